"""Measuring VEND: certified share of non-edges, query mixes, and store throughput with and without codes.

* :func:`sample_non_edges` — uniform random vertex pairs ``u != v`` that are not edges;
* :func:`sample_two_hop_non_edges` — non-edges ``(a, c)`` with a common neighbour (the hard
  case: friends of friends, the pairs a triangle or link-prediction query asks about);
* :func:`certified_fraction` — the share of pairs a filter answers ``NonNeighbor``;
* :func:`benchmark_store` — edge-query throughput of an on-disk store queried directly and
  through :class:`VENDStore`, on the same query mix, with the answers checked against each other.

    >>> import numpy as np
    >>> from sgl.analytics.vend import MemoryAdjacency, VENDCodes
    >>> edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4]])
    >>> adj = MemoryAdjacency.from_edges(edges)
    >>> pairs = sample_non_edges(adj.has_edges, 5, 100, seed=0)
    >>> bool(adj.has_edges(pairs[:, 0], pairs[:, 1]).any()), pairs.shape
    (False, (100, 2))
    >>> certified_fraction(VENDCodes.from_edges(edges, k=1), pairs)
    1.0
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Union

import numpy as np

from sgl._checks import check_int, check_real
from sgl.analytics.vend.codes import PairType
from sgl.errors import GraphError

__all__ = ["sample_non_edges", "sample_two_hop_non_edges", "certified_fraction", "StoreBenchmark",
           "benchmark_store"]

PathLike = Union[str, os.PathLike]


def sample_non_edges(has_edges: Callable[[np.ndarray, np.ndarray], np.ndarray], num_nodes: int, count: int, *,
                     seed: int = 0, max_rounds: int = 100) -> np.ndarray:
    """``(count, 2)`` uniform random pairs ``u != v`` for which ``has_edges`` is False."""
    check_int(count, "count", minimum=0)
    rng = np.random.default_rng(seed)
    found, have = [], 0
    for _ in range(max_rounds):
        if have >= count:
            break
        pairs = rng.integers(0, num_nodes, size=(2 * (count - have) + 16, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        pairs = pairs[~np.asarray(has_edges(pairs[:, 0], pairs[:, 1]), dtype=bool)]
        found.append(pairs)
        have += len(pairs)
    if have < count:
        raise GraphError(f"found only {have} of {count} non-edges in {max_rounds} rounds; the graph is too dense")
    return np.concatenate(found)[:count]


def sample_two_hop_non_edges(adjacency: Any, count: int, *, seed: int = 0, max_rounds: int = 100) -> np.ndarray:
    """``(count, 2)`` non-edges ``(a, c)``, ``a != c``, with a common neighbour ``b`` (random walks of length 2).

    ``adjacency`` answers ``neighbors_csr`` and ``has_edges`` (:class:`MemoryAdjacency`, :class:`EdgeStore`).
    """
    check_int(count, "count", minimum=0)
    rng = np.random.default_rng(seed)
    indptr, indices = adjacency.neighbors_csr(np.arange(adjacency.num_nodes))
    deg = np.diff(indptr)
    if not (deg >= 2).any():
        raise GraphError("no vertex has two neighbours, so the graph has no two-hop pairs")
    middle_pool = np.flatnonzero(deg >= 2)
    found, have = [], 0
    for _ in range(max_rounds):
        if have >= count:
            break
        size = 2 * (count - have) + 16
        b = middle_pool[rng.integers(0, middle_pool.size, size)]
        a = indices[indptr[b] + (rng.random(size) * deg[b]).astype(np.int64)]
        c = indices[indptr[b] + (rng.random(size) * deg[b]).astype(np.int64)]
        keep = a != c
        a, c = a[keep], c[keep]
        keep = ~np.asarray(adjacency.has_edges(a, c), dtype=bool)
        found.append(np.stack([a[keep], c[keep]], axis=1))
        have += int(keep.sum())
    if have < count:
        raise GraphError(f"found only {have} of {count} two-hop non-edges in {max_rounds} rounds")
    return np.concatenate(found)[:count]


def certified_fraction(codes: Any, pairs: np.ndarray) -> float:
    """Share of ``pairs`` (``(m, 2)``) that ``codes.test_batch`` answers ``NonNeighbor``."""
    pairs = np.asarray(pairs)
    if pairs.size == 0:
        return 0.0
    return float(np.mean(codes.test_batch(pairs[:, 0], pairs[:, 1]) == np.uint8(PairType.NonNeighbor)))


@dataclass(frozen=True)
class StoreBenchmark:
    """Result of :func:`benchmark_store` (throughputs in queries per second)."""

    path: str
    num_nodes: int
    num_edges: int
    k: int
    kind: str
    queries: int
    non_edge_share: float
    certified_fraction: float      # of the mix's non-edges
    store_share: float             # of the queries, the share VEND still sent to the store
    store_qps: float
    vend_qps: float
    open_seconds: float
    mismatches: int                # answers that differ between the two paths (must be 0)

    @property
    def speedup(self) -> float:
        return self.vend_qps / self.store_qps if self.store_qps else float("nan")

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "speedup": self.speedup}


def _edge_sample(store: Any, count: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform random edges: a vertex drawn by degree, then one of its neighbours."""
    indptr, indices = store.neighbors_csr(np.arange(store.num_nodes))
    deg = np.diff(indptr)
    if indices.size == 0:
        raise GraphError(f"{store.path} has no edges to query")
    u = rng.choice(store.num_nodes, size=count, p=deg / deg.sum())
    v = indices[indptr[u] + (rng.random(count) * deg[u]).astype(np.int64)]
    return np.stack([u, v], axis=1)


def benchmark_store(path: PathLike, *, queries: int = 100_000, non_edge_share: float = 0.9, repeats: int = 3,
                    seed: int = 0) -> StoreBenchmark:
    """Edge-query throughput of the store at ``path`` directly vs through its VEND codes.

    The mix holds ``non_edge_share`` uniform random non-edges and uniform random edges, shuffled;
    both paths answer it as one batch, ``repeats`` times (the median time counts).
    """
    from sgl.analytics.vend.front import VENDStore

    check_int(queries, "queries", minimum=1)
    check_int(repeats, "repeats", minimum=1)
    check_real(non_edge_share, "non_edge_share", 0.0, 1.0)
    started = time.perf_counter()
    db = VENDStore.open(path)
    open_seconds = time.perf_counter() - started
    try:
        rng = np.random.default_rng(seed)
        num_non = int(round(queries * non_edge_share))
        non = sample_non_edges(db.store.has_edges, db.num_nodes, num_non, seed=seed)
        mix = np.concatenate([non, _edge_sample(db.store, queries - num_non, rng)])
        mix = mix[rng.permutation(len(mix))]
        u, v = mix[:, 0], mix[:, 1]
        times = {"store": [], "vend": []}
        for _ in range(repeats):
            for name, query in (("store", db.store.has_edges), ("vend", db.has_edges)):
                db.reset_stats()
                started = time.perf_counter()
                answer = query(u, v)
                times[name].append(time.perf_counter() - started)
                if name == "store":
                    truth = answer
                else:
                    mismatches = int(np.count_nonzero(answer != truth))
                    store_share = db.stats.store_queries / len(u)
        certified = certified_fraction(db.codes, non)
        return StoreBenchmark(str(path), db.num_nodes, db.num_edges, db.codes.k, type(db.codes).__name__, len(u),
                              float(non_edge_share), certified, store_share,
                              len(u) / float(np.median(times["store"])), len(u) / float(np.median(times["vend"])),
                              open_seconds, mismatches)
    finally:
        db.close()
