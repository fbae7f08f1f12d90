"""A run on several processes: spawn them (``sgl train --procs N``) or join torchrun's world.

:func:`run_distributed` is what :func:`sgl.tasks.run` calls for ``config.procs > 1``:

* inside a world already -- ``torchrun`` set ``WORLD_SIZE``/``RANK`` (``torchrun --nproc-per-node
  2 -m sgl.cli train ...``) or :mod:`sgl.comm` is initialised -- this process joins it
  (:func:`sgl.comm.init`: Gloo on CPU, NCCL on CUDA) and runs its rank; the world must have
  ``procs`` processes;
* otherwise it starts ``procs`` local processes with :func:`sgl.comm.spawn` (Gloo on CPU, NCCL
  with one GPU per rank for ``device="cuda"``), each running the same rank body. On Linux they
  fork from a *fork server*, a fresh process that imported SGL once (safe with CUDA, OpenMP and
  numba, which a fork of this process would not be, and seconds faster to start than a fresh
  interpreter per rank; later runs in this process reuse it); elsewhere each starts fresh. The
  ranks get this process's environment variables, working folder and ``sys.path``.

Every rank runs its task's runner (:data:`sgl.tasks.dist_config.DISTRIBUTED_TASKS`); for node
classification :func:`run_node_distributed`. Every rank returns the same record (losses,
accuracies and the selected epoch are reduced over the ranks); it carries ``world_size`` and
``backend``. Rank 0 alone logs and shows progress; a spawned run returns rank 0's record. An
error a rank raises on bad input (a :class:`~sgl.errors.SGLError`) reaches the caller as that
error, not wrapped.

Datasets are loaded by rank 0 first, then by the others (a download happens once). Spawned
processes use ``OMP_NUM_THREADS`` torch threads each when it is set, else ``cpu_count // procs``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import torch

from sgl import comm
from sgl.errors import CommError, ConfigError, SGLError
from sgl.tasks.dist_config import distributed_runner

__all__ = ["run_distributed", "run_node_distributed", "in_world", "rank_start_method"]

Log = Callable[[str], None]
#: set for each rank by sgl.comm.spawn
_WORLD_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def in_world() -> bool:
    """Whether this process is one rank of a multi-process job (torchrun's environment, or sgl.comm)."""
    return comm.is_initialized() or ("WORLD_SIZE" in os.environ and "RANK" in os.environ)


def run_distributed(config: Any, log: Optional[Log] = None, progress: bool = True) -> Dict[str, Any]:
    """Run ``config`` (``procs > 1``) on its processes; returns the run record (see the module docstring)."""
    from sgl.device import default_backend, get_device

    distributed_runner(config.task)  # a task without a multi-process path fails before any process starts
    device = config.train.device if config.train is not None else None
    dev = get_device(device)  # DeviceError now for a device that does not exist
    if dev.type == "cuda" and not in_world() and torch.cuda.device_count() < config.procs:
        raise ConfigError(f"procs={config.procs} processes need one GPU each, but {torch.cuda.device_count()} "
                          f"are visible; use at most {torch.cuda.device_count()} processes or device='cpu'")
    if in_world():
        return _join(config, log, progress)
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    # set explicitly: a forked rank's OpenMP read the variable when the fork server started
    threads = int(omp) if omp.isdigit() and int(omp) > 0 else max(1, (os.cpu_count() or 1) // config.procs)
    env = {k: v for k, v in os.environ.items() if k not in _WORLD_VARIABLES}
    try:
        records = comm.spawn(_rank_main, config.procs, config, progress, log is not None, threads, env,
                             backend=default_backend(device), timeout=float("inf"),
                             comm_timeout=config.distributed.timeout, start_method=rank_start_method())
    except CommError as exc:
        _reraise_rank_error(exc)
        raise
    return records[0]


def rank_start_method() -> str:
    """How :func:`run_distributed` starts ranks: ``"forkserver"`` on Linux (SGL preloaded), else ``"spawn"``."""
    if not sys.platform.startswith("linux"):
        return "spawn"
    import torch.multiprocessing as mp

    # imported once in the server, then shared by every forked rank (no effect once the server runs)
    mp.get_context("forkserver").set_forkserver_preload(["sgl.tasks.dist_run", "sgl.tasks.ddp", "sgl.models",
                                                         "sgl.datasets"])
    return "forkserver"


def _reraise_rank_error(exc: CommError) -> None:
    """A rank's own bad-input error (ConfigError, DatasetError, ...) is raised as it was raised there."""
    import sgl.errors

    for rank, (name, message) in sorted(getattr(exc, "rank_errors", {}).items()):
        cls = getattr(sgl.errors, name, None)
        if isinstance(cls, type) and issubclass(cls, SGLError) and not issubclass(cls, CommError):
            raise cls(message) from None


def _join(config: Any, log: Optional[Log], progress: bool) -> Dict[str, Any]:
    owned = not comm.is_initialized()
    if owned:
        comm.init(device=config.train.device if config.train is not None else None,
                  timeout=config.distributed.timeout)
    try:
        world = comm.get_world_size()
        if world != config.procs:
            raise ConfigError(f"procs={config.procs} but this process is one of a world of {world} (torchrun "
                              f"--nproc-per-node / WORLD_SIZE); make them agree or leave procs out")
        rank = comm.get_rank()
        return _rank_body(config, log if rank == 0 else None, progress and rank == 0)
    finally:
        if owned:
            comm.shutdown()


def _rank_main(rank: int, world: int, config: Any, progress: bool, echo: bool, threads: int,
               env: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """Body of one spawned process (module level, so :func:`sgl.comm.spawn` can pickle it)."""
    # a fork server's children start with the server's environment: take the caller's
    for key in [k for k in os.environ if k not in env and k not in _WORLD_VARIABLES]:
        del os.environ[key]
    os.environ.update(env)
    torch.set_num_threads(threads)
    record = _rank_body(config, print if echo and rank == 0 else None, progress and rank == 0)
    return record if rank == 0 else None


def _rank_body(config: Any, log: Optional[Log], progress: bool) -> Dict[str, Any]:
    if config.train is not None:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, progress=progress))
    record = distributed_runner(config.task)(config, log or (lambda line: None), progress)
    record.update(world_size=comm.get_world_size(), backend=comm.get_backend())
    return record


# ---------------------------------------------------------------------------- node classification
def _load_graph(config: Any) -> Any:
    """Rank 0 loads (and downloads) first; the others then read what it left."""
    import sgl.datasets
    from sgl.tasks.run_parts import check_node_dataset

    check_node_dataset(config.dataset)
    load = lambda: sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)  # noqa: E731
    graph = load() if comm.get_rank() == 0 else None
    comm.barrier(timeout=max(config.distributed.timeout, 24 * 3600.0))
    return graph if graph is not None else load()


