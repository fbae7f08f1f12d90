"""Node classification over seeds: precompute once, train one fresh model per seed.

:func:`run_node_classification` repeats :class:`~sgl.tasks.Trainer` (or GAMLP's RLU stages,
:func:`~sgl.tasks.rlu.train_rlu`) over seeds and returns a JSON-serialisable record.

Example:
    >>> import sgl
    >>> from sgl.models import SGC
    >>> from sgl.tasks import TrainConfig
    >>> graph = sgl.datasets.load("karate")
    >>> record = run_node_classification(lambda: SGC(graph.num_features, graph.num_classes), graph,
    ...                                  seeds=[0, 1], train_config=TrainConfig(epochs=20, progress=False))
    >>> 0.0 <= record["test_acc"]["mean"] <= 1.0
    True
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from sgl.errors import ConfigError
from sgl.tasks.config import TrainConfig
from sgl.tasks.node_classification import Trainer
from sgl.tasks.rlu import train_rlu
from sgl.tasks.stats import peak_rss_mb, seed_everything, summarize

__all__ = ["run_node_classification"]


def run_node_classification(model_factory: Callable[[], torch.nn.Module], graph: Any,
                            seeds: Sequence[int] = (0,), train_config: Optional[TrainConfig] = None,
                            cache_dir: Optional[str] = None, rlu_config: Any = None) -> Dict[str, Any]:
    """Precompute once, then train one fresh model per seed; returns the run record.

    The record holds per-seed results, mean/std of each metric, precompute and training
    time, and the process's peak resident memory. With ``rlu_config`` (an
    :class:`sgl.tasks.rlu.RLUConfig`) every seed runs GAMLP's multi-stage RLU training.
    """
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    trainer = Trainer(train_config)
    runs: List[Dict[str, Any]] = []
    start = time.perf_counter()
    model = model_factory()
    features = model.precompute(graph, cache_dir=cache_dir, progress=trainer.config.progress)
    precompute_time = time.perf_counter() - start
    for seed in seeds:
        seed_everything(seed)
        if rlu_config is None:
            runs.append(trainer.fit(model_factory(), features, graph, seed=seed))
        else:
            runs.append(train_rlu(model_factory, graph, trainer.config, rlu_config, seed=seed, features=features))
    record: Dict[str, Any] = {
        "seeds": seeds,
        "runs": runs,
        "precompute_time_s": precompute_time,
        "train_time_s": sum(r["train_time_s"] if "stages" not in r else sum(s["train_time_s"] for s in r["stages"])
                            for r in runs),
        "peak_rss_mb": peak_rss_mb(),
    }
    for key in ("train_acc", "val_acc", "test_acc", "test_macro_f1") + (("ogb_test_acc",) if "ogb_test_acc" in runs[0] else ()):
        record[key] = summarize([r[key] for r in runs])
    return record
