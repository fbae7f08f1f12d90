"""Link prediction: the edge split, negatives, and evaluation of self-supervised embeddings.

:func:`split_edges` holds out a fraction of the *undirected* edges (both directions leave
the training graph together) for validation and test, each with ``neg_ratio`` times as many
uniformly sampled non-edges as negatives (never a self-loop, never an edge of the full
graph, no duplicates): the semantics of PyG's ``RandomLinkSplit(is_undirected=True)``, whose
sizes ``rounding="floor"`` reproduces exactly. Unlike ``RandomLinkSplit``, the test set is
evaluated on the training graph too (PyG adds the validation edges to the test graph).

:func:`run_link_prediction` evaluates a self-supervised model: pre-trained on the training
graph only, a pair scored by the dot product of the L2-normalised embeddings (cosine), AUC /
AP from scikit-learn. Supervised encoders with a trained decoder are in
:mod:`sgl.tasks.link_supervised`.

Example:
    >>> import sgl
    >>> graph = sgl.datasets.load("karate")
    >>> split = split_edges(graph, val_ratio=0.1, test_ratio=0.2, seed=0)
    >>> split.test_pos.shape, split.test_neg.shape, split.train_graph.num_edges
    (torch.Size([2, 16]), torch.Size([2, 16]), 108)
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Sequence

import torch
import torch.nn.functional as F

from sgl.data import EdgeSplit, Graph
from sgl.errors import ConfigError, GraphError
from sgl.tasks.ssl_pretraining import pretrain

__all__ = ["EdgeSplit", "split_edges", "sample_negatives", "link_scores", "link_metrics",
           "run_link_prediction"]


def _undirected_pairs(graph: Graph) -> torch.Tensor:
    """Unique ``u < v`` pairs of the graph's edges, ``[2, m]`` sorted."""
    src, dst = graph.edge_index
    lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
    keep = lo != hi
    n = graph.num_nodes
    keys = torch.unique(lo[keep] * n + hi[keep])
    return torch.stack([keys // n, keys % n])


def sample_negatives(num_nodes: int, count: int, forbidden: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``count`` distinct pairs ``u < v`` whose keys ``u * N + v`` are not in sorted ``forbidden``.

    Rejection sampling in vectorized rounds (oversampling by 2x); raises
    :class:`~sgl.errors.GraphError` when the graph is too dense to find enough non-edges.
    """
    n = num_nodes
    available = n * (n - 1) // 2 - forbidden.numel()
    if count > available:
        raise GraphError(f"need {count} negative pairs but the graph has only {available} non-edges; "
                         f"lower the held-out ratios")
    found = torch.empty(0, dtype=torch.long)
    for _ in range(50):
        need = count - found.numel()
        if need <= 0:
            break
        draw = torch.randint(0, n, (2, 2 * need + 16), generator=generator)
        lo, hi = torch.minimum(draw[0], draw[1]), torch.maximum(draw[0], draw[1])
        keys = (lo * n + hi)[lo != hi]
        if forbidden.numel():
            pos = torch.searchsorted(forbidden, keys).clamp(max=forbidden.numel() - 1)
            keys = keys[forbidden[pos] != keys]
        merged = torch.cat([found, keys])
        # keep first occurrences so earlier draws stay and the sample stays uniform
        uniq, inverse = torch.unique(merged, return_inverse=True)
        first = torch.full((uniq.numel(),), merged.numel(), dtype=torch.long).scatter_reduce(
            0, inverse, torch.arange(merged.numel()), reduce="amin")
        found = merged[torch.sort(first).values]
    if found.numel() < count:
        raise GraphError(f"could not sample {count} distinct non-edges; the graph is nearly complete")
    found = found[:count]
    return torch.stack([found // n, found % n])


def split_edges(graph: Graph, val_ratio: float = 0.05, test_ratio: float = 0.1, seed: int = 0,
                neg_ratio: float = 1.0, rounding: str = "nearest") -> EdgeSplit:
    """Hold out ``val_ratio`` / ``test_ratio`` of the undirected edges with ``neg_ratio`` times as
    many negatives (``int(neg_ratio * positives)`` per set, as PyG).

    ``rounding``: how a ratio becomes an edge count: ``"floor"`` is PyG's
    ``int(ratio * m)`` (supervised link prediction uses it); ``"nearest"``, ``round(ratio * m)``,
    is the default so that earlier self-supervised records and benchmarks replay.

    Example:
        >>> import sgl
        >>> graph = sgl.datasets.load("karate")        # 78 undirected edges
        >>> split = split_edges(graph, 0.1, 0.2, seed=0, neg_ratio=2.0, rounding="floor")
        >>> split.val_pos.size(1), split.test_pos.size(1), split.test_neg.size(1), split.train_pos.size(1)
        (7, 15, 30, 56)
    """
    if not isinstance(graph, Graph):
        raise GraphError(f"split_edges takes an sgl.data.Graph, got {type(graph).__name__}")
    for name, value in (("val_ratio", val_ratio), ("test_ratio", test_ratio)):
        if not 0.0 <= float(value) < 1.0:
            raise ConfigError(f"{name} must be in [0, 1), got {value}")
    if test_ratio == 0 or val_ratio + test_ratio >= 1.0:
        raise ConfigError(f"need test_ratio > 0 and val_ratio + test_ratio < 1, got {val_ratio} + {test_ratio}")
    if isinstance(neg_ratio, bool) or not isinstance(neg_ratio, (int, float)) or not 0 < neg_ratio < float("inf"):
        raise ConfigError(f"neg_ratio (negatives per held-out positive) must be a number > 0, got {neg_ratio!r}")
    if rounding not in ("nearest", "floor"):
        raise ConfigError(f"rounding must be 'nearest' or 'floor' (PyG's int(ratio * m)), got {rounding!r}")
    pairs = _undirected_pairs(graph)
    m = pairs.size(1)
    count = (lambda r: int(r * m)) if rounding == "floor" else (lambda r: int(round(r * m)))
    n_test, n_val = count(test_ratio), count(val_ratio)
    if m == 0 or n_test == 0 or m - n_test - n_val < 1:
        raise GraphError(f"the graph has {m} undirected edges: too few to hold out {test_ratio:.0%} for test "
                         f"and {val_ratio:.0%} for validation and still train")
    neg_test, neg_val = int(neg_ratio * n_test), int(neg_ratio * n_val)
    if neg_test == 0:
        raise ConfigError(f"neg_ratio={neg_ratio} leaves the {n_test} test edges without negatives; raise it")
    generator = torch.Generator().manual_seed(seed)
    perm = torch.randperm(m, generator=generator)
    test, val, train = perm[:n_test], perm[n_test:n_test + n_val], perm[n_test + n_val:]
    forbidden = pairs[0] * graph.num_nodes + pairs[1]  # sorted: pairs came from torch.unique
    negatives = sample_negatives(graph.num_nodes, neg_test + neg_val, forbidden, generator)
    tp = pairs[:, train]
    train_graph = Graph.from_edge_index(torch.cat([tp, tp.flip(0)], dim=1), num_nodes=graph.num_nodes,
                                        x=graph.x, y=graph.y, train_mask=graph.train_mask,
                                        val_mask=graph.val_mask, test_mask=graph.test_mask, name=graph.name)
    return EdgeSplit(train_graph, pairs[:, val], negatives[:, neg_test:], pairs[:, test], negatives[:, :neg_test],
                     train_pos=tp)


def link_scores(embeddings: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """Cosine of the two endpoints' embeddings for every ``[2, k]`` pair (dot-product decoder)."""
    h = F.normalize(embeddings.float(), dim=1)
    return (h[pairs[0]] * h[pairs[1]]).sum(1)


def link_metrics(pos_scores: torch.Tensor, neg_scores: torch.Tensor) -> Dict[str, float]:
    """ROC-AUC and average precision of positives against negatives (scikit-learn).

    Example:
        >>> import torch
        >>> link_metrics(torch.tensor([0.9, 0.4]), torch.tensor([0.5, 0.1]))
        {'auc': 0.75, 'ap': 0.8333333333333333}
    """
    from sgl.tasks.ranking_metrics import roc_auc_ap

    if pos_scores.numel() == 0 or neg_scores.numel() == 0:
        raise GraphError("link metrics need at least one positive and one negative pair")
    return roc_auc_ap(pos_scores, neg_scores)


def run_link_prediction(model_factory: Callable[[], Any], graph: Graph, seeds: Sequence[int] = (0,),
                        val_ratio: float = 0.05, test_ratio: float = 0.1, progress: bool = False) -> Dict[str, Any]:
    """Per seed: a fresh edge split, a fresh model pre-trained on the training graph, AUC/AP."""
    from sgl.tasks.stats import summarize

    seeds = list(seeds)
    if not seeds:
        raise ConfigError("seeds must list at least one seed")
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        split = split_edges(graph, val_ratio, test_ratio, seed=seed)
        model = model_factory()
        start = time.perf_counter()
        pretrain(model, split.train_graph, seed=seed, progress=progress)
        fit_time = time.perf_counter() - start
        emb = model.embed(split.train_graph)
        run = {"seed": seed, "fit_time_s": fit_time}
        for name in ("val", "test"):
            pos, neg = getattr(split, f"{name}_pos"), getattr(split, f"{name}_neg")
            if pos.size(1) == 0:
                continue
            metrics = link_metrics(link_scores(emb, pos), link_scores(emb, neg))
            run.update({f"{name}_{k}": v for k, v in metrics.items()})
        runs.append(run)
    record: Dict[str, Any] = {"seeds": seeds, "runs": runs}
    for key in ("val_auc", "val_ap", "test_auc", "test_ap"):
        if key in runs[0]:
            record[key] = summarize([r[key] for r in runs])
    return record