def run_node_distributed(config: Any, log: Log, progress: bool) -> Dict[str, Any]:
    """Node classification on every rank: DDP of a scalable model, or sampled sage/gcn (see the module docstring)."""
    from sgl.tasks.ddp import check_world_size
    from sgl.tasks.run_parts import describe

    d, world = config.distributed, comm.get_world_size()
    graph = _load_graph(config)
    check_world_size(graph, world)
    log(f"dataset: {config.dataset} ({describe(graph)})")
    if config.sampler is not None:
        return _run_sampled(config, graph, log)
    from sgl.models import build_model, model_config
    from sgl.tasks.ddp import train_ddp
    from sgl.tasks.dist_precompute import precompute_features
    from sgl.tasks.run_parts import record

    model_cfg = model_config(config.model, **config.model_config)

    def factory() -> Any:
        return build_model(config.model, graph.num_features, graph.num_classes, model_cfg)

    where = f"partition {d.partition}, halo exchange" if d.precompute == "distributed" else "whole graph per rank"
    log(f"model: {factory()!r}; {world} processes ({comm.get_backend()}), DDP, precompute {d.precompute} ({where})")
    start = time.perf_counter()
    rank_features = precompute_features(factory(), graph, d.precompute, partition=d.partition or "metis",
                                        cache_dir=config.cache_dir, progress=progress, timeout=d.timeout)
    precompute_time = _max(time.perf_counter() - start)
    runs = [train_ddp(factory(), rank_features.features, graph, config.train, seed=seed,
                      nodes=rank_features.nodes, uneven=d.uneven, timeout=d.timeout, grad_compress=d.grad_compress,
                      grad_bits=d.grad_bits, powersgd_rank=d.powersgd_rank) for seed in config.seeds]
    results: Dict[str, Any] = {"seeds": list(config.seeds), "runs": runs, "precompute_time_s": precompute_time,
                               "train_time_s": sum(r["train_time_s"] for r in runs), "peak_rss_mb": _peak_rss()}
    _summaries(results, runs, ("train_acc", "val_acc", "test_acc", "test_macro_f1")
               + (("ogb_test_acc",) if "ogb_test_acc" in runs[0] else ()))
    if rank_features.halo is not None:
        halo = rank_features.halo
        totals = _sum([halo.cut_edges] + list(halo.bytes_received))
        # summed over ranks: a cut edge is counted once, at its destination's owner
        results["halo"] = {"cut_edges": int(totals[0]), "bytes_per_hop": [int(b) for b in totals[1:]]}
    return record(dataclasses.replace(config, model_config=model_cfg.to_dict()), results, graph)


