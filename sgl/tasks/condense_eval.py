"""Training on a condensed graph, validating and testing on the real one (GCond's protocol).

``sgl train --dataset file:cond.pt`` lands here when the graph carries ``condensed_from``
(written by :func:`sgl.tasks.condense`): each seed trains a fresh zoo model on every synthetic
node, picks the epoch by accuracy on the *real* validation nodes and reports the real test
accuracy. Nothing is selected on the test split.

Example:
    >>> import sgl
    >>> from sgl.models import SGC
    >>> from sgl.tasks import TrainConfig
    >>> from sgl.tasks.condense import condense
    >>> g = sgl.datasets.load("karate")
    >>> small = condense(g, nodes=4, method="kmeans")
    >>> record = run_condensed(lambda: SGC(g.num_features, 2), small, g, [0], TrainConfig(epochs=5, progress=False))
    >>> 0.0 <= record["test_acc"]["mean"] <= 1.0
    True
"""
from __future__ import annotations

import copy
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.models.features import NodeFeatures, to_device
from sgl.tasks.config import TrainConfig
from sgl.tasks.metrics import accuracy, macro_f1
from sgl.tasks.node_classification import Trainer, _split_index
from sgl.tasks.stats import peak_rss_mb, seed_everything, summarize

__all__ = ["fit_condensed", "run_condensed", "check_condensed_source"]


def check_condensed_source(small: Any, real: Any) -> None:
    """The condensed graph must match its source in features and classes."""
    if small.num_features != real.num_features or small.num_classes > real.num_classes:
        raise ConfigError(f"the condensed graph has {small.num_features} features and {small.num_classes} classes, "
                          f"its source {real.num_features} and {real.num_classes}: it was condensed from another "
                          f"dataset")


def _logits(model: Any, features: Any, index: torch.Tensor, trainer: Trainer, device: torch.device) -> torch.Tensor:
    return trainer._predict(model, features, index, device)


def fit_condensed(model: Any, small: Any, real: Any, config: TrainConfig, seed: int = 0,
                  lr_drop_epoch: Optional[int] = None) -> Dict[str, Any]:
    """Train on all nodes of ``small``; choose the epoch on ``real``'s validation nodes; test on ``real``.

    ``lr_drop_epoch``: from that epoch on, a fresh Adam at a tenth of the learning rate (GCond's
    evaluation of a condensed graph: 600 epochs, the drop at 300).
    """
    seed_everything(seed)
    model.reset_parameters()
    device = get_device(config.device)
    model.to(device)
    small_in, real_in = model.precompute(small), model.precompute(real)
    if model.full_batch:
        small_in, real_in = small_in.to(device), real_in.to(device)
    elif isinstance(small_in, torch.Tensor):
        small_in, real_in = NodeFeatures(small_in), NodeFeatures(real_in)
    trainer = Trainer(config)
    val, test = _split_index(real, "val"), _split_index(real, "test")
    y_small = small.y.to(device)
    rows = torch.arange(small.num_nodes)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    best, best_state, stale, start = (-1.0, -1), None, 0, time.perf_counter()
    for epoch in range(config.epochs):
        if epoch == lr_drop_epoch:
            optimizer = torch.optim.Adam(model.parameters(), lr=config.lr / 10, weight_decay=config.weight_decay)
        model.train()
        optimizer.zero_grad()
        out = model(small_in) if model.full_batch else model(to_device(small_in[rows], device))
        F.cross_entropy(out, y_small).backward()
        optimizer.step()
        val_acc = accuracy(_logits(model, real_in, val, trainer, device), real.y[val])
        if val_acc > best[0]:
            best, best_state, stale = (val_acc, epoch), copy.deepcopy(model.state_dict()), 0
        else:
            stale += 1
        if config.patience is not None and stale >= config.patience:
            break
    model.load_state_dict(best_state)
    result: Dict[str, Any] = {"seed": seed, "best_epoch": best[1], "epochs_run": epoch + 1,
                              "train_time_s": time.perf_counter() - start, "train_acc": float("nan")}
    for name, index in (("val", val), ("test", test)):
        logits = _logits(model, real_in, index, trainer, device)
        result[f"{name}_acc"] = accuracy(logits, real.y[index])
        result[f"{name}_macro_f1"] = macro_f1(logits, real.y[index], real.num_classes)
    return result


def run_condensed(factory: Callable[[], Any], small: Any, real: Any, seeds: Sequence[int],
                  config: TrainConfig, lr_drop_epoch: Optional[int] = None) -> Dict[str, Any]:
    """:func:`fit_condensed` per seed; the results part of a run record."""
    check_condensed_source(small, real)
    runs: List[Dict[str, Any]] = [fit_condensed(factory(), small, real, config, seed, lr_drop_epoch)
                                  for seed in seeds]
    record: Dict[str, Any] = {"seeds": list(seeds), "runs": runs, "precompute_time_s": 0.0,
                              "train_time_s": sum(r["train_time_s"] for r in runs), "peak_rss_mb": peak_rss_mb(),
                              "condensed_from": dict(small.condensed_from)}
    for key in ("val_acc", "test_acc", "test_macro_f1"):
        record[key] = summarize([r[key] for r in runs])
    return record
