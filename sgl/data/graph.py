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
import warnings
from typing import Any, Dict, Optional, Sequence, Union

import torch

from sgl.data.csr import csr_from_coo
from sgl.data.graph_api import GraphAPI
from sgl.data.metadata import metadata_state, restore_metadata
from sgl.data.transforms import GraphTransforms
from sgl.data.validation import (
    check_edge_attr,
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

_MASKS = ("train_mask", "val_mask", "test_mask")
_FORMAT_VERSION = 1


class Graph(GraphTransforms, GraphAPI):
    r"""A (possibly weighted, possibly directed) graph in CSR form with node data.

    Args:
        indptr (Tensor): ``[num_nodes + 1]`` row pointer over destination nodes.
        indices (Tensor): ``[num_edges]`` source node of each edge, grouped by destination.
        edge_weight (Tensor, optional): ``[num_edges]`` weight of each edge (default: all 1).
        edge_attr (Tensor, optional): ``[num_edges, ...]`` features of each edge, aligned with
            ``indices`` (PyG's ``edge_attr``); every transform, subgraph and save/load keeps them.
        x (Tensor, optional): ``[num_nodes, num_features]`` node features.
        y (Tensor, optional): ``[num_nodes]`` labels (``-1`` = unlabeled) or ``[num_nodes, C]``.
        train_mask, val_mask, test_mask (Tensor, optional): boolean masks or index tensors.
        num_nodes (int, optional): defaults to ``len(indptr) - 1``.
        name (str, optional): the dataset's name.

    Any other attribute set on a graph (``graph.ogb_name``, ``graph.node_year``...) is
    metadata: every transform (:meth:`symmetrize`, :meth:`add_self_loops`, :meth:`subgraph`...)
    and :meth:`save`/:meth:`load` carry it, slicing per-node tensors in induced subgraphs
    (the rules are in :mod:`sgl.data.metadata`).

    Construction validates everything (ids in range, dtypes, one feature row per node,
    finite features) and raises :class:`sgl.errors.GraphError` /
    :class:`sgl.errors.FeatureError` with a message saying how to fix the input.

    A PyG user's habits work (:mod:`sgl.data.graph_api`): ``graph.keys()``, ``graph["x"]``,
    ``"y" in graph``, :meth:`clone`, :meth:`is_undirected`, ``num_node_features`` and device
    placement with ``to(device)`` / ``cpu()`` / ``cuda()`` / ``pin_memory()`` / ``device``, which
    return a new graph (:mod:`sgl.data.placement`); :meth:`apply_pyg` runs a
    ``torch_geometric`` transform.

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
        edge_attr: Optional[Any] = None,
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
        self.edge_attr: Optional[torch.Tensor] = check_edge_attr(edge_attr, indices.numel())
        self._input_order: Optional[torch.Tensor] = None
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
        *,
        edge_attr: Optional[Any] = None,
        keep_order: bool = False,
        **node_data: Any,
    ) -> "Graph":
        """Build from a ``[2, num_edges]`` edge list ``[sources; destinations]`` (PyG layout).

        Duplicate edges are kept (call :meth:`deduplicate` to merge them). ``num_nodes``
        defaults to ``max id + 1``, or to the number of feature rows when ``x`` is given.
        Edges are stored grouped by destination (CSR order); ``edge_weight`` and the
        ``[num_edges, ...]`` ``edge_attr`` are reordered with them. ``keep_order=True`` also
        records the input order (one int64 per edge, :attr:`input_edge_order`) so that
        ``to_pyg(keep_order=True)`` gives the edges back in it.
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
        attr = check_edge_attr(edge_attr, edge_index.size(1))
        indptr, indices, order = csr_from_coo(edge_index[0], edge_index[1], num_nodes,
                                              need_order=weight is not None or attr is not None or keep_order)
        graph = cls(indptr, indices, None if weight is None else weight[order],
                    edge_attr=None if attr is None else attr[order], num_nodes=num_nodes, **node_data)
        if keep_order:
            graph._input_order = order
        return graph

    @classmethod
    def from_scipy(cls, matrix: Any, **node_data: Any) -> "Graph":
        """Build from a square scipy sparse matrix where ``A[i, j] != 0`` means edge ``i -> j``.

        Stored entries become edges and their values become edge weights (dropped when all are 1).
        """
        from sgl.data.convert import graph_from_scipy

        return graph_from_scipy(cls, matrix, **node_data)

    @classmethod
    def from_pyg(cls, data: Any, keep_order: bool = False) -> "Graph":
        """Build from a ``torch_geometric.data.Data``: edge_index, edge_weight, edge_attr, x, y,
        masks, and its other node- and graph-level attributes as metadata.

        A 1-D (or one-column) floating ``edge_attr`` without ``edge_weight`` becomes the edge
        weight; any other ``edge_attr`` is kept as edge features. Attributes that cannot be
        carried (other per-edge ones, sparse adjacencies, names taken by Graph) are named in
        a warning. ``keep_order`` as in :meth:`from_edge_index`.
        """
        from sgl.data.convert import graph_from_pyg

        return graph_from_pyg(cls, data, keep_order=keep_order)

    @classmethod
    def from_networkx(cls, nx_graph: Any, weight: Optional[str] = "weight", keep_order: bool = False,
                      **node_data: Any) -> "Graph":
        """Build from a networkx graph; nodes are relabelled ``0..n-1`` in ``G.nodes`` order.

        Undirected graphs become two directed edges per edge. The edge attribute ``weight``
        (``None``: ignore weights) must be on every edge or on none (else ``GraphError``);
        node attributes ``x``/``y``/masks likewise. Other attributes are named in a warning.
        """
        from sgl.data.convert import graph_from_networkx

        return graph_from_networkx(cls, nx_graph, weight=weight, keep_order=keep_order, **node_data)

    @classmethod
    def from_dgl(cls, dgl_graph: Any, edge_weight_key: Optional[str] = "weight",
                 edge_attr_key: Optional[str] = "feat", keep_order: bool = False) -> "Graph":
        """Build from a ``dgl.DGLGraph`` (homogeneous); needs the optional ``dgl`` extra.

        ``edge_weight_key`` names the ``edata`` field holding the edge weights (``None``: no
        weights; a name that is not there raises, except the default ``"weight"``);
        ``edge_attr_key`` the edge features. Other node fields become metadata; edge fields
        that cannot be carried are named in a warning.
        """
        from sgl.data.dgl_interop import graph_from_dgl

        return graph_from_dgl(cls, dgl_graph, edge_weight_key=edge_weight_key, edge_attr_key=edge_attr_key,
                              keep_order=keep_order)

    # ------------------------------------------------------------------ exporters
    def to_pyg(self, keep_order: bool = False) -> Any:
        """Export to ``torch_geometric.data.Data`` (edge_index, edge_weight, edge_attr, x, y,
        masks, name and metadata; per-edge metadata with one row per edge follows the edge order,
        and metadata whose name ``Data`` takes, such as ``batch``, is named in a warning).

        The edges come out in CSR order (grouped by destination), which is generally not the
        order of the edge list the graph was built from. With ``keep_order=True`` they come out
        in that input order, for graphs built with ``keep_order=True`` and not transformed since
        (else ``GraphError``).
        """
        from sgl.data.convert import graph_to_pyg

        return graph_to_pyg(self, keep_order=keep_order)

    def to_scipy(self, fmt: str = "csr") -> Any:
        """Export the adjacency ``A`` with ``A[src, dst] = weight`` as a scipy sparse matrix."""
        from sgl.data.convert import graph_to_scipy

        return graph_to_scipy(self, fmt)

    def to_networkx(self) -> Any:
        """Export to a ``networkx.MultiDiGraph`` (duplicates kept) with node attributes ``x``/``y``."""
        from sgl.data.convert import graph_to_networkx

        return graph_to_networkx(self)

    def to_dgl(self) -> Any:
        """Export to a ``dgl.DGLGraph`` with ndata ``feat``/``label``/masks, edata ``weight`` and ``feat``."""
        from sgl.data.dgl_interop import graph_to_dgl

        return graph_to_dgl(self)

    def apply_pyg(self, transform: Any) -> "Graph":
        """The graph after a ``torch_geometric`` transform (e.g. ``T.NormalizeFeatures()``), with
        nothing of it lost: see :func:`sgl.data.pyg_transform`."""
        from sgl.data.pyg_transform import pyg_transform

        return pyg_transform(transform)(self)

    # ------------------------------------------------------------------ properties
    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def input_edge_order(self) -> Optional[torch.Tensor]:
        """Position of each (CSR-ordered) edge in the edge list the graph was built from, when it
        was built with ``keep_order=True``; ``None`` otherwise and after any transform."""
        return self._input_order

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
        return torch.repeat_interleave(torch.arange(self.num_nodes, device=counts.device), counts)

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, num_edges]`` tensor ``[sources; destinations]``."""
        return torch.stack([self.indices, self.destinations()])

    def edge_weight_or_ones(self) -> torch.Tensor:
        if self.edge_weight is not None:
            return self.edge_weight
        return torch.ones(self.num_edges, dtype=torch.float32, device=self.indices.device)

    def degree(self, direction: str = "in", weighted: bool = False) -> torch.Tensor:
        """Per-node degree: ``"in"`` (edges into the node, the CSR row length) or ``"out"``."""
        if direction not in ("in", "out"):
            raise GraphError(f"direction must be 'in' or 'out', got {direction!r}")
        if direction == "in" and not weighted:
            return self.indptr[1:] - self.indptr[:-1]
        index = self.destinations() if direction == "in" else self.indices
        if weighted:
            out = torch.zeros(self.num_nodes, dtype=self.edge_weight_or_ones().dtype, device=index.device)
            return out.index_add_(0, index, self.edge_weight_or_ones())
        return torch.bincount(index, minlength=self.num_nodes)

    def has_self_loops(self) -> bool:
        return bool((self.indices == self.destinations()).any())

    def is_symmetric(self) -> bool:
        """True when every edge ``u -> v`` has a reverse ``v -> u`` with the same total weight."""
        a = self.to_scipy("csr")
        diff = a - a.T
        return bool(diff.count_nonzero() == 0)

    # ------------------------------------------------------------------ node data (transforms: sgl.data.transforms)
    def _node_data(self) -> Dict[str, Any]:
        return {
            "x": self.x,
            "y": self.y,
            "train_mask": self.train_mask,
            "val_mask": self.val_mask,
            "test_mask": self.test_mask,
            "name": self.name,
        }

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
                digest.update(tensor.contiguous().cpu().numpy().tobytes())
        return digest.hexdigest()

    def state_dict(self) -> Dict[str, Any]:
        """Everything :meth:`save` writes: structure, edge and node data, metadata (the plain
        values among it: tensors, numbers, strings and containers of them)."""
        state: Dict[str, Any] = {"format_version": _FORMAT_VERSION, "indptr": self.indptr, "indices": self.indices,
                                 "edge_weight": self.edge_weight, "edge_attr": self.edge_attr, "name": self.name,
                                 "input_order": self._input_order}
        for key in ("x", "y") + _MASKS:
            state[key] = getattr(self, key)
        state["metadata"], _ = metadata_state(self)
        return state

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the graph to ``path`` atomically (temporary file + rename), metadata included;
        metadata that is not a plain value (an arbitrary object) is named in a warning and skipped."""
        _, skipped = metadata_state(self)
        if skipped:
            warnings.warn(f"Graph.save skips the attribute(s) {skipped}: only tensors, numbers, strings and "
                          f"lists/dicts of them are saved", UserWarning, stacklevel=2)
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
        graph = cls(state["indptr"], state["indices"], state["edge_weight"], name=state.get("name"),
                    edge_attr=state.get("edge_attr"), **data)
        order = state.get("input_order")
        if order is not None and (not isinstance(order, torch.Tensor) or order.shape != (graph.num_edges,)):
            raise GraphError(f"{path!r} holds an input edge order that does not match its {graph.num_edges} edges "
                             f"(corrupt); save the graph again")
        graph._input_order = order
        return restore_metadata(graph, state.get("metadata"))

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
