"""Heterogeneous-graph models: NARS-SIGN, SeHGNN, heterogeneous GAMLP (NARS-GAMLP), and the
full-batch R-GCN and HGT baselines. Each is built from the :class:`~sgl.data.HeteroGraph` it
will train on (``Model(graph, num_classes, config)``) and trained by :class:`sgl.tasks.Trainer`
like any other model: the graph's node-classification view is its target type's.

Example:
    >>> import torch
    >>> from sgl.data import HeteroGraph
    >>> from sgl.models.hetero import build_hetero_model
    >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 1, 2]])},
    ...     x_dict={"p": torch.randn(4, 3)}, target="p", y=torch.tensor([0, 1, 0, 1]))
    >>> build_hetero_model("nars-sign", g, 2)
    NARSSIGN(subsets=1, k=3, in_features=3, hidden=256, num_classes=2)
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from sgl.errors import ConfigError
from sgl.models.hetero.baselines import HGT, RGCN, HeteroFullInput, HGTConfig, RGCNConfig
from sgl.models.hetero.common import SubsetAggregator
from sgl.models.hetero.gamlp import HeteroGAMLP, HeteroGAMLPConfig
from sgl.models.hetero.nars import NARSConfig, NARSSIGN
from sgl.models.hetero.sehgnn import SeHGNN, SeHGNNConfig, SemanticFusion

__all__ = ["NARSSIGN", "NARSConfig", "SeHGNN", "SeHGNNConfig", "SemanticFusion", "HeteroGAMLP",
           "HeteroGAMLPConfig", "RGCN", "RGCNConfig", "HGT", "HGTConfig", "HeteroFullInput", "SubsetAggregator",
           "HETERO_MODELS", "build_hetero_model", "is_hetero_model", "model_input"]

#: name -> (model class, config dataclass, one-line description); merged into sgl.models.MODELS
HETERO_MODELS: Dict[str, Tuple[type, type, str]] = {
    "nars-sign": (NARSSIGN, NARSConfig, "NARS: SIGN over relation-subset hops mixed by a 1-D conv "
                                        "(heterogeneous; Yu et al. 2020)"),
    "sehgnn": (SeHGNN, SeHGNNConfig, "SeHGNN: mean-aggregated metapath features + semantic-fusion transformer "
                                     "(heterogeneous; Yang et al. 2023)"),
    "hetero-gamlp": (HeteroGAMLP, HeteroGAMLPConfig, "NARS-GAMLP: GAMLP attention over NARS hops + metapath label "
                                                     "input (heterogeneous; GAMLP's ogbn-mag entry)"),
    "rgcn": (RGCN, RGCNConfig, "R-GCN, full batch, torch_geometric RGCNConv (heterogeneous)"),
    "hgt": (HGT, HGTConfig, "HGT, full batch, torch_geometric HGTConv (heterogeneous)"),
}


def is_hetero_model(name: str) -> bool:
    return str(name).lower().replace("_", "-") in HETERO_MODELS


def model_input(name: str, graph: Any) -> Any:
    """What model ``name`` is built from: the graph itself for a heterogeneous model, its feature
    width otherwise; a heterogeneous graph with a homogeneous model (or the reverse) is a ``ConfigError``."""
    from sgl.data import HeteroGraph

    hetero = isinstance(graph, HeteroGraph)
    if hetero and not is_hetero_model(name):
        raise ConfigError(f"dataset {getattr(graph, 'name', '')!r} is heterogeneous; model {name!r} is not. Use one "
                          f"of {', '.join(HETERO_MODELS)}")
    if not hetero and is_hetero_model(name):
        raise ConfigError(f"model {name!r} needs a heterogeneous dataset (acm, imdb, ogbn-mag, ...)")
    return graph if hetero else graph.num_features


def build_hetero_model(name: str, graph: Any, num_classes: Optional[int] = None, config: Any = None) -> Any:
    """Instantiate heterogeneous model ``name`` for ``graph`` (``num_classes`` defaults to the graph's)."""
    key = str(name).lower().replace("_", "-")
    if key not in HETERO_MODELS:
        raise ConfigError(f"unknown heterogeneous model {name!r}; available: {', '.join(HETERO_MODELS)}")
    cls, config_cls, _ = HETERO_MODELS[key]
    return cls(graph, num_classes if num_classes is not None else graph.num_classes, config or config_cls())
