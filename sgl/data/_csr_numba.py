"""numba internals of :mod:`sgl.data.csr`: a parallel, stable counting sort of edges by destination.

Compiled on first use and cached on disk (``cache=True``), imported only for graphs large enough
to pay for it (see :data:`sgl.data.csr.PARALLEL_MIN_EDGES`).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True, nogil=True)
def counting_sort(src, dst, num_nodes, parts, indptr, indices, order):  # pragma: no cover - compiled
    """Group edges by ``dst`` into ``indptr``/``indices`` (and ``order`` when it is not empty).

    The edges are cut into ``parts`` contiguous slices; each slice is counted and scattered by
    one thread with its own per-node counters, and slice ``t``'s edges of a node go after slice
    ``t - 1``'s, so the result keeps the input order inside every row: the same arrays as a
    stable sort (and as scipy's sequential ``coo_tocsr``).
    """
    num_edges = src.size
    chunk = (num_edges + parts - 1) // parts
    cursor = np.zeros((parts, num_nodes), dtype=np.int64)
    for t in prange(parts):
        row = cursor[t]
        for e in range(t * chunk, min(num_edges, (t + 1) * chunk)):
            row[dst[e]] += 1
    total = 0
    for v in range(num_nodes):
        indptr[v] = total
        for t in range(parts):
            count = cursor[t, v]
            cursor[t, v] = total
            total += count
    indptr[num_nodes] = total
    with_order = order.size > 0
    for t in prange(parts):
        row = cursor[t]
        for e in range(t * chunk, min(num_edges, (t + 1) * chunk)):
            v = dst[e]
            position = row[v]
            indices[position] = src[e]
            if with_order:
                order[position] = e
            row[v] = position + 1


__all__ = ["counting_sort"]
