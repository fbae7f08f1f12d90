"""Runs on several processes: their settings, which runs have a multi-process path, and the checks.

A :class:`~sgl.tasks.RunConfig` with ``procs > 1`` (``sgl train --procs N``, or ``torchrun``)
runs every rank through the runner its task registers in :data:`DISTRIBUTED_TASKS`
(:func:`sgl.tasks.dist_run.run_distributed` spawns or joins the processes). Today:

* ``node``: a scalable (SGAP) model trained by DDP on its precomputed features
  (:func:`sgl.tasks.ddp.train_ddp`; ``precompute="local"`` or ``"distributed"``), or ``sage`` /
  ``gcn`` with ``--sampler neighbor`` (:func:`sgl.tasks.dist_minibatch.train_dist_minibatch`).

A run that has no multi-process path is a :class:`~sgl.errors.ConfigError` naming what has one.

Example:
    >>> from sgl.tasks import RunConfig
    >>> RunConfig.from_dict({"dataset": "karate", "procs": 2}).distributed
    DistributedConfig(precompute='local', partition=None, uneven='pad', timeout=1800.0, grad_compress='none', grad_bits=4, powersgd_rank=1)
    >>> RunConfig.from_dict({"model": "gat", "procs": 2})
    Traceback (most recent call last):
    ...
    sgl.errors.ConfigError: --model gat has no multi-process path (procs=2): node classification on several processes trains a scalable (SGAP) model by DDP: appnp, gamlp, gbp, mlp, nafs, pasca-v1, pasca-v2, pasca-v3, s2gc, sgap, sgc, sign; or sage/gcn with --sampler neighbor
"""
from __future__ import annotations

import importlib
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Dict, List, Optional

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["DistributedConfig", "DistributedTask", "DISTRIBUTED_TASKS", "check_procs", "sgap_models",
           "distributed_runner"]


@dataclass
class DistributedConfig:
    """How a run uses its processes (``RunConfig.procs > 1``).

    ``precompute``: ``"local"`` (every rank propagates the whole graph and trains a contiguous
    slice of the training nodes) or ``"distributed"`` (every rank propagates its partition with
    halo exchange and trains the training nodes it owns); scalable models only, default local.
    ``partition``: ``"metis"`` or ``"range"`` (also ``"fennel"`` for ``--sampler neighbor``) for
    the distributed precompute and the sampler; default metis there, not used otherwise.
    ``uneven``: ``"pad"`` or ``"drop"``, how ranks with fewer training nodes keep step
    (:mod:`sgl.tasks.ddp`). ``timeout``: seconds a collective may wait for the other ranks.
    ``grad_compress``: how DDP's gradient all-reduce is compressed (``none``, ``tinyscript``,
    ``uniform``, ``powersgd``; :mod:`sgl.tasks.grad_compress`), with ``grad_bits`` bits per value
    for the quantisers and ``powersgd_rank`` for PowerSGD.
    """

    precompute: Optional[str] = None
    partition: Optional[str] = None
    uneven: str = "pad"
    timeout: float = 1800.0
    grad_compress: str = "none"
    grad_bits: int = 4
    powersgd_rank: int = 1

    def __post_init__(self) -> None:
        if self.uneven not in ("pad", "drop"):
            raise ConfigError(f"uneven must be 'pad' or 'drop', got {self.uneven!r}")
        if self.precompute is not None and self.precompute not in ("local", "distributed"):
            raise ConfigError(f"precompute must be 'local' or 'distributed', got {self.precompute!r}")
        self.timeout = check_real(self.timeout, "timeout (seconds a collective may wait)", 0.0, open_low=True)
        from sgl.tasks.grad_compress import check_grad_compress

        self.grad_compress = check_grad_compress(self.grad_compress, self.grad_bits, self.powersgd_rank)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def given(self) -> List[str]:
        """``name=value`` of each field that differs from its default."""
        default = DistributedConfig()
        return [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)]


@dataclass
class DistributedTask:
    """A task's multi-process path: ``runner`` (``"module:function"``, called on every rank as
    ``runner(config, log, progress) -> record``), ``check`` (``"module:function"`` or ``None``,
    called with the RunConfig to validate and resolve its distributed settings) and ``what``
    (what it runs, for error messages)."""

    runner: str
    check: Optional[str] = None
    what: str = ""


#: task -> its multi-process path. Hook for other tasks: the CTR HET path registers ``"ctr"`` here
#: (``DISTRIBUTED_TASKS["ctr"] = DistributedTask("sgl.tasks.ctr:run_ctr_distributed", ...)``).
DISTRIBUTED_TASKS: Dict[str, DistributedTask] = {
    "node": DistributedTask("sgl.tasks.dist_run:run_node_distributed", "sgl.tasks.dist_config:check_node",
                            "node classification (a scalable model by DDP, or sage/gcn with --sampler neighbor)"),
    "ctr": DistributedTask("sgl.tasks.ctr_run:run_ctr_rank", "sgl.tasks.ctr_workers:check_ctr_procs",
                           "CTR over HET / HET-GMP workers, one per process (--ctr-embedding het|hetgmp)"),
}


