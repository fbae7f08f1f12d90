r"""Weighted random walks on a sparse weight matrix, vectorised over all walks.

From vertex ``v`` a walk moves to ``j`` with probability :math:`W[v, j] / \sum_k W[v, k]`
(first-order, DeepWalk-style; on the plain 0/1 graph this is the uniform walk). All walks
advance together: each step draws one uniform number per walk and finds its edge by binary
search in the cumulative weights of the CSR rows, so a step costs ``O(walks · log E)`` with no
Python loop over vertices. A walk that reaches a vertex without out-weight stops and the rest
of its row is ``-1``.

    >>> import numpy as np, scipy.sparse as sp
    >>> path = sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]]))
    >>> weighted_random_walks(path, np.array([0, 1]), 3, seed=0).tolist()
    [[0, 1, 0, 1], [1, 0, 1, 0]]
"""
from __future__ import annotations

from typing import Union

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_int
from sgl.errors import GraphError

__all__ = ["weighted_random_walks"]


def weighted_random_walks(weights: sp.spmatrix, start: np.ndarray, walk_length: int,
                          seed: Union[int, np.random.Generator] = 0) -> np.ndarray:
    """``[len(start), walk_length + 1]`` int64 walks; column 0 holds the start vertices.

    Args:
        weights: square sparse matrix of non-negative transition weights (row = from).
        start: vertex ids to start from (repeat an id for several walks from it).
        walk_length: number of steps.
        seed: an int or a ``numpy.random.Generator``.
    """
    walk_length = check_int(walk_length, "walk_length", minimum=1)
    w = sp.csr_matrix(weights, dtype=np.float64)
    n = w.shape[0]
    if w.shape != (n, n):
        raise GraphError(f"walk weights must be a square matrix, got shape {w.shape}")
    if w.nnz and (not np.all(np.isfinite(w.data)) or w.data.min() < 0):
        raise GraphError("walk weights must be finite and non-negative")
    start = np.asarray(start, dtype=np.int64)
    if start.size and (start.min() < 0 or start.max() >= n):
        raise GraphError(f"start vertices must be in [0, {n}), got ids from {start.min()} to {start.max()}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    w.eliminate_zeros()
    w.sort_indices()
    cumulative = np.concatenate([[0.0], np.cumsum(w.data)])
    lo, hi = w.indptr[:-1], w.indptr[1:]
    walks = np.full((start.size, walk_length + 1), -1, dtype=np.int64)
    walks[:, 0] = start
    alive = np.arange(start.size)
    current = start.copy()
    for step in range(1, walk_length + 1):
        has_out = hi[current] > lo[current]
        alive, current = alive[has_out], current[has_out]
        if alive.size == 0:
            break
        base, mass = cumulative[lo[current]], cumulative[hi[current]] - cumulative[lo[current]]
        target = base + rng.random(current.size) * mass
        pos = np.searchsorted(cumulative, target, side="right") - 1
        pos = np.clip(pos, lo[current], hi[current] - 1)  # rounding at a row's ends
        current = w.indices[pos].astype(np.int64)
        walks[alive, step] = current
    return walks
