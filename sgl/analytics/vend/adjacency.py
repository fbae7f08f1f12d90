"""Undirected neighbour lists for VEND: input checks, CSR from edges or a Graph, an in-memory edge set.

VEND codes describe a vertex's neighbour list, so building and maintaining them needs the
lists themselves: from a :class:`~sgl.data.Graph` or an edge array at build time, and, after
an update, from whatever holds the edges (the SQLite :class:`~sgl.analytics.vend.EdgeStore`, or
:class:`MemoryAdjacency` here). Both answer ``neighbors_csr(vertices)``.

    >>> import numpy as np
    >>> adj = MemoryAdjacency.from_edges(np.array([[0, 1], [1, 2]]), num_nodes=4)
    >>> adj.neighbors(1).tolist(), adj.num_edges
    ([0, 2], 2)
    >>> adj.apply(insert=np.array([[2, 3]]), delete=np.array([[0, 1]]))
    >>> adj.has_edges(np.array([0, 2]), np.array([1, 3])).tolist()
    [False, True]
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from sgl.errors import GraphError

__all__ = ["MemoryAdjacency", "as_vertex_ids", "as_pairs", "as_edge_array", "undirected_csr", "graph_csr"]


def as_vertex_ids(value: Any, num_nodes: int, name: str) -> np.ndarray:
    """``value`` as a 1-D ``int64`` array of ids in ``[0, num_nodes)``; a clear error otherwise."""
    try:
        ids = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    except (TypeError, ValueError) as exc:
        raise GraphError(f"{name} could not be read as vertex ids: {exc}") from exc
    if ids.dtype == bool or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
        raise GraphError(f"{name} has dtype {ids.dtype}; vertex ids must be integers")
    ids = ids.astype(np.int64, copy=False).reshape(-1)
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise GraphError(f"{name} has vertex id {bad} but the graph has num_nodes={num_nodes}; "
                             f"ids must be in [0, {num_nodes})")
    return ids


def as_pairs(u: Any, v: Any, num_nodes: int) -> Tuple[np.ndarray, np.ndarray]:
    """Two equally long id arrays (query pairs ``(u[i], v[i])``), each checked by :func:`as_vertex_ids`."""
    u = as_vertex_ids(u, num_nodes, "u")
    v = as_vertex_ids(v, num_nodes, "v")
    if u.size != v.size:
        raise GraphError(f"u and v must have the same length (one query pair each), got {u.size} and {v.size}")
    return u, v


def as_edge_array(edges: Any, name: str = "edges") -> np.ndarray:
    """An ``(E, 2)`` integer edge array (an empty input gives shape ``(0, 2)``)."""
    array = np.asarray(edges.numpy() if hasattr(edges, "numpy") else edges)
    if array.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise GraphError(f"{name} must have shape (E, 2) (one row per edge), got {array.shape}; "
                         f"for a PyG edge_index of shape (2, E) pass edge_index.T")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise GraphError(f"{name} has dtype {array.dtype}; vertex ids must be integers")
    return array.astype(np.int64, copy=False)


def _check_key_range(num_nodes: int) -> None:
    if num_nodes > 3_000_000_000:
        raise GraphError(f"num_nodes={num_nodes} is too large for int64 pair keys (at most 3e9 vertices)")


def undirected_csr(edges: np.ndarray, num_nodes: int) -> Tuple[np.ndarray, np.ndarray]:
    """Sorted, duplicate-free neighbour lists of the undirected view of ``edges`` (self-loops kept).

    One sort of the ``u * n + v`` keys of both directions (numpy only: no torch import on this path).
    """
    edges = as_edge_array(edges)
    as_vertex_ids(edges, num_nodes, "edges")
    _check_key_range(num_nodes)
    u, v = edges[:, 0], edges[:, 1]
    keys = np.sort(np.concatenate([u * num_nodes + v, v * num_nodes + u]))
    if keys.size:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    rows = keys // num_nodes
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num_nodes), out=indptr[1:])
    return indptr, keys - rows * num_nodes


def graph_csr(graph: Any) -> Tuple[np.ndarray, np.ndarray, int]:
    """``(indptr, indices, num_nodes)`` of a :class:`~sgl.data.Graph`'s undirected view."""
    from sgl.data import Graph

    if not isinstance(graph, Graph):
        raise GraphError(f"expected an sgl.data.Graph, got {type(graph).__name__}")
    src, dst = graph.edge_index.numpy()
    indptr, indices = undirected_csr(np.stack([src, dst], axis=1), graph.num_nodes)
    return indptr, indices, graph.num_nodes


