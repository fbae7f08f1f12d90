"""Linear probing: logistic regression on frozen node embeddings (node classification).

The probe is trained on the training nodes with Adam; the epoch with the best validation
accuracy is kept (never test) and its train/val/test accuracy reported, as in GraphMAE's
evaluation protocol. :func:`run_linear_probe` is the whole evaluation of a self-supervised
model: per seed, pre-train a fresh model (:func:`~sgl.tasks.pretrain`), embed every node,
probe (what ``sgl train --model gcmae --dataset cora`` runs).

With ``z`` the (optionally standardised) embeddings, the probe is softmax regression
``p(y | z_i) = softmax(z_i W + b)`` minimising the cross-entropy over the training nodes plus
``weight_decay * ||W||^2`` (Adam's L2 term).

Example:
    >>> import torch, sgl
    >>> graph = sgl.datasets.load("karate")
    >>> result = linear_probe(graph.x, graph, epochs=50)
    >>> 0.0 <= result["test_acc"] <= 1.0
    True
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Sequence

import torch
import torch.nn.functional as F

from sgl.errors import ConfigError, FeatureError
from sgl.tasks.metrics import accuracy
from sgl.tasks.ssl_pretraining import pretrain
from sgl.tasks.stats import summarize

__all__ = ["linear_probe", "run_linear_probe"]


def _probe_masks(graph: Any) -> Dict[str, torch.Tensor]:
    """Indices of the train/val/test nodes; integer labels ``graph.y`` are required."""
    y = graph.y
    if y is None or y.dim() != 1 or y.is_floating_point():
        raise FeatureError("the linear probe needs integer node labels graph.y")
    masks = {}
    for name in ("train", "val", "test"):
        mask = getattr(graph, f"{name}_mask", None)
        if mask is None or not bool(mask.any()):
            raise FeatureError(f"the linear probe needs graph.{name}_mask with at least one node")
        masks[name] = mask.nonzero().flatten()
    return masks


def linear_probe(embeddings: torch.Tensor, graph: Any, lr: float = 0.01, weight_decay: float = 1e-4,
                 epochs: int = 300, seed: int = 0, standardize: bool = True) -> Dict[str, Any]:
    """Train a logistic regression on ``embeddings[train]``; metrics at the best validation epoch."""
    if not isinstance(embeddings, torch.Tensor) or embeddings.dim() != 2 or embeddings.size(0) != graph.num_nodes:
        raise FeatureError(f"embeddings must be a [num_nodes={graph.num_nodes}, d] tensor, got "
                           f"{tuple(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__}")
    _check_probe_settings(lr, weight_decay, epochs)
    y = graph.y
    masks = _probe_masks(graph)
    z = embeddings.float()
    device = z.device  # the probe trains where the embeddings are
    y, masks = y.to(device), {name: index.to(device) for name, index in masks.items()}
    if standardize:
        # statistics of the training rows only: nothing about val/test leaks into the probe
        rows = z[masks["train"]]
        std = rows.std(0).clamp_min(1e-6) if rows.size(0) > 1 else torch.ones(z.size(1), device=device)
        z = (z - rows.mean(0)) / std
    generator = torch.Generator().manual_seed(seed)
    num_classes = int(y.max()) + 1
    weight = torch.empty(z.size(1), num_classes)
    torch.nn.init.xavier_uniform_(weight, generator=generator)  # drawn on the host: the same on any device
    weight = weight.to(device).requires_grad_(True)
    bias = torch.zeros(num_classes, device=device, requires_grad=True)
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


def _check_probe_settings(lr: float, weight_decay: float, epochs: int) -> None:
    if epochs < 1 or lr <= 0 or weight_decay < 0:
        raise ConfigError(f"linear probe needs epochs >= 1, lr > 0, weight_decay >= 0; got {epochs}, {lr}, {weight_decay}")


def run_linear_probe(model_factory: Callable[[], Any], graph: Any, seeds: Sequence[int] = (0,), lr: float = 0.01,
                     weight_decay: float = 1e-4, epochs: int = 400, standardize: bool = False,
                     progress: bool = False) -> Dict[str, Any]:
    """Pre-train one fresh self-supervised model per seed, then :func:`linear_probe` its frozen
    embeddings (seeded with the same seed). Returns the run record: ``runs`` (per seed: probe
    accuracies, best epoch, pre-training time, final loss) and mean/std of each accuracy.

    The defaults are the official GCMAE/GraphMAE protocol (raw embeddings, Adam lr 0.01,
    weight decay 1e-4, 400 epochs, best-validation epoch). The labels and masks are checked
    before any pre-training.

    Example:
        >>> import sgl
        >>> from sgl.models.ssl import build_ssl_model
        >>> graph = sgl.datasets.load("karate")
        >>> record = run_linear_probe(lambda: build_ssl_model("gae", graph.num_features, hidden=8, epochs=3),
        ...                           graph, seeds=[0, 1], epochs=20)
        >>> len(record["runs"]), sorted(record["test_acc"])
        (2, ['mean', 'std'])
    """
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    _check_probe_settings(lr, weight_decay, epochs)
    _probe_masks(graph)
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        model = model_factory()
        start = time.perf_counter()
        history = pretrain(model, graph, seed=seed, progress=progress)
        fit_time = time.perf_counter() - start
        probe = linear_probe(model.embed(graph), graph, lr=lr, weight_decay=weight_decay, epochs=epochs, seed=seed,
                             standardize=standardize)
        runs.append({"seed": seed, "fit_time_s": fit_time, "final_loss": history[-1]["loss"], **probe})
    record: Dict[str, Any] = {"seeds": seeds, "runs": runs}
    for key in ("test_acc", "val_acc", "train_acc", "fit_time_s"):
        record[key] = summarize([r[key] for r in runs])
    return record
