"""The baseline of HaCore: alternating k-medoids on the raw (concatenated) features.

Each round assigns every row to its nearest medoid (exact L2 search, faiss ``IndexFlatL2``: BLAS-backed)
and replaces each cluster's medoid by its exact medoid, the member with the least summed Euclidean
distance to the other members, ``O(sum_c n_c^2 d)``. The update is one compiled loop over the clusters
(:func:`exact_medoids`), the same engineering HaCore's Hamming rounds get, so the comparison measures
the method, not the interpreter. Ties go to the lowest row.

Example:
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0], [2.0], [10.0], [11.0]])
    >>> exact_medoids(x, np.array([0, 0, 0, 1, 1]), 2).tolist()
    [1, 3]
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
from numba import njit

__all__ = ["exact_medoids", "raw_kmedoids"]


@njit(cache=True, nogil=True)
def _exact_medoids(x, order, starts, k):  # pragma: no cover - compiled
    d = x.shape[1]
    out = np.empty(k, dtype=np.int64)
    for c in range(k):
        lo, hi = starts[c], starts[c + 1]
        best, best_cost = -1, np.inf
        for a in range(lo, hi):
            i = order[a]
            cost = 0.0
            for b in range(lo, hi):
                j = order[b]
                s = 0.0
                for f in range(d):
                    t = x[i, f] - x[j, f]
                    s += t * t
                cost += np.sqrt(s)
            if cost < best_cost or (cost == best_cost and i < best):
                best, best_cost = i, cost
        out[c] = best
    return out


def exact_medoids(x: np.ndarray, assign: np.ndarray, k: int) -> np.ndarray:
    """``[k]`` row ids: each cluster's member with the least summed Euclidean distance to its members
    (every cluster must be non-empty)."""
    assign = np.asarray(assign, dtype=np.int64)
    order = np.argsort(assign, kind="stable")
    starts = np.searchsorted(assign[order], np.arange(k + 1))
    return _exact_medoids(np.ascontiguousarray(x, dtype=np.float64), order, starts, int(k))


def raw_kmedoids(x: np.ndarray, k: int, iters: int = 3, seed: int = 0,
                 init: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(medoid row ids [k], assignment [n])``: alternating k-medoids on raw features ``x [n, d]`` from the
    initial medoids ``init`` (HaCore's; default ``sort(rng(seed).choice(n, k))``; ``k`` is validated by the
    caller)."""
    import faiss

    n = len(x)
    med = np.sort(np.random.default_rng(seed).choice(n, k, replace=False)) if init is None else \
        np.asarray(init, dtype=np.int64)
    x32 = np.ascontiguousarray(x, dtype=np.float32)

    def assign_to(med: np.ndarray) -> np.ndarray:
        index = faiss.IndexFlatL2(x.shape[1])
        index.add(x32[med])
        a = index.search(x32, 1)[1][:, 0].astype(np.int64)
        a[med] = np.arange(k)  # a medoid belongs to its own cluster, so none is empty
        return a

    assign = assign_to(med)
    for _ in range(iters):
        med = exact_medoids(x, assign, k)
        assign = assign_to(med)
    return med, assign
