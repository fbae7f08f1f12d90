"""Run ``torch_geometric`` transforms on :class:`~sgl.data.Graph` objects, losing nothing.

:func:`pyg_transform` wraps a PyG transform (``T.NormalizeFeatures()``, ``T.AddSelfLoops()``,
``T.ToUndirected()``, ``T.AddRandomWalkPE(walk_length=4)``, a ``T.Compose`` of them...) into a
``Graph -> Graph`` callable, usable as ``sgl.datasets.load(name, transform=...)``;
:meth:`Graph.apply_pyg` applies one directly. The round trip is ``to_pyg`` -> transform ->
back to a Graph, and what the graph had comes back:

* ``x``, ``y``, the masks, ``edge_weight``, ``edge_attr`` and ``name`` as the transform left
  them; ``edge_attr`` stays edge features and ``edge_weight`` stays the weight (unlike
  :meth:`Graph.from_pyg`, which reads a one-column float ``edge_attr`` as the weight);
* metadata: node- and graph-level attributes as the transform left them (non-plain values
  included), per-edge ones (names containing ``"edge"``, PyG's convention and
  :mod:`sgl.data.metadata`'s) realigned with the new edges, so a transform that adds or
  reorders edges keeps them lined up; metadata ``to_pyg`` could not export (a name ``Data``
  takes, such as ``batch``) is copied back from the input when the transform cannot have
  invalidated it;
* attributes the transform adds (``random_walk_pe``, ``laplacian_eigenvector_pe``...) become
  metadata attributes.

Whatever cannot come back (a per-edge value without one row per edge, a name a Graph method
takes, per-node metadata of a transform that changed the node count) is named in one
warning. Attributes the transform deletes stay deleted, and ``input_edge_order`` is reset.

The transform receives a new ``Data`` whose tensors are the graph's own, as a PyG dataset
hands its transform a shallow copy: one that modifies tensors in place (most do not) modifies
the graph; pass ``graph.clone()`` to keep it.

Example:
    >>> import torch
    >>> import torch_geometric.transforms as T
    >>> from sgl.data import Graph, pyg_transform
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), x=torch.tensor([[0.0, 1.0, 3.0]] * 3),
    ...                           train_mask=torch.tensor([True, False, True]))
    >>> h = pyg_transform(T.Compose([T.NormalizeFeatures(), T.ToUndirected()]))(g)
    >>> h.x[0].tolist(), h.num_edges, h.train_mask.tolist()
    ([0.0, 0.25, 0.75], 4, [True, False, True])
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, List

import torch

from sgl.data.convert import _NODE_KEYS, _PYG_FIELDS
from sgl.data.graph_api import GraphAPI
from sgl.data.metadata import GRAPH_FIELDS, is_edge_level, is_node_level, metadata
from sgl.errors import ConfigError, GraphError

__all__ = ["PyGTransform", "pyg_transform"]


class PyGTransform:
    """A ``torch_geometric`` transform as a ``Graph -> Graph`` callable (see the module docstring).

    Args:
        transform: any callable taking and returning a ``torch_geometric.data.Data``.
    """

    def __init__(self, transform: Callable[[Any], Any]) -> None:
        if isinstance(transform, type):
            raise ConfigError(f"pyg_transform got the class {transform.__name__}; pass an instance, e.g. "
                              f"{transform.__name__}()")
        if not callable(transform):
            raise ConfigError(f"a PyG transform must be callable (e.g. torch_geometric.transforms.AddSelfLoops()), "
                              f"got {type(transform).__name__}")
        self.transform = transform

    def __call__(self, graph: Any) -> Any:
        if not isinstance(graph, GraphAPI):  # i.e. a Graph: importing Graph here would be an import cycle
            raise GraphError(f"pyg_transform applies to a sgl.data.Graph, got {type(graph).__name__}")
        with warnings.catch_warnings():  # what to_pyg cannot export is copied back below
            warnings.simplefilter("ignore", UserWarning)
            data = graph.to_pyg()
        exported = set(data.keys())
        out = self.transform(data)
        from torch_geometric.data import Data

        if out is None:
            raise ConfigError(f"the transform {self.transform!r} returned None; a transform must return the "
                              f"transformed Data (in-place functions too: end them with `return data`)")
        if not isinstance(out, Data):
            raise GraphError(f"the transform {self.transform!r} returned a {type(out).__name__}; pyg_transform "
                             f"needs a torch_geometric.data.Data back (HeteroData: use HeteroGraph.from_pyg)")
        return _graph_from_transformed(graph, out, exported)

    def __repr__(self) -> str:
        return f"pyg_transform({self.transform!r})"


def pyg_transform(transform: Callable[[Any], Any]) -> PyGTransform:
    """Wrap a ``torch_geometric`` transform into a ``Graph -> Graph`` callable.

    Raises:
        ConfigError: ``transform`` is not callable (or, when called, returns ``None``).
    """
    return PyGTransform(transform)


def _graph_from_transformed(graph: Any, out: Any, exported: set) -> Any:
    """The Graph for the transform's output ``out`` plus the input ``graph``'s unexported metadata."""
    if "edge_index" not in out or out.edge_index is None:
        raise GraphError("the transformed Data has no edge_index; pyg_transform needs one")
    num_edges = int(out.edge_index.size(1))
    for key in ("edge_weight", "edge_attr"):
        value = out[key] if key in out else None
        if isinstance(value, torch.Tensor) and (value.dim() == 0 or value.size(0) != num_edges):
            rows = value.size(0) if value.dim() else 0
            raise GraphError(f"the transform left {key} with {rows} row(s) for {num_edges} edges, so it no longer "
                             f"lines up with them (T.AddSelfLoops extends only its `attr`: Graph.add_self_loops "
                             f"fills edge_weight and edge_attr both)")
    node_data = {key: out[key] for key in _NODE_KEYS if key in out and out[key] is not None}
    name = out["name"] if "name" in out else None
    lost: List[str] = [] if name is None or isinstance(name, str) else ["name"]
    result = type(graph).from_edge_index(
        out.edge_index, num_nodes=out.num_nodes, keep_order=True, name=name if isinstance(name, str) else None,
        edge_weight=out["edge_weight"] if "edge_weight" in out else None,
        edge_attr=out["edge_attr"] if "edge_attr" in out else None, **node_data)
    order, result._input_order = result._input_order, None
    source = metadata(graph)
    keys = out.keys()  # the input's metadata first, in its order, then what the transform added
    for key in [k for k in source if k in keys] + [k for k in keys if k not in source]:
        if key in _PYG_FIELDS:
            continue
        value = out[key]
        if key.startswith("_") or key in GRAPH_FIELDS or hasattr(result, key):
            lost.append(key)
        elif not is_edge_level(key):
            setattr(result, key, value)
        elif isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == num_edges:
            setattr(result, key, value[order])  # into CSR order, with its edges
        else:
            lost.append(key)
    same_nodes = result.num_nodes == graph.num_nodes
    same_edges = same_nodes and torch.equal(result.indptr, graph.indptr) and torch.equal(result.indices,
                                                                                        graph.indices)
    for key, value in source.items():
        if key in exported or hasattr(result, key):
            continue  # exported: the transform's version (or its deletion) stands
        if (same_edges if is_edge_level(key) else same_nodes or not is_node_level(key, value, graph.num_nodes)):
            setattr(result, key, value)
        else:
            lost.append(key)
    if lost:
        warnings.warn(f"pyg_transform could not carry the attribute(s) {lost} back to the Graph: per-edge values "
                      f"need one row per edge, per-node ones the same nodes, and a name a Graph attribute or method "
                      f"takes cannot be set", UserWarning, stacklevel=3)
    return result
