"""HET-GMP runtime: embeddings partitioned over workers, mirrored, synced with bounded staleness.

Every worker is the *root* of the rows the partitioner placed on it (master value
and version, in its server shard) and keeps *mirrors* of selected remote rows
(value, version, pending deltas, pending update count: the lines of HET's
bounded-staleness core, :mod:`sgl.embeddings.het.staleness`).  Per training step:

1. **query** -- for every unique non-owned id of its batch the worker sends
   ``(id, mirror version or -1)`` to the id's root; the root answers only
   outdated ids: not mirrored, or more than ``bound`` updates ahead.  A
   refreshed mirror re-applies its own pending deltas.
2. **update** -- the SGD delta of an owned row goes to the local root; of a
   remote row to its root; a mirror applies it locally and pushes its pending
   deltas to the root once it holds more than ``push_bound`` updates.

With ``bound = 0`` reads are fresh and every update is pushed at once, i.e.
synchronous data-parallel SGD on the whole table.  The transport is HET's:
:class:`~sgl.embeddings.het.LocalTransport` with ``rank`` for the in-process
simulator, :class:`~sgl.embeddings.het.DistTransport` with a ``placement``
(``count_local=False``) for real processes, where a query or an update is one
``all_to_all`` round.  Traffic to a worker's own shard is not counted.

Devices: a worker's mirrors live on its model's device (``device=`` or ``module.to(device)``),
its root rows (the server shard) in host memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from sgl.embeddings.het.embedding import WorkerEmbedding
from sgl.embeddings.het.server import ShardedServer
from sgl.embeddings.het.staleness import StaleLines, StalenessConfig
from sgl.embeddings.het.transport import DistTransport, LocalTransport, Transport
from sgl.errors import ConfigError, EmbeddingError

__all__ = ["GMPConfig", "GMPWorker", "GMPEmbedding", "simulated_cluster", "distributed_embedding"]


@dataclass
class GMPConfig(StalenessConfig):
    """Configuration of one HET-GMP worker (``bound``: mirror read bound; ``push_bound``: write bound)."""

    num_embeddings: int
    embedding_dim: int
    bound: int = 0
    push_bound: int | None = None
    lr: float = 0.01
    update_unit: Literal["step", "occurrence"] = "occurrence"

    def __post_init__(self) -> None:
        self._check_table()
        self._check_bounds()
        self._check_sgd()


class GMPWorker(StaleLines):
    """Root rows + mirrors of one worker and the query/update protocol.

    The worker's lines (:class:`~sgl.embeddings.het.staleness.StaleLines`) are its
    mirrors: ``keys`` (also :attr:`mirror_ids`) are the mirrored row ids.
    """

    _TENSORS = StaleLines._TENSORS + ("slot_of", "read_versions")

    def __init__(self, config: GMPConfig, transport: Transport, rank: int, mirrors: torch.Tensor,
                 device: torch.device | str | None = None) -> None:
        shard = getattr(transport, "local_shard", None)
        if shard is None:
            raise ConfigError(
                "GMPWorker: the transport has no local shard. Fix: LocalTransport(server, rank=r) "
                "or DistTransport(..., placement=...)."
            )
        if transport.num_embeddings != config.num_embeddings or transport.dim != config.embedding_dim:
            raise ConfigError(
                f"GMPWorker: transport serves a {transport.num_embeddings}x{transport.dim} table, "
                f"config asks for {config.num_embeddings}x{config.embedding_dim}."
            )
        self.config, self.transport, self.rank, self.shard = config, transport, rank, shard
        mirrors = torch.as_tensor(mirrors, dtype=torch.int64).reshape(-1)
        if mirrors.numel():
            if int(mirrors.min()) < 0 or int(mirrors.max()) >= config.num_embeddings:
                raise EmbeddingError(
                    f"GMPWorker: mirror ids must be in [0, {config.num_embeddings}), got "
                    f"[{int(mirrors.min())}, {int(mirrors.max())}]."
                )
            mirrors = torch.unique(mirrors)
            mirrors = mirrors[transport.owner(mirrors) != rank]  # own rows need no mirror
        mirrors = mirrors.to(device) if device is not None else mirrors
        super().__init__(mirrors, config.embedding_dim)
        self.slot_of = torch.full((config.num_embeddings,), -1, dtype=torch.int64, device=mirrors.device)
        self.slot_of[mirrors] = torch.arange(mirrors.numel(), device=mirrors.device)
        self.read_versions = torch.zeros(0, dtype=torch.int64, device=mirrors.device)
        self._batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self.local_reads = 0
        self.mirror_reads = 0
        self.remote_reads = 0

    @property
    def mirror_ids(self) -> torch.Tensor:
        """Row ids of the mirrors, one per line."""
        return self.keys

    def lookup(self, keys: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        own = self.transport.owner(keys) == self.rank
        slots = torch.where(own, -1, self.slot_of[keys])
        mirror = slots >= 0
        request = (~own).nonzero().flatten()
        versions = self.held_versions(slots)
        reply = self.transport.pull(keys[request], versions[request], self.config.bound)
        out = torch.empty(keys.numel(), self.config.embedding_dim, device=keys.device)
        read = versions.clone()
        own_values, own_versions = self.shard.values_of(keys[own].cpu())  # the root rows: host memory
        out[own], read[own] = own_values.to(keys.device), own_versions.to(keys.device)
        out[mirror] = self.value[slots[mirror]]
        assert reply.versions is not None
        self.refresh(slots, request[reply.positions], reply.values, reply.versions, out, read)
        self.read_versions = read
        self.local_reads += int(own.sum())
        self.mirror_reads += int(mirror.sum())
        self.remote_reads += int((~own & ~mirror).sum())
        self._batch = (keys, slots, own)
        return out

    def update(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor) -> None:
        if self._batch is None or not torch.equal(self._batch[0], keys):
            raise EmbeddingError(
                "GMPWorker.update: keys differ from the last lookup. Fix: call update once per "
                "lookup, with the same keys, before the next lookup."
            )
        _, slots, own = self._batch
        self._batch = None
        due_keys, due_deltas, due_counts = self.take(self.accumulate(slots, deltas, counts, self.config.write_bound))
        direct = slots < 0  # owned rows go to the local root, remote rows to theirs
        self.transport.push(
            torch.cat([keys[direct], due_keys]),
            torch.cat([deltas[direct], due_deltas]),
            torch.cat([counts[direct], due_counts]),
        )

    def flush(self) -> None:
        """Push every mirror's pending deltas (collective for DistTransport)."""
        self.transport.push(*self.take(self.dirty()))


