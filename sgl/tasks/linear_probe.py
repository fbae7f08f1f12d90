"""Linear probing: logistic regression on frozen node embeddings (node classification).

The probe is trained on the training nodes with Adam; the epoch with the best validation
accuracy is kept (never test) and its train/val/test accuracy reported, as in GraphMAE's
evaluation protocol.

Example:
    >>> import torch, sgl
    >>> graph = sgl.datasets.load("karate")
    >>> result = linear_probe(graph.x, graph, epochs=50)
    >>> 0.0 <= result["test_acc"] <= 1.0
    True
"""
from __future__ import annotations

from typing import Any, Dict

import torch
import torch.nn.functional as F

from sgl.errors import ConfigError, FeatureError
from sgl.tasks.metrics import accuracy

__all__ = ["linear_probe"]


def linear_probe(embeddings: torch.Tensor, graph: Any, lr: float = 0.01, weight_decay: float = 1e-4,
                 epochs: int = 300, seed: int = 0, standardize: bool = True) -> Dict[str, Any]:
    """Train a logistic regression on ``embeddings[train]``; metrics at the best validation epoch."""
    if not isinstance(embeddings, torch.Tensor) or embeddings.dim() != 2 or embeddings.size(0) != graph.num_nodes:
        raise FeatureError(f"embeddings must be a [num_nodes={graph.num_nodes}, d] tensor, got "
                           f"{tuple(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__}")
    if epochs < 1 or lr <= 0 or weight_decay < 0:
        raise ConfigError(f"linear probe needs epochs >= 1, lr > 0, weight_decay >= 0; got {epochs}, {lr}, {weight_decay}")
    y = graph.y
    if y is None or y.dim() != 1 or y.is_floating_point():
        raise FeatureError("the linear probe needs integer node labels graph.y")
    masks = {}
    for name in ("train", "val", "test"):
        mask = getattr(graph, f"{name}_mask", None)
        if mask is None or not bool(mask.any()):
            raise FeatureError(f"the linear probe needs graph.{name}_mask with at least one node")
        masks[name] = mask.nonzero().flatten()
    z = embeddings.float()
    if standardize:
        # statistics of the training rows only: nothing about val/test leaks into the probe
        rows = z[masks["train"]]
        std = rows.std(0).clamp_min(1e-6) if rows.size(0) > 1 else torch.ones(z.size(1))
        z = (z - rows.mean(0)) / std
    generator = torch.Generator().manual_seed(seed)
    num_classes = int(y.max()) + 1
    weight = torch.empty(z.size(1), num_classes)
    torch.nn.init.xavier_uniform_(weight, generator=generator)
    weight.requires_grad_(True)
    bias = torch.zeros(num_classes, requires_grad=True)
    optimizer = torch.optim.Adam([weight, bias], lr=lr, weight_decay=weight_decay)
    best = {"val_acc": -1.0}
    train = masks["train"]
    for epoch in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(z[train] @ weight + bias, y[train])
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            logits = z @ weight + bias
            val_acc = accuracy(logits[masks["val"]], y[masks["val"]])
            if val_acc > best["val_acc"]:
                best = {"val_acc": val_acc, "epoch": epoch,
                        "train_acc": accuracy(logits[train], y[train]),
                        "test_acc": accuracy(logits[masks["test"]], y[masks["test"]])}
    return best
