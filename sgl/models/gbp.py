"""GBP: Graph Bidirectional Propagation (Chen et al., NeurIPS 2020), exact propagation variant."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

from sgl.errors import ConfigError
from sgl.models.base import SGAPConfig, SGAPModel

__all__ = ["GBP", "GBPConfig"]


@dataclass
class GBPConfig(SGAPConfig):
    r"""GBP: :math:`\sum_{\ell=0}^{L} w_\ell (\tilde D^{r-1}\tilde A\tilde D^{-r})^\ell X` with
    :math:`w_\ell = \beta(1-\beta)^\ell`, then an MLP.

    The paper approximates the sum with bidirectional push + random walks; on graphs that fit
    in memory we compute it exactly by propagation, which is what that estimator converges to.
    """

    k: int = 10
    gbp_beta: float = 0.1
    message: str = "weighted"
    num_layers: int = 2
    hidden: int = 64
    dropout: float = 0.5
    message_options: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.gbp_beta <= 1.0:
            raise ConfigError(f"gbp_beta must be in (0, 1], got {self.gbp_beta}")
        weights = [self.gbp_beta * (1.0 - self.gbp_beta) ** level for level in range(self.k + 1)]
        self.message_options = {**self.message_options, "weights": weights}


class GBP(SGAPModel):
    """Generalised PageRank features with geometric weights, then an MLP."""

    config_class = GBPConfig
    default_train_config = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200}
