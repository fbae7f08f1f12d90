"""KNN across vertically split parties: faiss within a party, Fagin's threshold algorithm across them.

Party ``p`` holds the columns ``X_p`` of every row; the joint squared distance of rows ``i, j`` is
the sum of the parties' partial squared distances, ``D(i, j) = sum_p ||X_p[i] - X_p[j]||^2``.
Each party offers *sorted access* (its rows in increasing partial distance to a query, from an
exact faiss ``IndexFlatL2``) and *random access* (its partial distance to named rows). The
threshold algorithm (Fagin, Lotem and Naor) reads the sorted lists in blocks of growing depth
``D``; every row first seen is random-accessed at all parties and its total is known. Any row not
yet seen has a partial distance at least the ``D``-th sorted one in *every* list, so its total is at
least the threshold ``tau = sum_p d_p[D]``: the seen rows with total ``<= tau``, in order, are the
exact prefix of the joint ranking. The search stops once that prefix answers the question (``k``
rows, or ``k`` rows of the query's label for the mutual-information estimator of
:mod:`~sgl.federated.selection.mi`).

Every id and distance that would cross parties is counted in a :class:`Ledger` (bytes, sorted and
random accesses). Queries are processed together, vectorised: a query leaves the batch when done.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(60, 6))
    >>> parties = [LocalParty(x[:, :2]), LocalParty(x[:, 2:])]
    >>> res = fagin_knn(parties, k=3)
    >>> bool((res.ids == brute_force_knn(x, 3)[0]).all())
    True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Protocol, Sequence, Tuple

import numpy as np

from sgl.errors import ConfigError, FeatureError

__all__ = ["Ledger", "LocalParty", "SortedAccess", "FaginResult", "fagin_knn", "brute_force_knn", "check_features",
           "check_parties"]

_ID_BYTES, _DIST_BYTES = 8, 8  # int64 ids and float64 distances on the wire


@dataclass
class Ledger:
    """What crossed party boundaries: bytes, messages and accesses (sorted = ids read from a list)."""

    bytes: int = 0
    messages: int = 0
    sorted_accesses: int = 0
    random_accesses: int = 0

    def add(self, nbytes: int, messages: int = 1) -> None:
        self.bytes += int(nbytes)
        self.messages += int(messages)

    def merge(self, other: "Ledger") -> None:
        self.bytes += other.bytes
        self.messages += other.messages
        self.sorted_accesses += other.sorted_accesses
        self.random_accesses += other.random_accesses


def check_features(x, name: str = "features", allow_nan: bool = False) -> np.ndarray:
    """A 2-d float64 array, or a :class:`FeatureError` saying what is wrong with ``x``."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2:
        raise FeatureError(f"{name} must be a 2-d (rows x columns) array, got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise FeatureError(f"{name} has no columns; every party must own at least one column")
    if arr.shape[0] < 2:
        raise FeatureError(f"{name} has {arr.shape[0]} rows; KNN needs at least 2")
    if not allow_nan and not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).sum())
        raise FeatureError(f"{name} has NaN/inf in {bad} rows; KNN distances cannot take them: impute or drop "
                           "those rows first")
    return arr


def check_parties(blocks: Sequence, allow_nan: bool = False) -> List[np.ndarray]:
    """Validate the column blocks of a vertical split: 2-d, the same rows, at least one column each."""
    if len(blocks) == 0:
        raise ConfigError("no parties given; pass one feature block per party")
    out = [check_features(b, f"party {p}'s features", allow_nan) for p, b in enumerate(blocks)]
    rows = {a.shape[0] for a in out}
    if len(rows) != 1:
        raise FeatureError(f"parties hold different row counts {[a.shape[0] for a in out]}; align the rows first")
    return out