class MemoryAdjacency:
    """An undirected edge set in memory, as sorted ``int64`` keys ``u * n + v`` (both directions).

    The reference neighbour source for :meth:`VENDCodes.update` and the tests' ground truth:
    updates are vectorised set operations, ``O(E)`` per batch.
    """

    def __init__(self, keys: np.ndarray, num_nodes: int) -> None:
        _check_key_range(num_nodes)
        self.num_nodes = int(num_nodes)
        self._keys = np.asarray(keys, dtype=np.int64)

    @classmethod
    def from_csr(cls, indptr: np.ndarray, indices: np.ndarray) -> "MemoryAdjacency":
        n = np.asarray(indptr).size - 1
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
        return cls(rows * n + np.asarray(indices, dtype=np.int64), n)

    @classmethod
    def from_edges(cls, edges: Any, num_nodes: Optional[int] = None) -> "MemoryAdjacency":
        edges = as_edge_array(edges)
        if num_nodes is None:
            num_nodes = int(edges.max()) + 1 if edges.size else 1
        return cls.from_csr(*undirected_csr(edges, num_nodes))

    @property
    def num_edges(self) -> int:
        """Undirected edges (a self-loop counts once)."""
        u, v = np.divmod(self._keys, self.num_nodes)
        return int(np.count_nonzero(u <= v))

    def _keys_of(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return u * self.num_nodes + v

    def has_edges(self, u: Any, v: Any) -> np.ndarray:
        u, v = as_pairs(u, v, self.num_nodes)
        keys = self._keys_of(u, v)
        if self._keys.size == 0:
            return np.zeros(keys.size, dtype=bool)
        at = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        return self._keys[at] == keys

    def neighbors(self, vertex: int) -> np.ndarray:
        return self.neighbors_csr(np.array([vertex]))[1]

    def neighbors_csr(self, vertices: Any) -> Tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)``: the sorted neighbour list of each of ``vertices``, in order."""
        vertices = as_vertex_ids(vertices, self.num_nodes, "vertices")
        lo = np.searchsorted(self._keys, vertices * self.num_nodes)
        hi = np.searchsorted(self._keys, (vertices + 1) * self.num_nodes)
        indptr = np.zeros(vertices.size + 1, dtype=np.int64)
        np.cumsum(hi - lo, out=indptr[1:])
        take = np.repeat(lo - indptr[:-1], hi - lo) + np.arange(indptr[-1])
        return indptr, self._keys[take] % self.num_nodes

    def apply(self, insert: Any = None, delete: Any = None) -> None:
        """Delete, then insert, undirected edges; deleting an absent edge raises before any change."""
        delete = as_edge_array(delete if delete is not None else [], "delete")
        insert = as_edge_array(insert if insert is not None else [], "insert")
        for name, pairs in (("delete", delete), ("insert", insert)):
            as_vertex_ids(pairs, self.num_nodes, name)
        if delete.size:
            missing = ~self.has_edges(delete[:, 0], delete[:, 1])
            if missing.any():
                u, v = delete[np.argmax(missing)]
                raise GraphError(f"cannot delete edge ({u}, {v}): it is not in the graph "
                                 f"({int(missing.sum())} of {len(delete)} deletions name absent edges)")
            gone = np.concatenate([self._keys_of(delete[:, 0], delete[:, 1]),
                                   self._keys_of(delete[:, 1], delete[:, 0])])
            self._keys = self._keys[~np.isin(self._keys, gone)]
        if insert.size:
            new = np.concatenate([self._keys_of(insert[:, 0], insert[:, 1]),
                                  self._keys_of(insert[:, 1], insert[:, 0])])
            self._keys = np.union1d(self._keys, new)
