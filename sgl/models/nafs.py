"""NAFS: node-adaptive feature smoothing (Zhang et al., ICML 2022), with a linear classifier."""
from __future__ import annotations

from dataclasses import dataclass

from sgl.models.base import SGAPConfig, SGAPModel

__all__ = ["NAFS", "NAFSConfig"]


@dataclass
class NAFSConfig(SGAPConfig):
    """NAFS: hops 0..K weighted per node by how far each is from over-smoothing; LR on top."""

    k: int = 10
    message: str = "nafs"
    num_layers: int = 1


class NAFS(SGAPModel):
    """Training-free node-adaptive smoothing followed by logistic regression."""

    config_class = NAFSConfig
    default_train_config = {"lr": 0.2, "weight_decay": 5e-5, "epochs": 100}
