"""Conversions between :class:`sgl.data.Graph` and scipy, torch_geometric and networkx.

Kept out of ``graph.py`` so the core type imports nothing heavy; each function is
reached through the matching ``Graph.from_*`` / ``Graph.to_*`` method.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import scipy.sparse as sp
import torch

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
    weight = graph.edge_weight_or_ones().numpy()
    # Our CSR over destinations is the CSC of A[src, dst]; this copies nothing.
    csc = sp.csc_matrix((weight, graph.indices.numpy(), graph.indptr.numpy()), shape=(n, n))
    return csc.asformat(fmt)


def graph_from_pyg(cls: type, data: Any):
    try:
        from torch_geometric.data import Data
    except ImportError as exc:  # pragma: no cover - torch_geometric is a core dependency
        raise GraphError("from_pyg needs torch_geometric (pip install torch-geometric)") from exc
    if not isinstance(data, Data):
        raise GraphError(f"from_pyg expects a torch_geometric.data.Data, got {type(data).__name__}")
    if data.edge_index is None:
        raise GraphError("the Data object has no edge_index")
    weight = getattr(data, "edge_weight", None)
    if weight is None:
        attr = getattr(data, "edge_attr", None)
        if attr is not None and (attr.dim() == 1 or (attr.dim() == 2 and attr.size(1) == 1)):
            weight = attr.flatten()
    node_data: Dict[str, Any] = {k: data[k] for k in _NODE_KEYS if k in data and data[k] is not None}
    return cls.from_edge_index(data.edge_index, num_nodes=data.num_nodes, edge_weight=weight, **node_data)


def graph_to_pyg(graph):
    from torch_geometric.data import Data

    data = Data(edge_index=graph.edge_index, num_nodes=graph.num_nodes)
    if graph.edge_weight is not None:
        data.edge_weight = graph.edge_weight
    for key in _NODE_KEYS:
        value = getattr(graph, key)
        if value is not None:
            data[key] = value
    return data


def graph_from_networkx(cls: type, nx_graph: Any, weight: Optional[str] = "weight", **node_data: Any):
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
    if weight is not None and edges and all(weight in d for _, _, d in edges):
        w = np.fromiter((float(d[weight]) for _, _, d in edges), dtype=np.float32, count=len(edges))
    if not nx_graph.is_directed():
        loops = src == dst
        src, dst = np.concatenate([src, dst[~loops]]), np.concatenate([dst, src[~loops]])
        if w is not None:
            w = np.concatenate([w, w[~loops]])
    for key in _NODE_KEYS:
        if key in node_data:
            continue
        values = [attrs.get(key) for _, attrs in nx_graph.nodes(data=True)]
        if all(v is not None for v in values):
            # networkx stores Python floats; features come back as float32 like everywhere else.
            node_data[key] = torch.as_tensor(np.asarray(values, dtype=np.float32 if key == "x" else None))
    edge_index = torch.from_numpy(np.stack([src, dst])) if len(src) else torch.empty(2, 0, dtype=torch.long)
    return cls.from_edge_index(
        edge_index, num_nodes=n, edge_weight=None if w is None else torch.from_numpy(w), **node_data
    )


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
