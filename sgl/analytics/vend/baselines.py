"""Baselines for VEND at equal bits: per-vertex Bloom filters, one Bloom filter over all edges, range codes.

All three spend exactly the ``64 K`` bits per vertex that :class:`VENDCodes` spends, answer
``test_batch(u, v)`` with :class:`PairType` values and never give a false ``NonNeighbor``:

* :class:`VertexBloomFilter` — VEND's exact list for low-degree vertices (as the paper's Bloom
  baseline does), otherwise a Bloom filter of ``M = P - 5`` bits over the neighbours with
  ``h = round(M / d * ln 2)`` hash functions (the optimum, stored in 4 bits, 1..15);
  ``NonNeighbor`` when a queried bit of either endpoint's filter is 0.
  :class:`OneHashBloomFilter` is the same with ``h = 1``, the Bloom baseline of the VEND code;
* :class:`EdgeBloomFilter` — one Bloom filter of ``n * P`` bits over the undirected edges, with
  the optimal ``h = round(n P / E * ln 2)`` hash functions;
* :class:`RangeFilter` — VEND's layout without the bitmap: the largest window of the sorted
  neighbour list (the range code of the VEND repository), ``Uncertain`` outside it.

False-positive rate of a Bloom filter with ``m`` bits, ``e`` keys and ``h`` hashes:
``(1 - exp(-h e / m))^h``; the share of non-edges it certifies is one minus that.

    >>> import numpy as np
    >>> edges = np.array([[0, 1], [1, 2], [2, 3]])
    >>> EdgeBloomFilter.from_edges(edges, k=1, num_nodes=4).test(0, 1).name
    'Uncertain'
    >>> int(RangeFilter.from_edges(edges, k=1, num_nodes=4).test_batch([0], [3])[0])
    2
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np

from sgl.analytics.vend.adjacency import as_edge_array, as_pairs, graph_csr, undirected_csr
from sgl.analytics.vend.codes import PairType, VENDCodes
from sgl.analytics.vend.encode import row_entries, write_exact
from sgl.analytics.vend.layout import CodeLayout, get_field, hash_ids, or_field

__all__ = ["VertexBloomFilter", "OneHashBloomFilter", "EdgeBloomFilter", "RangeFilter", "bloom_positions"]

_HASH_FIELD = 4            # bits 1..4 of a Bloom code: the number of hash functions
_BLOOM_BASE = 1 + _HASH_FIELD
_MAX_HASHES = 2 ** _HASH_FIELD - 1
_NON, _UNCERTAIN = np.uint8(PairType.NonNeighbor), np.uint8(PairType.Uncertain)


def bloom_positions(keys: np.ndarray, i: int, bits) -> np.ndarray:
    """Position of hash function ``i`` for ``keys`` in a filter of ``bits`` bits (double hashing)."""
    h = hash_ids(keys)
    bits = np.asarray(bits, dtype=np.uint64)
    step = np.uint64(1) + (h >> np.uint64(32)) % np.maximum(bits - np.uint64(1), np.uint64(1))
    return ((h % bits + np.uint64(i) * step) % bits).astype(np.int64)


def _optimal_hashes(bits: float, keys: np.ndarray, cap: int) -> np.ndarray:
    return np.clip(np.rint(bits / np.maximum(keys, 1) * math.log(2)), 1, cap).astype(np.int64)


class RangeFilter(VENDCodes):
    """Range codes: VEND's exact lists and windows, no bitmap (``Uncertain`` outside the window)."""

    bitmap = False
    hashes = "one"


