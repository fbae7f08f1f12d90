"""Top-k baselines for HotSketch at equal bytes: SpaceSaving and Count-Min + a top-k heap.

Byte accounting (stated so comparisons are reproducible): a monitored entry of SpaceSaving
or of the Count-Min candidate heap costs 20 bytes — key 4, count 4, heap position 4 and a
hash-index entry (key 4 + position 4). That is a lower bound of a real stream-summary or
heap + hash map (pointers alone are 8 bytes each on 64-bit machines), so the baselines are
given the benefit of the doubt. Count-Min counters are 4-byte floats.

Example:
    >>> import numpy as np
    >>> ss = SpaceSaving.from_bytes(200)
    >>> ss.capacity
    10
    >>> ss.insert(np.array([1, 1, 2, 3, 1]), np.ones(5))
    >>> ss.top_k(1).tolist()
    [1]
"""
from __future__ import annotations

import heapq
from typing import Dict, List, Tuple

import numpy as np

from sgl._checks import check_int
from sgl.errors import EmbeddingError

__all__ = ["SpaceSaving", "CountMinTopK", "ENTRY_BYTES"]

ENTRY_BYTES = 20


class _Heap:
    """A min-heap of (count, key) with lazy invalidation against ``counts``."""

    def __init__(self) -> None:
        self.heap: List[Tuple[float, int]] = []
        self.counts: Dict[int, float] = {}

    def set(self, key: int, count: float) -> None:
        self.counts[key] = count
        heapq.heappush(self.heap, (count, key))
        if len(self.heap) > 4 * len(self.counts) + 64:  # drop stale entries
            self.heap = [(c, k) for k, c in self.counts.items()]
            heapq.heapify(self.heap)

    def pop_min(self) -> Tuple[int, float]:
        while True:
            count, key = heapq.heappop(self.heap)
            if self.counts.get(key) == count:
                del self.counts[key]
                return key, count

    def min_count(self) -> float:
        while True:
            count, key = self.heap[0]
            if self.counts.get(key) == count:
                return count
            heapq.heappop(self.heap)

    def top_k(self, k: int) -> np.ndarray:
        ranked = sorted(self.counts.items(), key=lambda kc: (-kc[1], kc[0]))[:k]
        return np.array([key for key, _ in ranked], dtype=np.int64)


class SpaceSaving:
    """SpaceSaving (Metwally et al. 2005): ``capacity`` monitored keys; a new key replaces the
    minimum and inherits its count."""

    def __init__(self, capacity: int) -> None:
        self.capacity = check_int(capacity, "capacity", 1, error=EmbeddingError)
        self._heap = _Heap()

    @classmethod
    def from_bytes(cls, num_bytes: int) -> "SpaceSaving":
        if num_bytes < ENTRY_BYTES:
            raise EmbeddingError(f"{num_bytes} bytes cannot hold one {ENTRY_BYTES}-byte SpaceSaving entry")
        return cls(num_bytes // ENTRY_BYTES)

    def memory_bytes(self) -> int:
        return self.capacity * ENTRY_BYTES

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        heap = self._heap
        for key, value in zip(np.asarray(keys).reshape(-1).tolist(), np.asarray(values).reshape(-1).tolist()):
            if key in heap.counts:
                heap.set(key, heap.counts[key] + value)
            elif len(heap.counts) < self.capacity:
                heap.set(key, value)
            else:
                _, count = heap.pop_min()
                heap.set(key, count + value)

    def top_k(self, k: int) -> np.ndarray:
        return self._heap.top_k(k)


class CountMinTopK:
    """Count-Min sketch (``depth`` rows of ``width`` counters) + a heap of the ``k`` keys with
    the largest estimates."""

    def __init__(self, width: int, depth: int, k: int, seed: int = 0) -> None:
        self.width = check_int(width, "width", 1, error=EmbeddingError)
        self.depth = check_int(depth, "depth", 1, error=EmbeddingError)
        self.k = check_int(k, "k", 1, error=EmbeddingError)
        self.table = np.zeros((self.depth, self.width), dtype=np.float32)
        rng = np.random.default_rng(seed)
        self._a = rng.integers(1, (1 << 31) - 1, size=self.depth, dtype=np.int64)
        self._b = rng.integers(0, (1 << 31) - 1, size=self.depth, dtype=np.int64)
        self._heap = _Heap()

    @classmethod
    def from_bytes(cls, num_bytes: int, k: int, depth: int = 3, seed: int = 0) -> "CountMinTopK":
        counters = (num_bytes - k * ENTRY_BYTES) // 4
        if counters < depth:
            raise EmbeddingError(f"{num_bytes} bytes cannot hold a {k}-entry heap ({k * ENTRY_BYTES} B) and "
                                 f"{depth} counter rows")
        return cls(counters // depth, depth, k, seed)

    def memory_bytes(self) -> int:
        return self.table.nbytes + self.k * ENTRY_BYTES

    def _columns(self, keys: np.ndarray) -> np.ndarray:
        return ((keys[None, :] % ((1 << 31) - 1)) * self._a[:, None] + self._b[:, None]) % ((1 << 31) - 1) \
            % self.width

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.int64).reshape(-1)
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        columns = self._columns(keys)
        rows = np.arange(self.depth)
        heap = self._heap
        for i, key in enumerate(keys.tolist()):
            cols = columns[:, i]
            self.table[rows, cols] += values[i]
            estimate = float(self.table[rows, cols].min())
            if key in heap.counts or len(heap.counts) < self.k:
                heap.set(key, estimate)
            elif estimate > heap.min_count():
                heap.pop_min()
                heap.set(key, estimate)

    def top_k(self, k: int) -> np.ndarray:
        return self._heap.top_k(k)
