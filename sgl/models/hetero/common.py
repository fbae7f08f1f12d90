"""Shared parts of the heterogeneous models: input checks, feature preparation, NARS's
per-hop subset aggregator."""
from __future__ import annotations

from typing import Any, Dict, List

import torch
from torch import nn

from sgl._checks import check_bool, check_choice, check_int, check_probability
from sgl.errors import ConfigError
from sgl.ops import align_type_features, aligned_width, fill_featureless, row_normalize

__all__ = ["require_hetero", "prepare_x_dict", "input_width", "SubsetAggregator", "check_hetero_common",
           "train_label_matrix"]


def require_hetero(graph: Any, model: str) -> Any:
    """``graph`` if it is a :class:`~sgl.data.HeteroGraph` with a target type, else ``ConfigError``."""
    from sgl.data import HeteroGraph

    if not isinstance(graph, HeteroGraph):
        raise ConfigError(f"{model} is a heterogeneous-graph model: build it with the HeteroGraph "
                          f"(e.g. {model}(sgl.datasets.load('acm'), num_classes)), got {type(graph).__name__}; "
                          f"for a homogeneous graph use sgc, sign, gamlp, ...")
    graph.require_target()
    return graph


def check_hetero_common(config: Any, model: str) -> None:
    check_int(config.hidden, f"{model} hidden", 1)
    check_probability(config.dropout, f"{model} dropout")
    check_probability(config.input_dropout, f"{model} input_dropout")
    check_choice(config.featureless, f"{model} featureless", ("mean", "random", "transe"))
    check_bool(config.normalize_features, f"{model} normalize_features")
    check_int(getattr(config, "type_width", 0), f"{model} type_width", 0)
    if config.dropout >= 1 or config.input_dropout >= 1:
        raise ConfigError(f"{model} dropouts must be < 1")


def _aligns(graph: Any, config: Any) -> bool:
    """Whether the given features need :func:`~sgl.ops.align_type_features` (widths differ and
    the config's ``type_width`` allows it)."""
    return bool(getattr(config, "type_width", 0)) and len({int(x.size(1)) for x in graph.x_dict.values()}) > 1


def input_width(graph: Any, config: Any) -> int:
    """The width of the features :func:`prepare_x_dict` gives the model (without computing them
    when it can be read off the graph)."""
    if _aligns(graph, config):
        return aligned_width({t: int(x.size(1)) for t, x in graph.x_dict.items()}, config.type_width)
    return graph.num_features or int(prepare_x_dict(graph, config)[graph.target].size(1))


def prepare_x_dict(graph: Any, config: Any, seed: int = 0) -> Dict[str, torch.Tensor]:
    """Features of every type: types of different widths aligned to one (each in its own block,
    :func:`~sgl.ops.align_type_features`, when ``config.type_width`` > 0), featureless types
    filled (``config.featureless``), optionally row-normalised (``config.normalize_features``)."""
    if _aligns(graph, config):
        given = align_type_features(graph.x_dict, config.type_width, seed=seed)
        width = int(next(iter(given.values())).size(1))
        x_dict = fill_featureless(graph, config.featureless, dim=width, seed=seed, x_dict=given)
    else:
        x_dict = fill_featureless(graph, config.featureless, seed=seed)
    if config.normalize_features:
        x_dict = {t: row_normalize(x.float()) for t, x in x_dict.items()}
    return {t: x.float() for t, x in x_dict.items()}


def train_label_matrix(graph: Any) -> torch.Tensor:
    """One-hot rows for the training nodes of the target type, zeros elsewhere."""
    y = graph.require_labels()
    if graph.train_mask is None:
        raise ConfigError("the label input needs a train_mask on the target type")
    matrix = torch.zeros(graph.num_nodes, graph.num_classes)
    train = graph.train_mask.nonzero().flatten()
    matrix[train, y[train]] = 1.0
    return matrix


class SubsetAggregator(nn.Module):
    r"""NARS's learned 1-D convolution over relation subsets, one per hop:
    :math:`Z^{(l)}_i = \sum_s w^{(l)}_s \odot X^{(l)}_{i,s}` with :math:`w^{(l)}_s \in \mathbb{R}^d`.

    Input: a list of ``[B, S, d]`` hop tensors; output: a list of ``[B, d]``.

    Example:
        >>> agg = SubsetAggregator(num_hops=2, num_subsets=3, in_features=4)
        >>> [z.shape for z in agg([torch.ones(5, 3, 4), torch.ones(5, 3, 4)])]
        [torch.Size([5, 4]), torch.Size([5, 4])]
    """

    def __init__(self, num_hops: int, num_subsets: int, in_features: int) -> None:
        super().__init__()
        self.weights = nn.ParameterList(nn.Parameter(torch.empty(num_subsets, in_features)) for _ in range(num_hops))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for w in self.weights:
            nn.init.xavier_uniform_(w)

    def forward(self, hops: List[torch.Tensor]) -> List[torch.Tensor]:
        return [(h * w.unsqueeze(0)).sum(dim=1) for h, w in zip(hops, self.weights)]
