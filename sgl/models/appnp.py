"""APPNP, decoupled: K steps of personalised-PageRank propagation precomputed, then an MLP."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

from sgl.errors import ConfigError
from sgl.models.base import SGAPModel
from sgl.models.weighted_hops import WeightedHopsConfig

__all__ = ["APPNP", "APPNPConfig"]


@dataclass
class APPNPConfig(WeightedHopsConfig):
    r"""K steps of :math:`Z \leftarrow (1-\alpha)\hat A Z + \alpha X` (Klicpera et al. 2019).

    Unrolled, :math:`Z_K = \sum_{k<K}\alpha(1-\alpha)^k\hat A^kX + (1-\alpha)^K\hat A^KX`: a
    fixed weighting of the hops, so it is precomputed once. Propagation is linear, so
    propagating the features (precompute) instead of the MLP's predictions gives the
    scalable "propagate-then-predict" form of APPNP.
    """

    alpha: float = 0.1

    def hop_weights(self) -> List[float]:
        if not 0.0 < self.alpha <= 1.0 or self.k < 1:
            raise ConfigError(f"APPNP needs k >= 1 and alpha in (0, 1], got k={self.k}, alpha={self.alpha}")
        a = self.alpha
        return [a * (1.0 - a) ** step for step in range(self.k)] + [(1.0 - a) ** self.k]


class APPNP(SGAPModel):
    """Decoupled APPNP (see :class:`APPNPConfig`)."""

    config_class = APPNPConfig
    default_train_config = {"lr": 0.01, "weight_decay": 5e-3, "epochs": 200}
