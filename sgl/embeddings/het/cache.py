"""Per-worker embedding cache of HET with LRU, LFU and pinned-LFU eviction.

The cache is worker-side state: it lives on the worker's device (its model's; ``device=`` or
:meth:`~sgl.embeddings.het.staleness.StaleLines.to_device`), the server in host memory.

Lines live in fixed slot arrays (vectorised per batch); a dense ``slot_of``
index maps a row id to its slot (8 bytes per table row, counted in
:meth:`EmbeddingCache.memory_bytes`).  Each line holds the bounded-staleness
state of :class:`~sgl.embeddings.het.staleness.StaleLines` (key, value, pending
deltas, version, unpushed updates) plus its use count and last use.

Eviction never picks a line used by the current batch.  Policies (HET's
``lru``, ``lfu`` and ``lfuopt``):

* ``"lru"``        -- least recently used first;
* ``"lfu"``        -- least frequently used first, least recent among equals;
* ``"lfu_pinned"`` -- LFU with use counts capped at ``pin_threshold``; a line
  that reaches the cap is pinned and never evicted; when only pinned or busy
  lines remain, a new key bypasses the cache for this batch.
"""
from __future__ import annotations

from typing import Literal

import torch

from sgl._checks import check_choice, check_int
from sgl.embeddings.base import check_scalar
from sgl.embeddings.het.staleness import StaleLines
from sgl.errors import EmbeddingError

__all__ = ["CachePolicy", "POLICIES", "EmbeddingCache"]

CachePolicy = Literal["lru", "lfu", "lfu_pinned"]
POLICIES: tuple[str, ...] = ("lru", "lfu", "lfu_pinned")
_FREQ_SHIFT = 2**40  # frequency dominates recency in the LFU eviction key


class EmbeddingCache(StaleLines):
    """Slot storage plus eviction policy; the protocol lives in :class:`HETWorker`.

    >>> cache = EmbeddingCache(num_embeddings=10, dim=2, capacity=2, policy="lru")
    >>> slots, evicted = cache.admit(torch.tensor([1, 2]), torch.ones(2, dtype=torch.long))
    >>> cache.tick(); slots, evicted = cache.admit(torch.tensor([3]), torch.ones(1, dtype=torch.long))
    >>> sorted(cache.cached_keys().tolist()), evicted[0].tolist()
    ([2, 3], [])
    """

    _TENSORS = StaleLines._TENSORS + ("freq", "last_used", "slot_of")

    def __init__(self, num_embeddings: int, dim: int, capacity: int,
                 policy: CachePolicy = "lfu_pinned", pin_threshold: int = 10,
                 device: torch.device | str | None = None) -> None:
        check_scalar(check_choice, policy, f"cache policy must be one of {POLICIES}, got {policy!r}.", POLICIES)
        capacity = check_scalar(check_int, capacity, f"cache capacity must be an int >= 0 (lines), got {capacity!r}.", 0)
        pin_threshold = check_scalar(check_int, pin_threshold, f"pin_threshold must be an int >= 1, got "
                                     f"{pin_threshold!r}.", 1)
        super().__init__(torch.full((capacity,), -1, dtype=torch.int64, device=device), dim)
        self.num_embeddings, self.capacity = num_embeddings, capacity
        self.policy, self.pin_threshold = policy, pin_threshold
        device = self.keys.device
        self.freq = torch.zeros(capacity, dtype=torch.int64, device=device)
        self.last_used = torch.full((capacity,), -1, dtype=torch.int64, device=device)
        self.slot_of = torch.full((num_embeddings,), -1, dtype=torch.int64, device=device)
        self.clock = 0
        self.evictions = 0

    def tick(self) -> None:
        """Start a new batch: lines touched from now on are protected from eviction."""
        self.clock += 1

    def locate(self, keys: torch.Tensor) -> torch.Tensor:
        """Slot of each key, -1 when not cached."""
        return self.slot_of[keys]

    def touch(self, slots: torch.Tensor) -> None:
        """Record a use of cached lines by the current batch."""
        self.last_used[slots] = self.clock
        freq = self.freq[slots] + 1
        if self.policy == "lfu_pinned":
            freq = freq.clamp_max(self.pin_threshold)
        self.freq[slots] = freq

    def _evictable_order(self) -> torch.Tensor:
        """Slots that may take a new key, best victim first (empty slots first)."""
        empty = self.keys < 0
        free = ~empty & (self.last_used < self.clock)
        if self.policy == "lfu_pinned":
            free &= self.freq < self.pin_threshold
        if self.policy == "lru":
            score = self.last_used
        else:
            score = self.freq * _FREQ_SHIFT + self.last_used
        empty_slots = empty.nonzero().flatten()
        cand = free.nonzero().flatten()
        cand = cand[torch.argsort(score[cand], stable=True)]
        return torch.cat([empty_slots, cand])

    def admit(self, keys: torch.Tensor, counts: torch.Tensor
              ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Insert uncached ``keys``; returns their slots (-1 = bypass) and the evicted
        lines that still had unpushed updates, as ``(keys, pending, updates)``.

        When slots run short, keys with more occurrences in the batch win.
        """
        device = self.keys.device
        slots = torch.full((keys.numel(),), -1, dtype=torch.int64, device=device)
        none = (torch.zeros(0, dtype=torch.int64, device=device), torch.zeros(0, self.dim, device=device),
                torch.zeros(0, dtype=torch.int64, device=device))
        if keys.numel() == 0 or self.capacity == 0:
            return slots, none
        victims = self._evictable_order()
        n = min(keys.numel(), victims.numel())
        if n == 0:
            return slots, none
        chosen = victims[:n]
        winners = torch.argsort(-counts, stable=True)[:n] if n < keys.numel() else \
            torch.arange(n, device=device)
        old = self.keys[chosen]
        used = old >= 0
        dirty = used & (self.updates[chosen] > 0)
        evicted = self.take(chosen[dirty])
        self.evictions += int(used.sum())
        self.slot_of[old[used]] = -1
        new_keys = keys[winners]
        self.keys[chosen] = new_keys
        self.slot_of[new_keys] = chosen
        self.clear(chosen)
        self.freq[chosen] = 1
        self.last_used[chosen] = self.clock
        slots[winners] = chosen
        return slots, evicted

    def cached_keys(self) -> torch.Tensor:
        return self.keys[self.keys >= 0]

    def memory_bytes(self) -> int:
        """Bytes of all cache state: lines (two float rows + five int64) and the id index."""
        line = self.line_bytes() + 2 * 8  # + use count and last use
        return self.capacity * line + self.slot_of.numel() * 8
