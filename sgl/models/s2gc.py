"""S²GC: Simple Spectral Graph Convolution (Zhu & Koniusz, ICLR 2021)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

from sgl.errors import ConfigError
from sgl.models.base import SGAPConfig, SGAPModel

__all__ = ["S2GC", "S2GCConfig"]


@dataclass
class S2GCConfig(SGAPConfig):
    r"""S²GC: :math:`\frac1K\sum_{k=1}^K((1-\alpha)\hat A^k X + \alpha X)`, logistic regression.

    ``s2gc_alpha`` is the paper's :math:`\alpha` (0.05 on the citation graphs, K=16).
    """

    k: int = 16
    s2gc_alpha: float = 0.05
    message: str = "weighted"
    num_layers: int = 1
    message_options: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.s2gc_alpha <= 1.0 or self.k < 1:
            raise ConfigError(f"S2GC needs k >= 1 and s2gc_alpha in [0, 1], got k={self.k}, {self.s2gc_alpha}")
        # the filter is a fixed weighted sum of hops: alpha on X, (1 - alpha)/K on each of A^1..A^K
        weights = [self.s2gc_alpha] + [(1.0 - self.s2gc_alpha) / self.k] * self.k
        self.message_options = {**self.message_options, "weights": weights}


class S2GC(SGAPModel):
    """Simple spectral graph convolution (a Markov-diffusion filter over ``k`` hops)."""

    config_class = S2GCConfig
    default_train_config = {"lr": 0.2, "weight_decay": 5e-5, "epochs": 100}
