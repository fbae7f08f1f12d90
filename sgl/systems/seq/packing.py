"""Shared combinatorial pieces: FlexSP's sequence blaster and bucketing DP, bin/greedy assignments.

* :func:`blast` -- sort a global batch (descending) and cut it into the fewest contiguous
  micro-batches whose token sums fit ``capacity``, minimising the largest sum (the min-max
  contiguous partition DP, ``O(n²·m)``, vectorised over the split point).
* :func:`bucketize` -- DP over the sorted distinct lengths into at most ``B`` buckets, each padded
  to its largest length, minimising total padding; the bucket count grows until padding is at
  most ``tolerance`` of the tokens.
* :func:`assign` -- put sequences into ``groups`` bins of capacity ``capacity`` with ``random``
  (even split of a shuffle), ``ffd`` / ``bfd`` (first / best fit decreasing, by tokens) or ``lpt``
  (longest processing time first onto the least-loaded bin that fits).

>>> import numpy as np
>>> [mb.tolist() for mb in blast(np.array([5, 1, 4, 2, 3]), capacity=8)]
[[0], [2], [4, 3, 1]]
>>> bounds, which = bucketize(np.array([10, 11, 50, 52]), max_buckets=2)
>>> bounds.tolist(), which.tolist()
([11, 52], [0, 0, 1, 1])
"""
from __future__ import annotations

import functools
from typing import Callable, List, Optional, Tuple

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import PlanError
from sgl.systems.seq._greedy import bin_assign

__all__ = ["blast", "bucketize", "assign", "min_max_partition"]


def min_max_partition(values: np.ndarray, parts: int) -> Tuple[float, List[int]]:
    """Split ``values`` (in order) into ``parts`` contiguous non-empty runs minimising the largest sum.

    Returns the optimum and the run start indices.
    """
    n = values.size
    parts = min(parts, n)
    if n > _DP_LIMIT and values.min() >= 0 and np.all(values == np.round(values)):
        return _partition_search(np.asarray(values, dtype=np.float64), parts)
    prefix = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
    span = prefix[None, :] - prefix[:, None]           # span[k, i] = sum(values[k:i])
    upper = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1)
    span = np.where(upper, span, np.inf)
    best = span[0].copy()                             # one run: values[0:i]
    choice = np.zeros((parts, n + 1), dtype=np.int64)
    for j in range(1, parts):
        cand = np.maximum(best[:, None], span)        # last run values[k:i] after j runs ending at k
        choice[j] = np.argmin(cand, axis=0)
        best = cand[choice[j], np.arange(n + 1)]
    starts, i = [], n
    for j in range(parts - 1, 0, -1):
        k = int(choice[j, i])
        starts.append(k)
        i = k
    starts.append(0)
    return float(best[n]), starts[::-1]


_DP_LIMIT = 512        # above this many values the O(n²) DP table gives way to a search on the answer


