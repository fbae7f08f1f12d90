"""HET and HET-GMP as the embedding backend of a CTR model (``sgl train --ctr-embedding het|hetgmp``).

:class:`ProtocolEmbedding` maps global ids ``[B, F]`` to ``[B, F, dim]`` like every other backend,
but its table lives on a parameter server and is trained by SGD *inside* the workers' protocol
(:mod:`sgl.embeddings.het`, :mod:`sgl.embeddings.hetgmp`). It holds the workers one process runs:

* all ``workers`` of the **in-process simulator**: one shared
  :class:`~sgl.embeddings.het.ShardedServer`, a :class:`~sgl.embeddings.het.LocalTransport` each;
* under an initialised :mod:`sgl.comm` world of ``W > 1`` ranks (``sgl train --procs W``),
  **this rank's one worker** over :class:`~sgl.embeddings.het.DistTransport` (rank ``r`` hosts
  server shard ``r``).

Both place rows and initialise them alike (a row's initial value depends only on the seed and
its id), so with the same seed the simulator with ``workers=W`` and ``W`` processes train the
same table. A training forward goes through the *active* worker (the trainer,
:mod:`sgl.tasks.ctr_workers`, picks one per batch); an evaluation forward (``eval()`` or no
grad) reads the server's current values, not counted as traffic. ``after_backward`` applies
every worker's SGD step (and pushes what is due), :meth:`ProtocolEmbedding.flush` pushes what
the caches still hold.

Options (``--ctr-embedding-option KEY=VALUE``), with their defaults in :data:`HET_OPTIONS` and
:data:`HETGMP_OPTIONS`:

* both: ``workers`` (simulated workers; ``--procs`` sets it), ``bound`` (read staleness bound),
  ``push_bound`` (write bound, default ``bound``), ``lr`` (the table's SGD step),
  ``update_unit`` (``occurrence`` or ``step``), ``init_std``, ``compress`` (the push codec:
  ``none``, ``sketchml``, ``uniform8`` or ``zlib``; :mod:`sgl.comm.compress`, ``sgl train --compress``);
* ``het``: ``cache`` (lines per worker: an int, or a float fraction of the table's rows),
  ``policy`` (``lru``, ``lfu``, ``lfu_pinned``), ``pin_threshold``;
* ``hetgmp``: ``mirrors`` (mirrored rows per worker: an int, or a fraction of the ids the
  training rows use), ``partition`` (``greedy``: HET-GMP's bigraph partitioner, or ``random``),
  ``partition_rounds``. HET-GMP partitions the training rows (``train_ids``) over the workers.

Example (two simulated HET workers):
    >>> import torch
    >>> emb = build_protocol_embedding("het", 100, 4, workers=2, cache=0.2, bound=2, lr=0.1)
    >>> out = emb(torch.tensor([[1, 7], [7, 3]]))          # worker 0's lookup
    >>> out.sum().backward(); emb.after_backward(); emb.flush()
    >>> tuple(emb.eval()(torch.tensor([[1, 2]])).shape), emb.num_workers, emb.traffic_bytes() > 0
    ((1, 2, 4), 2, True)
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from sgl import comm
from sgl.comm.compress import KV_CODECS, build_codec
from sgl.embeddings.base import EmbeddingBackend, check_ratio
from sgl.embeddings.het import DistTransport, HETConfig, HETEmbedding, LocalTransport, ShardedServer
from sgl.embeddings.het.embedding import WorkerEmbedding
from sgl.errors import ConfigError, EmbeddingError

__all__ = ["PROTOCOL_EMBEDDINGS", "HET_OPTIONS", "HETGMP_OPTIONS", "ProtocolEmbedding", "build_protocol_embedding",
           "check_protocol_options"]

PROTOCOL_EMBEDDINGS = ("het", "hetgmp")
_SHARED = {"workers": 1, "bound": 10, "push_bound": None, "lr": 0.01, "update_unit": "occurrence",
           "init_std": 0.01, "compress": "none"}
#: ``--ctr-embedding het`` options and defaults (HET's: a cache of 10 % of the rows, LFU with pinning, bound 10)
HET_OPTIONS: Dict[str, Any] = {**_SHARED, "cache": 0.1, "policy": "lfu_pinned", "pin_threshold": 10}
#: ``--ctr-embedding hetgmp`` options and defaults (mirrors of 1 % of the used ids, the greedy partitioner)
HETGMP_OPTIONS: Dict[str, Any] = {**_SHARED, "mirrors": 0.01, "partition": "greedy", "partition_rounds": 5}


class ProtocolEmbedding(EmbeddingBackend):
    """The HET / HET-GMP workers of this process as one ``ids -> embeddings`` backend.

    Args:
        kind: ``"het"`` or ``"hetgmp"``.
        workers: this process's :class:`~sgl.embeddings.het.WorkerEmbedding` s.
        worker_ids: the global index of each (``0..W-1`` in the simulator, ``[rank]`` per rank).
        num_workers: ``W``, the workers of the whole run.
        sample_owner: HET-GMP's worker of each training row (int64 ``[rows]``); ``None``: any.
    """

    def __init__(self, kind: str, num_embeddings: int, dim: int, workers: Sequence[WorkerEmbedding],
                 worker_ids: Sequence[int], num_workers: int, sample_owner: Optional[torch.Tensor] = None) -> None:
        super().__init__(num_embeddings, dim)
        self.kind = kind
        self.workers = nn.ModuleList(workers)
        self.worker_ids = list(worker_ids)
        self.num_workers = num_workers
        self.sample_owner = sample_owner
        #: the local worker the next training forward goes through
        self.active = 0

    @property
    def distributed(self) -> bool:
        """Workers in several processes (over sgl.comm), not the in-process simulator."""
        return isinstance(self.workers[0].transport, DistTransport)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.training and torch.is_grad_enabled():
            return self.workers[self.active](ids)
        return self.read(ids)

    def read(self, ids: torch.Tensor) -> torch.Tensor:
        """The server's current rows of ``ids`` (collective under sgl.comm; not counted as traffic)."""
        ids = self.check_ids(ids)
        uniq, inverse = torch.unique(ids.reshape(-1), return_inverse=True)
        rows = self.workers[0].transport.read(uniq)
        return F.embedding(inverse, rows).reshape(*ids.shape, self.dim)

    def after_backward(self, optimizer: Optional[torch.optim.Optimizer] = None) -> None:
        """Every worker's SGD step on the rows of its last training batch, in worker order."""
        for worker in self.workers:
            if worker._pending is not None:
                worker.step()

    def flush(self) -> None:
        """Push every update the workers still hold (collective under sgl.comm)."""
        for worker in self.workers:
            worker.flush()

    def _shards(self) -> List[Any]:
        transport = self.workers[0].transport
        return list(transport.server.shards) if isinstance(transport, LocalTransport) else [transport.local_shard]

    def snapshot(self) -> List[tuple]:
        """A copy of the server rows this process holds (every shard in the simulator, its own per rank)."""
        return [(shard.weight.clone(), shard.version.clone()) for shard in self._shards()]

    def restore(self, snapshot: List[tuple]) -> None:
        """Put the server rows of :meth:`snapshot` back (the workers' caches are left as they are)."""
        for shard, (weight, version) in zip(self._shards(), snapshot):
            shard.weight.copy_(weight)
            shard.version.copy_(version)

    def traffic_bytes(self) -> int:
        """Protocol bytes this process's workers moved while training (evaluation reads excluded)."""
        return sum(worker.transport.stats.total_bytes for worker in self.workers)

    def push_bytes(self) -> int:
        """The pushes' share of :meth:`traffic_bytes` (what ``compress=`` shrinks)."""
        return sum(worker.transport.stats.push_bytes for worker in self.workers)

    def memory_bytes(self) -> int:
        """Bytes one worker holds: HET its cache, HET-GMP its root rows and mirrors (the first local worker)."""
        return self.workers[0].memory_bytes()

    def extra_repr(self) -> str:
        where = "processes" if self.distributed else "simulated workers"
        return f"{self.kind}, {self.num_embeddings}, {self.dim}, {self.num_workers} {where}, {self.workers[0].extra_repr()}"


