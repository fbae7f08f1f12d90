"""Node clustering on self-supervised embeddings: k-means, then NMI / ARI / ACC.

ACC matches clusters to classes one-to-one with the Hungarian algorithm
(:func:`scipy.optimize.linear_sum_assignment` on the contingency table) before counting
agreements. NMI and ARI come from scikit-learn.

Example:
    >>> import torch
    >>> cluster_metrics(torch.tensor([1, 1, 0, 0, 2]), torch.tensor([0, 0, 1, 1, 1]))["acc"]
    0.8
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Sequence

import numpy as np
import torch

from sgl.errors import ConfigError, FeatureError
from sgl.tasks.ssl_pretraining import pretrain
from sgl.tasks.stats import summarize  # noqa: F401 -- one summary for every task

__all__ = ["clustering_accuracy", "cluster_metrics", "kmeans", "run_clustering"]


def _labels(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values.cpu() if isinstance(values, torch.Tensor) else values)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise FeatureError(f"{name} must be a 1-D integer array, got shape {array.shape} dtype {array.dtype}")
    if array.size and array.min() < 0:
        raise FeatureError(f"{name} must be >= 0 (drop unlabeled nodes first), got min {array.min()}")
    return array


def clustering_accuracy(pred: Any, target: Any) -> float:
    """Accuracy under the best one-to-one cluster-to-class matching (Hungarian algorithm).

    Example:
        >>> clustering_accuracy([1, 1, 0, 0], [0, 0, 1, 1])
        1.0
    """
    from scipy.optimize import linear_sum_assignment

    pred, target = _labels(pred, "pred"), _labels(target, "target")
    if pred.size != target.size or pred.size == 0:
        raise FeatureError(f"pred and target must be non-empty and of equal length, got {pred.size} and {target.size}")
    k = int(max(pred.max(), target.max())) + 1
    table = np.zeros((k, k), dtype=np.int64)
    np.add.at(table, (pred, target), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / pred.size)


def cluster_metrics(pred: Any, target: Any) -> Dict[str, float]:
    """``{"nmi", "ari", "acc"}`` of predicted clusters against the true classes."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    p, t = _labels(pred, "pred"), _labels(target, "target")
    return {"nmi": float(normalized_mutual_info_score(t, p)), "ari": float(adjusted_rand_score(t, p)),
            "acc": clustering_accuracy(p, t)}


def kmeans(embeddings: torch.Tensor, num_clusters: int, seed: int = 0, n_init: int = 10) -> torch.Tensor:
    """k-means (scikit-learn, k-means++ init, ``n_init`` restarts) on L2-normalised rows."""
    from sklearn.cluster import KMeans

    if not isinstance(embeddings, torch.Tensor) or embeddings.dim() != 2:
        raise FeatureError(f"embeddings must be a 2-D tensor, got {type(embeddings).__name__}")
    if not 1 <= num_clusters <= embeddings.size(0):
        raise ConfigError(f"num_clusters must be in [1, {embeddings.size(0)}], got {num_clusters}")
    z = torch.nn.functional.normalize(embeddings.float(), dim=1).cpu().numpy()  # scikit-learn: host
    model = KMeans(n_clusters=num_clusters, n_init=n_init, random_state=seed)
    return torch.from_numpy(model.fit_predict(z).astype(np.int64))


def run_clustering(model_factory: Callable[[], Any], graph: Any, seeds: Sequence[int] = (0,),
                   n_init: int = 10, progress: bool = False) -> Dict[str, Any]:
    """Pre-train one fresh self-supervised model per seed, k-means its embeddings with
    ``num_classes`` clusters, and score against ``graph.y``. Returns the run record."""
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    if graph.y is None or graph.y.dim() != 1 or graph.y.is_floating_point():
        raise FeatureError("clustering is scored against integer node labels graph.y; the graph has none")
    labeled = graph.y >= 0
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        model = model_factory()
        start = time.perf_counter()
        pretrain(model, graph, seed=seed, progress=progress)
        fit_time = time.perf_counter() - start
        emb = model.embed(graph)[labeled]
        pred = kmeans(emb, graph.num_classes, seed=seed, n_init=n_init)
        runs.append({"seed": seed, "fit_time_s": fit_time, **cluster_metrics(pred, graph.y[labeled])})
    record: Dict[str, Any] = {"seeds": seeds, "runs": runs}
    for key in ("nmi", "ari", "acc"):
        record[key] = summarize([r[key] for r in runs])
    return record
