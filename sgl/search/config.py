"""Settings of one PaSca search: :class:`SearchConfig` and the training its trials share.

A search config holds the study's own settings (objectives, trial budget, optimizer,
storage, parallelism) and *contains* the :class:`~sgl.tasks.config.TrainConfig` every
trial trains with, by default :func:`search_train_config` (``lr=0.01``,
``weight_decay=5e-4``, ``epochs=200``, ``patience=50``, no per-epoch progress bar).

The optimizer is a name (``"tpe"``, ``"gp"``, ``"nsga2"``, ``"random"``) or any optuna sampler
object (``sampler=optuna.samplers.QMCSampler(seed=0)``); a config records a sampler object
by its class name, so :meth:`SearchConfig.to_dict` stays serialisable.
:meth:`SearchConfig.from_dict` reads both that nested form and the flat one of older
records (``lr``, ``weight_decay``, ``epochs``, ``patience``, ``device`` at the top level),
and the constructor still takes those flat keywords.

    >>> config = SearchConfig(trials=10, train=search_train_config(lr=0.05, epochs=20))
    >>> config.to_dict()["train"]["epochs"], SearchConfig.from_dict(config.to_dict()) == config
    (20, True)
    >>> SearchConfig.from_dict({"trials": 10, "lr": 0.05, "epochs": 20}) == config   # an older, flat record
    True
"""
from __future__ import annotations

import math
from dataclasses import InitVar, dataclass, field, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from sgl._checks import check_choice, check_int, check_real, with_message
from sgl.errors import ConfigError
from sgl.search.objectives import Objective, parse_objectives
from sgl.tasks.config import TrainConfig

__all__ = ["SearchConfig", "OPTIMIZERS", "PRUNERS", "search_train_config", "SEARCH_TRAIN_DEFAULTS", "FLAT_TRAIN_KEYS"]

OPTIMIZERS = ("tpe", "nsga2", "random", "gp")

#: ``SearchConfig.pruner``: none, successive halving over epochs (one bracket), Hyperband
#: (see :class:`sgl.search.evaluate.EpochPruner`).
PRUNERS = ("none", "halving", "hyperband")

#: The training of every trial unless told otherwise (no per-epoch bar inside a trial).
SEARCH_TRAIN_DEFAULTS: Dict[str, Any] = dict(lr=0.01, weight_decay=5e-4, epochs=200, patience=50, progress=False)

#: The ``TrainConfig`` fields an older, flat ``SearchConfig`` held at its top level.
FLAT_TRAIN_KEYS = ("lr", "weight_decay", "epochs", "patience", "device")


class _Unset:
    """The default of a flat training keyword: not given (``None`` is a value: ``patience=None``).

    It is also what ``config.lr`` etc. read: the values live in ``config.train``.
    """

    def __repr__(self) -> str:
        return "<unset: see SearchConfig.train>"


_UNSET = _Unset()


def search_train_config(**overrides: Any) -> TrainConfig:
    """:data:`SEARCH_TRAIN_DEFAULTS` with ``overrides`` (any :class:`TrainConfig` field).

    >>> search_train_config(epochs=5).epochs, search_train_config().patience
    (5, 50)
    """
    return TrainConfig(**{**SEARCH_TRAIN_DEFAULTS, **overrides})


def _is_sampler(value: Any) -> bool:
    if value is None or isinstance(value, str):
        return False
    import optuna

    return isinstance(value, optuna.samplers.BaseSampler)