def _load(path: str) -> Callable[..., Any]:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def distributed_runner(task: str) -> Callable[..., Any]:
    """The function every rank runs for ``task`` (ConfigError when it has no multi-process path)."""
    if task not in DISTRIBUTED_TASKS:
        raise ConfigError(_unsupported_task(task))
    return _load(DISTRIBUTED_TASKS[task].runner)


def _unsupported_task(task: str) -> str:
    paths = "; ".join(f"--task {t}: {d.what}" for t, d in DISTRIBUTED_TASKS.items())
    return f"--task {task} has no multi-process path; runs on several processes (procs > 1) support {paths}"


def sgap_models() -> List[str]:
    """Names of the zoo's scalable models (trained on precomputed rows, so by DDP under ``procs > 1``)."""
    from sgl.models import MODELS

    return sorted(name for name, (cls, _, _) in MODELS.items() if not getattr(cls, "full_batch", True))


def check_procs(config: Any) -> None:
    """Validate ``config.procs`` and, for ``procs > 1``, that the run has a multi-process path."""
    config.procs = check_int(config.procs, "procs (the number of processes)", minimum=1)
    if config.procs == 1:
        if config.distributed is not None and config.distributed.given():
            raise ConfigError(f"{', '.join(config.distributed.given())} applies to runs on several processes; "
                              f"set procs >= 2 (--procs N) or remove it")
        config.distributed = None
        return
    if config.distributed is None:
        config.distributed = DistributedConfig()
    if config.task not in DISTRIBUTED_TASKS:
        raise ConfigError(_unsupported_task(config.task))
    device = config.train.device if config.train is not None else None
    if device is not None and re.fullmatch(r"\s*cuda:\d+\s*", str(device).lower()):
        raise ConfigError(f"device={device!r} puts every one of the {config.procs} processes on one GPU; with "
                          f"procs > 1 use device='cuda' (rank r on GPU r of its machine) or 'cpu'")
    check = DISTRIBUTED_TASKS[config.task].check
    if check is not None:
        _load(check)(config)


def check_node(config: Any) -> None:
    """Node classification on several processes: resolve the defaults, refuse what has no path."""
    d, model = config.distributed, str(config.model).lower()
    why = f"procs={config.procs}"
    if config.self_supervised:
        raise ConfigError(f"--model {model} (self-supervised pre-training and a linear probe) has no multi-process "
                          f"path ({why}); use a scalable model such as sgc or sign, or one process")
    for name, what in (("rlu", "RLU distillation"), ("structure", "structure learning")):
        if getattr(config, name) is not None:
            raise ConfigError(f"{name} ({what}) has no multi-process path ({why}); remove it or use one process")
    if config.sampler is not None:
        if config.sampler.name != "neighbor":
            raise ConfigError(f"--sampler {config.sampler.name} has no multi-process path ({why}); on several "
                              f"processes mini-batches come from --sampler neighbor (distributed neighbour sampling)")
        if model not in ("sage", "gcn"):
            raise ConfigError(f"--sampler neighbor trains the models sage or gcn, got --model {model}")
        if d.precompute is not None:
            raise ConfigError("precompute applies to scalable (SGAP) models; with --sampler neighbor every rank "
                              "keeps its partition's raw feature rows")
        d.partition = d.partition or "metis"
        if d.partition not in ("metis", "fennel", "range"):
            raise ConfigError(f"partition must be one of metis, fennel, range, got {d.partition!r}")
        return
    if model not in sgap_models():
        raise ConfigError(f"--model {model} has no multi-process path ({why}): node classification on several "
                          f"processes trains a scalable (SGAP) model by DDP: {', '.join(sgap_models())}; or "
                          f"sage/gcn with --sampler neighbor")
    d.precompute = d.precompute or "local"
    if d.precompute == "local":
        if d.partition is not None:
            raise ConfigError(f"partition={d.partition!r} applies to precompute='distributed' (and --sampler "
                              f"neighbor); precompute='local' gives every rank a contiguous slice of the training "
                              f"nodes")
        return
    d.partition = d.partition or "metis"
    if d.partition not in ("metis", "range"):
        raise ConfigError(f"partition must be 'metis' or 'range' for precompute='distributed', got {d.partition!r}")
    if config.cache_dir is not None:
        raise ConfigError("cache_dir (--cache-dir) caches whole-graph features; precompute='distributed' keeps only "
                          "each rank's rows, so remove it or use precompute='local'")
