"""GBP: Graph Bidirectional Propagation (Chen et al., NeurIPS 2020), exact propagation variant."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

from sgl.errors import ConfigError
from sgl.models.base import SGAPModel
from sgl.models.weighted_hops import WeightedHopsConfig

__all__ = ["GBP", "GBPConfig"]


@dataclass
class GBPConfig(WeightedHopsConfig):
    r"""GBP: :math:`\sum_{\ell=0}^{L} w_\ell (\tilde D^{r-1}\tilde A\tilde D^{-r})^\ell X` with
    :math:`w_\ell = \beta(1-\beta)^\ell`, then an MLP.

    The paper approximates the sum with bidirectional push + random walks; on graphs that fit
    in memory we compute it exactly by propagation, which is what that estimator converges to.
    """

    gbp_beta: float = 0.1

    def hop_weights(self) -> List[float]:
        if not 0.0 < self.gbp_beta <= 1.0:
            raise ConfigError(f"gbp_beta must be in (0, 1], got {self.gbp_beta}")
        return [self.gbp_beta * (1.0 - self.gbp_beta) ** level for level in range(self.k + 1)]


class GBP(SGAPModel):
    """Generalised PageRank features with geometric weights, then an MLP."""

    config_class = GBPConfig
    default_train_config = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200}
