"""In-memory caches of out-of-core training, all bounded by one :class:`MemoryBudget`.

* :class:`LRUFeatureCache` — least-recently-used at batch granularity (the rows of one batch
  are "used" together; ties inside a batch are irrelevant to the hit count of later batches).
* :class:`StaticFeatureCache` — a fixed node set chosen in advance (OUTRE: top access
  frequency from one profiling pass), filled lazily on the first miss.
* :class:`BeladyFeatureCache` — Ginex's policy: given the pre-sampled id trace of a
  superbatch, evict the row whose next use is furthest in the future (optimal for the trace).
* :class:`HistoricalEmbeddingCache` — OUTRE's cache of last-layer inputs with a staleness
  bound in iterations.

Every cache reports ``nbytes`` (values plus index structures) so the budget can be checked
at run time; every feature cache reads its misses through the store's counted I/O layer.
Budgets are read by :func:`sgl._checks.parse_bytes` (re-exported here): ``"512MB"`` is 512·10^6
bytes, ``"512MiB"`` 512·2^20.

Example:
    >>> import numpy as np, torch
    >>> from sgl.samplers.caches import LRUFeatureCache, parse_bytes
    >>> parse_bytes("512MB"), parse_bytes("1.5GiB"), parse_bytes(1024)
    (512000000, 1610612736, 1024)
    >>> class Rows:  # any reader with read(ids) -> float32 rows
    ...     num_nodes, num_features, row_bytes = 10, 2, 8
    ...     def read(self, ids): return torch.as_tensor(np.stack([ids, ids], 1), dtype=torch.float32)
    >>> cache = LRUFeatureCache(Rows(), capacity_rows=3)
    >>> cache.fetch(np.array([1, 2])).tolist(), cache.fetch(np.array([2, 5])).tolist()
    ([[1.0, 1.0], [2.0, 2.0]], [[2.0, 2.0], [5.0, 5.0]])
    >>> cache.hits, cache.misses
    (1, 3)
"""
from __future__ import annotations

import abc
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import torch

from sgl._checks import parse_bytes
from sgl.errors import ConfigError

__all__ = ["parse_bytes", "MemoryBudget", "NoFeatureCache", "LRUFeatureCache", "StaticFeatureCache",
           "BeladyFeatureCache", "HistoricalEmbeddingCache"]


class MemoryBudget:
    """A byte cap shared by every cache and the per-batch working set; :meth:`check` enforces it."""

    def __init__(self, total: Union[str, int]) -> None:
        self.total = parse_bytes(total, "a memory budget")
        self.parts: Dict[str, Any] = {}
        self.peak = 0

    def register(self, name: str, cache: Any) -> None:
        self.parts[name] = cache

    def used(self) -> int:
        return sum(int(getattr(part, "nbytes", 0)) for part in self.parts.values())

    def check(self, working_bytes: int = 0, where: str = "") -> int:
        """Raise :class:`ConfigError` when caches + ``working_bytes`` exceed the budget."""
        used = self.used() + int(working_bytes)
        self.peak = max(self.peak, used)
        if used > self.total:
            detail = ", ".join(f"{k} {int(getattr(v, 'nbytes', 0)):,}" for k, v in self.parts.items())
            raise ConfigError(f"memory budget exceeded{' ' + where if where else ''}: {used:,} bytes in use "
                              f"({detail}, batch {int(working_bytes):,}) > budget {self.total:,}; "
                              f"raise --memory-budget or lower the batch size / fan-outs")
        return used

    def __repr__(self) -> str:
        return f"MemoryBudget(total={self.total:,}, used={self.used():,})"


