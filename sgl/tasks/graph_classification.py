"""Graph classification with self-supervised node embeddings (TU datasets, 10-fold).

A self-supervised model is pre-trained on the disjoint union of all graphs of the
collection (:func:`batch_graphs`; labels are never seen), node embeddings are pooled per
graph (:func:`pool`: mean, sum or max), and a classifier is scored by stratified k-fold
cross-validation (:func:`evaluate_graph_embeddings`): an SVM whose ``C`` is chosen by an
inner 5-fold grid search on each training fold (GraphMAE's protocol), or a logistic
regression.

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.datasets import GraphDataset
    >>> g1 = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3))
    >>> g2 = Graph.from_edge_index(torch.tensor([[0], [1]]), num_nodes=3, x=torch.zeros(3, 3))
    >>> union, graph_id = batch_graphs(GraphDataset([g1, g2], torch.tensor([0, 1])))
    >>> union.num_nodes, union.edge_index.tolist(), graph_id.tolist()
    (5, [[1, 0, 2], [0, 1, 3]], [0, 0, 1, 1, 1])
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
import torch

from sgl.data import Graph
from sgl.errors import ConfigError, DatasetError, FeatureError
from sgl.tasks.ssl_pretraining import pretrain

__all__ = ["batch_graphs", "pool", "evaluate_graph_embeddings", "run_graph_classification"]


def batch_graphs(dataset: Sequence[Graph]) -> Tuple[Graph, torch.Tensor]:
    """Disjoint union of the graphs (node ids offset) and the graph id of every node."""
    graphs = list(dataset)
    if not graphs:
        raise DatasetError("the graph collection is empty")
    missing = [i for i, g in enumerate(graphs) if g.x is None]
    if missing:
        raise FeatureError(f"{len(missing)} graph(s) have no node features (first: graph {missing[0]}); "
                           f"self-supervised encoders need x (e.g. one-hot degrees)")
    sizes = torch.tensor([g.num_nodes for g in graphs])
    offsets = torch.cumsum(sizes, 0) - sizes
    edge_index = torch.cat([g.edge_index + off for g, off in zip(graphs, offsets.tolist())], dim=1)
    x = torch.cat([g.x.float() for g in graphs])
    union = Graph.from_edge_index(edge_index, num_nodes=int(sizes.sum()), x=x)
    return union, torch.repeat_interleave(torch.arange(len(graphs)), sizes)


def pool(embeddings: torch.Tensor, graph_id: torch.Tensor, num_graphs: int, how: str = "mean") -> torch.Tensor:
    """Per-graph readout ``[num_graphs, d]`` of node embeddings (``mean``, ``sum`` or ``max``).

    Example:
        >>> import torch
        >>> pool(torch.tensor([[1.0], [3.0], [5.0]]), torch.tensor([0, 0, 1]), 2, "mean").tolist()
        [[2.0], [5.0]]
    """
    if how not in ("mean", "sum", "max"):
        raise ConfigError(f"pooling must be 'mean', 'sum' or 'max', got {how!r}")
    index = graph_id.view(-1, 1).expand_as(embeddings)
    out = torch.zeros(num_graphs, embeddings.size(1), dtype=embeddings.dtype, device=embeddings.device)
    reduce = {"mean": "mean", "sum": "sum", "max": "amax"}[how]
    return out.scatter_reduce(0, index, embeddings, reduce=reduce, include_self=False)


def evaluate_graph_embeddings(features: torch.Tensor, labels: torch.Tensor, folds: int = 10, seed: int = 0,
                              classifier: str = "svm", n_jobs: Any = None) -> Dict[str, Any]:
    """Stratified ``folds``-fold accuracy of a classifier on graph embeddings.

    ``n_jobs`` parallelises the SVM's inner grid search (scikit-learn's meaning).

    Returns ``{"acc": mean, "std": std over folds, "folds": [...]}``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    if classifier not in ("svm", "logreg"):
        raise ConfigError(f"classifier must be 'svm' or 'logreg', got {classifier!r}")
    x = features.double().cpu().numpy()  # scikit-learn: host
    y = labels.cpu().numpy()
    counts = np.bincount(y)
    if folds < 2 or counts[counts > 0].min() < folds:
        raise ConfigError(f"{folds}-fold cross-validation needs folds >= 2 and at least {folds} graphs per "
                          f"class; class sizes are {counts.tolist()}")
    accs = []
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(x, y):
        if classifier == "svm":
            model = GridSearchCV(make_pipeline(StandardScaler(), SVC(random_state=seed)),
                                 {"svc__C": [1e-3, 1e-2, 1e-1, 1, 10]}, cv=5, n_jobs=n_jobs)
        else:
            model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        model.fit(x[train], y[train])
        accs.append(float((model.predict(x[test]) == y[test]).mean()))
    return {"acc": float(np.mean(accs)), "std": float(np.std(accs)), "folds": accs}


def run_graph_classification(model_factory: Callable[[], Any], dataset: Any, seeds: Sequence[int] = (0,),
                             folds: int = 10, pooling: str = "mean", classifier: str = "svm",
                             progress: bool = False) -> Dict[str, Any]:
    """Per seed: pre-train a fresh model on the union graph, pool, ``folds``-fold accuracy."""
    from sgl.tasks.stats import summarize

    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    labels = getattr(dataset, "labels", None)
    if labels is None or labels.dim() != 1 or labels.is_floating_point():
        raise DatasetError("graph classification needs a GraphDataset with one integer label per graph")
    union, graph_id = batch_graphs(dataset)
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        model = model_factory()
        start = time.perf_counter()
        pretrain(model, union, seed=seed, progress=progress)
        fit_time = time.perf_counter() - start
        pooled = pool(model.embed(union), graph_id, len(dataset), pooling)
        result = evaluate_graph_embeddings(pooled, labels, folds, seed=seed, classifier=classifier)
        runs.append({"seed": seed, "fit_time_s": fit_time, **result})
    record: Dict[str, Any] = {"seeds": seeds, "runs": runs, "acc": summarize([r["acc"] for r in runs]),
                              "fold_std": float(np.mean([r["std"] for r in runs]))}
    return record