class SortedAccess(Protocol):
    """A party as the threshold algorithm sees it (local object or a proxy to another process)."""

    num_rows: int

    def sorted_block(self, queries: np.ndarray, depth: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids [q, depth], dist [q])``: each query's ``depth`` nearest rows (itself excluded), in order,
        and the partial distance at position ``depth`` (the party's share of the threshold)."""

    def partial(self, queries: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """``[q, c]`` partial squared distances of each query to its candidate rows (``-1`` = padding, 0)."""


class LocalParty:
    """One party's columns with sorted access through an exact faiss ``IndexFlatL2``.

    Example:
        >>> import numpy as np
        >>> LocalParty(np.eye(3)).sorted_block(np.array([0]), 2)[0].shape
        (1, 2)
    """

    def __init__(self, x) -> None:
        import faiss

        self.x = check_features(x)
        self.num_rows = self.x.shape[0]
        self._index = faiss.IndexFlatL2(self.x.shape[1])
        self._index.add(np.ascontiguousarray(self.x, dtype=np.float32))

    def sorted_block(self, queries: np.ndarray, depth: int) -> Tuple[np.ndarray, np.ndarray]:
        depth = min(int(depth), self.num_rows - 1)
        q = np.ascontiguousarray(self.x[queries], dtype=np.float32)
        _, ids = self._index.search(q, depth + 1)
        # drop the query itself (wherever ties put it), else the last column
        is_self = ids == queries[:, None]
        is_self[~is_self.any(axis=1), -1] = True
        keep = np.argsort(is_self, axis=1, kind="stable")[:, :depth]
        ids = np.take_along_axis(ids, keep, axis=1).astype(np.int64)
        last = self.partial(queries, ids[:, -1:])[:, 0]
        return ids, last

    def partial(self, queries: np.ndarray, cand: np.ndarray) -> np.ndarray:
        out = np.zeros(cand.shape, dtype=np.float64)
        chunk = max(1, 4_000_000 // max(1, cand.shape[1] * self.x.shape[1]))
        for s in range(0, len(queries), chunk):
            c = cand[s:s + chunk]
            diff = self.x[np.maximum(c, 0)] - self.x[queries[s:s + chunk], None, :]
            out[s:s + chunk] = np.einsum("qcd,qcd->qc", diff, diff)
        out[cand < 0] = 0.0
        return out


@dataclass
class FaginResult:
    """The joint ranking prefix per query: ``ids``/``dist`` ``[q, k]`` (``-1``/``inf`` beyond what was asked),
    ``depth`` read from each sorted list, and the :class:`Ledger` of what crossed parties."""

    ids: np.ndarray
    dist: np.ndarray
    depth: np.ndarray
    ledger: Ledger = field(default_factory=Ledger)
    kth_rank: Optional[np.ndarray] = None  # label-aware: 1-based rank of the k-th same-label row


def _dedupe(ids: np.ndarray) -> np.ndarray:
    """Set to -1 every repeat of an id in a row (the first occurrence, by column, stays)."""
    order = np.argsort(ids, axis=1, kind="stable")
    s = np.take_along_axis(ids, order, axis=1)
    dup = np.zeros_like(s, dtype=bool)
    dup[:, 1:] = s[:, 1:] == s[:, :-1]
    out = ids.copy()
    np.put_along_axis(out, order, np.where(dup, -1, s), axis=1)
    return out


def fagin_knn(parties: Sequence[SortedAccess], k: int, queries: Optional[np.ndarray] = None,
              labels: Optional[np.ndarray] = None, start_depth: Optional[int] = None,
              ledger: Optional[Ledger] = None, aggregate=None) -> FaginResult:
    """Exact joint KNN of ``queries`` (default: every row, each excluding itself) by the threshold algorithm.

    With ``labels``, the search runs until the certified prefix holds ``k`` rows of the query's own
    label (what the KSG-style MI estimator needs); ``kth_rank`` then gives the rank of the ``k``-th such
    row and ``ids``/``dist`` hold the same-label neighbours. Sorted lists are read in blocks whose depth
    doubles from ``start_depth`` (default ``k``). ``aggregate`` adds the parties' partial distances of the
    candidates (default: plaintext; :class:`~sgl.federated.selection.secure.PaillierSum` encrypts them).
    """
    if len(parties) == 0:
        raise ConfigError("fagin_knn needs at least one party")
    n = parties[0].num_rows
    if any(p.num_rows != n for p in parties):
        raise FeatureError(f"parties hold different row counts {[p.num_rows for p in parties]}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        raise ConfigError(f"k must be an integer in [1, {n - 1}] (rows - 1), got {k!r}")
    queries = np.arange(n) if queries is None else np.asarray(queries, dtype=np.int64)
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (n,):
            raise FeatureError(f"labels must have shape ({n},), got {labels.shape}")
        _, counts = np.unique(labels, return_counts=True)
        if counts.min() <= k:
            raise ConfigError(f"a class has {counts.min()} rows; the label-aware KNN needs more than k={k} per class")
    ledger = ledger if ledger is not None else Ledger()
    nq, num_p = len(queries), len(parties)
    out_ids = np.full((nq, k), -1, dtype=np.int64)
    out_dist = np.full((nq, k), np.inf)
    out_depth = np.zeros(nq, dtype=np.int64)
    kth_rank = np.zeros(nq, dtype=np.int64) if labels is not None else None
    active = np.arange(nq)
    cand = np.zeros((nq, 0), dtype=np.int64)
    total = np.zeros((nq, 0))
    prev, depth = 0, int(start_depth or k)
    while len(active):
        depth = min(depth, n - 1)
        q = queries[active]
        blocks, tau = [], np.zeros(len(active))
        for party in parties:
            ids, last = party.sorted_block(q, depth)
            blocks.append(ids[:, prev:])
            tau += last
        # sorted access: each party sends its new ids and its d_p[depth]; the coordinator sends the query ids
        fresh = blocks[0].shape[1] * num_p * len(active)
        ledger.add(fresh * _ID_BYTES + len(active) * (_DIST_BYTES + _ID_BYTES) * num_p, 2 * num_p)
        ledger.sorted_accesses += fresh
        merged = _dedupe(np.concatenate([cand[active]] + blocks, axis=1))
        new = merged[:, cand.shape[1]:]
        # random access: the coordinator names each new candidate to every party, which returns its distance
        width = int((new >= 0).sum(axis=1).max()) if new.size else 0
        order = np.argsort(new < 0, axis=1, kind="stable")[:, :width]
        new = np.take_along_axis(new, order, axis=1)
        new_tot = np.zeros(new.shape)
        valid = new >= 0
        n_new = int(valid.sum())
        if aggregate is None:
            new_tot[valid] = np.sum([party.partial(q, new)[valid] for party in parties], axis=0)
            value_bytes = _DIST_BYTES
        else:  # each party's values go (encrypted) to the aggregator, the sums to the key holder and back
            if n_new:
                new_tot[valid] = aggregate.total(parties, q, new, valid)
            value_bytes = aggregate.value_bytes
            ledger.add(n_new * (value_bytes + _DIST_BYTES), 2)
        ledger.add(n_new * (_ID_BYTES + value_bytes) * num_p, 2 * num_p)
        ledger.random_accesses += n_new * num_p
        # grow the candidate table to fit the widest active row
        old_c = cand.shape[1]
        cand = np.concatenate([cand, np.full((nq, width), -1, dtype=np.int64)], axis=1)
        total = np.concatenate([total, np.full((nq, width), np.inf)], axis=1)
        cand[active, old_c:] = new
        total[active, old_c:] = np.where(new >= 0, new_tot, np.inf)
        # certified prefix: seen rows with total <= tau (a tiny slack covers float32 sorting in faiss)
        t = total[active]
        certain = t <= tau[:, None] * (1 - 1e-9)
        exhausted = depth >= n - 1
        if labels is None:
            done = (certain.sum(axis=1) >= k) | exhausted
            sel = active[done]
            if len(sel):
                order = np.argsort(total[sel], axis=1, kind="stable")[:, :k]
                out_ids[sel] = np.take_along_axis(cand[sel], order, axis=1)
                out_dist[sel] = np.take_along_axis(total[sel], order, axis=1)
        else:
            same = labels[np.maximum(cand[active], 0)] == labels[q][:, None]
            same &= cand[active] >= 0
            done = ((certain & same).sum(axis=1) >= k) | exhausted
            sel = active[done]
            if len(sel):
                tt = total[sel]
                s_same = same[done]
                masked = np.where(s_same, tt, np.inf)
                order = np.argsort(masked, axis=1, kind="stable")[:, :k]
                out_ids[sel] = np.take_along_axis(cand[sel], order, axis=1)
                out_dist[sel] = np.take_along_axis(tt, order, axis=1)
                kth = out_dist[sel][:, -1]
                kth_rank[sel] = (tt <= kth[:, None]).sum(axis=1)
        out_depth[active[done]] = depth
        active = active[~done]
        prev, depth = depth, 2 * depth
    return FaginResult(out_ids, out_dist, out_depth, ledger, kth_rank)


def brute_force_knn(x, k: int, queries: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(ids, squared distances)`` ``[q, k]`` of the exact KNN on the concatenated columns (reference)."""
    x = check_features(x)
    queries = np.arange(len(x)) if queries is None else np.asarray(queries)
    d = ((x[queries, None, :] - x[None, :, :]) ** 2).sum(-1)
    d[np.arange(len(queries)), queries] = np.inf
    order = np.argsort(d, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(d, order, axis=1)
