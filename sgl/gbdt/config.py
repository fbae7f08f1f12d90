"""``GBDTConfig``: one typed definition of the GBDT's hyper-parameters (API and CLI share it).

>>> GBDTConfig(num_trees=5, max_depth=3).growth
'depthwise'
>>> GBDTConfig(growth="leafwise", num_leaves=8, max_depth=0).validate().num_leaves
8
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from sgl.errors import ConfigError
from sgl.gbdt.loss import LOSSES

__all__ = ["GBDTConfig", "GROWTHS"]

GROWTHS = ("depthwise", "leafwise")


@dataclass
class GBDTConfig:
    """Hyper-parameters of :class:`~sgl.gbdt.GBDT`.

    ``growth="depthwise"`` grows every node level by level up to ``max_depth``;
    ``"leafwise"`` always splits the leaf of highest gain (best-first) until
    ``num_leaves`` leaves, with ``max_depth <= 0`` meaning no depth limit.
    ``max_bins`` value bins per feature (NaN gets one more bin, see
    :class:`~sgl.gbdt.BinMapper`); ``reg_lambda`` is the L2 penalty λ on leaf
    weights; a child's hessian sum must reach ``min_child_weight``; a split must
    gain more than ``min_split_gain`` (see :func:`~sgl.gbdt.split_gain`).
    """

    num_trees: int = 100
    learning_rate: float = 0.1
    max_depth: int = 6
    num_leaves: int = 31
    growth: str = "depthwise"
    max_bins: int = 255
    reg_lambda: float = 1.0
    min_child_weight: float = 1.0
    min_split_gain: float = 0.0
    loss: str = "logloss"
    missing: str = "bin"

    def validate(self) -> "GBDTConfig":
        def _int(name: str, lo: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ConfigError(f"GBDTConfig.{name} must be an int >= {lo}; got {v!r}")

        _int("num_trees", 1)
        _int("max_bins", 2)
        _int("num_leaves", 2)
        if isinstance(self.max_depth, bool) or not isinstance(self.max_depth, int):
            raise ConfigError(f"GBDTConfig.max_depth must be an int; got {self.max_depth!r}")
        if self.growth not in GROWTHS:
            raise ConfigError(f"GBDTConfig.growth must be one of {GROWTHS}; got {self.growth!r}")
        if self.growth == "depthwise" and self.max_depth < 1:
            raise ConfigError("growth='depthwise' needs max_depth >= 1; use growth='leafwise' for "
                              "trees limited only by num_leaves")
        if self.loss not in LOSSES:
            raise ConfigError(f"GBDTConfig.loss must be one of {LOSSES}; got {self.loss!r}")
        if not 0 < self.learning_rate <= 1:
            raise ConfigError(f"GBDTConfig.learning_rate must be in (0, 1]; got {self.learning_rate}")
        for name in ("reg_lambda", "min_child_weight", "min_split_gain"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"GBDTConfig.{name} must be >= 0; got {getattr(self, name)}")
        if self.missing not in ("bin", "error"):
            raise ConfigError(f"GBDTConfig.missing must be 'bin' or 'error'; got {self.missing!r}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)
