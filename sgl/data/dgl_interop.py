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
from typing import Any

import torch

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


def graph_from_dgl(cls: type, dgl_graph: Any):
    dgl = import_dgl()
    if not isinstance(dgl_graph, dgl.DGLGraph):
        raise GraphError(f"from_dgl expects a dgl.DGLGraph, got {type(dgl_graph).__name__}")
    if not dgl_graph.is_homogeneous:
        raise GraphError("from_dgl supports homogeneous graphs only; convert with dgl.to_homogeneous first")
    src, dst = dgl_graph.edges(order="eid")
    weight = dgl_graph.edata.get("weight") if "weight" in dgl_graph.edata else None
    node_data = {ours: dgl_graph.ndata[theirs] for ours, theirs in _NODE_FIELDS.items() if theirs in dgl_graph.ndata}
    return cls.from_edge_index(torch.stack([src.long(), dst.long()]), num_nodes=dgl_graph.num_nodes(),
                               edge_weight=weight, **node_data)


def graph_to_dgl(graph: Any) -> Any:
    dgl = import_dgl()
    out = dgl.graph((graph.indices, graph.destinations()), num_nodes=graph.num_nodes)
    if graph.edge_weight is not None:
        out.edata["weight"] = graph.edge_weight
    for ours, theirs in _NODE_FIELDS.items():
        value = getattr(graph, ours)
        if value is not None:
            out.ndata[theirs] = value
    return out
