r"""Motif-weighted adjacency: how many motif instances use each edge.

:math:`W_M[i, j]` is the number of instances of motif ``M`` in which ``i`` and ``j`` are
adjacent, so ``W_M`` lives on the edges of the support ``S`` and is symmetric. For the
triangle this is the triangle-motif adjacency of Benson et al. (2016),

.. math::

    W_\triangle = (S S) \odot S,

whose entry on an edge is the number of common neighbours of its ends. Every closed directed
motif is a sum of typed path products (notation of :mod:`~sgl.analytics.motifs.counts`),
:math:`W_M = \sum_{(x,y,z) \to M} (T_x T_z) \odot T_y`; an open motif with end types
``{x, y}`` adds, for each ordered pair, :math:`C_{xy} = T_x \odot (d_y \mathbf 1^\top - [x{=}y])
- T_x \odot (T_y S)` (edge ``v - c`` of type ``x`` at the centre ``v``, times the other ends of
type ``y`` not adjacent to ``c``), and :math:`W_M = C + C^\top`. The open undirected wedge is the
same with one type. Unlike Benson's matrices, the non-adjacent end pair of an open motif gets
no weight, so that ``W_M`` stays a reweighting of the graph's own edges.

:func:`mixed_adjacency` blends it with the plain graph, :math:`W = \lambda S + (1 - \lambda) W_M`:
``mix=1`` is the graph itself (DeepWalk's walk graph), ``mix=0`` the motif graph alone.

    >>> import torch
    >>> from sgl.data import Graph
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 3]]))   # triangle + tail
    >>> motif_adjacency(g, "triangle").toarray().tolist()
    [[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]
    >>> motif_adjacency(g, "wedge").toarray()[2].tolist()   # wedges 0-2-3 and 1-2-3 share edge 2-3
    [1, 1, 0, 2]
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_real
from sgl.analytics.motifs.adjacency import TypedAdjacency, undirected_support
from sgl.analytics.motifs.catalog import CLOSED_MOTIFS, DIRECTED_MOTIFS, OPEN_MOTIFS, check_motif
from sgl.analytics.motifs.counts import closed_configs, open_configs

__all__ = ["motif_adjacency", "mixed_adjacency", "is_directed_motif"]


def is_directed_motif(motif: str) -> bool:
    """Whether ``motif`` is counted on the directed graph (``M1`` .. ``M13``, ``asym_edge``, ``mutual_edge``)."""
    return motif in DIRECTED_MOTIFS


def _open_part(edges: sp.csr_matrix, degree_other: np.ndarray, same: bool, two_step: sp.csr_matrix) -> sp.csr_matrix:
    """``T_x ⊙ (d_y 1ᵀ − [x=y]) − T_x ⊙ (T_y S)`` for one ordered pair of end types."""
    scale = sp.diags((degree_other - (1 if same else 0)).astype(np.int64), dtype=np.int64)
    return (scale @ edges.astype(np.int64) - edges.multiply(two_step)).tocsr()


def _undirected(graph: Any, motif: str) -> sp.csr_matrix:
    s = undirected_support(graph)
    if motif == "edge":
        return s.astype(np.int64)
    common = (s @ s).multiply(s).tocsr().astype(np.int64)
    if motif == "triangle":
        return common
    centre = _open_part(s, np.diff(s.indptr), True, common)
    return (centre + centre.T).tocsr()


def _directed(graph: Any, motif: str) -> sp.csr_matrix:
    typed = TypedAdjacency.from_graph(graph)
    if motif == "asym_edge":
        return (typed.out + typed.inn).tocsr().astype(np.int64)
    if motif == "mutual_edge":
        return typed.bi.astype(np.int64)
    n = typed.num_nodes
    total = sp.csr_matrix((n, n), dtype=np.int64)
    if motif in CLOSED_MOTIFS:
        for x, y, z in closed_configs(motif):
            total = total + typed.product(x, z).multiply(typed.of(y))
        return total.tocsr().astype(np.int64)
    assert motif in OPEN_MOTIFS
    for x, y in open_configs(motif):
        total = total + _open_part(typed.of(x), typed.degree(y), x == y, typed.two_step(y))
    return (total + total.T).tocsr()


def motif_adjacency(graph: Any, motif: str = "triangle") -> sp.csr_matrix:
    """``W_M``: the number of instances of ``motif`` in which ``i`` and ``j`` are adjacent (int64 CSR).

    Args:
        graph: an :class:`sgl.data.Graph` or a square scipy sparse matrix.
        motif: ``edge``, ``wedge`` or ``triangle`` (on the undirected view), or a directed
            motif ``M1`` .. ``M13``, ``asym_edge``, ``mutual_edge`` (on the graph's directions).
    """
    check_motif(motif)
    out = _directed(graph, motif) if is_directed_motif(motif) else _undirected(graph, motif)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def mixed_adjacency(graph: Any, motif: str = "triangle", mix: float = 0.5) -> sp.csr_matrix:
    """``λ S + (1 − λ) W_M`` as float64 CSR: the walk graph of the motif embeddings.

    ``mix`` (``λ`` in ``[0, 1]``) = 1 gives the plain undirected graph, 0 the motif graph alone
    (edges in no instance of the motif are then dropped).

    Example:
        >>> import sgl
        >>> w = mixed_adjacency(sgl.datasets.load("karate"), "triangle", mix=0.5)
        >>> w.shape, float(w[0, 1])   # 0 and 1 share 7 neighbours: 0.5 * 1 + 0.5 * 7
        ((34, 34), 4.0)
    """
    mix = check_real(mix, "mix", 0.0, 1.0)
    support = undirected_support(graph).astype(np.float64)
    if mix == 1.0:
        return support
    weights = motif_adjacency(graph, motif).astype(np.float64)
    out = (mix * support + (1.0 - mix) * weights).tocsr() if mix > 0 else weights
    out.eliminate_zeros()
    out.sort_indices()
    return out

