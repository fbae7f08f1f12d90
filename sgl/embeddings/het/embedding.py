"""HET: a cached embedding table over a parameter server with bounded staleness.

Protocol per batch (after HET, VLDB'22; see the module docs of
:mod:`sgl.embeddings.het`):

``lookup`` -- the worker sends ``(key, cached version or -1)`` for every unique
key of the batch; the server returns the rows that are new to the worker or
more than ``bound`` updates ahead of its version, and the worker re-applies its
own unpushed deltas on top.  So a read misses at most ``bound`` server updates.

``update`` -- the SGD delta ``-lr * grad`` of each unique key is applied to the
cached value and accumulated as pending; a line pushes its pending deltas and
update count once it holds more than ``push_bound`` local updates, and always
when evicted.  With ``bound = 0`` every read is fresh and every update is
pushed at once: synchronous sparse SGD.

An *update* is, as in the official HET code, one occurrence of a key in a batch
(``update_unit="occurrence"``, the default), or one SGD step on a row
(``update_unit="step"``: a key updated by one batch counts 1 however often it
occurs).  Per-step counting lets hot rows stay stale longer: fewer bytes, lower
AUC (see docs/embeddings.md).

Devices: a worker's state (cache lines, the last read's versions) lives on its model's device
(``device=`` or ``module.to(device)``), the parameter server in host memory; the transport
moves what crosses between them.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from sgl._checks import check_choice
from sgl.embeddings.base import check_scalar
from sgl.embeddings.het.cache import POLICIES, CachePolicy, EmbeddingCache
from sgl.embeddings.het.staleness import PushPart, StalenessConfig
from sgl.embeddings.het.transport import Transport
from sgl.errors import ConfigError, EmbeddingError

__all__ = ["HETConfig", "CacheCounters", "HETWorker", "WorkerEmbedding", "HETEmbedding", "NoCacheWorker",
           "NoCacheEmbedding", "check_ids"]


@dataclass
class HETConfig(StalenessConfig):
    """Configuration of one HET worker.

    ``cache_capacity`` is in lines (rows); ``bound`` bounds reads and, unless
    ``push_bound`` is given, writes (see :class:`~sgl.embeddings.het.staleness.StalenessConfig`).
    """

    num_embeddings: int
    embedding_dim: int
    cache_capacity: int
    policy: CachePolicy = "lfu_pinned"
    bound: int = 10
    push_bound: int | None = None
    lr: float = 0.01
    update_unit: Literal["step", "occurrence"] = "occurrence"
    pin_threshold: int = 10

    def __post_init__(self) -> None:
        self._check_table()
        self._check_int("cache_capacity", 0, " (cache lines)")
        self._check_bounds()
        check_scalar(check_choice, self.policy, f"HETConfig.policy must be one of {POLICIES}, got {self.policy!r}.",
                     POLICIES, error=ConfigError)
        self._check_sgd()


def check_ids(ids: torch.Tensor, num_embeddings: int, who: str) -> None:
    """Raise EmbeddingError unless ``ids`` is an integer tensor with values in range."""
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
        raise EmbeddingError(
            f"{who}: ids must be an int64/int32 tensor, got "
            f"{ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__}."
        )
    if ids.numel():
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_embeddings:
            raise EmbeddingError(
                f"{who}: ids must be in [0, {num_embeddings}), got values in [{lo}, {hi}]. "
                "Fix: remap ids per field (sgl.datasets CTRData.global_ids) or enlarge the table."
            )


@dataclass
class CacheCounters:
    """Where one HET worker's rows travel, by reason (rows, not bytes).

    ``occurrences`` counts looked-up keys with duplicates, ``unique`` without.
    Rows fetched: ``fetched_new`` (a key that was not cached and got a line: a
    miss), ``fetched_stale`` (a cached line more than ``bound`` updates behind:
    a refresh), ``fetched_bypass`` (a key that got no line: a full pinned cache).
    Rows pushed: ``pushed_bound`` (a line holding more than ``push_bound``
    updates), ``pushed_evicted`` (an evicted line with pending updates),
    ``pushed_bypass`` (the update of a key without a line), ``pushed_flush``
    (pending updates sent by :meth:`HETWorker.flush`).

    >>> c = CacheCounters(unique=4, fetched_new=1, pushed_bound=2)
    >>> c.rows_fetched, c.rows_pushed
    (1, 2)
    """

    occurrences: int = 0
    unique: int = 0
    hits: int = 0
    fetched_new: int = 0
    fetched_stale: int = 0
    fetched_bypass: int = 0
    pushed_bound: int = 0
    pushed_evicted: int = 0
    pushed_bypass: int = 0
    pushed_flush: int = 0

    @property
    def rows_fetched(self) -> int:
        return self.fetched_new + self.fetched_stale + self.fetched_bypass

    @property
    def rows_pushed(self) -> int:
        return self.pushed_bound + self.pushed_evicted + self.pushed_bypass + self.pushed_flush

    def __add__(self, other: "CacheCounters") -> "CacheCounters":
        return CacheCounters(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


class HETWorker:
    """The cache protocol of one worker (no autograd; see :class:`HETEmbedding`), its cache on ``device``."""

    def __init__(self, config: HETConfig, transport: Transport, device: torch.device | str | None = None) -> None:
        if transport.num_embeddings != config.num_embeddings or transport.dim != config.embedding_dim:
            raise ConfigError(
                f"HETWorker: transport serves a {transport.num_embeddings}x{transport.dim} table, "
                f"config asks for {config.num_embeddings}x{config.embedding_dim}."
            )
        self.config, self.transport = config, transport
        self.cache = EmbeddingCache(config.num_embeddings, config.embedding_dim,
                                    config.cache_capacity, config.policy, config.pin_threshold, device=device)
        self._evicted: list[PushPart] = []
        self._batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        #: Server version each value of the last lookup reflects (for staleness checks).
        self.read_versions = torch.zeros(0, dtype=torch.int64, device=self.cache.device)
        self.lookups = 0
        self.hits = 0
        #: Rows fetched and pushed, by reason (see :class:`CacheCounters`).
        self.counters = CacheCounters()

    @property
    def device(self) -> torch.device:
        """Where the worker-side state lives."""
        return self.cache.device

    def to_device(self, device: torch.device) -> None:
        """Move the worker-side state (cache, evicted lines not pushed yet) to ``device``."""
        self.cache.to_device(device)
        self.read_versions = self.read_versions.to(device)
        self._evicted = [tuple(t.to(device) for t in part) for part in self._evicted]  # type: ignore[misc]

    def lookup(self, keys: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Values ``[len(keys), dim]`` of unique ``keys`` (int64) used ``counts`` times."""
        cache, dim = self.cache, self.config.embedding_dim
        cache.tick()
        slots = cache.locate(keys)
        hit = slots >= 0
        self.lookups += keys.numel()
        self.hits += int(hit.sum())
        cache.touch(slots[hit])
        miss = (~hit).nonzero().flatten()
        new_slots, evicted = cache.admit(keys[miss], counts[miss])
        if evicted[0].numel():
            self._evicted.append(evicted)
        slots[miss] = new_slots
        cached = slots >= 0
        versions = cache.held_versions(slots)
        reply = self.transport.pull(keys, versions, self.config.bound)
        out = torch.empty(keys.numel(), dim, device=keys.device)
        out[cached] = cache.value[slots[cached]]
        pos = reply.positions
        assert reply.versions is not None
        c = self.counters
        c.occurrences += int(counts.sum())
        c.unique += keys.numel()
        c.hits += int(hit.sum())
        c.fetched_stale += int(hit[pos].sum())
        c.fetched_bypass += int((~cached[pos]).sum())
        c.fetched_new += int((cached[pos] & ~hit[pos]).sum())
        read = versions.clone()
        cache.refresh(slots, pos, reply.values, reply.versions, out, read)
        self.read_versions = read
        self._batch = (keys, slots, counts)
        return out

    def update(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor) -> None:
        """Apply SGD ``deltas`` of the last lookup's ``keys`` and push what is due."""
        if self._batch is None or not torch.equal(self._batch[0], keys):
            raise EmbeddingError(
                "HETWorker.update: keys differ from the last lookup. Fix: call update once per "
                "lookup, with the same keys, before the next lookup."
            )
        _, slots, _ = self._batch
        self._batch = None
        due = self.cache.accumulate(slots, deltas, counts, self.config.write_bound)
        bypass = slots < 0
        parts = [self.cache.take(due), (keys[bypass], deltas[bypass], counts[bypass])]
        self.counters.pushed_bound += due.numel()
        self.counters.pushed_bypass += int(bypass.sum())
        self._push(parts)

    def _push(self, parts: list[PushPart]) -> None:
        self.counters.pushed_evicted += sum(e[0].numel() for e in self._evicted)
        parts = parts + self._evicted
        self._evicted = []
        self.transport.push(
            torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]),
            torch.cat([p[2] for p in parts]),
        )

    def flush(self) -> None:
        """Push every unpushed update (cached lines and evicted ones)."""
        due = self.cache.dirty()  # empty lines never hold updates
        self.counters.pushed_flush += due.numel()
        self._push([self.cache.take(due)])

    @property
    def hit_rate(self) -> float:
        return self.hits / max(self.lookups, 1)