class VertexBloomFilter(VENDCodes):
    """A Bloom filter of ``64 K - 5`` bits per high-degree vertex; exact lists below ``max_exact``."""

    #: cap on the hash functions per filter (the optimum is used up to it)
    max_hashes = _MAX_HASHES
    hashes = "one"           # the layout's windowed fields are unused; exact lists are the same

    @classmethod
    def _encode(cls, layout: CodeLayout, indptr: np.ndarray, indices: np.ndarray, progress: bool) -> np.ndarray:
        rows, k = np.asarray(indptr).size - 1, layout.k
        words = np.zeros(rows * k, dtype=np.uint64)
        deg = np.diff(indptr)
        exact = deg <= layout.max_exact
        write_exact(layout, words, np.flatnonzero(exact), indptr, indices)
        high = np.flatnonzero(~exact)
        bits = layout.bits - _BLOOM_BASE
        hashes = np.zeros(rows, dtype=np.int64)
        hashes[high] = _optimal_hashes(bits, deg[high], cls.max_hashes)
        or_field(words, k, high, 1, _HASH_FIELD, hashes[high])
        entry_row, _ = row_entries(indptr)
        keep = ~exact[entry_row]
        x, y = entry_row[keep], indices[keep]
        for i in range(_MAX_HASHES):
            active = hashes[x] > i
            if not active.any():
                break
            or_field(words, k, x[active], _BLOOM_BASE + bloom_positions(y[active], i, bits), 1, 1)
        return words.reshape(rows, k)

    def _refresh(self, rows: np.ndarray) -> None:
        pass  # Bloom codes are read directly; no header cache

    def _side(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        lay, words, k = self.layout, self._words, self.k
        exact = get_field(words, k, x, 0, 1) == 1
        out = np.full(x.size, _UNCERTAIN, dtype=np.uint8)
        if exact.any():
            xe = x[exact]
            found = self._contains(xe * k, np.full(xe.size, lay.exact_base), get_field(words, k, xe, 1, lay.count_bits),
                                   y[exact])
            out[exact] = np.where(found, np.uint8(PairType.Neighbor), _NON)
        rest = np.flatnonzero(~exact)
        hashes = get_field(words, k, x[rest], 1, _HASH_FIELD)
        bits = lay.bits - _BLOOM_BASE
        for i in range(_MAX_HASHES):
            active = hashes > i
            if not active.any():
                break
            at = rest[active]
            zero = get_field(words, k, x[at], _BLOOM_BASE + bloom_positions(y[at], i, bits), 1) == 0
            out[at[zero]] = _NON
        return out

    def kinds(self) -> Dict[str, int]:
        exact = int((get_field(self._words, self.k, np.arange(self.num_nodes), 0, 1) == 1).sum())
        return {"exact": exact, "bloom": self.num_nodes - exact}


class OneHashBloomFilter(VertexBloomFilter):
    """The Bloom baseline of the VEND repository: per-vertex filters with a single hash function."""

    max_hashes = 1


class EdgeBloomFilter:
    """One Bloom filter over the undirected edges, ``num_nodes * 64 k`` bits in all (static)."""

    def __init__(self, words: np.ndarray, num_nodes: int, hashes: int) -> None:
        self.num_nodes, self.hashes = int(num_nodes), int(hashes)
        self._words = np.asarray(words, dtype=np.uint64)
        self.bits = self._words.size * 64

    @classmethod
    def from_edges(cls, edges: Any, k: int, num_nodes: Optional[int] = None) -> "EdgeBloomFilter":
        edges = as_edge_array(edges)
        if num_nodes is None:
            num_nodes = int(edges.max()) + 1 if edges.size else 1
        CodeLayout(num_nodes, k)
        return cls.from_csr(*undirected_csr(edges, num_nodes), k)

    @classmethod
    def from_graph(cls, graph: Any, k: int) -> "EdgeBloomFilter":
        CodeLayout(max(graph.num_nodes, 1), k)
        indptr, indices, _ = graph_csr(graph)
        return cls.from_csr(indptr, indices, k)

    @classmethod
    def from_csr(cls, indptr: np.ndarray, indices: np.ndarray, k: int) -> "EdgeBloomFilter":
        """The filter for sorted, duplicate-free symmetric neighbour lists."""
        n = indptr.size - 1
        rows, _ = row_entries(indptr)
        keys = (rows * n + indices)[rows <= indices]
        words = np.zeros(n * k, dtype=np.uint64)
        hashes = int(_optimal_hashes(words.size * 64, np.array([keys.size]), 32)[0])
        for i in range(hashes):
            pos = bloom_positions(keys, i, words.size * 64)
            np.bitwise_or.at(words, pos >> 6, np.uint64(1) << (pos & 63).astype(np.uint64))
        return cls(words, n, hashes)

    @property
    def nbytes(self) -> int:
        return self._words.nbytes

    def test_batch(self, u: Any, v: Any) -> np.ndarray:
        u, v = as_pairs(u, v, self.num_nodes)
        keys = np.minimum(u, v) * self.num_nodes + np.maximum(u, v)
        out = np.full(keys.size, _UNCERTAIN, dtype=np.uint8)
        for i in range(self.hashes):
            pos = bloom_positions(keys, i, self.bits)
            zero = (self._words[pos >> 6] >> (pos & 63).astype(np.uint64)) & np.uint64(1) == 0
            out[zero] = _NON
        return out

    def test(self, u: int, v: int) -> PairType:
        return PairType(int(self.test_batch([u], [v])[0]))

    def __repr__(self) -> str:
        return f"EdgeBloomFilter(num_nodes={self.num_nodes}, bits={self.bits}, hashes={self.hashes})"
