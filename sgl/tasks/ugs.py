r"""UGS: a unified lottery ticket over edges and weights (Chen et al., ICML 2021).

A full-batch GCN of the zoo is trained with a trainable mask :math:`m_g` (one scalar per
edge, multiplying its weight before GCN normalisation) and masks :math:`m_\theta` on its
weight matrices (``torch.func.functional_call`` swaps in :math:`W \odot m_\theta`), under

.. math:: \mathcal L = \mathrm{CE} + \gamma_1\lVert m_g\rVert_1 + \gamma_2\lVert m_\theta\rVert_1 .

At the best-validation epoch of each round, the smallest-:math:`|m|` ``edge_rate`` of the
remaining edges and ``weight_rate`` of the remaining weights (global over layers) are pruned;
the weights rewind to :math:`\theta_0` and the surviving masks reset to 1. After ``rounds``
rounds the graph sparsity is :math:`1-(1-p_g)^R`. The ticket is scored by retraining
:math:`\theta_0` with the frozen masks on the pruned graph, which is returned as a valid
:class:`~sgl.data.Graph` (directions (i, j) and (j, i) are pruned independently, as in UGS).

Example:
    >>> import sgl
    >>> from sgl.models import GCN
    >>> from sgl.tasks import TrainConfig
    >>> g = sgl.datasets.load("karate")
    >>> out = ugs(lambda: GCN(g.num_features, 2), g, TrainConfig(epochs=5, lr=0.01, progress=False), rounds=1)
    >>> out["graph"].num_edges < g.num_edges
    True
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict

import torch
import torch.nn.functional as F
from torch.func import functional_call

from sgl._checks import check_int, check_real
from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.models.features import FullGraphInput
from sgl.tasks.config import TrainConfig
from sgl.tasks.metrics import accuracy
from sgl.tasks.node_classification import Trainer, _split_index
from sgl.tasks.prune import apply_weight_masks, check_sparsity, magnitude_masks, prunable_weights, weight_sparsity
from sgl.tasks.stats import seed_everything

__all__ = ["ugs"]


def ugs(factory: Callable[[], Any], graph: Any, config: TrainConfig, rounds: int = 1, edge_rate: float = 0.05,
        weight_rate: float = 0.2, gamma_edge: float = 1e-2, gamma_weight: float = 1e-2,
        seed: int = 0) -> Dict[str, Any]:
    """Run UGS; returns ``{"graph", "masks", "test_acc", "val_acc", "graph_sparsity", "weight_sparsity"}``."""
    rounds = check_int(rounds, "rounds", minimum=1)
    check_sparsity(edge_rate, "edge_rate (edges pruned per round)")
    check_sparsity(weight_rate, "weight_rate (weights pruned per round)")
    check_real(gamma_edge, "gamma_edge", 0.0)
    check_real(gamma_weight, "gamma_weight", 0.0)
    model = factory()
    if not getattr(model, "full_batch", False) or not getattr(model, "uses_edge_weight", False):
        raise ConfigError(f"UGS masks the edges inside message passing: it needs a full-batch model that reads edge "
                          f"weights (gcn), got {type(model).__name__}")
    device = get_device(config.device)
    seed_everything(seed)
    model.reset_parameters()
    model.to(device)
    theta0 = copy.deepcopy(model.state_dict())
    y = graph.y.to(device)
    train, val = _split_index(graph, "train"), _split_index(graph, "val")
    keep_edges = torch.ones(graph.num_edges, dtype=torch.bool, device=graph.indices.device)
    weight_masks = {n: torch.ones_like(p, dtype=torch.bool) for n, p in prunable_weights(model).items()}
    for _ in range(rounds):
        model.load_state_dict(theta0)
        pruned = graph.edge_subgraph(keep_edges)
        inputs = model.precompute(pruned).to(device)
        base = inputs.edge_weight if inputs.edge_weight is not None else torch.ones(pruned.num_edges, device=device)
        m_g = torch.ones(pruned.num_edges, device=device, requires_grad=True)
        m_w = {n: torch.ones_like(m, dtype=torch.float32, device=device, requires_grad=True)
               for n, m in weight_masks.items()}
        hard = {n: m.to(device).float() for n, m in weight_masks.items()}
        optimizer = torch.optim.Adam([*model.parameters(), m_g, *m_w.values()], lr=config.lr,
                                     weight_decay=config.weight_decay)
        best, best_masks = -1.0, None
        for _ in range(config.epochs):
            model.train()
            optimizer.zero_grad()
            params = {n: p * m_w[n] * hard[n] if n in m_w else p for n, p in model.named_parameters()}
            logits = functional_call(model, params, (FullGraphInput(inputs.x, inputs.edge_index, base * m_g),))
            loss = F.cross_entropy(logits[train], y[train]) + gamma_edge * m_g.abs().sum() / m_g.numel() \
                + gamma_weight * sum(m.abs().sum() for m in m_w.values()) / sum(m.numel() for m in m_w.values())
            loss.backward()
            optimizer.step()
            val_acc = accuracy(logits.detach()[val], y[val])
            if val_acc > best:
                best = val_acc
                best_masks = (m_g.detach().clone(), {n: (m * hard[n]).detach().clone() for n, m in m_w.items()})
        edge_scores, weight_scores = best_masks
        kept = keep_edges.nonzero().flatten()
        drop = int(round(edge_rate * kept.numel()))
        if drop:
            keep_edges = keep_edges.clone()
            keep_edges[kept[torch.argsort(edge_scores.abs().cpu(), stable=True)[:drop].to(kept.device)]] = False
        total = sum(m.numel() for m in weight_masks.values())
        current = sum(int(m.sum()) for m in weight_masks.values())
        target = 1 - (current * (1 - weight_rate)) / total
        weight_masks = magnitude_masks(weight_scores, min(target, 1 - 1 / total), weight_masks)
    pruned = graph.edge_subgraph(keep_edges)
    ticket = factory()
    apply_weight_masks(ticket, weight_masks)  # fit() re-draws theta_0 from the seed; the hooks mask it
    result = Trainer(config).fit(ticket, ticket.precompute(pruned), pruned, seed=seed)
    return {"graph": pruned, "masks": weight_masks, "test_acc": result["test_acc"], "val_acc": result["val_acc"],
            "graph_sparsity": 1 - pruned.num_edges / graph.num_edges, "weight_sparsity": weight_sparsity(ticket)}