class WorkerEmbedding(nn.Module):
    """``ids -> embeddings`` through a protocol worker with ``lookup``/``update``/``flush``.

    Shared by :class:`HETEmbedding` and HET-GMP's ``GMPEmbedding``: deduplicates
    the ids of a batch, looks the unique rows up, and turns their gradients
    into SGD deltas ``-lr * grad`` in :meth:`step`.
    """

    config: HETConfig
    transport: Transport

    def _init_worker(self, config, transport, worker) -> None:
        self.config, self.transport, self.worker = config, transport, worker
        self._pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def _apply(self, fn, recurse=True):
        # ``.to(device)`` / ``.cuda()`` / ``.cpu()`` of the model also move the worker's state
        # (plain tensors, not parameters or buffers); the server stays in host memory.
        out = super()._apply(fn, recurse)
        if hasattr(self.worker, "to_device"):
            # where fn sends a tensor of the worker's device (a dtype-only fn keeps the device)
            self.worker.to_device(fn(torch.zeros(0, device=self.worker.device)).device)
        return out

    @property
    def embedding_dim(self) -> int:
        return self.config.embedding_dim

    @property
    def dim(self) -> int:
        """Same as :attr:`embedding_dim` (the name the other sgl.embeddings backends use)."""
        return self.config.embedding_dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, self.config.num_embeddings, type(self).__name__)
        if self._pending is not None:
            raise EmbeddingError(
                f"{type(self).__name__}: the previous training batch was never applied. Fix: call "
                "loss.backward() and emb.step() after each training forward (use eval() or "
                "torch.no_grad() for lookups that do not train)."
            )
        uniq, inverse, counts = torch.unique(ids.reshape(-1).long(), return_inverse=True,
                                             return_counts=True)
        rows = self.worker.lookup(uniq, counts)
        if self.training and torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._pending = (uniq, counts, rows)
        else:
            self.worker._batch = None
        return F.embedding(inverse, rows).reshape(*ids.shape, self.config.embedding_dim)

    def step(self) -> None:
        """Apply the SGD update of the last training batch (and push what is due)."""
        if self._pending is None:
            raise EmbeddingError(f"{type(self).__name__}.step: no training batch to apply (call forward first).")
        uniq, counts, rows = self._pending
        self._pending = None
        grad = rows.grad if rows.grad is not None else torch.zeros_like(rows, device=rows.device)
        delta = grad * (-self.config.lr)
        n = counts if self.config.update_unit == "occurrence" else torch.ones_like(counts)
        self.worker.update(uniq, delta, n)

    def flush(self) -> None:
        """Push all unpushed updates (end of training; collective for DistTransport)."""
        self.worker.flush()


