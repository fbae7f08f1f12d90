"""The one graph type of SGL: a validated CSR adjacency on torch tensors.

Storage convention (the same as DGL's ``edge_dir="in"`` and PyG's ``adj_t``): rows are
*destination* nodes. For node ``v``, ``indices[indptr[v]:indptr[v + 1]]`` lists the
*sources* of the edges ``u -> v`` (its in-neighbours), so ``A_csr @ X`` aggregates
messages along edge direction exactly as PyG's ``source_to_target`` flow does. An
``edge_index`` is ``[sources; destinations]`` as in PyG.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import torch

from sgl.data.validation import (
    as_tensor,
    check_edge_weight,
    check_features,
    check_index_tensor,
    check_labels,
    check_mask,
    check_node_ids,
)
from sgl.errors import GraphError
from sgl.fileio import atomic_write

__all__ = ["Graph"]

try:  # scipy's O(E) counting sort behind coo_matrix.tocsr (private module, hence the fallback)
    from scipy.sparse._sparsetools import coo_tocsr as _coo_tocsr
except ImportError:  # pragma: no cover
    _coo_tocsr = None

_MASKS = ("train_mask", "val_mask", "test_mask")
_FORMAT_VERSION = 1


def _csr_from_coo(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, need_order: bool = True):
    """Group edges by destination, keeping duplicates and input order within a row.

    Returns ``(indptr, indices, order)`` with ``indices = src[order]`` (``order`` is None
    when ``need_order`` is False, which saves two edge-sized arrays). Uses scipy's O(E)
    counting sort (``coo_tocsr``, the routine behind ``coo_matrix.tocsr``) when available:
    about 5x faster than a stable comparison sort on 10M edges.
    """
    num_edges = src.numel()
    if _coo_tocsr is not None and num_edges:
        indptr = np.empty(num_nodes + 1, dtype=np.int64)
        indices = np.empty(num_edges, dtype=np.int64)
        # the "data" array carries edge positions when we need the permutation; otherwise a
        # 1-byte dummy keeps the C routine happy at a fraction of the memory
        data = np.arange(num_edges, dtype=np.int64) if need_order else np.zeros(num_edges, dtype=np.int8)
        order = np.empty(num_edges, dtype=data.dtype)
        _coo_tocsr(num_nodes, num_nodes, num_edges, dst.numpy(), src.numpy(), data, indptr, indices, order)
        return torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(order) if need_order else None
    order = torch.argsort(dst, stable=True)
    counts = torch.bincount(dst, minlength=num_nodes)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr[1:])
    return indptr, src[order], order


class Graph:
    r"""A (possibly weighted, possibly directed) graph in CSR form with node data.

    Args:
        indptr (Tensor): ``[num_nodes + 1]`` row pointer over destination nodes.
        indices (Tensor): ``[num_edges]`` source node of each edge, grouped by destination.
        edge_weight (Tensor, optional): ``[num_edges]`` weight of each edge (default: all 1).
        x (Tensor, optional): ``[num_nodes, num_features]`` node features.
        y (Tensor, optional): ``[num_nodes]`` labels (``-1`` = unlabeled) or ``[num_nodes, C]``.
        train_mask, val_mask, test_mask (Tensor, optional): boolean masks or index tensors.
        num_nodes (int, optional): defaults to ``len(indptr) - 1``.

    Construction validates everything (ids in range, dtypes, one feature row per node,
    finite features) and raises :class:`sgl.errors.GraphError` /
    :class:`sgl.errors.FeatureError` with a message saying how to fix the input.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
        >>> g
        Graph(num_nodes=3, num_edges=4)
        >>> g.degree().tolist()
        [1, 2, 1]
        >>> g.add_self_loops().num_edges
        7
    """

    def __init__(
        self,
        indptr: Any,
        indices: Any,
        edge_weight: Optional[Any] = None,
        *,
        x: Optional[Any] = None,
        y: Optional[Any] = None,
        train_mask: Optional[Any] = None,
        val_mask: Optional[Any] = None,
        test_mask: Optional[Any] = None,
        num_nodes: Optional[int] = None,
        name: Optional[str] = None,
    ) -> None:
        indptr = check_index_tensor(indptr, "indptr")
        indices = check_index_tensor(indices, "indices")
        if indptr.dim() != 1 or indptr.numel() < 1:
            raise GraphError(f"indptr must be 1-D with num_nodes + 1 entries, got shape {tuple(indptr.shape)}")
        if indices.dim() != 1:
            raise GraphError(f"indices must be 1-D, got shape {tuple(indices.shape)}")
        n = indptr.numel() - 1
        if num_nodes is not None and int(num_nodes) != n:
            raise GraphError(f"num_nodes={num_nodes} but indptr has {indptr.numel()} entries (expected num_nodes + 1)")
        if n <= 0:
            raise GraphError("the graph is empty (0 nodes); a Graph needs at least one node")
        if int(indptr[0]) != 0:
            raise GraphError(f"indptr[0] must be 0, got {int(indptr[0])}")
        if int(indptr[-1]) != indices.numel():
            raise GraphError(
                f"indptr[-1]={int(indptr[-1])} but indices has {indices.numel()} entries; they must be equal"
            )
        if n > 0 and bool((indptr[1:] < indptr[:-1]).any()):
            raise GraphError("indptr must be non-decreasing (it is a CSR row pointer)")
        check_node_ids(indices, n, "indices")
        self.indptr: torch.Tensor = indptr
        self.indices: torch.Tensor = indices
        self.edge_weight: Optional[torch.Tensor] = check_edge_weight(edge_weight, indices.numel())
        self.num_nodes: int = n
        self.name = name
        self.x: Optional[torch.Tensor] = None if x is None else check_features(x, n)
        self.y: Optional[torch.Tensor] = None if y is None else check_labels(y, n)
        self.train_mask: Optional[torch.Tensor] = None if train_mask is None else check_mask(train_mask, n, "train_mask")
        self.val_mask: Optional[torch.Tensor] = None if val_mask is None else check_mask(val_mask, n, "val_mask")
        self.test_mask: Optional[torch.Tensor] = None if test_mask is None else check_mask(test_mask, n, "test_mask")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edge_index(
        cls,
        edge_index: Any,
        num_nodes: Optional[int] = None,
        edge_weight: Optional[Any] = None,
        **node_data: Any,
    ) -> "Graph":
        """Build from a ``[2, num_edges]`` edge list ``[sources; destinations]`` (PyG layout).

        Duplicate edges are kept (call :meth:`deduplicate` to merge them). ``num_nodes``
        defaults to ``max id + 1``, or to the number of feature rows when ``x`` is given.
        """
        edge_index = check_index_tensor(edge_index, "edge_index")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise GraphError(
                f"edge_index must have shape [2, num_edges], got {tuple(edge_index.shape)} "
                f"(transpose it if you have [num_edges, 2])"
            )
        if num_nodes is None:
            x = node_data.get("x")
            if x is not None and hasattr(x, "shape") and len(x.shape) >= 1:
                num_nodes = int(x.shape[0])
            elif edge_index.numel():
                num_nodes = int(edge_index.max()) + 1
            else:
                raise GraphError("edge_index has no edges; pass num_nodes to build a graph without edges")
        num_nodes = int(num_nodes)
        if num_nodes <= 0:
            raise GraphError(f"num_nodes must be positive, got {num_nodes}")
        check_node_ids(edge_index, num_nodes, "edge_index")
        weight = check_edge_weight(edge_weight, edge_index.size(1))
        indptr, indices, order = _csr_from_coo(edge_index[0], edge_index[1], num_nodes,
                                               need_order=weight is not None)
        if weight is not None:
            weight = weight[order]
        return cls(indptr, indices, weight, num_nodes=num_nodes, **node_data)

    @classmethod
    def from_scipy(cls, matrix: Any, **node_data: Any) -> "Graph":
        """Build from a square scipy sparse matrix where ``A[i, j] != 0`` means edge ``i -> j``.

        Stored entries become edges and their values become edge weights (dropped when all are 1).
        """
        from sgl.data.convert import graph_from_scipy

        return graph_from_scipy(cls, matrix, **node_data)

    @classmethod
    def from_pyg(cls, data: Any) -> "Graph":
        """Build from a ``torch_geometric.data.Data`` (edge_index, edge_weight/edge_attr, x, y, masks)."""
        from sgl.data.convert import graph_from_pyg

        return graph_from_pyg(cls, data)

    @classmethod
    def from_networkx(cls, nx_graph: Any, weight: Optional[str] = "weight", **node_data: Any) -> "Graph":
        """Build from a networkx graph; nodes are relabelled ``0..n-1`` in ``G.nodes`` order.

        Undirected graphs become two directed edges per edge.
        """
        from sgl.data.convert import graph_from_networkx

        return graph_from_networkx(cls, nx_graph, weight=weight, **node_data)

    @classmethod
    def from_dgl(cls, dgl_graph: Any) -> "Graph":
        """Build from a ``dgl.DGLGraph`` (homogeneous); needs the optional ``dgl`` extra."""
        from sgl.data.dgl_interop import graph_from_dgl

        return graph_from_dgl(cls, dgl_graph)

    # ------------------------------------------------------------------ exporters
    def to_pyg(self) -> Any:
        """Export to ``torch_geometric.data.Data`` (edge_index, edge_weight, x, y, masks)."""
        from sgl.data.convert import graph_to_pyg

        return graph_to_pyg(self)

    def to_scipy(self, fmt: str = "csr") -> Any:
        """Export the adjacency ``A`` with ``A[src, dst] = weight`` as a scipy sparse matrix."""
        from sgl.data.convert import graph_to_scipy

        return graph_to_scipy(self, fmt)

    def to_networkx(self) -> Any:
        """Export to a ``networkx.MultiDiGraph`` (duplicates kept) with node attributes ``x``/``y``."""
        from sgl.data.convert import graph_to_networkx

        return graph_to_networkx(self)

    def to_dgl(self) -> Any:
        """Export to a ``dgl.DGLGraph`` with ndata ``feat``/``label``/masks and edata ``weight``."""
        from sgl.data.dgl_interop import graph_to_dgl

        return graph_to_dgl(self)

    # ------------------------------------------------------------------ properties
    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def num_features(self) -> int:
        return 0 if self.x is None else int(self.x.size(1))

    @property
    def num_classes(self) -> int:
        """Number of classes for integer labels (``max(y) + 1``); 0 without labels."""
        if self.y is None:
            return 0
        if self.y.is_floating_point() or self.y.dim() > 1:
            return int(self.y.size(-1)) if self.y.dim() > 1 else 0
        return int(self.y.max()) + 1 if self.y.numel() else 0

    def destinations(self) -> torch.Tensor:
        """Destination node of every edge, aligned with :attr:`indices`."""
        counts = self.indptr[1:] - self.indptr[:-1]
        return torch.repeat_interleave(torch.arange(self.num_nodes), counts)

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, num_edges]`` tensor ``[sources; destinations]``."""
        return torch.stack([self.indices, self.destinations()])

    def edge_weight_or_ones(self) -> torch.Tensor:
        if self.edge_weight is not None:
            return self.edge_weight
        return torch.ones(self.num_edges, dtype=torch.float32)

    def degree(self, direction: str = "in", weighted: bool = False) -> torch.Tensor:
        """Per-node degree: ``"in"`` (edges into the node, the CSR row length) or ``"out"``."""
        if direction not in ("in", "out"):
            raise GraphError(f"direction must be 'in' or 'out', got {direction!r}")
        if direction == "in" and not weighted:
            return self.indptr[1:] - self.indptr[:-1]
        index = self.destinations() if direction == "in" else self.indices
        if weighted:
            out = torch.zeros(self.num_nodes, dtype=self.edge_weight_or_ones().dtype)
            return out.index_add_(0, index, self.edge_weight_or_ones())
        return torch.bincount(index, minlength=self.num_nodes)

    def has_self_loops(self) -> bool:
        return bool((self.indices == self.destinations()).any())

    def is_symmetric(self) -> bool:
        """True when every edge ``u -> v`` has a reverse ``v -> u`` with the same total weight."""
        a = self.to_scipy("csr")
        diff = a - a.T
        return bool(diff.count_nonzero() == 0)

    # ------------------------------------------------------------------ structural operations
    def _node_data(self) -> Dict[str, Any]:
        return {
            "x": self.x,
            "y": self.y,
            "train_mask": self.train_mask,
            "val_mask": self.val_mask,
            "test_mask": self.test_mask,
            "name": self.name,
        }

    def _with_edges(self, src: torch.Tensor, dst: torch.Tensor, weight: Optional[torch.Tensor]) -> "Graph":
        indptr, indices, order = _csr_from_coo(src, dst, self.num_nodes, need_order=weight is not None)
        return Graph(indptr, indices, None if weight is None else weight[order], num_nodes=self.num_nodes,
                     **self._node_data())

    def deduplicate(self, reduce: str = "sum") -> "Graph":
        """Merge parallel edges; weights are combined with ``reduce`` in {sum, mean, max, min}.

        Also sorts every row's neighbours by id.
        """
        if reduce not in ("sum", "mean", "max", "min"):
            raise GraphError(f"reduce must be one of sum, mean, max, min; got {reduce!r}")
        dst = self.destinations()
        key = dst * self.num_nodes + self.indices
        unique, inverse = torch.unique(key, sorted=True, return_inverse=True)
        new_dst = unique // self.num_nodes
        new_src = unique % self.num_nodes
        weight = None
        if self.edge_weight is not None:
            w = self.edge_weight
            weight = torch.zeros(unique.numel(), dtype=w.dtype)
            if reduce in ("sum", "mean"):
                weight.index_add_(0, inverse, w)
                if reduce == "mean":
                    weight /= torch.bincount(inverse, minlength=unique.numel()).to(w.dtype)
            else:
                weight = weight.scatter_reduce(0, inverse, w, reduce="amax" if reduce == "max" else "amin",
                                               include_self=False)
        return self._with_edges(new_src, new_dst, weight)

    def symmetrize(self, reduce: str = "max") -> "Graph":
        """Make the graph undirected: add every reverse edge, then merge duplicates.

        ``reduce`` combines the weights of an edge and its reverse (default ``max``, so an
        already-symmetric unweighted graph is unchanged, unlike a plain concatenation,
        which would double its weights).
        """
        src, dst = self.indices, self.destinations()
        weight = None if self.edge_weight is None else torch.cat([self.edge_weight, self.edge_weight])
        g = self._with_edges(torch.cat([src, dst]), torch.cat([dst, src]), weight)
        if weight is None:
            reduce = "max"
        return g.deduplicate(reduce)

    def remove_self_loops(self) -> "Graph":
        """Drop every edge ``v -> v``."""
        dst = self.destinations()
        keep = self.indices != dst
        weight = None if self.edge_weight is None else self.edge_weight[keep]
        return self._with_edges(self.indices[keep], dst[keep], weight)

    def add_self_loops(self, fill_value: float = 1.0) -> "Graph":
        """Add one edge ``v -> v`` per node (existing self-loops are kept; remove them first
        for exactly one loop per node)."""
        loops = torch.arange(self.num_nodes)
        weight = None
        if self.edge_weight is not None or fill_value != 1.0:
            weight = torch.cat([self.edge_weight_or_ones(),
                                torch.full((self.num_nodes,), float(fill_value), dtype=torch.float32)])
        return self._with_edges(torch.cat([self.indices, loops]), torch.cat([self.destinations(), loops]), weight)

    def subgraph(self, nodes: Any, relabel: bool = True) -> "Graph":
        """Induced subgraph on ``nodes`` (index tensor or boolean mask).

        With ``relabel=True`` (default) nodes are renumbered ``0..len(nodes)-1`` in the given
        order and node data is sliced; the original ids are kept in ``graph.node_ids``.
        """
        nodes_t = as_tensor(nodes, "nodes")
        if nodes_t.dtype == torch.bool:
            if nodes_t.numel() != self.num_nodes:
                raise GraphError(f"a boolean node mask needs {self.num_nodes} entries, got {nodes_t.numel()}")
            nodes_t = nodes_t.nonzero().flatten()
        nodes_t = check_index_tensor(nodes_t, "nodes").flatten()
        check_node_ids(nodes_t, self.num_nodes, "nodes")
        if nodes_t.numel() == 0:
            raise GraphError("subgraph needs at least one node")
        if torch.unique(nodes_t).numel() != nodes_t.numel():
            raise GraphError("nodes contains duplicate ids; pass each node once")
        mapping = torch.full((self.num_nodes,), -1, dtype=torch.int64)
        mapping[nodes_t] = torch.arange(nodes_t.numel())
        src, dst = self.indices, self.destinations()
        keep = (mapping[src] >= 0) & (mapping[dst] >= 0)
        weight = None if self.edge_weight is None else self.edge_weight[keep]
        if not relabel:
            return self._with_edges(src[keep], dst[keep], weight)
        data = {k: (v[nodes_t] if isinstance(v, torch.Tensor) else v) for k, v in self._node_data().items()}
        g = Graph.from_edge_index(
            torch.stack([mapping[src[keep]], mapping[dst[keep]]]), num_nodes=nodes_t.numel(),
            edge_weight=weight, **data,
        )
        g.node_ids = nodes_t
        return g

    def edge_subgraph(self, edge_mask: Any) -> "Graph":
        """Keep the edges selected by a boolean mask over :attr:`indices` (all nodes kept)."""
        mask = as_tensor(edge_mask, "edge_mask")
        if mask.dtype != torch.bool or mask.numel() != self.num_edges:
            raise GraphError(f"edge_mask must be a bool tensor with {self.num_edges} entries")
        weight = None if self.edge_weight is None else self.edge_weight[mask]
        return self._with_edges(self.indices[mask], self.destinations()[mask], weight)

    # ------------------------------------------------------------------ identity, persistence
    def content_hash(self) -> str:
        """A stable hex digest of the structure (indptr, indices, weights), for cache keys."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(str(self.num_nodes).encode())
        for tensor in (self.indptr, self.indices, self.edge_weight):
            if tensor is None:
                digest.update(b"none")
            else:
                digest.update(str(tensor.dtype).encode())
                digest.update(tensor.contiguous().numpy().tobytes())
        return digest.hexdigest()

    def state_dict(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {"format_version": _FORMAT_VERSION, "indptr": self.indptr, "indices": self.indices,
                                 "edge_weight": self.edge_weight, "name": self.name}
        for key in ("x", "y") + _MASKS:
            state[key] = getattr(self, key)
        return state

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the graph to ``path`` atomically (temporary file + rename)."""
        with atomic_write(path, "wb") as handle:
            torch.save(self.state_dict(), handle)

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Graph":
        """Read a graph written by :meth:`save`; corrupt or foreign files raise ``GraphError``."""
        if not os.path.exists(path):
            raise GraphError(f"no graph file at {path!r}; write one with Graph.save(path)")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises many types for truncated/corrupt archives
            raise GraphError(f"{path!r} is not a readable SGL graph file (truncated or corrupt?): {exc}") from exc
        if not isinstance(state, dict) or state.get("format_version") != _FORMAT_VERSION:
            raise GraphError(f"{path!r} was not written by Graph.save (format_version missing or unknown)")
        data = {key: state.get(key) for key in ("x", "y") + _MASKS}
        return cls(state["indptr"], state["indices"], state["edge_weight"], name=state.get("name"), **data)

    # ------------------------------------------------------------------ misc
    def __repr__(self) -> str:
        parts = [f"num_nodes={self.num_nodes}", f"num_edges={self.num_edges}"]
        if self.edge_weight is not None:
            parts.append("weighted")
        if self.x is not None:
            parts.append(f"num_features={self.num_features}")
        if self.y is not None and self.num_classes:
            parts.append(f"num_classes={self.num_classes}")
        name = f"{self.name}: " if self.name else ""
        return f"Graph({name}{', '.join(parts)})"

    def split_sizes(self) -> Sequence[int]:
        """``(train, val, test)`` mask sizes (0 for an absent mask)."""
        return tuple(0 if getattr(self, m) is None else int(getattr(self, m).sum()) for m in _MASKS)