def _run_sampled(config: Any, graph: Any, log: Log) -> Dict[str, Any]:
    """Mini-batch sage/gcn under DDP on distributed neighbour sampling (:mod:`sgl.tasks.dist_minibatch`)."""
    from sgl.samplers import DistGraph
    from sgl.samplers.models import SampledGNN
    from sgl.tasks.dist_minibatch import train_dist_minibatch
    from sgl.tasks.run_parts import record, sampled_setup

    d = config.distributed
    sampler_cfg, options, resolved = sampled_setup(config)
    if sampler_cfg.num_workers:
        raise ConfigError("num_workers does not apply to distributed neighbour sampling (every rank samples its "
                          "own seeds in its process); remove it")

    def factory() -> SampledGNN:
        return SampledGNN(graph.num_features, graph.num_classes, conv=config.model, **options)

    log(f"model: {factory()!r}, sampler: distributed neighbor fanouts {sampler_cfg.fanouts}; "
        f"{comm.get_world_size()} processes ({comm.get_backend()}), DDP, partition {d.partition}")
    part = DistGraph.from_graph(graph, method=d.partition, x=factory().precompute(graph))
    runs = [train_dist_minibatch(factory(), part, config.train, sampler_cfg, seed=seed, uneven=d.uneven,
                                 grad_compress=d.grad_compress, grad_bits=d.grad_bits, powersgd_rank=d.powersgd_rank,
                                 timeout=d.timeout) for seed in config.seeds]
    results: Dict[str, Any] = {"seeds": list(config.seeds), "runs": runs,
                               "train_time_s": sum(r["train_time_s"] for r in runs), "peak_rss_mb": _peak_rss()}
    _summaries(results, runs, ("train_acc", "val_acc", "test_acc"))
    return record(resolved, results, graph)


def _summaries(results: Dict[str, Any], runs: List[Dict[str, Any]], keys: Any) -> None:
    from sgl.tasks.stats import summarize

    for key in keys:
        results[key] = summarize([r[key] for r in runs])


def _sum(values: List[float]) -> List[float]:
    from sgl.tasks.ddp import _reduce  # on the backend's device (NCCL reduces GPU tensors)

    return _reduce(values).tolist()


def _max(value: float) -> float:
    from sgl.tasks.ddp import _reduce

    return float(_reduce([value], "max")[0])


def _peak_rss() -> float:
    """The largest peak resident memory of any rank, in MB."""
    from sgl.tasks.stats import peak_rss_mb

    return _max(peak_rss_mb())
