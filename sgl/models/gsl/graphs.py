"""Graph plumbing shared by the structure learners: input checks, edge-key membership, copies.

Edges are keyed ``dst * N + src``; a sorted key array answers "is (u, v) an edge?" for whole
arrays of pairs with one ``searchsorted``. Learned graphs are symmetric, de-duplicated and
loop-free copies that keep the input's node data.
"""
from __future__ import annotations

from typing import Any

import torch

from sgl.data import Graph
from sgl.errors import FeatureError, GraphError

__all__ = ["check_gsl_graph"]


def _edge_keys(graph: Graph) -> torch.Tensor:
    """Sorted ``dst * N + src`` keys of every edge, for ``searchsorted`` membership tests."""
    n = graph.num_nodes
    return torch.sort(graph.destinations() * n + graph.indices).values


def _contains(sorted_keys: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    if sorted_keys.numel() == 0:
        return torch.zeros(keys.shape, dtype=torch.bool)
    pos = torch.searchsorted(sorted_keys, keys).clamp(max=sorted_keys.numel() - 1)
    return sorted_keys[pos] == keys


def check_gsl_graph(graph: Any, who: str) -> Graph:
    """Validate a structure learner's input: an :class:`~sgl.data.Graph` with 2-D features."""
    if not isinstance(graph, Graph):
        raise GraphError(f"{who} takes an sgl.data.Graph, got {type(graph).__name__}")
    if graph.x is None:
        raise FeatureError(
            f"{who} needs node features (the feature-cosine term): the graph has no x; set graph.x "
            f"(e.g. one-hot node ids or degrees for a featureless graph)"
        )
    if graph.x.dim() != 2:
        raise FeatureError(f"{who} needs 2-D features [num_nodes, d], got shape {tuple(graph.x.shape)}")
    return graph


def _with_node_data(graph: Graph, edge_index: torch.Tensor) -> Graph:
    return Graph.from_edge_index(edge_index, num_nodes=graph.num_nodes, x=graph.x, y=graph.y,
                                 train_mask=graph.train_mask, val_mask=graph.val_mask, test_mask=graph.test_mask,
                                 name=graph.name)


def _undirected(graph: Graph) -> Graph:
    """Symmetric, de-duplicated, loop-free, unweighted copy (node data kept)."""
    src, dst = graph.edge_index
    keep = src != dst
    n = graph.num_nodes
    keys = torch.unique(torch.cat([dst[keep] * n + src[keep], src[keep] * n + dst[keep]]))
    return _with_node_data(graph, torch.stack([keys % n, keys // n]))