@dataclass
class SearchConfig:
    """Settings of one search (all serialisable; stored in the study for resume and export).

    Args:
        objectives: two or more of :data:`sgl.search.OBJECTIVES` (``"accuracy,latency"``).
        trials: number of *completed* trials the study should end with (across restarts
            and processes sharing the storage).
        timeout: stop starting new trials after this many seconds (None = no limit).
        optimizer: ``tpe`` (multi-objective TPE), ``gp`` (Gaussian process, log-EHVI),
            ``nsga2`` or ``random``, or an optuna
            sampler object (the same as ``sampler=``).
        seed: seeds the named optimizers and every trial's training.
        storage: None (in memory), a file path (SQLite) or an optuna RDB URL.
        study_name: name inside the storage (default ``sgl-<dataset>``).
        n_jobs: parallel trials in this process (threads); use several processes on one
            storage to scale further.
        startup_trials: random trials before TPE/NSGA-II start modelling.
        progress: a progress bar over the trials.
        threads: torch intra-op threads while searching (None = torch's default); 1 is
            fastest for small graphs on a busy machine.
        train: the training of every trial (Adam; default :func:`search_train_config`).
        sampler: an ``optuna.samplers.BaseSampler`` object used as it is (its own seed;
            it is not re-seeded on resume); ``optimizer`` then records its class name.
        pruner: the multi-fidelity path: ``none``, ``halving`` (successive halving over
            epochs) or ``hyperband``; trials report their validation accuracy every epoch
            and the unpromising ones stop early as ``PRUNED`` (never on the front). With a
            pruner, ``trials`` counts finished trials, completed or pruned.
        min_epochs: the pruner's minimum resource: the first rung is after this many epochs
            (must be below ``train.epochs``).
        reduction_factor: the pruner's :math:`\\eta`: the top ``1/eta`` of a rung continue.
        lr, weight_decay, epochs, patience, device: the older, flat spelling of the same
            fields of ``train``; given, they replace those of ``train``.
    """

    objectives: Union[str, Sequence[str]] = "accuracy,latency"
    trials: int = 60
    timeout: Optional[float] = None
    optimizer: Any = "tpe"
    seed: int = 0
    storage: Optional[str] = None
    study_name: Optional[str] = None
    n_jobs: int = 1
    lr: InitVar[Any] = _UNSET
    weight_decay: InitVar[Any] = _UNSET
    epochs: InitVar[Any] = _UNSET
    patience: InitVar[Any] = _UNSET
    startup_trials: int = 10
    progress: bool = True
    device: InitVar[Any] = _UNSET
    threads: Optional[int] = None
    train: TrainConfig = field(default_factory=search_train_config)
    sampler: Any = None
    pruner: str = "none"
    min_epochs: int = 10
    reduction_factor: int = 3

    def __post_init__(self, lr: Any, weight_decay: Any, epochs: Any, patience: Any, device: Any) -> None:
        self.objective_list: List[Objective] = parse_objectives(self.objectives)
        self.objectives = ",".join(o.name for o in self.objective_list)
        self._resolve_sampler()
        if self.sampler is None and self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
        with_message(f"trials must be a positive integer, got {self.trials!r}", check_int, self.trials, 1)
        if self.timeout is not None:
            with_message(f"timeout must be positive seconds or None, got {self.timeout}", check_real, self.timeout,
                         0.0, math.inf, open_low=True)
        with_message(f"n_jobs must be a positive integer, got {self.n_jobs!r}", check_int, self.n_jobs, 1)
        if self.n_jobs > 1 and "memory" in self.objectives.split(","):
            raise ConfigError("the memory objective is measured per process; with n_jobs > 1 trials would share "
                              "it. Run several processes on one --storage instead of --n-jobs")
        if self.threads is not None:
            with_message(f"threads must be a positive integer or None, got {self.threads!r}", check_int,
                         self.threads, 1)
        with_message(f"startup_trials must be >= 1, got {self.startup_trials}", check_real, self.startup_trials, 1.0)
        if isinstance(self.train, Mapping):
            self.train = _train_from_dict(self.train)
        if not isinstance(self.train, TrainConfig):
            raise ConfigError(f"train must be a sgl.tasks.TrainConfig (or its dict), got {type(self.train).__name__}")
        flat = {k: v for k, v in zip(FLAT_TRAIN_KEYS, (lr, weight_decay, epochs, patience, device))
                if v is not _UNSET}
        if flat:
            self.train = replace(self.train, **flat)
        check_choice(self.pruner, "pruner", PRUNERS)
        check_int(self.min_epochs, "min_epochs", 1)
        check_int(self.reduction_factor, "reduction_factor", 2)
        if self.pruner != "none" and self.min_epochs >= self.train.epochs:
            raise ConfigError(f"min_epochs ({self.min_epochs}) must be below the trials' epochs "
                              f"({self.train.epochs}) for the {self.pruner} pruner to stop anything; "
                              f"lower min_epochs (--min-epochs) or raise epochs")

    def _resolve_sampler(self) -> None:
        """``optimizer=<sampler>`` moves to ``sampler``; with a sampler, ``optimizer`` is its class name."""
        if _is_sampler(self.optimizer):
            if self.sampler is not None and self.sampler is not self.optimizer:
                raise ConfigError("give one optuna sampler, as optimizer= or as sampler=, not two")
            self.sampler, self.optimizer = self.optimizer, type(self.optimizer).__name__
        if self.sampler is None:
            return
        if not _is_sampler(self.sampler):
            raise ConfigError(f"sampler must be an optuna.samplers.BaseSampler object, got "
                              f"{type(self.sampler).__name__}; or name an optimizer: {', '.join(OPTIMIZERS)}")
        name = type(self.sampler).__name__
        if self.optimizer not in ("tpe", name):  # "tpe" is the default, i.e. not chosen
            raise ConfigError(f"give optimizer={self.optimizer!r} or sampler={name}(...), not both")
        self.optimizer = name

    def train_config(self) -> TrainConfig:
        """The training of every trial (never with a per-epoch progress bar)."""
        return replace(self.train, progress=False)

    def to_dict(self) -> Dict[str, Any]:
        """Plain values only: ``train`` as a dict, a sampler object by its class name."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["train"] = self.train.to_dict()
        out["sampler"] = None if self.sampler is None else type(self.sampler).__name__
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, sampler: Any = None) -> "SearchConfig":
        """A config from :meth:`to_dict` (nested ``train``) or from an older flat record.

        A config that used a sampler object records only its class name: pass the object
        again as ``sampler``.
        """
        data = dict(data)
        stored = data.pop("sampler", None)
        if stored is not None:
            if sampler is None:
                raise ConfigError(f"this search used an optuna {stored}; pass sampler=<the {stored} object> "
                                  f"to rebuild its config")
            if type(sampler).__name__ != stored:
                raise ConfigError(f"this search used an optuna {stored}, got a {type(sampler).__name__}")
        if sampler is not None and data.get("optimizer") not in OPTIMIZERS:
            data.pop("optimizer", None)  # the recorded class name
        flat = {k: data.pop(k) for k in FLAT_TRAIN_KEYS if k in data}
        train = _train_from_dict(data.pop("train", None) or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown search setting(s) {unknown}; valid: {sorted(known | set(FLAT_TRAIN_KEYS))}")
        return cls(**data, train=train, sampler=sampler, **flat)


def _train_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """The search's defaults with the given fields."""
    valid = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - valid)
    if unknown:
        raise ConfigError(f"unknown training setting(s) {unknown}; valid: {sorted(valid)}")
    return search_train_config(**data)
