r"""Structure learning as a task: RWGSL's pseudo-label model, and running any structure learner.

The learners of :mod:`sgl.models.gsl` are parameter-free; RWGSL scores candidate edges partly
by how alike the endpoints' pseudo-labels are. :func:`rwgsl_pseudo_labels` trains RWGSL's
built-in base model for them (a logistic regression on SGC features :math:`\hat A^k X`, trained
on the training nodes); :func:`learn_structure` runs a learner, training that base model first
when the learner needs pseudo-labels and the caller has none
(:func:`sgl.tasks.pseudo_labels.model_pseudo_labels` makes stronger ones from zoo models).

Example:
    >>> import sgl
    >>> from sgl.models.gsl import structure_learner
    >>> graph = sgl.datasets.load("karate")
    >>> refined = learn_structure(structure_learner("rwgsl", rounds=1, pseudo_epochs=20), graph)
    >>> refined.num_nodes, refined.is_symmetric()
    (34, True)
"""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F

from sgl.data import Graph
from sgl.errors import FeatureError
from sgl.models.gsl import RWGSL, RWGSLConfig, check_gsl_graph
from sgl.ops import propagate_hops, row_normalize

__all__ = ["rwgsl_pseudo_labels", "learn_structure"]


def rwgsl_pseudo_labels(graph: Graph, config: Optional[RWGSLConfig] = None, seed: int = 0) -> torch.Tensor:
    """Class probabilities ``[N, C]`` of RWGSL's base model (logistic regression on ``A^k X``).

    ``config`` gives ``pseudo_k``, ``pseudo_epochs``, ``pseudo_lr``, ``pseudo_weight_decay`` and
    ``clamp_train_labels``. Trained on the training nodes, the epoch with the best validation
    accuracy is kept (training accuracy when there is no validation set); ``seed`` seeds the
    initial weights.
    """
    cfg = config or RWGSLConfig()
    graph = check_gsl_graph(graph, "RWGSL")
    if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
        raise FeatureError("RWGSL's pseudo-labels need integer node labels graph.y "
                           "(or pass pseudo_labels=[N, C] probabilities to learn())")
    if graph.train_mask is None or not bool(graph.train_mask.any()):
        raise FeatureError("RWGSL's pseudo-label model needs training nodes (graph.train_mask); "
                           "or pass pseudo_labels=[N, C] to learn()")
    y = graph.y
    num_classes = int(y.max()) + 1
    gen = torch.Generator().manual_seed(seed)
    x = propagate_hops(graph, row_normalize(graph.x.float()), cfg.pseudo_k, progress=False)[-1]
    train = graph.train_mask.nonzero().flatten()
    val = graph.val_mask.nonzero().flatten() if graph.val_mask is not None and bool(graph.val_mask.any()) else train
    device = x.device  # the base model trains where the propagated features are
    y, train, val = y.to(device), train.to(device), val.to(device)
    weight = torch.zeros(x.size(1), num_classes)
    torch.nn.init.xavier_uniform_(weight, generator=gen)  # drawn on the host: the same on any device
    weight = weight.to(device).requires_grad_(True)
    bias = torch.zeros(num_classes, device=device, requires_grad=True)
    opt = torch.optim.Adam([weight, bias], lr=cfg.pseudo_lr, weight_decay=cfg.pseudo_weight_decay)
    best, best_params = -1.0, None
    x_val, y_val = x[val], y[val]
    for _ in range(cfg.pseudo_epochs):
        opt.zero_grad()
        loss = F.cross_entropy(x[train] @ weight + bias, y[train])
        loss.backward()
        opt.step()
        with torch.no_grad():
            acc = float(((x_val @ weight + bias).argmax(1) == y_val).float().mean())
            if acc > best:
                best, best_params = acc, (weight.detach().clone(), bias.detach().clone())
    with torch.no_grad():
        probs = torch.softmax(x @ best_params[0] + best_params[1], dim=1)
    if cfg.clamp_train_labels:
        probs[train] = F.one_hot(y[train], num_classes).float()
    return probs


def learn_structure(learner: Any, graph: Graph, pseudo_labels: Optional[torch.Tensor] = None) -> Graph:
    """``learner.learn(graph, pseudo_labels)``, with RWGSL's base-model pseudo-labels when none are given.

    ``learner`` is any structure learner of :mod:`sgl.models.gsl` (e.g. from
    :func:`~sgl.models.gsl.structure_learner`); the refined graph is returned and the
    learner's :attr:`history` holds its statistics.
    """
    if pseudo_labels is None and isinstance(learner, RWGSL):
        pseudo_labels = rwgsl_pseudo_labels(graph, learner.config, learner.seed)
    return learner.learn(graph, pseudo_labels=pseudo_labels)
