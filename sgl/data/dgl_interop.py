"""DGL interop, isolated in one module because importing DGL needs a workaround.

DGL's PyPI build (2.1) ships native ``graphbolt`` libraries only up to torch 2.2, so a
plain ``import dgl`` fails under torch 2.13 while loading ``libgraphbolt_pytorch_*.so``.
DGL's core graph, sampling and METIS do not need graphbolt, so when the real import fails
we put an empty stub module at ``sys.modules["dgl.graphbolt"]`` and import again, with a
warning. Nothing else in SGL imports DGL.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
import warnings
from typing import Any, Optional

import torch

from sgl.data.metadata import GRAPH_FIELDS, restore_metadata
from sgl.errors import GraphError

__all__ = ["import_dgl", "dgl_available", "graph_from_dgl", "graph_to_dgl"]

_NODE_FIELDS = {"x": "feat", "y": "label", "train_mask": "train_mask", "val_mask": "val_mask",
                "test_mask": "test_mask"}


def import_dgl() -> Any:
    """Import and return ``dgl``, stubbing ``dgl.graphbolt`` when its native library is missing."""
    if "dgl" in sys.modules and hasattr(sys.modules["dgl"], "graph"):
        return sys.modules["dgl"]
    if importlib.util.find_spec("dgl") is None:
        raise GraphError("DGL is not installed; install the optional extra: pip install 'sgl[dgl]'")
    os.environ.setdefault("DGLBACKEND", "pytorch")
    try:
        return importlib.import_module("dgl")
    except (FileNotFoundError, OSError, ImportError) as first_error:
        for name in [m for m in sys.modules if m == "dgl" or m.startswith("dgl.")]:
            del sys.modules[name]
        stub = types.ModuleType("dgl.graphbolt")
        stub.__path__ = []  # a package, so `dgl.graphbolt.x` imports fail loudly instead of oddly
        sys.modules["dgl.graphbolt"] = stub
        try:
            module = importlib.import_module("dgl")
        except Exception as exc:
            raise GraphError(f"importing dgl failed even with dgl.graphbolt stubbed: {exc}") from exc
        warnings.warn(
            f"dgl.graphbolt could not load its native library for torch {torch.__version__} "
            f"({type(first_error).__name__}); SGL stubbed it. DGL graphs, sampling and METIS work; "
            f"graphbolt does not.",
            RuntimeWarning,
            stacklevel=2,
        )
        return module


def dgl_available() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import_dgl()
        return True
    except GraphError:
        return False


def graph_from_dgl(cls: type, dgl_graph: Any, edge_weight_key: Optional[str] = "weight",
                   edge_attr_key: Optional[str] = "feat", keep_order: bool = False):
    dgl = import_dgl()
    if not isinstance(dgl_graph, dgl.DGLGraph):
        raise GraphError(f"from_dgl expects a dgl.DGLGraph, got {type(dgl_graph).__name__}")
    if not dgl_graph.is_homogeneous:
        raise GraphError("from_dgl supports homogeneous graphs only; convert with dgl.to_homogeneous first")
    edata = dict(dgl_graph.edata)
    for key, default, what in ((edge_weight_key, "weight", "edge_weight_key"), (edge_attr_key, "feat", "edge_attr_key")):
        if key is not None and key != default and key not in edata:
            raise GraphError(f"{what}={key!r} is not an edge field of the DGL graph; its edata fields are "
                             f"{sorted(edata)}")
    weight = edata.pop(edge_weight_key, None) if edge_weight_key is not None else None
    attr = edata.pop(edge_attr_key, None) if edge_attr_key is not None else None
    if weight is not None and weight.dim() == 2 and weight.size(1) == 1:
        weight = weight.flatten()
    if weight is not None and weight.dim() != 1:
        raise GraphError(f"edata[{edge_weight_key!r}] has shape {tuple(weight.shape)}; edge weights are one number "
                         f"per edge (pass its name as edge_attr_key to keep it as edge features)")
    src, dst = dgl_graph.edges(order="eid")
    ndata = dict(dgl_graph.ndata)
    node_data = {ours: ndata.pop(theirs) for ours, theirs in _NODE_FIELDS.items() if theirs in ndata}
    if "_ID" in ndata:  # dgl.NID: a DGL subgraph's ids in its parent, what Graph.subgraph calls node_ids
        ndata["node_ids"] = ndata.pop("_ID")
    carried = {k: v for k, v in ndata.items() if not hasattr(cls, k) and k not in GRAPH_FIELDS}
    dropped = [f"edata[{k!r}]" for k in edata] + [f"ndata[{k!r}]" for k in ndata if k not in carried]
    if dropped:
        warnings.warn(f"from_dgl does not carry {dropped}: a Graph keeps one edge weight field "
                      f"(edge_weight_key) and one edge feature field (edge_attr_key)", UserWarning, stacklevel=3)
    graph = cls.from_edge_index(torch.stack([src.long(), dst.long()]), num_nodes=dgl_graph.num_nodes(),
                                edge_weight=weight, edge_attr=attr, keep_order=keep_order, **node_data)
    return restore_metadata(graph, carried)


def graph_to_dgl(graph: Any) -> Any:
    dgl = import_dgl()
    out = dgl.graph((graph.indices, graph.destinations()), num_nodes=graph.num_nodes)
    if graph.edge_weight is not None:
        out.edata["weight"] = graph.edge_weight
    if graph.edge_attr is not None:
        out.edata["feat"] = graph.edge_attr
    for ours, theirs in _NODE_FIELDS.items():
        value = getattr(graph, ours)
        if value is not None:
            out.ndata[theirs] = value
    return out