class GMPEmbedding(WorkerEmbedding):
    """``ids -> embeddings`` of one HET-GMP worker; train with ``backward()`` then :meth:`step`.

    >>> from sgl.embeddings.hetgmp import simulated_cluster
    >>> cfg = GMPConfig(num_embeddings=20, embedding_dim=4, bound=0, lr=0.1)
    >>> placement = torch.arange(20) % 2                      # row -> root worker
    >>> server, (w0, w1) = simulated_cluster(cfg, placement, mirrors=[torch.tensor([1]), []])
    >>> out = w0(torch.tensor([[0, 1, 3]]))                  # 0 own, 1 mirror, 3 remote
    >>> (w0.worker.local_reads, w0.worker.mirror_reads, w0.worker.remote_reads)
    (1, 1, 1)
    >>> out.sum().backward(); w0.step()
    >>> w0.transport.stats.rows_pushed                        # rows 1 and 3 (bound 0)
    2
    """

    def __init__(self, config: GMPConfig, transport: Transport, rank: int,
                 mirrors: torch.Tensor | list, device: torch.device | str | None = None) -> None:
        super().__init__()
        self._init_worker(config, transport, GMPWorker(config, transport, rank, torch.as_tensor(mirrors), device))

    def memory_bytes(self) -> int:
        """Bytes this worker stores: its root rows (value + version) and its mirrors."""
        w = self.worker
        dim = self.config.embedding_dim
        return w.shard.rows.numel() * (4 * dim + 16) + w.mirror_ids.numel() * w.line_bytes()

    def extra_repr(self) -> str:
        c = self.config
        return (f"{c.num_embeddings}, {c.embedding_dim}, rank={self.worker.rank}, "
                f"mirrors={self.worker.mirror_ids.numel()}, bound={c.bound}, push_bound={c.write_bound}")


def _check_cluster(placement: torch.Tensor, mirrors: list, num_workers: int | None) -> int:
    if not isinstance(placement, torch.Tensor) or placement.dim() != 1:
        raise ConfigError("placement must be a 1-D tensor with the root worker of every table row.")
    k = int(placement.max()) + 1 if num_workers is None else num_workers
    if len(mirrors) != k:
        raise ConfigError(f"mirrors must hold one id list per worker ({k}), got {len(mirrors)}.")
    return k


def simulated_cluster(config: GMPConfig, placement: torch.Tensor, mirrors: list, *,
                      num_workers: int | None = None, seed: int = 0, init_std: float = 0.01
                      ) -> tuple[ShardedServer, list[GMPEmbedding]]:
    """In-process HET-GMP: one server shard per worker (rows by ``placement``) and the workers.

    Run the workers in lock-step rounds (every worker's forward, then every
    worker's step) to reproduce the multi-process schedule exactly.
    """
    k = _check_cluster(placement, mirrors, num_workers)
    server = ShardedServer(config.num_embeddings, config.embedding_dim, num_shards=k,
                           placement=placement, seed=seed, init_std=init_std)
    workers = [GMPEmbedding(config, LocalTransport(server, rank=r), r, mirrors[r]) for r in range(k)]
    return server, workers


def distributed_embedding(config: GMPConfig, placement: torch.Tensor, mirrors: torch.Tensor, *,
                          seed: int = 0, init_std: float = 0.01, group=None,
                          timeout: float | None = None) -> GMPEmbedding:
    """This rank's :class:`GMPEmbedding` over :mod:`sgl.comm` (call on every rank, same placement)."""
    transport = DistTransport(config.num_embeddings, config.embedding_dim, seed=seed, init_std=init_std,
                              placement=placement, count_local=False, group=group, timeout=timeout)
    return GMPEmbedding(config, transport, transport.rank, mirrors)
