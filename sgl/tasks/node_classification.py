"""Node classification on precomputed features: mini-batch training with early stopping.

The :class:`Trainer` trains the trainable part of an SGAP model on rows of its
precomputed features, picks the epoch with the best *validation* accuracy (never test),
and reports train/val/test accuracy and macro-F1 at that epoch. :func:`run_node_classification`
repeats it over seeds and returns a JSON-serialisable record.

Example:
    >>> import sgl
    >>> from sgl.models import SGC
    >>> from sgl.tasks import Trainer, TrainConfig
    >>> graph = sgl.datasets.load("karate")
    >>> model = SGC(graph.num_features, graph.num_classes)
    >>> result = Trainer(TrainConfig(epochs=50, progress=False)).fit(model, model.precompute(graph), graph)
    >>> 0.0 <= result["test_acc"] <= 1.0
    True
"""
from __future__ import annotations

import copy
import math
import platform
import resource
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from sgl.device import get_device
from sgl.errors import ConfigError, FeatureError
from sgl.tasks.metrics import accuracy, macro_f1

__all__ = ["TrainConfig", "Trainer", "run_node_classification", "summarize", "seed_everything"]


def seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class TrainConfig:
    """Optimisation settings (defaults: SGC's Cora setting, lr 0.2 / 100 epochs / Adam).

    ``batch_size=None`` trains on all training nodes at once; ``patience`` stops after that
    many epochs without a better validation accuracy (``None`` = run all epochs).
    """

    lr: float = 0.2
    weight_decay: float = 1.3e-5
    epochs: int = 100
    batch_size: Optional[int] = None
    eval_batch_size: int = 65536
    patience: Optional[int] = None
    device: Optional[str] = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.weight_decay < 0:
            raise ConfigError(f"need lr > 0 and weight_decay >= 0, got lr={self.lr}, weight_decay={self.weight_decay}")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ConfigError(f"epochs must be a positive integer, got {self.epochs!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be positive or None (full batch), got {self.batch_size}")
        if self.patience is not None and self.patience < 1:
            raise ConfigError(f"patience must be positive or None, got {self.patience}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _split_index(graph: Any, name: str) -> torch.Tensor:
    mask = getattr(graph, f"{name}_mask", None)
    if mask is None or not bool(mask.any()):
        raise FeatureError(
            f"the graph has no {name} nodes ({name}_mask missing or empty); node classification needs "
            f"train/val/test masks — set graph.{name}_mask or load a dataset with a split"
        )
    return mask.nonzero().flatten()


class Trainer:
    """Train a model's trainable part on precomputed node features.

    Args:
        config (TrainConfig): optimisation settings.
    """

    def __init__(self, config: Optional[TrainConfig] = None) -> None:
        self.config = config or TrainConfig()

    @torch.no_grad()
    def _predict(self, model: torch.nn.Module, features: torch.Tensor, index: torch.Tensor,
                 device: torch.device) -> torch.Tensor:
        model.eval()
        chunks = [model(features[index[i:i + self.config.eval_batch_size]].to(device)).cpu()
                  for i in range(0, index.numel(), self.config.eval_batch_size)]
        return torch.cat(chunks)

    def fit(self, model: torch.nn.Module, features: torch.Tensor, graph: Any, seed: int = 0) -> Dict[str, Any]:
        """Train ``model`` on ``features[train]``; return metrics at the best validation epoch."""
        if features.dim() != 2 or features.size(0) != graph.num_nodes:
            raise FeatureError(
                f"precomputed features have shape {tuple(features.shape)}; expected [{graph.num_nodes}, d]"
            )
        if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
            raise FeatureError("node classification needs integer labels graph.y of shape [num_nodes]")
        cfg = self.config
        seed_everything(seed)
        if hasattr(model, "reset_parameters"):
            model.reset_parameters()
        device = get_device(cfg.device)
        model.to(device)
        y = graph.y
        train, val, test = (_split_index(graph, s) for s in ("train", "val", "test"))
        if bool((y[train] < 0).any()):
            raise FeatureError("some training nodes have label -1 (unlabeled); fix the train mask")
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        batch = cfg.batch_size or train.numel()
        generator = torch.Generator().manual_seed(seed)

        best = {"val_acc": -1.0, "epoch": -1}
        best_state = None
        stale = 0
        bar = None
        if cfg.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.epochs, desc=f"train seed {seed}", leave=False)
        start = time.perf_counter()
        for epoch in range(cfg.epochs):
            model.train()
            order = train[torch.randperm(train.numel(), generator=generator)]
            total_loss = 0.0
            for i in range(0, order.numel(), batch):
                idx = order[i:i + batch]
                optimizer.zero_grad()
                loss = F.cross_entropy(model(features[idx].to(device)), y[idx].to(device))
                loss.backward()
                optimizer.step()
                total_loss += float(loss.detach()) * idx.numel()
            if not math.isfinite(total_loss):
                raise FeatureError(f"training diverged (loss {total_loss}) at epoch {epoch}; lower the learning rate")
            val_acc = accuracy(self._predict(model, features, val, device), y[val])
            if val_acc > best["val_acc"]:
                best = {"val_acc": val_acc, "epoch": epoch}
                best_state = copy.deepcopy(model.state_dict())
                stale = 0
            else:
                stale += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{total_loss / order.numel():.4f}", val=f"{val_acc:.4f}")
            if cfg.patience is not None and stale >= cfg.patience:
                break
        train_time = time.perf_counter() - start
        if bar is not None:
            bar.close()
        model.load_state_dict(best_state)
        result: Dict[str, Any] = {"seed": seed, "best_epoch": best["epoch"], "epochs_run": epoch + 1,
                                  "train_time_s": train_time}
        for name, index in (("train", train), ("val", val), ("test", test)):
            logits = self._predict(model, features, index, device)
            result[f"{name}_acc"] = accuracy(logits, y[index])
            result[f"{name}_macro_f1"] = macro_f1(logits, y[index], graph.num_classes)
        evaluator = _ogb_evaluator(graph)
        if evaluator is not None:
            logits = self._predict(model, features, test, device)
            result["ogb_test_acc"] = evaluator(logits.argmax(1), y[test])
        return result


