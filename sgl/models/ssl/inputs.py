"""The argument and graph checks and the feature preparation shared by every self-supervised model."""
from __future__ import annotations

from numbers import Integral
from typing import Any, Optional, Tuple

import torch

from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops import row_normalize

__all__ = ["check_ssl_model_args", "check_ssl_graph", "ssl_inputs"]


def check_ssl_model_args(who: str, in_features: Any, config: Any, config_cls: type) -> None:
    """A model's constructor arguments: a ``config_cls`` instance and ``in_features >= 1``."""
    if not isinstance(config, config_cls):
        raise ConfigError(f"{who} takes a {config_cls.__name__}, got {type(config).__name__}")
    if isinstance(in_features, bool) or not isinstance(in_features, Integral) or in_features < 1:
        raise ConfigError(f"{who} needs in_features >= 1, got {in_features!r}")


def check_ssl_graph(graph: Any, in_features: Optional[int], who: str) -> Graph:
    """Validate a graph for a self-supervised model: features present, finite, right width."""
    if not isinstance(graph, Graph):
        raise GraphError(f"{who} takes an sgl.data.Graph, got {type(graph).__name__}")
    if graph.x is None:
        raise FeatureError(
            f"{who} needs node features: the graph has no x; set graph.x (for a featureless graph, "
            f"one-hot degrees or a constant column are common choices)"
        )
    if graph.x.dim() != 2 or (in_features is not None and graph.x.size(1) != in_features):
        raise FeatureError(f"{who} expects features [num_nodes, {in_features}], got {tuple(graph.x.shape)}")
    return graph


def ssl_inputs(graph: Any, in_features: int, who: str, device: torch.device, normalize: bool = True,
               sparse: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(x, edge_index)`` on ``device`` after :func:`check_ssl_graph`: float features, rows
    divided by their sum when ``normalize``, as a coalesced sparse COO matrix when ``sparse``."""
    graph = check_ssl_graph(graph, in_features, who)
    x = graph.x.float()
    if normalize:
        x = row_normalize(x)
    if sparse:
        x = x.to_sparse().coalesce()
    return x.to(device), graph.edge_index.to(device)