def _world() -> int:
    return comm.get_world_size() if comm.is_initialized() else 1


def check_protocol_options(kind: str, ratio: float, options: Dict[str, Any]) -> None:
    """Refuse a compression ratio or an option that ``kind`` (``het``, ``hetgmp``) does not take
    (:class:`~sgl.tasks.CTRConfig` calls it before any data is loaded).

    >>> check_protocol_options("het", 1.0, {"cache": 0.2, "bound": 3})
    >>> check_protocol_options("het", 1.0, {"mirrors": 0.1})
    Traceback (most recent call last):
    ...
    sgl.errors.ConfigError: unknown option(s) ['mirrors'] for embedding backend 'het'; valid: bound, cache, compress, init_std, lr, pin_threshold, policy, push_bound, update_unit, workers (--ctr-embedding-option KEY=VALUE)
    """
    if check_ratio(ratio) != 1.0:
        raise ConfigError(f"{kind} keeps the whole table on its parameter server: --ctr-compression does not apply "
                          f"(got {ratio:g}); remove it and size the cache with --ctr-embedding-option "
                          f"{'cache' if kind == 'het' else 'mirrors'}=...")
    _check_options(kind, options)


def _check_options(kind: str, options: Dict[str, Any]) -> Dict[str, Any]:
    defaults = HET_OPTIONS if kind == "het" else HETGMP_OPTIONS
    unknown = set(options) - set(defaults)
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for embedding backend {kind!r}; valid: "
                          f"{', '.join(sorted(defaults))} (--ctr-embedding-option KEY=VALUE)")
    merged = {**defaults, **options}
    workers, world = merged["workers"], _world()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"{kind} option workers must be a positive integer, got {workers!r}")
    if world > 1 and "workers" in options and workers != world:
        raise ConfigError(f"{kind} option workers={workers} but the run has {world} processes (--procs); with "
                          f"--procs every process is one worker: drop workers or set it to {world}")
    merged["workers"] = world if world > 1 else workers
    if str(merged["compress"]).lower() not in KV_CODECS:
        raise ConfigError(f"{kind} option compress must be one of {', '.join(sorted(KV_CODECS))}, got "
                          f"{merged['compress']!r} (--compress / --ctr-embedding-option compress=...)")
    return merged