def _ogb_evaluator(graph: Any) -> Optional[Callable[[torch.Tensor, torch.Tensor], float]]:
    """OGB's official ``Evaluator`` for graphs loaded from an OGB dataset (``graph.ogb_name``)."""
    name = getattr(graph, "ogb_name", None)
    if not name:
        return None
    try:
        from ogb.nodeproppred import Evaluator
    except ImportError:
        return None
    evaluator = Evaluator(name=name)

    def evaluate(pred: torch.Tensor, target: torch.Tensor) -> float:
        out = evaluator.eval({"y_true": target.view(-1, 1), "y_pred": pred.view(-1, 1)})
        return float(out["acc"])

    return evaluate


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if platform.system() == "Darwin" else peak / 1024


def summarize(values: Sequence[float]) -> Dict[str, float]:
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values) if len(values) > 1 else 0.0}


def run_node_classification(model_factory: Callable[[], torch.nn.Module], graph: Any,
                            seeds: Sequence[int] = (0,), train_config: Optional[TrainConfig] = None,
                            cache_dir: Optional[str] = None) -> Dict[str, Any]:
    """Precompute once, then train one fresh model per seed; returns the run record.

    The record holds per-seed results, mean/std of each metric, precompute and training
    time, and the process's peak resident memory.
    """
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    trainer = Trainer(train_config)
    model = model_factory()
    start = time.perf_counter()
    features = model.precompute(graph, cache_dir=cache_dir, progress=trainer.config.progress)
    precompute_time = time.perf_counter() - start
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        seed_everything(seed)
        runs.append(trainer.fit(model_factory(), features, graph, seed=seed))
    record: Dict[str, Any] = {
        "seeds": list(seeds),
        "runs": runs,
        "precompute_time_s": precompute_time,
        "train_time_s": sum(r["train_time_s"] for r in runs),
        "peak_rss_mb": _peak_rss_mb(),
    }
    for key in ("train_acc", "val_acc", "test_acc", "test_macro_f1") + (("ogb_test_acc",) if "ogb_test_acc" in runs[0] else ()):
        record[key] = summarize([r[key] for r in runs])
    return record