def _partition_search(values: np.ndarray, parts: int) -> Tuple[float, List[int]]:
    """Min-max contiguous partition of non-negative integers: binary search on the largest run sum ``X``
    with the greedy test (fill each run up to ``X``, ``O(parts·log n)`` by ``searchsorted`` on the prefix
    sums), then split runs of two or more values until there are exactly ``parts`` (never raises the max)."""
    n = values.size
    prefix = np.concatenate([[0.0], np.cumsum(values)])

    def greedy(x: float) -> Optional[List[int]]:
        starts, i = [0], 0
        while True:
            j = int(np.searchsorted(prefix, prefix[i] + x, side="right")) - 1
            if j >= n:
                return starts
            if j == i or len(starts) == parts:
                return None
            starts.append(j)
            i = j

    lo, hi = int(max(values.max(), np.ceil(prefix[-1] / parts))), int(prefix[-1])
    while lo < hi:
        mid = (lo + hi) // 2
        if greedy(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    starts = greedy(lo)
    bounds = set(starts)
    for k in range(n - 1, 0, -1):                         # add cuts inside runs until there are `parts`
        if len(bounds) >= parts:
            break
        bounds.add(k)
    starts = sorted(bounds)
    edges = starts + [n]
    best = max(prefix[b] - prefix[a] for a, b in zip(edges[:-1], edges[1:]))
    return float(best), starts


def blast(lengths: np.ndarray, capacity: int) -> List[np.ndarray]:
    """FlexSP's sequence blaster: index arrays of the micro-batches (longest sequences first).

    Results are cached per (batch, capacity) (the switching planner and the static baselines
    blast the same batch for many strategies); callers get fresh copies.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    return [mb.copy() for mb in _blast_cached(lengths.tobytes(), int(capacity))]


@functools.lru_cache(maxsize=64)
def _blast_cached(raw: bytes, capacity: int) -> tuple:
    lengths = np.frombuffer(raw, dtype=np.int64)
    if lengths.size == 0:
        raise PlanError("an empty global batch has nothing to plan; give at least one sequence")
    if lengths.max() > capacity:
        raise PlanError(f"a sequence of {int(lengths.max())} tokens exceeds the cluster's capacity of {capacity} "
                        f"tokens per micro-batch")
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    m = max(1, int(np.ceil(sorted_lengths.sum() / capacity)))
    while True:
        best, starts = min_max_partition(sorted_lengths.astype(np.float64), m)
        if best <= capacity:
            bounds = starts + [lengths.size]
            return tuple(order[bounds[j]:bounds[j + 1]] for j in range(len(starts)))
        m += 1


def bucketize(lengths: np.ndarray, max_buckets: int = 16, tolerance: float = 0.0) -> Tuple[np.ndarray, np.ndarray]:
    """``(boundaries, bucket of each sequence)``: padding-minimal buckets (module doc).

    With ``tolerance > 0`` the fewest buckets whose padding is at most ``tolerance`` × tokens are
    used (up to ``max_buckets``).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    max_buckets = check_int(max_buckets, "max_buckets", 1, error=PlanError)
    values, counts = np.unique(lengths, return_counts=True)
    u = values.size
    if u <= max_buckets and tolerance <= 0:
        return values, np.searchsorted(values, lengths)
    cnt_prefix = np.concatenate([[0], np.cumsum(counts)])
    tok_prefix = np.concatenate([[0], np.cumsum(values * counts)])
    # pad[k, i]: padding of a bucket holding distinct values k..i-1, padded to values[i-1]
    k = np.arange(u + 1)[:, None]
    i = np.arange(u + 1)[None, :]
    top = values[np.clip(i - 1, 0, u - 1)]
    pad = top * (cnt_prefix[i] - cnt_prefix[k]) - (tok_prefix[i] - tok_prefix[k])
    pad = np.where(i > k, pad.astype(np.float64), np.inf)
    best = pad[0].copy()
    choices = []
    total = float(tok_prefix[-1])
    for b in range(1, min(max_buckets, u) + 1):
        if b > 1:
            cand = best[:, None] + pad
            choice = np.argmin(cand, axis=0)
            best = cand[choice, np.arange(u + 1)]
            choices.append(choice)
        if tolerance > 0 and best[u] <= tolerance * total:
            break
    cuts, i_end = [u], u
    for choice in reversed(choices):
        i_end = int(choice[i_end])
        cuts.append(i_end)
    cuts = cuts[::-1]
    boundaries = values[np.asarray(cuts) - 1]
    return boundaries, np.searchsorted(boundaries, lengths)


def assign(lengths: np.ndarray, groups: int, capacity: int, method: str = "lpt", *,
           time_of: Optional[Callable[[np.ndarray], np.ndarray]] = None,
           seed: int = 0) -> Optional[List[np.ndarray]]:
    """Index arrays of the ``groups`` bins, or ``None`` when the method overflows a bin."""
    check_choice(method, "assignment method", ("random", "ffd", "bfd", "lpt"), error=PlanError)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = lengths.size
    if method == "random":
        order = np.random.default_rng(seed).permutation(n)
        bins = [b for b in np.array_split(order, groups)]
        return bins if all(int(lengths[b].sum()) <= capacity for b in bins) else None
    weights = lengths.astype(np.float64) if time_of is None else np.asarray(time_of(lengths), dtype=np.float64)
    order = np.lexsort((np.arange(n), -lengths)) if method != "lpt" else np.lexsort((np.arange(n), -weights))
    owner, ok = bin_assign(order, lengths, weights, groups, capacity, method)
    if not ok:
        return None
    return members_in_order(owner, order, groups)


def members_in_order(owner: np.ndarray, order: np.ndarray, groups: int) -> List[np.ndarray]:
    """Per group, the indices ``owner`` gave it, in the order they were assigned (``order``)."""
    which = owner[order]
    ranked = order[np.argsort(which, kind="stable")]
    return [m.astype(np.int64) for m in np.split(ranked, np.cumsum(np.bincount(which, minlength=groups))[:-1])]