def _rows(value: Any, total: int, name: str, kind: str) -> int:
    """An int row count, or a float fraction of ``total`` rows."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
            (isinstance(value, float) and value > 1):
        raise ConfigError(f"{kind} option {name} must be a number of rows (int >= 0) or a fraction (float in "
                          f"[0, 1]), got {value!r}")
    return int(value) if isinstance(value, int) else int(round(value * total))


def build_protocol_embedding(kind: str, num_embeddings: int, dim: int, ratio: float = 1.0, *, seed: int = 0,
                             train_ids: Any = None, batch_size: int = 1024,
                             device: Optional[torch.device] = None, **options: Any) -> ProtocolEmbedding:
    """A :class:`ProtocolEmbedding`: the simulator's workers, or this rank's worker under sgl.comm.

    ``seed`` initialises the server rows (and HET-GMP's partitioner); ``train_ids`` (HET-GMP:
    the training rows' global ids ``[rows, F]``) and ``batch_size`` (the per-worker batch the
    partitioner plans for) come from the trainer; ``options``: see the module docstring.
    """
    kind = str(kind).lower().replace("-", "")
    if kind not in PROTOCOL_EMBEDDINGS:
        raise EmbeddingError(f"unknown protocol embedding {kind!r}; choose one of {', '.join(PROTOCOL_EMBEDDINGS)}")
    check_protocol_options(kind, ratio, {})
    opts = _check_options(kind, options)
    num_workers, world = opts["workers"], _world()
    rank = comm.get_rank() if world > 1 else None
    if kind == "het":
        return _build_het(num_embeddings, dim, opts, seed, rank, device)
    return _build_hetgmp(num_embeddings, dim, opts, seed, rank, device, train_ids, batch_size)


def _build_het(num_embeddings: int, dim: int, opts: Dict[str, Any], seed: int, rank: Optional[int],
               device: Optional[torch.device]) -> ProtocolEmbedding:
    w = opts["workers"]
    config = HETConfig(num_embeddings, dim, _rows(opts["cache"], num_embeddings, "cache", "het"),
                       policy=opts["policy"], bound=opts["bound"], push_bound=opts["push_bound"], lr=opts["lr"],
                       update_unit=opts["update_unit"], pin_threshold=opts["pin_threshold"])
    if rank is not None:
        transports = [DistTransport(num_embeddings, dim, seed=seed, init_std=opts["init_std"],
                                    compressor=build_codec(opts["compress"], seed=seed))]
    else:
        server = ShardedServer(num_embeddings, dim, num_shards=w, seed=seed, init_std=opts["init_std"])
        transports = [LocalTransport(server, compressor=build_codec(opts["compress"], seed=seed + i))
                      for i in range(w)]
    workers = [HETEmbedding(config, t, device) for t in transports]
    return ProtocolEmbedding("het", num_embeddings, dim, workers, [rank] if rank is not None else range(w), w)


def _build_hetgmp(num_embeddings: int, dim: int, opts: Dict[str, Any], seed: int, rank: Optional[int],
                  device: Optional[torch.device], train_ids: Any, batch_size: int) -> ProtocolEmbedding:
    from sgl.embeddings.hetgmp import (
        Bigraph, GMPConfig, GMPEmbedding, PartitionConfig, partition_bigraph, random_partition, select_replicas,
    )

    if train_ids is None:
        raise ConfigError("hetgmp partitions the training rows over its workers: pass train_ids (the training "
                          "split's global ids, [rows, fields]); `sgl train --task ctr` does")
    w = opts["workers"]
    if opts["partition"] not in ("greedy", "random"):
        raise ConfigError(f"hetgmp option partition must be greedy or random, got {opts['partition']!r}")
    graph = Bigraph(train_ids)
    if graph.num_samples < w:
        raise ConfigError(f"hetgmp: {graph.num_samples} training rows cannot feed {w} workers; use fewer workers")
    if opts["partition"] == "greedy" and w > 1:
        part = partition_bigraph(graph, PartitionConfig(w, batch_size, rounds=opts["partition_rounds"], seed=seed))
    else:
        part = random_partition(graph, w, batch_size, seed=seed)
    placement = part.placement(num_embeddings)
    _rows(opts["mirrors"], graph.num_embeddings, "mirrors", "hetgmp")  # the message names the option
    mirrors = select_replicas(part, opts["mirrors"])
    config = GMPConfig(num_embeddings, dim, bound=opts["bound"], push_bound=opts["push_bound"], lr=opts["lr"],
                       update_unit=opts["update_unit"])
    if rank is not None:
        transports = {rank: DistTransport(num_embeddings, dim, seed=seed, init_std=opts["init_std"],
                                          placement=placement, count_local=False,
                                          compressor=build_codec(opts["compress"], seed=seed))}
    else:
        server = ShardedServer(num_embeddings, dim, num_shards=w, placement=placement, seed=seed,
                               init_std=opts["init_std"])
        transports = {r: LocalTransport(server, rank=r, compressor=build_codec(opts["compress"], seed=seed + r))
                      for r in range(w)}
    workers = [GMPEmbedding(config, t, r, mirrors[r], device) for r, t in transports.items()]
    owner = torch.from_numpy(part.sample_part.astype("int64"))
    return ProtocolEmbedding("hetgmp", num_embeddings, dim, workers, list(transports), w, owner)
