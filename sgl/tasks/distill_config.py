"""What a run distils from (:class:`DistillConfig`) and the run parts it cannot combine with.

Kept apart from :mod:`sgl.tasks.distill` (the training loop), which reads run configs, so that
:mod:`sgl.tasks.run_config` can hold a ``DistillConfig`` without an import cycle.

    >>> DistillConfig("gamlp").to_dict()
    {'teacher': 'gamlp', 'hard_weight': 0.0, 'temperature': 1.0, 'inductive': 0.0}
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict

from sgl._checks import check_real
from sgl.errors import ConfigError

__all__ = ["DistillConfig", "check_distill_run"]


@dataclass
class DistillConfig:
    """Where the soft labels come from and how they are weighted.

    ``teacher``: a zoo model name (trained with its preset on the student's dataset) or the
    path of a run record (``sgl train --out``) whose config is replayed. ``hard_weight`` is
    GLNN's :math:`\\lambda`; ``inductive`` the fraction of test nodes hidden from training.
    """

    teacher: str
    hard_weight: float = 0.0
    temperature: float = 1.0
    inductive: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.teacher, str) or not self.teacher.strip():
            raise ConfigError(f"the distillation teacher must be a model name or a run record path, got "
                              f"{self.teacher!r}")
        check_real(self.hard_weight, "--distill-hard-weight", 0.0, 1.0)
        check_real(self.temperature, "--distill-temperature", 0.0, open_low=True)
        check_real(self.inductive, "--distill-inductive", 0.0, 1.0, open_high=True)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def check_distill_run(config: Any) -> None:
    """The parts of a :class:`~sgl.tasks.RunConfig` that distillation cannot combine with."""
    if config.task != "node":
        raise ConfigError(f"distill (--distill-from) does not apply to --task {config.task} (distillation trains a "
                          f"node classifier); remove it")
    if str(config.model).lower() != "mlp":
        raise ConfigError(f"--distill-from trains a graph-free student: use --model mlp, got --model {config.model}")
    for name in ("rlu", "structure", "sampler"):
        if getattr(config, name) is not None:
            raise ConfigError(f"{name} does not combine with --distill-from; remove it (give the teacher's options "
                              f"in its run record instead)")
    if config.procs != 1:
        raise ConfigError("--distill-from runs on one process; remove --procs")
