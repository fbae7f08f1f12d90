"""Conversions between :class:`sgl.data.Graph` and scipy, torch_geometric and networkx.

Kept out of ``graph.py`` so the core type imports nothing heavy; each function is
reached through the matching ``Graph.from_*`` / ``Graph.to_*`` method.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import scipy.sparse as sp
import torch

from sgl.data.metadata import GRAPH_FIELDS, is_edge_level, is_plain, metadata, restore_metadata
from sgl.errors import GraphError

__all__ = [
    "graph_from_scipy",
    "graph_to_scipy",
    "graph_from_pyg",
    "graph_to_pyg",
    "graph_from_networkx",
    "graph_to_networkx",
]

_NODE_KEYS = ("x", "y", "train_mask", "val_mask", "test_mask")
#: the Data keys from_pyg reads into Graph fields
_PYG_FIELDS = frozenset({"edge_index", "edge_weight", "edge_attr", "num_nodes", "name"} | set(_NODE_KEYS))


def graph_from_scipy(cls: type, matrix: Any, **node_data: Any):
    if not sp.issparse(matrix):
        raise GraphError(f"from_scipy expects a scipy.sparse matrix, got {type(matrix).__name__}")
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise GraphError(f"an adjacency matrix must be square, got shape {matrix.shape}")
    if matrix.shape[0] == 0:
        raise GraphError("the adjacency matrix is empty (0 nodes)")
    # CSC of A groups entries by column j (= destination), row ids are the sources:
    # exactly our in-neighbour CSR, with no sort.
    csc = sp.csc_matrix(matrix)
    data = np.asarray(csc.data)
    weight = None
    if data.size and not np.all(data == 1):
        weight = torch.from_numpy(data.astype(np.float32))
    return cls(
        torch.from_numpy(csc.indptr.astype(np.int64)),
        torch.from_numpy(csc.indices.astype(np.int64)),
        weight,
        num_nodes=matrix.shape[0],
        **node_data,
    )


def graph_to_scipy(graph, fmt: str = "csr"):
    if fmt not in ("csr", "csc", "coo"):
        raise GraphError(f"fmt must be 'csr', 'csc' or 'coo', got {fmt!r}")
    n = graph.num_nodes
    weight = graph.edge_weight_or_ones().cpu().numpy()
    # Our CSR over destinations is the CSC of A[src, dst]; on CPU this copies nothing.
    csc = sp.csc_matrix((weight, graph.indices.cpu().numpy(), graph.indptr.cpu().numpy()), shape=(n, n))
    return csc.asformat(fmt)


def graph_from_pyg(cls: type, data: Any, keep_order: bool = False):
    try:
        from torch_geometric.data import Data
    except ImportError as exc:  # pragma: no cover - torch_geometric is a core dependency
        raise GraphError("from_pyg needs torch_geometric (pip install torch-geometric)") from exc
    if not isinstance(data, Data):
        raise GraphError(f"from_pyg expects a torch_geometric.data.Data, got {type(data).__name__}")
    if data.edge_index is None:
        raise GraphError("the Data object has no edge_index")
    weight = data["edge_weight"] if "edge_weight" in data else None
    attr = data["edge_attr"] if "edge_attr" in data else None
    if (weight is None and isinstance(attr, torch.Tensor) and attr.is_floating_point()
            and (attr.dim() == 1 or (attr.dim() == 2 and attr.size(1) == 1))):
        weight, attr = attr.flatten(), None  # PyG's habit: a one-column edge_attr is the edge weight
    node_data: Dict[str, Any] = {k: data[k] for k in _NODE_KEYS if k in data and data[k] is not None}
    extra, dropped = {}, []
    if "name" in data and isinstance(data["name"], str):
        node_data["name"] = data["name"]
    elif "name" in data:
        dropped.append("name")
    for key in data.keys():
        if key in _PYG_FIELDS or key in node_data:
            continue
        value = data[key]
        if data.is_edge_attr(key) or hasattr(cls, key) or key in GRAPH_FIELDS or not is_plain(value):
            dropped.append(key)
        else:
            extra[key] = value
    if dropped:
        warnings.warn(f"from_pyg does not carry the Data attribute(s) {dropped}: a Graph keeps edge_index, "
                      f"edge_weight and edge_attr per edge (put other per-edge data in edge_attr), node- and "
                      f"graph-level tensors and plain values", UserWarning, stacklevel=3)
    graph = cls.from_edge_index(data.edge_index, num_nodes=data.num_nodes, edge_weight=weight, edge_attr=attr,
                                keep_order=keep_order, **node_data)
    return restore_metadata(graph, extra)


def _exported_order(graph, keep_order: bool) -> Optional[torch.Tensor]:
    """The permutation that puts CSR edges back in input order, or None for CSR order."""
    if not keep_order:
        return None
    order = graph.input_edge_order
    if order is None:
        raise GraphError("keep_order=True needs the input edge order, which is known only for a graph built with "
                         "keep_order=True (Graph.from_edge_index/from_pyg/from_dgl/from_networkx) and not "
                         "transformed since; transforms reorder edges")
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel())
    return inverse


def graph_to_pyg(graph, keep_order: bool = False):
    from torch_geometric.data import Data

    inverse = _exported_order(graph, keep_order)

    def edges(tensor):
        return tensor if inverse is None else tensor[..., inverse]

    data = Data(edge_index=edges(graph.edge_index), num_nodes=graph.num_nodes)
    if graph.edge_weight is not None:
        data.edge_weight = edges(graph.edge_weight)
    if graph.edge_attr is not None:
        data.edge_attr = graph.edge_attr if inverse is None else graph.edge_attr[inverse]
    for key in _NODE_KEYS:
        value = getattr(graph, key)
        if value is not None:
            data[key] = value
    if graph.name is not None:
        data.name = graph.name
    skipped = []
    for key, value in metadata(graph).items():
        if hasattr(Data, key):  # a Data method or property (``batch``, ``keys``...): setting it would clobber it
            skipped.append(key)
        elif not is_edge_level(key):
            data[key] = value
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == graph.num_edges:
            data[key] = value if inverse is None else value[inverse]  # per-edge rows follow their edges
        else:
            skipped.append(key)
    if skipped:
        warnings.warn(f"to_pyg does not carry the attribute(s) {skipped}: their names are taken by Data or mark "
                      f"per-edge data that does not have one row per edge; rename them", UserWarning, stacklevel=3)
    return data


def graph_from_networkx(cls: type, nx_graph: Any, weight: Optional[str] = "weight", keep_order: bool = False,
                        **node_data: Any):
    import networkx as nx

    if not isinstance(nx_graph, nx.Graph):
        raise GraphError(f"from_networkx expects a networkx graph, got {type(nx_graph).__name__}")
    n = nx_graph.number_of_nodes()
    if n == 0:
        raise GraphError("the networkx graph has no nodes")
    index = {node: i for i, node in enumerate(nx_graph.nodes())}
    edges = list(nx_graph.edges(data=True))
    src = np.fromiter((index[u] for u, _, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[v] for _, v, _ in edges), dtype=np.int64, count=len(edges))
    w = None
    if weight is not None:
        _all_or_none([(f"{u!r} -> {v!r}", weight in d) for u, v, d in edges], f"edge attribute {weight!r}",
                     "edges", "pass weight=None to ignore weights")
        if edges and weight in edges[0][2]:
            w = np.fromiter((float(d[weight]) for _, _, d in edges), dtype=np.float32, count=len(edges))
    if not nx_graph.is_directed():
        loops = src == dst
        src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
        if w is not None:
            w = np.concatenate([w, w[~loops]])
    nodes = list(nx_graph.nodes(data=True))
    for key in _NODE_KEYS:
        if key in node_data:
            continue
        _all_or_none([(repr(v), key in attrs) for v, attrs in nodes], f"node attribute {key!r}", "nodes",
                     f"set it on every node or pass {key}= explicitly")
        if nodes and key in nodes[0][1]:
            values = [attrs[key] for _, attrs in nodes]
            # networkx stores Python floats; features come back as float32 like everywhere else.
            node_data[key] = torch.as_tensor(np.asarray(values, dtype=np.float32 if key == "x" else None))
    ignored = sorted({k for _, attrs in nodes for k in attrs} - set(_NODE_KEYS))
    ignored += sorted({f"edge:{k}" for _, _, d in edges for k in d} - {f"edge:{weight or 'weight'}"})
    if ignored:
        reads = f"the edge attribute {weight!r}" if weight is not None else "no edge attribute (weight=None)"
        warnings.warn(f"from_networkx does not carry the attribute(s) {ignored}: it reads {reads} and the node "
                      f"attributes {list(_NODE_KEYS)}", UserWarning, stacklevel=3)
    edge_index = torch.from_numpy(np.stack([src, dst])) if len(src) else torch.empty(2, 0, dtype=torch.long)
    return cls.from_edge_index(edge_index, num_nodes=n, edge_weight=None if w is None else torch.from_numpy(w),
                               keep_order=keep_order, **node_data)


def _all_or_none(flags: List[Tuple[str, bool]], what: str, items: str, fix: str) -> None:
    """Raise when ``what`` is set on some of the ``items`` but not all (a half-weighted graph)."""
    have = sum(flag for _, flag in flags)
    if 0 < have < len(flags):
        missing = next(name for name, flag in flags if not flag)
        raise GraphError(f"the {what} is set on {have} of {len(flags)} {items} (missing on {missing}, ...); "
                         f"set it on all {items} or on none ({fix})")


def graph_to_networkx(graph):
    import networkx as nx

    out = nx.MultiDiGraph()
    for v in range(graph.num_nodes):
        attrs = {}
        for key in _NODE_KEYS:
            value = getattr(graph, key)
            if value is not None:
                attrs[key] = value[v].tolist()
        out.add_node(v, **attrs)
    src, dst = graph.indices.tolist(), graph.destinations().tolist()
    if graph.edge_weight is not None:
        out.add_weighted_edges_from(zip(src, dst, graph.edge_weight.tolist()))
    else:
        out.add_edges_from(zip(src, dst))
    return out
