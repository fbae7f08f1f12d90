"""Pseudo-labels from an ensemble of zoo models, for structure learners such as RWGSL.

RWGSL scores candidate edges partly by how alike the two endpoints' (propagated) pseudo-labels
are, so its edits are only as good as those labels. The authors' code reads pre-computed label
files that are not published; :func:`model_pseudo_labels` makes them from any zoo model
trained on the graph's *training* labels only: the class probabilities of ``seeds`` models
(each keeping its best-validation epoch) are averaged, and the training rows are replaced by
their true one-hot labels.

Example:
    >>> import sgl
    >>> from sgl.tasks.pseudo_labels import model_pseudo_labels
    >>> graph = sgl.datasets.csbm(num_nodes=200, num_classes=3, avg_degree=5, homophily=0.8, seed=0)
    >>> probs = model_pseudo_labels(graph, "sgc", seeds=2, epochs=20)
    >>> probs.shape, bool(torch.allclose(probs.sum(1), torch.ones(200)))
    (torch.Size([200, 3]), True)
"""
from __future__ import annotations

from numbers import Integral
from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F

from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError

__all__ = ["model_pseudo_labels"]


def model_pseudo_labels(graph: Graph, model: str = "gamlp", seeds: Union[int, Sequence[int]] = 5,
                        device: Optional[str] = None, clamp_train: bool = True, **train_options) -> torch.Tensor:
    """Mean class probabilities ``[N, C]`` of zoo model ``model`` trained with each seed.

    Args:
        graph: a node-classification graph with features, integer labels ``y`` and a
            non-empty ``train_mask`` (``val_mask`` selects each model's epoch when present).
        model: a name from ``sgl.models.MODELS`` (e.g. ``"gamlp"``, ``"appnp"``, ``"gcn"``).
        seeds: the number of seeds ``0..n-1`` or an explicit list.
        device: where to train (default: the library's device choice).
        clamp_train: replace the rows of training nodes by their one-hot labels.
        **train_options: fields of :class:`sgl.tasks.TrainConfig` over the model's defaults.
    """
    from sgl.device import get_device
    from sgl.models import build_model, default_train_config
    from sgl.tasks.node_classification import TrainConfig, Trainer

    if not isinstance(graph, Graph):
        raise FeatureError(f"model_pseudo_labels takes an sgl.data.Graph, got {type(graph).__name__}")
    if graph.x is None:
        raise FeatureError("model_pseudo_labels needs node features graph.x to train the model")
    if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
        raise FeatureError("model_pseudo_labels needs integer node labels graph.y")
    if graph.train_mask is None or not bool(graph.train_mask.any()):
        raise FeatureError("model_pseudo_labels needs training nodes (graph.train_mask); only they are used")
    defaults = default_train_config(model)  # ConfigError naming the available models for an unknown one
    if isinstance(seeds, Integral) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ConfigError(f"seeds must be a positive number of seeds or a list, got {seeds}")
        seeds = list(range(int(seeds)))
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds is empty: give at least one seed")
    try:
        config = TrainConfig(**{**defaults, "progress": False, "device": device,
                                **train_options})
    except TypeError as exc:
        raise ConfigError(f"bad training option for the pseudo-label model: {exc}") from exc
    trainer = Trainer(config)
    num_classes = int(graph.y.max()) + 1

    def factory():
        return build_model(model, graph.num_features, num_classes)

    features = factory().precompute(graph, progress=False)
    probs = torch.zeros(graph.num_nodes, num_classes)
    for seed in seeds:
        net = factory()
        trainer.fit(net, features, graph, seed=seed)
        logits = trainer.predict_all(net, features, graph, get_device(device))
        probs += torch.softmax(logits.float().cpu(), dim=1)
    probs /= len(seeds)
    if clamp_train:
        train = graph.train_mask
        probs[train] = F.one_hot(graph.y[train], num_classes).float()
    return probs
