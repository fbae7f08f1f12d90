"""SGC: Simplifying Graph Convolutional Networks (Wu et al., ICML 2019)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from sgl.errors import ConfigError
from sgl.models.base import SGAPModel
from sgl.ops import NormalizedAdjacency, row_normalize

__all__ = ["SGC", "SGCConfig"]


@dataclass
class SGCConfig:
    """Hyper-parameters of :class:`SGC` (the paper's Cora setting: ``k=2``, symmetric norm)."""

    k: int = 2
    r: float = 0.5
    self_loops: bool = True
    bias: bool = True
    #: row-normalise features before propagating (the SGC/GCN papers' preprocessing)
    normalize_features: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 0:
            raise ConfigError(f"SGC k must be a non-negative integer, got {self.k!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class SGC(SGAPModel):
    r"""Simple graph convolution: :math:`\mathrm{softmax}(\hat A^K X W)`.

    Precompute is :math:`\hat A^K X` with :math:`\hat A = \tilde D^{r-1}\tilde A\tilde D^{-r}`
    (the *last* hop only); the base model is a single linear layer (logistic regression).

    Args:
        in_features (int): feature dimension.
        num_classes (int): number of classes.
        config (SGCConfig, optional): ``k``, ``r``, ``self_loops``, ``bias``.

    Example:
        >>> import torch, sgl
        >>> from sgl.models import SGC
        >>> graph = sgl.datasets.load("karate")
        >>> model = SGC(graph.num_features, graph.num_classes)
        >>> features = model.precompute(graph)      # no parameters involved
        >>> model(features).shape
        torch.Size([34, 2])
    """

    def __init__(self, in_features: int, num_classes: int, config: SGCConfig = None) -> None:
        config = config or SGCConfig()
        super().__init__(NormalizedAdjacency(r=config.r, self_loops=config.self_loops), config.k)
        if in_features < 1 or num_classes < 2:
            raise ConfigError(f"SGC needs in_features >= 1 and num_classes >= 2, got {in_features}, {num_classes}")
        self.config = config
        self.linear = nn.Linear(in_features, num_classes, bias=config.bias)

    def combine_hops(self, hops: List[torch.Tensor]) -> torch.Tensor:
        return hops[-1]

    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, **kwargs: Any) -> torch.Tensor:
        x = graph.x if x is None else x
        if self.config.normalize_features and x is not None:
            x = row_normalize(x)
        return super().precompute(graph, x, **kwargs)

    def reset_parameters(self) -> None:
        self.linear.reset_parameters()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear(features)

    def __repr__(self) -> str:
        return (f"SGC(in_features={self.linear.in_features}, num_classes={self.linear.out_features}, "
                f"k={self.k}, op={self.graph_op})")
