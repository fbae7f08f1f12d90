"""Train one design and measure every objective (see :mod:`sgl.search.objectives`).

Example:
    >>> import sgl
    >>> from sgl.search import DesignSpace, DesignEvaluator
    >>> from sgl.tasks import TrainConfig
    >>> graph = sgl.datasets.load("karate")
    >>> space = DesignSpace()
    >>> evaluator = DesignEvaluator(graph, space, TrainConfig(lr=0.01, epochs=5, progress=False))
    >>> metrics = evaluator.evaluate(space.design_at(0))
    >>> sorted(metrics)
    ['accuracy', 'epoch_time', 'epochs_run', 'latency', 'memory', 'params', 'train_time']
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any, Dict, Mapping, Optional

import torch

from sgl.device import get_device
from sgl.models import SGAPConfig, SGAPModel
from sgl.models.features import NodeFeatures
from sgl.search.cache import HopCache
from sgl.search.config import search_train_config
from sgl.search.objectives import MemoryMeter
from sgl.search.space import DesignSpace
from sgl.tasks import Trainer
from sgl.tasks.config import TrainConfig

__all__ = ["DesignEvaluator"]


class DesignEvaluator:
    """Builds, trains and measures designs of ``space`` on ``graph``.

    Args:
        graph: a graph with features, labels and train/val/test masks.
        space (DesignSpace): the space the designs come from.
        train_config (TrainConfig): optimisation settings shared by all trials
            (default :func:`~sgl.search.config.search_train_config`).
        cache (HopCache, optional): shared precomputed hops (one is made if omitted).
        latency_repeats (int): inference is timed this many times; the median is reported.
    """

    def __init__(self, graph: Any, space: DesignSpace, train_config: Optional[TrainConfig] = None,
                 cache: Optional[HopCache] = None, latency_repeats: int = 3) -> None:
        self.graph = graph
        self.space = space
        self.train_config = train_config or search_train_config()
        self.cache = cache or HopCache(graph)
        self.latency_repeats = max(1, int(latency_repeats))

    def build(self, design: Mapping[str, Any]) -> SGAPModel:
        config = SGAPConfig(**self.space.to_model_config(design))
        return SGAPModel(self.graph.num_features, self.graph.num_classes, config)

    def evaluate(self, design: Mapping[str, Any], seed: int = 0) -> Dict[str, float]:
        """Train ``design`` once (seeded) and return its measured objectives."""
        model = self.build(design)
        cfg = model.config
        trainer = Trainer(replace(self.train_config, progress=False))
        device = get_device(trainer.config.device)
        with MemoryMeter(device) as meter:
            hops, precompute_s = self.cache.get(cfg.to_dict(), cfg.k)
            start = time.perf_counter()
            features = NodeFeatures(hops) if model.message_op.learnable else NodeFeatures(model.message_op(hops))
            precompute_s += time.perf_counter() - start
            result = trainer.fit(model, features, self.graph, seed=seed)
            latencies = []
            for _ in range(self.latency_repeats):
                start = time.perf_counter()
                trainer.predict_all(model, features, self.graph, device)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                latencies.append(time.perf_counter() - start)
        return {
            "accuracy": float(result["val_acc"]),
            "epoch_time": result["train_time_s"] / result["epochs_run"],
            "train_time": precompute_s + result["train_time_s"],
            "latency": statistics.median(latencies),
            "memory": meter.peak_mb,
            "epochs_run": float(result["epochs_run"]),
            "params": float(sum(p.numel() for p in model.parameters())),
        }
