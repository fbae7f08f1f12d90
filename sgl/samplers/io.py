"""The one I/O layer of disk-backed stores: every read is counted in bytes and requests.

A *request* is one contiguous run of rows (reading rows 4, 5, 6 and 9 costs 2 requests);
*bytes* are the bytes copied from the file. Out-of-core experiments report both per epoch
so that caching and de-redundancy can be compared on I/O volume, independently of how fast
the page cache or the disk happens to be.

Example:
    >>> import numpy as np
    >>> from sgl.samplers.io import IOCounter, CountedArray
    >>> counter = IOCounter()
    >>> rows = CountedArray(np.arange(20, dtype=np.float32).reshape(10, 2), counter, "features")
    >>> rows.read_rows(np.array([4, 5, 6, 9])).shape
    (4, 2)
    >>> counter.stats("features")
    {'bytes': 32, 'requests': 2}
"""
from __future__ import annotations

import threading
from typing import Dict, Optional

import numpy as np

__all__ = ["IOCounter", "CountedArray", "count_runs"]


def count_runs(sorted_rows: np.ndarray) -> int:
    """Number of maximal runs of consecutive ids in a sorted, duplicate-free array."""
    if sorted_rows.size == 0:
        return 0
    return int(np.count_nonzero(np.diff(sorted_rows) != 1)) + 1


class IOCounter:
    """Bytes and requests read from storage, per kind (``"features"``, ``"adjacency"``, ...)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes: Dict[str, int] = {}
        self._requests: Dict[str, int] = {}

    def record(self, kind: str, nbytes: int, requests: int) -> None:
        with self._lock:
            self._bytes[kind] = self._bytes.get(kind, 0) + int(nbytes)
            self._requests[kind] = self._requests.get(kind, 0) + int(requests)

    def stats(self, kind: Optional[str] = None) -> Dict[str, int]:
        """``{"bytes", "requests"}`` for one kind, or summed over all kinds."""
        with self._lock:
            if kind is not None:
                return {"bytes": self._bytes.get(kind, 0), "requests": self._requests.get(kind, 0)}
            return {"bytes": sum(self._bytes.values()), "requests": sum(self._requests.values())}

    def by_kind(self) -> Dict[str, Dict[str, int]]:
        with self._lock:
            return {k: {"bytes": self._bytes[k], "requests": self._requests.get(k, 0)} for k in self._bytes}

    def reset(self) -> None:
        with self._lock:
            self._bytes.clear()
            self._requests.clear()

    def __repr__(self) -> str:
        total = self.stats()
        return f"IOCounter(bytes={total['bytes']:,}, requests={total['requests']:,})"


class CountedArray:
    """Row reads from a (memory-mapped) array, recorded in an :class:`IOCounter` under ``kind``."""

    def __init__(self, array: np.ndarray, counter: IOCounter, kind: str) -> None:
        self.array, self.counter, self.kind = array, counter, kind
        self.row_bytes = int(array.dtype.itemsize * (int(np.prod(array.shape[1:])) if array.ndim > 1 else 1))

    @property
    def shape(self):
        return self.array.shape

    @property
    def dtype(self):
        return self.array.dtype

    def read_rows(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` (any order, duplicates allowed); each distinct row is read once."""
        rows = np.asarray(rows, dtype=np.int64)
        uniq, inverse = np.unique(rows, return_inverse=True)
        self.counter.record(self.kind, uniq.size * self.row_bytes, count_runs(uniq))
        data = np.asarray(self.array[uniq])  # sorted reads: sequential within each run
        return data if uniq.size == rows.size and np.array_equal(uniq, rows) else data[inverse]

    def read_ranges(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Concatenate ``array[s:e]`` for every range (1-D arrays). Ranges must be sorted and disjoint;
        one request per maximal contiguous run (back-to-back ranges are read in one go)."""
        starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        lengths = ends - starts
        total = int(lengths.sum())
        nonempty = lengths > 0
        s, e = starts[nonempty], ends[nonempty]
        runs = int(s.size and 1 + np.count_nonzero(s[1:] != e[:-1]))
        self.counter.record(self.kind, total * self.row_bytes, runs)
        if total == 0:
            return np.empty(0, dtype=self.array.dtype)
        offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)
        return np.asarray(self.array[offsets])
