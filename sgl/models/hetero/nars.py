r"""NARS-SIGN: SIGN over neighbour-averaged relation-subset features (Yu et al., 2020).

Precompute (:func:`sgl.ops.nars_propagate`): for ``num_subsets`` sampled relation subsets,
``k`` hops of mean aggregation in each subset's homogeneous graph, target rows kept. Train:
per hop a learned 1-D convolution mixes the subsets
(:class:`~sgl.models.hetero.common.SubsetAggregator`), then SIGN: one MLP per hop,
concatenation, PReLU, dropout and an output MLP.

.. math:: Z^{(l)} = \sum_s w^{(l)}_s \odot X^{(l)}_s, \qquad
          \hat y = \mathrm{MLP}_{out}\big(\big\Vert_{l=0}^{k} \mathrm{MLP}_l(Z^{(l)})\big)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from sgl._checks import check_int
from sgl.models.features import NodeFeatures
from sgl.models.hetero.common import (SubsetAggregator, check_hetero_common, input_width, prepare_x_dict,
                                      require_hetero)
from sgl.models.mlp import MLP
from sgl.ops import nars_propagate, sample_relation_subsets

__all__ = ["NARSSIGN", "NARSConfig"]


@dataclass
class NARSConfig:
    """``k`` hops in each of ``num_subsets`` relation subsets (sampled with ``subset_seed``);
    SIGN's per-hop MLPs (``hop_layers``) and output MLP (``num_layers``), ``hidden`` wide."""

    k: int = 3
    num_subsets: int = 8
    subset_seed: int = 0
    hidden: int = 256
    hop_layers: int = 2
    num_layers: int = 2
    dropout: float = 0.5
    input_dropout: float = 0.1
    batch_norm: bool = True
    featureless: str = "mean"
    normalize_features: bool = False
    #: node types with different feature widths: each (reduced to at most this many columns) in its
    #: own block of one common width, so the first layer learns one projection per type
    #: (:func:`sgl.ops.align_type_features`); 0 = raise instead
    type_width: int = 256

    def __post_init__(self) -> None:
        check_int(self.k, "NARS k", 1)
        check_int(self.num_subsets, "NARS num_subsets", 1)
        check_int(self.hop_layers, "NARS hop_layers", 1)
        check_int(self.num_layers, "NARS num_layers", 1)
        check_hetero_common(self, "NARS")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class NARSSIGN(nn.Module):
    """NARS with a SIGN classifier on a :class:`~sgl.data.HeteroGraph` (see the module docstring).

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 1, 2]])},
        ...     x_dict={"p": torch.randn(4, 3)}, target="p", y=torch.tensor([0, 1, 0, 1]))
        >>> model = NARSSIGN(g, 2, NARSConfig(k=2, hidden=8))
        >>> model(model.precompute(g)[torch.arange(4)]).shape
        torch.Size([4, 2])
    """

    config_class = NARSConfig
    full_batch = False
    default_train_config = {"lr": 0.003, "weight_decay": 0.0, "epochs": 200, "patience": 50, "batch_size": 10000}

    def __init__(self, graph: Any, num_classes: int, config: Optional[NARSConfig] = None) -> None:
        super().__init__()
        graph = require_hetero(graph, "NARSSIGN")
        self.config = config = config or NARSConfig()
        self.num_classes = num_classes
        self.subsets = sample_relation_subsets(graph, config.num_subsets, seed=config.subset_seed)
        width = input_width(graph, config)
        self.in_features = width
        num_hops = config.k + 1
        self.aggregator = SubsetAggregator(num_hops, len(self.subsets), width)
        self.hop_mlps = nn.ModuleList(MLP(width, config.hidden, config.hidden, config.hop_layers, config.dropout,
                                          input_dropout=config.input_dropout, batch_norm=config.batch_norm)
                                      for _ in range(num_hops))
        self.act = nn.PReLU()
        self.dropout = nn.Dropout(config.dropout)
        self.output = MLP(config.hidden * num_hops, config.hidden, num_classes, config.num_layers, config.dropout,
                          batch_norm=config.batch_norm)

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *, cache_dir: Any = None,
                   progress: bool = False) -> NodeFeatures:
        """Hops ``0..k`` of NARS features, each ``[n_target, num_subsets, d]``."""
        graph = require_hetero(graph, "NARSSIGN")
        hops = nars_propagate(graph, self.subsets, self.config.k, prepare_x_dict(graph, self.config),
                              progress=progress)
        return NodeFeatures([h.transpose(0, 1).contiguous() for h in hops])

    def forward(self, batch: List[torch.Tensor]) -> torch.Tensor:
        hops = self.aggregator(batch)
        z = torch.cat([mlp(h) for mlp, h in zip(self.hop_mlps, hops)], dim=1)
        return self.output(self.dropout(self.act(z)))

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def __repr__(self) -> str:
        cfg = self.config
        return (f"NARSSIGN(subsets={len(self.subsets)}, k={cfg.k}, in_features={self.in_features}, "
                f"hidden={cfg.hidden}, num_classes={self.num_classes})")
