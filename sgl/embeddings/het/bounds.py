"""How few bytes HET can move: analytic and offline limits of the cache protocol.

* :func:`steady_state_reduction` -- the byte reduction vs the no-cache
  parameter server on one key that is always cached (the protocol's own cost:
  (key, version) requests, pushes every ``bound + 1`` updates and the
  refetches other workers' pushes cause).
* :func:`optimal_misses` / :func:`het_traffic_bound` -- the fewest misses any
  cache of a given capacity can have on a worker's actual key stream
  (Belady's MIN with bypass, offline), and the byte floor that follows for
  *every* eviction policy and *every* staleness bound: each miss fetches a row
  and, because every training lookup is an update that must reach the server
  before its line leaves the cache, pushes at least one row.

Byte sizes are those of :mod:`sgl.embeddings.het.transport`: a versioned
request ``(key, version)`` 16 B, a fetched row ``(position, version, value)``
``16 + 4 dim`` B, a pushed row ``(key, delta, count)`` ``16 + 4 dim`` B; the
no-cache PS moves ``2 (8 + 4 dim)`` B per unique key of a batch.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sgl._checks import check_int
from sgl.embeddings.base import check_scalar
from sgl.embeddings.het.transport import _ID_BYTES
from sgl.errors import EmbeddingError

__all__ = ["steady_state_reduction", "optimal_misses", "TrafficBound", "het_traffic_bound"]


def steady_state_reduction(bound: int, workers: int, dim: int, rate: float = 0.0,
                           occurrences: float = 1.0) -> float:
    """Expected byte reduction of HET vs the unique-key no-cache PS on one key, in steady state.

    A key that is always cached and that each of ``workers`` finds in its
    batch independently with probability ``rate`` per round (data shuffled
    across workers), ``occurrences`` times per batch (``push_bound = bound``,
    one version step per occurrence).  Each lookup sends its 16-byte
    ``(key, version)``; a worker pushes once per ``bound + 1`` local updates,
    i.e. with probability ``q = min(1, occurrences / (bound + 1))`` per lookup,
    and a push carries more than ``bound`` updates, so it makes every other
    worker's copy stale: a worker refetches when some other worker pushed since
    its previous lookup, ``1 - E[f^T]`` with ``f = (1 - rate q)^(W - 1)`` and
    the gap ``T ~ Geometric(rate)`` rounds.  Fetches and pushes cost
    ``16 + 4 dim`` bytes, the no-cache PS ``2 (8 + 4 dim)`` per lookup.

    ``rate -> 0`` (the default: rare keys, where the other workers' pushes
    between two lookups coalesce into one refetch) gives the largest value, an
    approximate ceiling for shuffled data; misses, evictions and bypasses only
    cost more.  Keys used by one worker only (fixed data shards) can do better.

    >>> [round(steady_state_reduction(10, 4, d), 3) for d in (64, 128)]         # rare keys
    [0.812, 0.83]
    >>> round(steady_state_reduction(10, 4, 128, rate=1.0), 3)                   # in every batch
    0.812
    >>> round(steady_state_reduction(10, 4, 128, rate=1.0, occurrences=11), 3)   # push every step
    -0.031
    """
    if bound < 0 or workers < 1 or dim < 1 or not 0 <= rate <= 1 or not occurrences >= 1:
        raise EmbeddingError(
            f"steady_state_reduction: need bound >= 0, workers, dim >= 1, 0 <= rate <= 1 and occurrences "
            f">= 1; got bound={bound}, workers={workers}, dim={dim}, rate={rate}, occurrences={occurrences}."
        )
    q = min(1.0, occurrences / (bound + 1))
    if rate == 0:  # limit rate -> 0 of 1 - rate f / (1 - (1 - rate) f)
        refetch = (workers - 1) * q / (1 + (workers - 1) * q)
    else:
        f = (1 - rate * q) ** (workers - 1)
        refetch = 1 - rate * f / (1 - (1 - rate) * f)
    per_lookup = 16 + (16 + 4 * dim) * (q + refetch)
    return 1 - per_lookup / (2 * (_ID_BYTES + 4 * dim))


def _batch_keys(batch: np.ndarray | torch.Tensor, who: str) -> np.ndarray:
    keys = batch.cpu().numpy() if isinstance(batch, torch.Tensor) else np.asarray(batch)
    if keys.dtype.kind not in "iu":
        raise EmbeddingError(f"{who}: a batch must hold integer ids, got dtype {keys.dtype}.")
    if keys.size and keys.min() < 0:
        raise EmbeddingError(f"{who}: ids must be >= 0, got {int(keys.min())}.")
    return np.unique(keys.astype(np.int64, copy=False))


def _next_use(seq: np.ndarray) -> np.ndarray:
    """Index of the next access of the same key (``len(seq)``: never again)."""
    n = seq.size
    order = np.argsort(seq, kind="stable")
    nxt = np.full(n, n, dtype=np.int64)
    same = seq[order[1:]] == seq[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def optimal_misses(batches: Iterable[np.ndarray | torch.Tensor], capacity: int) -> tuple[int, int]:
    """``(unique lookups, fewest misses)`` of one worker's batches with a cache of ``capacity`` lines.

    Each batch is looked up by its unique ids, as a HET worker does. The misses
    are those of Belady's offline MIN with bypass (on a miss, drop whichever of
    the cached keys and the new key is used again furthest in the future),
    which no eviction or admission policy can beat. A HET cache never evicts a
    line of the current batch, so any HET policy is one such policy and has at
    least these misses (a bypassed key counts as a miss: it is fetched too).

    >>> optimal_misses([[1, 2], [3], [1, 2, 2, 3]], capacity=2)   # 3 cold misses + 1 for want of room
    (6, 4)
    >>> optimal_misses([[1, 2], [3], [1, 2, 2, 3]], capacity=3)
    (6, 3)
    """
    check_scalar(check_int, capacity, f"optimal_misses: capacity must be an int >= 0 (lines), got {capacity!r}.", 0)
    parts = [_batch_keys(b, "optimal_misses") for b in batches]
    seq = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    n = seq.size
    nxt = _next_use(seq)
    cached: dict[int, int] = {}        # key -> index of its next use
    heap: list[tuple[int, int]] = []   # (-next use, key); stale entries skipped lazily
    misses = 0
    for key, nu in zip(seq.tolist(), nxt.tolist()):
        if key in cached:
            cached[key] = nu
            heapq.heappush(heap, (-nu, key))
            continue
        misses += 1
        if nu == n or capacity == 0:
            continue                   # never used again (or no cache): not worth a line
        if len(cached) < capacity:
            cached[key] = nu
            heapq.heappush(heap, (-nu, key))
            continue
        while cached.get(heap[0][1]) != -heap[0][0]:
            heapq.heappop(heap)
        far, victim = heap[0]
        if -far > nu:                  # the victim is needed later than the new key: swap
            heapq.heappop(heap)
            del cached[victim]
            cached[key] = nu
            heapq.heappush(heap, (-nu, key))
    return n, misses


@dataclass(frozen=True)
class TrafficBound:
    """Byte floor of HET on given key streams (see :func:`het_traffic_bound`).

    >>> b = TrafficBound(unique=100, misses=20, dim=128)
    >>> b.min_bytes, b.no_cache_bytes, round(b.max_reduction, 3)
    (22720, 104000, 0.782)
    """

    unique: int    #: unique keys looked up, summed over batches and workers
    misses: int    #: fewest misses any cache of the capacity can have, summed over workers
    dim: int

    @property
    def min_bytes(self) -> int:
        """(key, version) requests plus one fetch and one push of ``16 + 4 dim`` B per miss."""
        return 16 * self.unique + 2 * (16 + 4 * self.dim) * self.misses

    @property
    def no_cache_bytes(self) -> int:
        """What the no-cache parameter server moves: a pull and a push per unique key."""
        return 2 * (_ID_BYTES + 4 * self.dim) * self.unique

    @property
    def max_reduction(self) -> float:
        """The largest byte reduction vs the no-cache PS any HET policy and bound can reach."""
        return 1 - self.min_bytes / max(self.no_cache_bytes, 1)


def het_traffic_bound(worker_batches: Sequence[Iterable[np.ndarray | torch.Tensor]], capacity: int,
                      dim: int) -> TrafficBound:
    """The fewest bytes HET can move on these batches with ``capacity`` cache lines per worker.

    ``worker_batches[w]`` are worker ``w``'s training batches of ids, in order.
    The floor holds for every eviction policy, staleness bound and push bound
    when each lookup is followed by its update (training): a cached line that
    was updated must push at least once before it is evicted or flushed, and a
    bypassed key is fetched and pushed. The protocol's own refetches and
    periodic pushes (:func:`steady_state_reduction`) come on top, so real runs
    stay above it; with one worker, a cache holding every key and a push bound
    no line reaches, HET moves exactly these bytes.

    >>> bound = het_traffic_bound([[[1, 2], [2, 3]], [[1, 1, 4]]], capacity=8, dim=4)
    >>> bound.unique, bound.misses, bound.min_bytes
    (6, 5, 416)
    """
    check_scalar(check_int, dim, f"het_traffic_bound: dim must be an int >= 1, got {dim!r}.", 1)
    unique = misses = 0
    for batches in worker_batches:
        u, m = optimal_misses(batches, capacity)
        unique, misses = unique + u, misses + m
    return TrafficBound(unique, misses, int(dim))
