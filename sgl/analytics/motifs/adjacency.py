r"""The simple graphs motif counting works on, as scipy sparse matrices.

A motif is a pattern of *whether* edges exist, so weights, duplicate edges and self-loops are
dropped: ``A[i, j] = 1`` iff the input has at least one edge ``i -> j`` with ``i != j``. The
undirected view is the support ``S = A ∨ Aᵀ``. The directed view splits ``A`` into the
bidirectional part ``B = A ⊙ Aᵀ`` and the one-way part ``U = A − B``, so that every
neighbour ``w`` of ``v`` has exactly one type: ``OUT`` (``U[v, w] = 1``), ``IN``
(``Uᵀ[v, w] = 1``) or ``BI`` (``B[v, w] = 1``), and ``S = U + Uᵀ + B``.

    >>> import torch
    >>> from sgl.data import Graph
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2, 2], [1, 0, 2, 2, 0]]))
    >>> typed = TypedAdjacency.from_graph(g)
    >>> typed.degree(OUT).tolist(), typed.degree(IN).tolist(), typed.degree(BI).tolist()
    ([0, 1, 1], [1, 0, 1], [1, 1, 0])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

import numpy as np
import scipy.sparse as sp

from sgl.analytics.motifs.catalog import BI, IN, OUT, TYPES, flip
from sgl.errors import GraphError

__all__ = ["simple_adjacency", "undirected_support", "oriented_support", "TypedAdjacency"]

#: products of 0/1 matrices count paths; int32 is exact up to 2^31 paths per entry and twice
#: as fast as float64 in scipy's SpGEMM
_DTYPE = np.int32


def _from_csr(indptr: np.ndarray, indices: np.ndarray, n: int, transpose: bool) -> sp.csr_matrix:
    """Binary CSR without self-loops or duplicates from (possibly transposed) CSR arrays, in O(E)."""
    ones = np.ones(indices.size, dtype=_DTYPE)
    matrix = (sp.csc_matrix if transpose else sp.csr_matrix)((ones, indices, indptr), shape=(n, n))
    out = matrix.tocsr() if transpose else matrix.copy()
    out.sort_indices()
    out.sum_duplicates()
    rows = np.repeat(np.arange(n), np.diff(out.indptr))
    loops = out.indices == rows
    if loops.any():
        out.data[loops] = 0
        out.eliminate_zeros()
    out.data[:] = 1
    return out


def simple_adjacency(graph: Any) -> sp.csr_matrix:
    """``A[i, j] = 1`` iff ``graph`` has an edge ``i -> j``, ``i != j`` (int32 CSR, sorted indices).

    ``graph`` is an :class:`sgl.data.Graph` or a square scipy sparse matrix (``M[i, j] != 0``
    meaning an edge ``i -> j``).
    """
    from sgl.data import Graph

    if isinstance(graph, Graph):
        # the Graph's CSR over destinations is the CSC of A[src, dst]
        return _from_csr(graph.indptr.numpy(), graph.indices.numpy(), graph.num_nodes, transpose=True)
    if not sp.issparse(graph):
        raise GraphError(f"motif counting takes an sgl.data.Graph or a square scipy sparse matrix, "
                         f"got {type(graph).__name__}")
    if graph.ndim != 2 or graph.shape[0] != graph.shape[1]:
        raise GraphError(f"an adjacency matrix must be square, got shape {graph.shape}")
    if graph.shape[0] == 0:
        raise GraphError("the graph is empty (0 nodes); motif counting needs at least one node")
    matrix = graph.tocsr()
    if matrix.nnz and not np.all(np.isfinite(matrix.data)):
        raise GraphError("the adjacency matrix has NaN or inf entries; motifs need a 0/1 pattern")
    if matrix.nnz and not np.all(matrix.data != 0):
        matrix = matrix.copy()
        matrix.eliminate_zeros()
    return _from_csr(matrix.indptr, matrix.indices, matrix.shape[0], transpose=False)


def undirected_support(graph: Any) -> sp.csr_matrix:
    """``S = A ∨ Aᵀ`` of :func:`simple_adjacency` (symmetric int32 CSR, sorted indices)."""
    a = graph if sp.isspmatrix_csr(graph) and graph.dtype == _DTYPE else simple_adjacency(graph)
    transpose = a.T.tocsr()
    transpose.sort_indices()
    if np.array_equal(transpose.indptr, a.indptr) and np.array_equal(transpose.indices, a.indices):
        return a  # already symmetric (undirected datasets): skip the sparse addition
    s = (a + transpose).tocsr()
    s.data[:] = 1
    s.sort_indices()
    return s


def oriented_support(support: sp.csr_matrix) -> sp.csr_matrix:
    """``R[i, j] = S[i, j]`` where ``(d_i, i) < (d_j, j)``: each undirected edge kept once, pointing up
    the order (degree, id), which makes every upward list at most ``sqrt(2m)`` long (Chiba & Nishizeki)."""
    n = support.shape[0]
    degree = np.diff(support.indptr)
    rows = np.repeat(np.arange(n, dtype=support.indices.dtype), degree)
    cols = support.indices
    row_degree, col_degree = np.repeat(degree, degree), degree[cols]
    # (degree, id) order compared pairwise: no sort needed
    up = (row_degree < col_degree) | ((row_degree == col_degree) & (rows < cols))
    kept = np.concatenate([[0], np.cumsum(up)])
    return sp.csr_matrix((support.data[up], cols[up], kept[support.indptr]), shape=(n, n))


@dataclass(eq=False)  # holds arrays: no elementwise ==
class TypedAdjacency:
    """The three neighbour types of a directed simple graph as 0/1 matrices, with the support.

    ``of(OUT) = U``, ``of(IN) = Uᵀ``, ``of(BI) = B``; :meth:`degree` counts each type per
    vertex and :meth:`product` caches the sparse products ``of(x) @ of(z)`` that the motif
    formulas share.
    """

    out: sp.csr_matrix
    inn: sp.csr_matrix
    bi: sp.csr_matrix
    support: sp.csr_matrix

    @classmethod
    def from_graph(cls, graph: Any) -> "TypedAdjacency":
        a = simple_adjacency(graph)
        bi = a.multiply(a.T).tocsr().astype(_DTYPE)
        one_way = (a - bi).tocsr()
        one_way.eliminate_zeros()
        support = undirected_support(a)
        typed = cls(one_way, one_way.T.tocsr(), bi, support)
        for matrix in (typed.out, typed.inn, typed.bi):
            matrix.sort_indices()
        return typed

    def __post_init__(self) -> None:
        self._products: Dict[tuple, sp.csr_matrix] = {}

    @property
    def num_nodes(self) -> int:
        return self.support.shape[0]

    def of(self, kind: int) -> sp.csr_matrix:
        return {OUT: self.out, IN: self.inn, BI: self.bi}[kind]

    def degree(self, kind: int) -> np.ndarray:
        return np.diff(self.of(kind).indptr).astype(np.int64)

    def product(self, x: int, z: int) -> sp.csr_matrix:
        """``of(x) @ of(z)``: entry ``(v, b)`` counts the ``a`` with type ``x`` from ``v`` and ``b``
        of type ``z`` from ``a`` (two-step paths by type)."""
        key = (x, z)
        if key not in self._products:
            # (of(x) of(z))ᵀ = of(flip z) of(flip x): a cached transpose saves a third of the products
            mirror = self._products.get((flip(z), flip(x)))
            self._products[key] = (mirror.T if mirror is not None else self.of(x) @ self.of(z)).tocsr()
        return self._products[key]

    def two_step(self, x: int) -> sp.csr_matrix:
        """``of(x) @ S`` = sum over the three types of :meth:`product`."""
        return sum((self.product(x, z) for z in TYPES[1:]), self.product(x, TYPES[0])).tocsr()
