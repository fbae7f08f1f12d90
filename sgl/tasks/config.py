"""Typed, serialisable run settings shared by the Python API, the CLI and the search.

:class:`TrainConfig` is the one definition of the optimisation settings; the search,
out-of-core and CTR configs contain one instead of repeating its fields.

    >>> TrainConfig(lr=0.01, epochs=5).to_dict()["epochs"]
    5
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

from sgl.errors import ConfigError

__all__ = ["TrainConfig"]


@dataclass
class TrainConfig:
    """Optimisation settings (Adam). Each model family has its own defaults
    (``sgl.models.default_train_config(name)``); these are SGC's Cora setting.

    ``batch_size=None`` trains on all training nodes at once; ``patience`` stops after that
    many epochs without a better validation accuracy (``None`` = run all epochs).
    """

    lr: float = 0.2
    weight_decay: float = 1.3e-5
    epochs: int = 100
    batch_size: Optional[int] = None
    eval_batch_size: int = 65536
    patience: Optional[int] = None
    device: Optional[str] = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.weight_decay < 0:
            raise ConfigError(f"need lr > 0 and weight_decay >= 0, got lr={self.lr}, weight_decay={self.weight_decay}")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ConfigError(f"epochs must be a positive integer, got {self.epochs!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be positive or None (full batch), got {self.batch_size}")
        if self.patience is not None and self.patience < 1:
            raise ConfigError(f"patience must be positive or None, got {self.patience}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