class _FeatureCacheBase(abc.ABC):
    """Slot storage ``values[capacity, F]`` plus a ``num_nodes`` slot map."""

    def __init__(self, reader: Any, capacity_rows: int, dtype: torch.dtype = torch.float32) -> None:
        if capacity_rows < 0:
            raise ConfigError(f"cache capacity must be >= 0 rows, got {capacity_rows}")
        self.reader = reader
        self.capacity = int(min(capacity_rows, reader.num_nodes))
        self.values = torch.empty(self.capacity, reader.num_features, dtype=dtype)
        self.slot_of = np.full(reader.num_nodes if self.capacity else 0, -1, dtype=np.int32)
        self.node_of = np.full(self.capacity, -1, dtype=np.int64)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def capacity_for(nbytes: int, num_nodes: int, num_features: int, itemsize: int = 4) -> int:
        """Rows that fit in ``nbytes`` after the slot map (4 B per node) and 8 B per slot."""
        room = int(nbytes) - 4 * num_nodes
        return max(0, room // (num_features * itemsize + 8))

    @property
    def nbytes(self) -> int:
        return int(self.values.numel() * self.values.element_size() + self.slot_of.nbytes + self.node_of.nbytes)

    def _lookup(self, ids: np.ndarray):
        slot = self.slot_of[ids] if self.capacity else np.full(ids.size, -1, dtype=np.int32)
        return slot

    def fetch(self, ids: np.ndarray) -> torch.Tensor:
        """Rows of ``ids`` (unique ids), from the cache or the store."""
        ids = np.asarray(ids, dtype=np.int64)
        slot = self._lookup(ids)
        hit = slot >= 0
        out = torch.empty(ids.size, self.reader.num_features, dtype=torch.float32)
        if hit.any():
            out[torch.from_numpy(hit)] = self.values[torch.from_numpy(slot[hit].astype(np.int64))].float()
        miss = ~hit
        if miss.any():
            rows = self.reader.read(ids[miss])
            out[torch.from_numpy(miss)] = rows
            self._admit(ids, hit, slot, ids[miss], rows)
        else:
            self._admit(ids, hit, slot, ids[:0], out[:0])
        self.hits += int(hit.sum())
        self.misses += int(miss.sum())
        return out

    def clear(self) -> None:
        """Drop every cached row (hit/miss counters are kept)."""
        if self.capacity:
            self.slot_of[self.node_of[self.node_of >= 0]] = -1
        self.node_of[:] = -1

    @abc.abstractmethod
    def _admit(self, ids, hit, slot, miss_ids, miss_rows) -> None:
        """The policy: decide which of this batch's rows stay cached (and update its bookkeeping)."""

    def _store(self, slots: np.ndarray, nodes: np.ndarray, rows: torch.Tensor) -> None:
        old = self.node_of[slots]
        self.slot_of[old[old >= 0]] = -1
        self.node_of[slots] = nodes
        self.slot_of[nodes] = slots
        self.values[torch.from_numpy(slots.astype(np.int64))] = rows.to(self.values.dtype)


class NoFeatureCache(_FeatureCacheBase):
    """Every read goes to the store."""

    def __init__(self, reader: Any) -> None:
        super().__init__(reader, 0)

    def _admit(self, ids, hit, slot, miss_ids, miss_rows) -> None:
        return None


class LRUFeatureCache(_FeatureCacheBase):
    """Least-recently-used rows (batch granularity)."""

    def __init__(self, reader: Any, capacity_rows: int) -> None:
        super().__init__(reader, capacity_rows)
        self.last_used = np.full(self.capacity, -1, dtype=np.int64)
        self.clock = 0

    @property
    def nbytes(self) -> int:
        return super().nbytes + int(self.last_used.nbytes)

    def clear(self) -> None:
        super().clear()
        self.last_used[:] = -1  # empty slots are taken first

    def _admit(self, ids, hit, slot, miss_ids, miss_rows) -> None:
        self.clock += 1
        if not self.capacity:
            return
        self.last_used[slot[hit]] = self.clock
        if miss_ids.size == 0:
            return
        # victims: the least recently used slots, never ones used by this batch
        take = min(miss_ids.size, self.capacity - int(hit.sum()))
        if take <= 0:
            return
        victims = np.argpartition(self.last_used, take - 1)[:take] if take < self.capacity else np.arange(take)
        keep = miss_ids[:take]
        self._store(victims, keep, miss_rows[:take])
        self.last_used[victims] = self.clock


class StaticFeatureCache(_FeatureCacheBase):
    """A fixed set of nodes, cached on their first miss (never evicted)."""

    def __init__(self, reader: Any, nodes: np.ndarray) -> None:
        nodes = np.unique(np.asarray(nodes, dtype=np.int64))
        super().__init__(reader, nodes.size)
        self.member = np.zeros(reader.num_nodes if self.capacity else 0, dtype=bool)
        if self.capacity:
            self.member[nodes] = True
        self.filled = 0

    @property
    def nbytes(self) -> int:
        return super().nbytes + int(self.member.nbytes)

    def clear(self) -> None:
        """Empty the cache; members are cached again on their next miss (OUTRE's per-epoch restart)."""
        super().clear()
        self.filled = 0

    def _admit(self, ids, hit, slot, miss_ids, miss_rows) -> None:
        if not self.capacity or miss_ids.size == 0:
            return
        admit = self.member[miss_ids]
        count = int(admit.sum())
        if count:
            slots = np.arange(self.filled, self.filled + count)
            self._store(slots, miss_ids[admit], miss_rows[torch.from_numpy(admit)])
            self.filled += count


class BeladyFeatureCache(_FeatureCacheBase):
    """Belady's optimal replacement over a known trace of per-batch id sets (Ginex).

    ``trace[t]`` must be the unique ids batch ``t`` will fetch, in the order they will be fetched.
    """

    NEVER32 = np.iinfo(np.int32).max
    #: bytes of the next-use plan per traced id
    PLAN_BYTES_PER_ID = 4

    def __init__(self, reader: Any, capacity_rows: int, trace: Sequence[np.ndarray] = ()) -> None:
        super().__init__(reader, capacity_rows)
        self.next_of = np.full(self.capacity, np.iinfo(np.int64).max, dtype=np.int64)
        self.used = 0
        self.set_trace(trace)

    def set_trace(self, trace: Sequence[np.ndarray], refill: bool = False) -> None:
        """Start a new superbatch: its per-batch id sets. Cached rows keep their data, or, with
        ``refill``, the cache is rebuilt as Ginex does for every superbatch: emptied, then filled
        from storage (counted reads) with the superbatch's first ``capacity`` distinct ids in
        access order (Ginex's ``initial_cache_indices`` / ``fill_cache``)."""
        never = np.iinfo(np.int64).max
        self.trace = [np.asarray(t, dtype=np.int64) for t in trace]
        self.step = 0
        empty = np.empty(0, dtype=np.int64)
        batch = np.concatenate([np.full(t.size, i, dtype=np.int64) for i, t in enumerate(self.trace)]) \
            if self.trace else empty
        nodes = np.concatenate(self.trace) if self.trace else empty
        # next use of every (batch, node) occurrence: sort occurrences by (node, batch)
        order = np.lexsort((batch, nodes))
        nxt = np.full(nodes.size, never, dtype=np.int64)
        same = nodes[order][1:] == nodes[order][:-1]
        nxt[order[:-1][same]] = batch[order][1:][same]
        # the plan keeps one int32 batch index per occurrence (``never`` -> int32 max): 4 B per id
        nxt32 = np.where(nxt == never, self.NEVER32, nxt).astype(np.int32)
        self._next = np.split(nxt32, np.cumsum([t.size for t in self.trace])[:-1]) if self.trace else []
        if not self.capacity:
            return
        is_first = np.ones(nodes.size, dtype=bool)
        is_first[1:] = ~same
        firsts = order[is_first]  # each traced node's first occurrence
        if refill:
            self.clear()
            self.next_of[:] = never
            initial = nodes[np.sort(firsts)][:self.capacity]  # first distinct ids in access order
            for lo in range(0, initial.size, 1 << 16):  # in chunks: no cache-sized temporary
                part = initial[lo:lo + (1 << 16)]
                self._store(np.arange(lo, lo + part.size), part, self.reader.read(part))
            self.used = int(initial.size)
        if self.used:
            # cached rows: next use = first batch of the new superbatch that needs them
            first = np.full(self.capacity, never, dtype=np.int64)
            slots = self.slot_of[nodes[firsts]]
            ok = slots >= 0
            first[slots[ok]] = batch[firsts][ok]
            self.next_of[:self.used] = first[:self.used]

    @property
    def nbytes(self) -> int:
        # the next-use plan of the superbatch is part of Ginex's memory footprint
        return super().nbytes + int(self.next_of.nbytes) + sum(int(n.nbytes) for n in self._next)

    def fetch(self, ids: np.ndarray) -> torch.Tensor:
        ids = np.asarray(ids, dtype=np.int64)
        if self.step >= len(self.trace) or not np.array_equal(ids, self.trace[self.step]):
            raise ConfigError(f"Belady cache: batch {self.step} asked for ids that differ from the pre-sampled "
                              f"trace; the superbatch must be replayed exactly")
        return super().fetch(ids)

    def _admit(self, ids, hit, slot, miss_ids, miss_rows) -> None:
        never = np.iinfo(np.int64).max
        nxt = self._next[self.step].astype(np.int64)
        nxt[nxt == self.NEVER32] = never
        self.step += 1
        if not self.capacity:
            return
        self.next_of[slot[hit]] = nxt[hit]
        miss_next = nxt[~hit]
        useful = miss_next != never
        miss_ids, miss_next = miss_ids[useful], miss_next[useful]
        miss_rows = miss_rows[torch.from_numpy(useful)]
        if miss_ids.size == 0:
            return
        free = self.capacity - self.used
        if miss_ids.size <= free:
            slots = np.arange(self.used, self.used + miss_ids.size)
            self.used += miss_ids.size
            self._store(slots, miss_ids, miss_rows)
            self.next_of[slots] = miss_next
            return
        # keep the `capacity` entries (cached or new) with the soonest next use
        keys = np.concatenate([self.next_of[:self.used], miss_next])
        keep = np.argpartition(keys, self.capacity - 1)[:self.capacity]
        keep_new = keep[keep >= self.used] - self.used
        evict = np.setdiff1d(np.arange(self.used), keep[keep < self.used], assume_unique=True)
        fill = np.concatenate([evict, np.arange(self.used, self.capacity)])[:keep_new.size]
        if free > 0:
            self.used = self.capacity
        if keep_new.size:
            self._store(fill, miss_ids[keep_new], miss_rows[torch.from_numpy(keep_new)])
            self.next_of[fill] = miss_next[keep_new]
        stale = evict[keep_new.size:] if keep_new.size < evict.size else evict[:0]
        if stale.size:  # evicted and not refilled: mark empty (never reused before refill)
            self.slot_of[self.node_of[stale]] = -1
            self.node_of[stale] = -1
            self.next_of[stale] = never


class HistoricalEmbeddingCache:
    """Last-layer inputs of a selected node set, with a staleness bound (OUTRE).

    A selected node's entry is *fresh* at iteration ``it`` when it was pushed at ``ts`` with
    ``it - ts < staleness``; a fresh node is pulled (and its subtree pruned), otherwise it is
    recomputed and pushed.
    """

    def __init__(self, nodes: np.ndarray, num_nodes: int, width: int, staleness: int) -> None:
        if isinstance(staleness, bool) or not isinstance(staleness, (int, np.integer)) or staleness < 1:
            raise ConfigError(f"staleness must be a positive number of iterations, got {staleness!r}")
        nodes = np.unique(np.asarray(nodes, dtype=np.int64))
        self.staleness = int(staleness)
        self.slot_of = np.full(num_nodes if nodes.size else 0, -1, dtype=np.int64)
        self.slot_of[nodes] = np.arange(nodes.size)
        self.values = torch.zeros(nodes.size, width)
        self.stamp = np.full(nodes.size, -(1 << 40), dtype=np.int64)
        self.pulls = 0
        self.pushes = 0
        #: pushes that overwrote an earlier value (a stale entry recomputed)
        self.refreshes = 0

    @property
    def nbytes(self) -> int:
        return int(self.values.numel() * 4 + self.stamp.nbytes + self.slot_of.nbytes)

    @staticmethod
    def capacity_for(nbytes: int, num_nodes: int, width: int) -> int:
        return max(0, (int(nbytes) - 8 * num_nodes) // (4 * width + 8))

    def fresh(self, nodes: np.ndarray, iteration: int, stamps: Optional[np.ndarray] = None) -> np.ndarray:
        """Which ``nodes`` are cached and fresh at ``iteration``; ``stamps`` (a copy of
        :attr:`stamp`, see :meth:`plan_push`) answers for a planned future instead of the present."""
        if not self.values.size(0):
            return np.zeros(nodes.size, dtype=bool)
        stamps = self.stamp if stamps is None else stamps
        slot = self.slot_of[nodes]
        ok = slot >= 0
        ok[ok] = iteration - stamps[slot[ok]] < self.staleness
        return ok

    def plan_push(self, nodes: np.ndarray, iteration: int, stamps: np.ndarray) -> None:
        """Record in ``stamps`` (a copy of :attr:`stamp`) the push of ``nodes`` at ``iteration`` that
        :meth:`push` will make later, so batches sampled ahead see the pruning they will have."""
        if not self.values.size(0) or nodes.size == 0:
            return
        slot = self.slot_of[nodes]
        stamps[slot[slot >= 0]] = iteration

    def clear(self) -> None:
        """Forget every entry (OUTRE starts each epoch with an empty embedding cache)."""
        self.stamp[:] = -(1 << 40)

    def pull(self, nodes: np.ndarray) -> torch.Tensor:
        self.pulls += int(nodes.size)
        return self.values[torch.from_numpy(self.slot_of[nodes])]

    def push(self, nodes: np.ndarray, rows: torch.Tensor, iteration: int) -> None:
        if not self.values.size(0) or nodes.size == 0:
            return
        slot = self.slot_of[nodes]
        sel = slot >= 0
        if sel.any():
            self.values[torch.from_numpy(slot[sel])] = rows[torch.from_numpy(sel)].detach().float().cpu()
            self.refreshes += int((self.stamp[slot[sel]] > -(1 << 40)).sum())
            self.stamp[slot[sel]] = iteration
            self.pushes += int(sel.sum())