class HETEmbedding(WorkerEmbedding):
    r"""Embedding lookup ``ids [*] -> [*, dim]`` served by a HET cache over a parameter server.

    The table is trained by SGD inside the layer: call :meth:`step` after
    ``loss.backward()`` (the layer has no ``nn.Parameter``; the dense part of a
    model uses any torch optimizer as usual), and :meth:`flush` at the end.
    With ``bound=0`` and one worker this is exactly SGD on a full table.

    >>> from sgl.embeddings.het import ShardedServer, LocalTransport
    >>> cfg = HETConfig(num_embeddings=50, embedding_dim=4, cache_capacity=8, bound=2, lr=0.1)
    >>> emb = HETEmbedding(cfg, LocalTransport(ShardedServer(50, 4, num_shards=2)))
    >>> out = emb(torch.tensor([[1, 7], [7, 3]]))
    >>> out.sum().backward(); emb.step(); emb.flush()
    >>> tuple(out.shape), emb.transport.stats.rows_fetched
    ((2, 2, 4), 3)
    """

    def __init__(self, config: HETConfig, transport: Transport, device: torch.device | str | None = None) -> None:
        super().__init__()
        self._init_worker(config, transport, HETWorker(config, transport, device))

    def memory_bytes(self) -> int:
        """Bytes held by this worker: the cache (the server's table is not counted)."""
        return self.worker.cache.memory_bytes()

    def extra_repr(self) -> str:
        c = self.config
        return (f"{c.num_embeddings}, {c.embedding_dim}, capacity={c.cache_capacity}, "
                f"policy={c.policy}, bound={c.bound}, push_bound={c.write_bound}")


class NoCacheWorker:
    """A plain sparse parameter-server client: pull the batch's unique keys, push their deltas.

    The baseline HET is measured against (HET with the cache bypassed): no
    versions travel, every unique key is pulled and pushed every step.
    """

    def __init__(self, config: HETConfig, transport: Transport) -> None:
        self.config, self.transport = config, transport
        self._batch: torch.Tensor | None = None

    def lookup(self, keys: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        self._batch = keys
        return self.transport.pull(keys, None, 0).values

    def update(self, keys: torch.Tensor, deltas: torch.Tensor, counts: torch.Tensor) -> None:
        if self._batch is None or not torch.equal(self._batch, keys):
            raise EmbeddingError("NoCacheWorker.update: keys differ from the last lookup.")
        self._batch = None
        self.transport.push(keys, deltas, None)

    def flush(self) -> None:
        """Nothing is ever held back."""


class NoCacheEmbedding(WorkerEmbedding):
    """``ids -> embeddings`` straight from the parameter server (no cache; the HET baseline).

    >>> from sgl.embeddings.het import ShardedServer, LocalTransport
    >>> emb = NoCacheEmbedding(HETConfig(50, 4, cache_capacity=0), LocalTransport(ShardedServer(50, 4)))
    >>> emb(torch.tensor([[1, 7, 7]])).sum().backward(); emb.step()
    >>> emb.transport.stats.total_bytes      # pull 2 ids (8 B) + 2 values (16 B), push 2 x (8 + 16) B
    96
    """

    def __init__(self, config: HETConfig, transport: Transport) -> None:
        super().__init__()
        self._init_worker(config, transport, NoCacheWorker(config, transport))

    def memory_bytes(self) -> int:
        return 0
