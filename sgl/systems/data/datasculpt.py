"""DataSculpt packing (coarse clustering + fine multi-objective greedy) and its three baselines.

DataSculpt (arXiv 2409.00997) packs documents into context windows in two stages:

1. **coarse** — embed every document (:mod:`~sgl.systems.data.embed`) and cluster the
   embeddings (spherical faiss k-means, or the ISODATA split/merge variant;
   :mod:`~sgl.systems.data.cluster`), so a window is filled from one semantic neighbourhood;
2. **fine** — inside each cluster, :func:`~sgl.systems.data.packing.greedy_assign` places the
   documents (longest first) into the window maximising relevance to the window's running
   centre × remaining capacity: documents stay whole (integrity), windows fill up
   (efficiency) with related text (relevance, homogeneity). The windows left under
   ``merge_below`` fill in every cluster are then re-packed together by the same greedy, so
   a cluster's leftovers do not each waste a window.

Baselines (``method``): ``"random"`` — shuffle and concatenate, cut every ``window`` tokens;
``"iclm"`` — concatenate along the similarity chain (In-Context Pretraining), cut likewise;
``"bfd"`` — best-fit decreasing on lengths only. The overlong policy
(:data:`~sgl.systems.data.packing.OVERLONG_POLICIES`) applies to the whole-document packers.

>>> texts = [f"cats purr {i}" for i in range(6)] + [f"dogs bark {i}" for i in range(6)]
>>> result = pack_documents(texts, PackConfig(window=9, num_clusters=2, dim=4))
>>> packing = result.packing.validate()          # every document once, no window over 9 tokens
>>> packing.num_windows >= 4, result.metrics["docs_truncated"], result.metrics["homogeneity"]
(True, 0, 1.0)
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np

from sgl._checks import check_choice, check_int, check_real
from sgl.errors import ConfigError, DatasetError
from sgl.systems.data.cluster import assign_clusters, isodata_centroids, kmeans_centroids
from sgl.systems.data.corpus import check_documents, document_lengths
from sgl.systems.data.embed import TfidfSvdEncoder
from sgl.systems.data.metrics import packing_metrics
from sgl.systems.data.packing import (OVERLONG_POLICIES, Packing, _kernel, bfd_assign, check_capacity,
                                      concat_segments, greedy_assign, segments_from_assignment, similarity_chain,
                                      split_overlong)

__all__ = ["PackConfig", "PackResult", "PACK_METHODS", "pack_documents", "pack_arrays", "encode_documents"]

PACK_METHODS = ("datasculpt", "bfd", "random", "iclm")


@dataclass
class PackConfig:
    """How to pack: window size, method, clustering, the overlong policy and seeds.

    ``num_clusters`` defaults to ``max(1, round(n / docs_per_cluster))``; the encoder is fitted
    on the first ``fit_docs`` documents and k-means trained on the first ``train_docs``
    embeddings (what makes streaming and in-memory packing equal).
    """

    window: int = 4096
    method: str = "datasculpt"
    clustering: str = "kmeans"
    num_clusters: Optional[int] = None
    docs_per_cluster: int = 256
    dim: int = 64
    overlong: str = "split"
    merge_below: float = 0.5
    fit_docs: int = 50_000
    train_docs: int = 200_000
    seed: int = 0
    progress: bool = False

    def __post_init__(self) -> None:
        check_capacity(self.window)
        check_choice(self.method, "method", PACK_METHODS)
        check_choice(self.clustering, "clustering", ("kmeans", "isodata"))
        if self.num_clusters is not None:
            check_int(self.num_clusters, "num_clusters", minimum=1)
        check_int(self.docs_per_cluster, "docs_per_cluster", minimum=1)
        check_int(self.dim, "dim", minimum=1)
        check_choice(self.overlong, "overlong policy", OVERLONG_POLICIES)
        check_real(self.merge_below, "merge_below", 0.0, 1.0)
        check_int(self.fit_docs, "fit_docs", minimum=1)
        check_int(self.train_docs, "train_docs", minimum=1)
        check_int(self.seed, "seed", minimum=0)

    def clusters_for(self, n: int) -> int:
        return self.num_clusters or max(1, int(round(n / self.docs_per_cluster)))


@dataclass
class PackResult:
    """A packing, its metrics, the document embeddings/labels it used and stage timings (s)."""

    packing: Packing
    metrics: Dict[str, Any]
    embeddings: Optional[np.ndarray] = None
    clusters: Optional[np.ndarray] = None
    centroids: Optional[np.ndarray] = None
    timings: Dict[str, float] = field(default_factory=dict)

    def report(self) -> Dict[str, Any]:
        return {"metrics": self.metrics, "timings_s": self.timings}


def encode_documents(texts: Sequence[str], config: PackConfig, encoder: Any = None) -> np.ndarray:
    """Unit-row embeddings of ``texts`` by ``encoder`` (default TF-IDF + SVD) fitted on the first ``fit_docs``."""
    encoder = encoder if encoder is not None else TfidfSvdEncoder(config.dim, seed=config.seed)
    encoder.fit(list(texts[: config.fit_docs]))
    return encoder.encode(list(texts))


def _centroids(embeddings: np.ndarray, config: PackConfig, n: int) -> np.ndarray:
    sample = np.ascontiguousarray(embeddings[: min(n, config.train_docs)], dtype=np.float32)
    k = config.clusters_for(n)
    if config.clustering == "isodata":
        return isodata_centroids(sample, k, max_size=max(4, 2 * config.docs_per_cluster), seed=config.seed)
    return kmeans_centroids(sample, k, seed=config.seed)


def _datasculpt(lengths, embeddings, config, full, items, timings, progress_cb) -> tuple:
    n = lengths.size
    started = time.perf_counter()
    centroids = _centroids(embeddings, config, n)
    doc_cluster = assign_clusters(embeddings, centroids)
    timings["cluster"] = time.perf_counter() - started
    idoc, istart, ilen = items
    item_cluster = doc_cluster[idoc]
    order = np.argsort(item_cluster, kind="stable")
    bounds = np.searchsorted(item_cluster[order], np.arange(len(centroids) + 1))
    assignment = np.empty(idoc.size, dtype=np.int64)
    _kernel()  # compiled (or loaded from numba's cache) outside the timed greedy stage
    started = time.perf_counter()
    next_window = 0
    clusters = range(len(centroids))
    if progress_cb is not None:
        clusters = progress_cb(clusters, "clusters")
    for c in clusters:
        members = order[bounds[c]:bounds[c + 1]]
        if members.size == 0:
            continue
        local, count = greedy_assign(embeddings[idoc[members]], ilen[members], config.window)
        assignment[members] = local + next_window
        next_window += int(count)
    if idoc.size and config.merge_below > 0:
        tokens = np.bincount(assignment, weights=ilen, minlength=next_window)
        sparse = np.flatnonzero(tokens < config.merge_below * config.window)
        if sparse.size > 1:
            redo = np.flatnonzero(np.isin(assignment, sparse))
            dense = np.setdiff1d(np.arange(next_window), sparse)
            renumber = np.full(next_window, -1, dtype=np.int64)
            renumber[dense] = np.arange(dense.size)
            keep = renumber[assignment] >= 0
            assignment[keep] = renumber[assignment[keep]]
            local, count = greedy_assign(embeddings[idoc[redo]], ilen[redo], config.window)
            assignment[redo] = local + dense.size
            next_window = dense.size + int(count)
    timings["greedy"] = time.perf_counter() - started
    return assignment, next_window, doc_cluster, centroids


def pack_arrays(lengths: np.ndarray, embeddings: Optional[np.ndarray], config: PackConfig,
                progress_cb: Optional[Callable] = None) -> PackResult:
    """Pack documents given their token counts and (for datasculpt/iclm) unit embeddings.

    ``embeddings`` may be a ``np.memmap``: DataSculpt reads it in chunks and one cluster at a time.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1 or lengths.size == 0:
        raise ConfigError("the corpus is empty: give at least one document to pack") if lengths.size == 0 \
            else ConfigError(f"lengths must be 1-D, got shape {lengths.shape}")
    if lengths.min() < 1:
        bad = int(np.argmin(lengths))
        raise DatasetError(f"document {bad} has {int(lengths[bad])} tokens; drop empty documents before packing")
    if config.method in ("datasculpt", "iclm") and (embeddings is None or embeddings.shape[0] != lengths.size):
        raise ConfigError(f"method {config.method!r} needs one embedding row per document")
    timings: Dict[str, float] = {}
    clusters = centroids = None
    started = time.perf_counter()
    if config.method == "random":
        order = np.random.default_rng(config.seed).permutation(lengths.size)
        packing = concat_segments(order, lengths, config.window, "random")
    elif config.method == "iclm":
        chain_start = time.perf_counter()
        packing = concat_segments(similarity_chain(np.asarray(embeddings)), lengths, config.window, "iclm")
        timings["chain"] = time.perf_counter() - chain_start
    else:
        full, items = split_overlong(lengths, config.window, config.overlong)
        if config.method == "bfd":
            assignment = bfd_assign(items[2], config.window)
            count = int(assignment.max()) + 1 if assignment.size else 0
        else:
            assignment, count, clusters, centroids = _datasculpt(lengths, embeddings, config, full, items, timings,
                                                      progress_cb)
        packing = segments_from_assignment(full, items, assignment, count, config.window, lengths, config.method)
    timings["pack"] = time.perf_counter() - started
    packing.meta.update({"overlong": config.overlong, "seed": config.seed})
    metrics = packing_metrics(packing, embeddings, clusters)
    if clusters is not None:
        metrics["clusters"] = int(clusters.max()) + 1
        metrics["greedy_docs_per_s"] = lengths.size / max(timings["greedy"], 1e-9)
    metrics["pack_docs_per_s"] = lengths.size / max(timings["pack"], 1e-9)
    metrics["config"] = {k: v for k, v in asdict(config).items() if k != "progress"}
    return PackResult(packing, metrics, embeddings, clusters, centroids, timings)


def pack_documents(texts: Sequence[str], config: PackConfig, *, encoder: Any = None,
                   length_fn: Optional[Callable] = None, labels: Optional[np.ndarray] = None,
                   progress_cb: Optional[Callable] = None) -> PackResult:
    """Pack in-memory documents: token counts by ``length_fn`` (words by default), embeddings by ``encoder``.

    ``labels`` (e.g. each document's source article) add ``label_homogeneity`` to the metrics.
    """
    texts = check_documents(texts)
    lengths = document_lengths(texts, length_fn)
    started = time.perf_counter()
    try:  # every method: the similarity metric needs them
        embeddings = encode_documents(texts, config, encoder)
    except DatasetError:
        if config.method in ("datasculpt", "iclm"):
            raise
        embeddings = None  # lengths-only packers run on text without words
    encode_s = time.perf_counter() - started
    result = pack_arrays(lengths, embeddings, config, progress_cb)
    result.timings["encode"] = encode_s
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (len(texts),):
            raise ConfigError(f"labels must hold one value per document ({len(texts)}), got shape {labels.shape}")
        result.metrics["label_homogeneity"] = packing_metrics(result.packing, None, labels)["homogeneity"]
    return result
