"""Graph metadata: what a :class:`~sgl.data.Graph` carries besides its structure and node data.

Any public attribute set on a graph that is not one of its fields (``graph.ogb_name``,
``graph.node_year``, ``graph.split``, ``graph.node_ids``...) is *metadata*. It is sorted the
way PyG sorts ``Data`` attributes:

* a name containing ``"edge"`` is **per edge**. Only ``edge_weight`` and ``edge_attr`` are
  realigned when a transform reorders or drops edges; any other per-edge attribute is dropped
  by such a transform, with a warning naming it (store per-edge data in ``edge_attr``);
* a tensor with one row per node is **per node**: an induced subgraph slices it;
* everything else is **per graph** and is copied unchanged.

:func:`copy_metadata` is the one place a transform's result receives its source's metadata;
:func:`metadata_state` / :func:`restore_metadata` are the ones :meth:`Graph.save` /
:meth:`Graph.load` use.

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]))
    >>> g.ogb_name, g.node_year = "ogbn-arxiv", torch.tensor([2010, 2011, 2012])
    >>> sub = g.add_self_loops().symmetrize().subgraph(torch.tensor([2, 0]))
    >>> sub.ogb_name, sub.node_year.tolist()
    ('ogbn-arxiv', [2012, 2010])
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch

__all__ = ["GRAPH_FIELDS", "metadata", "is_edge_level", "is_node_level", "copy_metadata", "metadata_state",
           "restore_metadata", "is_plain"]

#: the attributes every Graph has; everything else public is metadata
GRAPH_FIELDS = frozenset({"indptr", "indices", "edge_weight", "edge_attr", "num_nodes", "name", "x", "y",
                          "train_mask", "val_mask", "test_mask"})


def metadata(graph: Any) -> Dict[str, Any]:
    """The graph's metadata attributes (public, not a Graph field), in the order they were set."""
    return {k: v for k, v in vars(graph).items() if k not in GRAPH_FIELDS and not k.startswith("_")}


def is_edge_level(key: str) -> bool:
    """PyG's rule: an attribute whose name contains ``"edge"`` holds one entry per edge."""
    return "edge" in key


def is_node_level(key: str, value: Any, num_nodes: int) -> bool:
    """A tensor with one row per node whose name does not mark it as per edge."""
    return (isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == num_nodes
            and not is_edge_level(key))


def copy_metadata(source: Any, target: Any, nodes: Optional[torch.Tensor] = None,
                  edges_changed: bool = True, who: str = "this transform") -> Any:
    """Give ``target`` (built from ``source`` by a transform) the metadata of ``source``.

    ``nodes``: the source ids of ``target``'s nodes when the transform renumbered them (an
    induced subgraph); per-node tensors are sliced with it. ``edges_changed``: the transform
    reordered, added or dropped edges, so per-edge metadata no longer lines up and is dropped
    with a warning. Returns ``target``.
    """
    dropped = []
    for key, value in metadata(source).items():
        if is_edge_level(key) and edges_changed:
            dropped.append(key)
            continue
        if nodes is not None and is_node_level(key, value, source.num_nodes):
            value = value[nodes]
        setattr(target, key, value)
    if dropped:
        warnings.warn(f"{who} dropped the per-edge attribute(s) {dropped}: only edge_weight and edge_attr follow "
                      f"their edges when edges are reordered or removed; store per-edge data in edge_attr",
                      UserWarning, stacklevel=3)
    return target


def is_plain(value: Any) -> bool:
    """Tensors, numbers, strings, None, and lists/tuples/dicts of them: what a weights-only load reads."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return False


def metadata_state(graph: Any) -> Tuple[Dict[str, Any], List[str]]:
    """``(metadata that can be saved, names of the attributes that cannot)``."""
    saved, skipped = {}, []
    for key, value in metadata(graph).items():
        if is_plain(value):
            saved[key] = value
        else:
            skipped.append(key)
    return saved, skipped


def restore_metadata(graph: Any, state: Optional[Dict[str, Any]]) -> Any:
    for key, value in (state or {}).items():
        if key not in GRAPH_FIELDS and not key.startswith("_"):
            setattr(graph, key, value)
    return graph
