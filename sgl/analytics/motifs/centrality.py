r"""Motif centralities: motif degree and motif PageRank on the motif-weighted adjacency.

The **motif degree** of ``v`` is its weighted degree in :math:`W_M`,
:math:`\deg_M(v) = \sum_j W_M[v, j]` (for the triangle: twice the triangles at ``v``).

**Motif PageRank** is PageRank on :math:`W_M` (by default the triangle-motif adjacency):
with :math:`P = D_M^{-1} W_M` and teleport probability :math:`1 - \alpha`,

.. math::

    \pi = \alpha \big(P^\top \pi + \tfrac{\pi^\top \mathbf 1_{\text{dangling}}}{n} \mathbf 1\big)
          + \tfrac{1 - \alpha}{n} \mathbf 1,

where vertices in no instance (``deg_M = 0``) jump uniformly, as networkx does. Power
iteration stops when the L1 change falls below ``n · tol``.

    >>> import sgl
    >>> karate = sgl.datasets.load("karate")
    >>> rank = motif_pagerank(karate)
    >>> round(float(rank.sum()), 6), sorted(rank.argsort()[-2:].tolist())   # the two faction leaders
    (1.0, [0, 33])
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_int, check_real
from sgl.analytics.motifs.weighted import motif_adjacency
from sgl.errors import ConfigError, GraphError

__all__ = ["motif_degree", "motif_pagerank", "weighted_pagerank"]


def motif_degree(graph: Any, motif: str = "triangle") -> np.ndarray:
    """Weighted degree of every vertex in :func:`~sgl.analytics.motifs.motif_adjacency` (int64).

    Example:
        >>> import sgl
        >>> motif_degree(sgl.datasets.load("karate"))[:3].tolist()
        [36, 24, 22]
    """
    return np.asarray(motif_adjacency(graph, motif).sum(axis=1, dtype=np.int64)).ravel()


def weighted_pagerank(weights: sp.spmatrix, alpha: float = 0.85, tol: float = 1e-10,
                      max_iter: int = 1000) -> np.ndarray:
    """PageRank of the random walk on non-negative ``weights`` (row ``i`` = out-weights of ``i``)."""
    alpha = check_real(alpha, "alpha", 0.0, 1.0, open_high=True)
    tol = check_real(tol, "tol", 0.0, open_low=True)
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if not sp.issparse(weights) or weights.shape[0] != weights.shape[1] or weights.shape[0] == 0:
        raise GraphError(f"PageRank needs a non-empty square sparse weight matrix, got {getattr(weights, 'shape', None)}")
    w = sp.csr_matrix(weights, dtype=np.float64)
    if w.nnz and (not np.all(np.isfinite(w.data)) or w.data.min() < 0):
        raise GraphError("PageRank weights must be finite and non-negative")
    n = w.shape[0]
    out = np.asarray(w.sum(axis=1)).ravel()
    dangling = out == 0
    inv = np.divide(1.0, out, out=np.zeros(n), where=~dangling)
    transition_t = (sp.diags(inv) @ w).T.tocsr()
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        previous = rank
        rank = alpha * (transition_t @ rank + previous[dangling].sum() / n) + (1.0 - alpha) / n
        if np.abs(rank - previous).sum() < n * tol:
            return rank / rank.sum()
    raise ConfigError(f"PageRank did not converge in max_iter={max_iter} iterations (tol={tol}); "
                      f"raise max_iter or tol")


def motif_pagerank(graph: Any, motif: str = "triangle", alpha: float = 0.85, tol: float = 1e-10,
                   max_iter: int = 1000) -> np.ndarray:
    """PageRank on the motif-weighted adjacency :math:`W_M` (default: the triangle motif).

    Args:
        graph: an :class:`sgl.data.Graph` or a square scipy sparse matrix.
        motif: any motif of :func:`~sgl.analytics.motifs.motif_adjacency`.
        alpha: damping factor in ``[0, 1)`` (the walk follows an edge with probability ``alpha``).
        tol, max_iter: convergence threshold (per vertex, L1) and iteration budget.

    Returns:
        ``[num_nodes]`` float64 probabilities summing to 1.
    """
    return weighted_pagerank(motif_adjacency(graph, motif), alpha, tol, max_iter)
