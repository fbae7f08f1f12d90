"""Context-window packings: the result type, the overlong-document policy and the four packers.

A :class:`Packing` is a list of *segments* ``(window, doc, start, length)``: tokens
``[start, start + length)`` of document ``doc`` placed in window ``window``. Invariants
(:meth:`Packing.validate`): no window holds more than ``capacity`` tokens, segments of one
document never overlap, and every token is placed once, except the tail of a document that
the ``"truncate"`` policy dropped (counted in ``dropped_tokens``).

A document longer than the window is handled by ``overlong``: ``"split"`` (default; ⌊L/C⌋
full windows of it, the remainder ``L mod C`` packed like any document), ``"truncate"`` (its
first ``C`` tokens fill one window, the rest is dropped), or ``"error"``
(:class:`~sgl.errors.DatasetError`). Either way the document is reported as truncated.

Packers of whole documents (no document that fits a window is ever cut):

* :func:`greedy_assign` — DataSculpt's fine stage: documents in decreasing length; document
  ``i`` goes to the open window ``w`` with room that maximises
  ``rel(w, i) · r_w``, ``rel = (1 + cos(s_w, x_i)) / 2`` with ``s_w`` the sum (running centre)
  of the window's embeddings and ``r_w`` its remaining capacity; an empty window has
  ``rel = 1``. ``⌊Σ L / C⌋`` windows are open at the start (the W longest documents seed them),
  and a new one opens only when nothing fits. O(n·W·d), a numba loop.
* :func:`bfd_assign` — best-fit decreasing (the tightest window that fits), O(n log W).

Packers that concatenate and cut (each cut document is *truncated*, i.e. split over windows):
:func:`concat_segments` over a random order (standard pre-training concatenation) or over the
ICLM-style similarity chain of :func:`similarity_chain`.

>>> import numpy as np
>>> lengths = np.array([6, 5, 4, 3, 2])
>>> bfd_assign(lengths, 8).tolist()
[0, 1, 2, 1, 0]
>>> p = concat_segments(np.arange(5), lengths, capacity=8)
>>> p.num_windows, p.truncated_docs().tolist()
(3, [1, 3])
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Tuple, Union

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError, DatasetError
from sgl.fileio import atomic_write

__all__ = ["Packing", "OVERLONG_POLICIES", "split_overlong", "greedy_assign", "bfd_assign", "concat_segments",
           "similarity_chain", "segments_from_assignment"]

OVERLONG_POLICIES = ("split", "truncate", "error")


@dataclass
class Packing:
    """Segments ``(window, doc, start, length)`` sorted by window, then placement order."""

    capacity: int
    window: np.ndarray
    doc: np.ndarray
    start: np.ndarray
    length: np.ndarray
    doc_lengths: np.ndarray
    method: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def num_windows(self) -> int:
        return int(self.window.max()) + 1 if self.window.size else 0

    def window_tokens(self) -> np.ndarray:
        return np.bincount(self.window, weights=self.length, minlength=self.num_windows).astype(np.int64)

    def truncated_docs(self) -> np.ndarray:
        """Documents not placed whole in one window (split over windows or cut short)."""
        pieces = np.bincount(self.doc, minlength=self.doc_lengths.size)
        placed = np.bincount(self.doc, weights=self.length, minlength=self.doc_lengths.size)
        return np.flatnonzero((pieces > 1) | (placed < self.doc_lengths))

    @property
    def dropped_tokens(self) -> int:
        return int(self.doc_lengths.sum() - self.length.sum())

    def windows(self) -> List[List[Tuple[int, int, int]]]:
        """Per window, its ``(doc, start, length)`` segments in order."""
        out: List[List[Tuple[int, int, int]]] = [[] for _ in range(self.num_windows)]
        for w, d, s, n in zip(self.window.tolist(), self.doc.tolist(), self.start.tolist(), self.length.tolist()):
            out[w].append((d, s, n))
        return out

    def validate(self) -> "Packing":
        """Check capacity and coverage; raises :class:`~sgl.errors.DatasetError` naming the violation."""
        tokens = self.window_tokens()
        if tokens.size and tokens.max() > self.capacity:
            w = int(tokens.argmax())
            raise DatasetError(f"window {w} holds {int(tokens[w])} tokens > capacity {self.capacity}")
        if np.any(self.length <= 0) or np.any(self.start < 0):
            raise DatasetError("a segment has a non-positive length or a negative start")
        order = np.lexsort((self.start, self.doc))
        d, s, n = self.doc[order], self.start[order], self.length[order]
        same = d[1:] == d[:-1]
        if np.any(same & (s[1:] < s[:-1] + n[:-1])):
            raise DatasetError("two segments of one document overlap")
        if np.any(s + n > self.doc_lengths[d]):
            raise DatasetError("a segment runs past the end of its document")
        placed = np.bincount(self.doc, weights=self.length, minlength=self.doc_lengths.size)
        missing = np.flatnonzero(placed == 0)
        if missing.size:
            raise DatasetError(f"{missing.size} documents are not placed (first: {int(missing[0])})")
        return self

    def to_jsonl(self, path: Union[str, Path]) -> None:
        """One line per window: ``{"window": w, "tokens": t, "segments": [[doc, start, length], ...]}``."""
        with atomic_write(path, "w") as handle:
            write_windows(handle, self.windows(), 0)

    @classmethod
    def from_jsonl(cls, path: Union[str, Path], doc_lengths: np.ndarray, capacity: int) -> "Packing":
        rows = []
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                rows.extend((record["window"], *seg) for seg in record["segments"])
        arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        return cls(capacity, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], np.asarray(doc_lengths, np.int64))


def write_windows(handle, windows: Iterable[List[Tuple[int, int, int]]], first: int) -> int:
    """Append windows as JSON lines numbered from ``first``; returns the next number."""
    number = first
    for segs in windows:
        handle.write(json.dumps({"window": number, "tokens": int(sum(s[2] for s in segs)),
                                 "segments": [list(map(int, s)) for s in segs]}) + "\n")
        number += 1
    return number


def check_capacity(capacity: int) -> int:
    return check_int(capacity, "window (tokens per context window)", minimum=1, error=ConfigError)


def split_overlong(lengths: np.ndarray, capacity: int, policy: str = "split"):
    """``(full, items)``: whole-window pieces of overlong documents and the pieces left to pack.

    Each is ``(doc, start, length)`` int64 columns; ``items`` holds every document that fits a
    window plus the ``L mod C`` remainders (``"split"``).
    """
    capacity = check_capacity(capacity)
    check_choice(policy, "overlong policy", OVERLONG_POLICIES)
    lengths = np.asarray(lengths, dtype=np.int64)
    long_docs = np.flatnonzero(lengths > capacity)
    if long_docs.size and policy == "error":
        d = int(long_docs[0])
        raise DatasetError(f"{long_docs.size} documents are longer than the window of {capacity} tokens "
                           f"(document {d} has {int(lengths[d])}); raise the window or use the overlong "
                           f"policy 'split' (cut into windows) or 'truncate' (keep the first window)")
    if policy == "split":
        full_count = lengths[long_docs] // capacity
    else:
        full_count = np.ones(long_docs.size, dtype=np.int64)
    full_doc = np.repeat(long_docs, full_count)
    first = np.cumsum(full_count) - full_count
    full_start = (np.arange(full_doc.size) - np.repeat(first, full_count)) * capacity
    full = (full_doc, full_start, np.full(full_doc.size, capacity, dtype=np.int64))
    item_len = lengths.copy()
    item_start = np.zeros_like(lengths)
    if policy == "split":
        item_len[long_docs] = lengths[long_docs] % capacity
        item_start[long_docs] = full_count * capacity
    else:
        item_len[long_docs] = 0
    keep = np.flatnonzero(item_len > 0)
    return full, (keep, item_start[keep], item_len[keep])


def _greedy_kernel(emb, lens, order, capacity, n_open):  # pragma: no cover - compiled by numba
    m, d = emb.shape
    size = n_open + m + 1
    sums = np.zeros((size, d), dtype=np.float32)
    sq = np.zeros(size, dtype=np.float64)
    rem = np.full(size, capacity, dtype=np.int64)
    cnt = np.zeros(size, dtype=np.int64)
    out = np.empty(m, dtype=np.int64)
    nw = n_open
    for idx in order:
        length = lens[idx]
        best = -1
        best_score = -1.0
        for w in range(nw):
            r = rem[w]
            if r >= length:
                if cnt[w] == 0:
                    rel = 1.0
                else:
                    dot = 0.0
                    for j in range(d):
                        dot += sums[w, j] * emb[idx, j]
                    rel = 0.5 * (1.0 + dot / np.sqrt(sq[w])) if sq[w] > 0 else 0.5
                score = rel * r
                if score > best_score:
                    best_score = score
                    best = w
        if best < 0:
            best = nw
            nw += 1
        dot = 0.0
        self_sq = 0.0
        for j in range(d):
            dot += sums[best, j] * emb[idx, j]
            self_sq += emb[idx, j] * emb[idx, j]
            sums[best, j] += emb[idx, j]
        sq[best] += 2.0 * dot + self_sq
        rem[best] -= length
        cnt[best] += 1
        out[idx] = best
    return out, nw


_COMPILED = None


def _kernel():
    global _COMPILED
    if _COMPILED is None:
        try:
            import numba
            compiled = numba.njit(cache=True, nogil=True)(_greedy_kernel)
            # compile now, so the first packing's timing is the packing
            compiled(np.zeros((1, 1), np.float32), np.ones(1, np.int64), np.zeros(1, np.int64), np.int64(1),
                     np.int64(1))
            _COMPILED = compiled
        except ImportError:  # pragma: no cover - numba is a dependency; the loop still runs
            _COMPILED = _greedy_kernel
    return _COMPILED


def greedy_assign(embeddings: np.ndarray, lengths: np.ndarray, capacity: int) -> Tuple[np.ndarray, int]:
    """DataSculpt's relevance × remaining-capacity greedy: ``(window of each item, number of windows)``.

    Every length must be ``<= capacity`` (apply :func:`split_overlong` first).
    """
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    if lengths.max() > capacity:
        raise DatasetError(f"greedy_assign: an item of {int(lengths.max())} tokens exceeds the window "
                           f"{capacity}; split overlong documents first")
    emb = np.ascontiguousarray(embeddings, dtype=np.float32)
    order = np.argsort(-lengths, kind="stable")
    n_open = max(1, int(lengths.sum()) // capacity)
    return _kernel()(emb, lengths, order, np.int64(capacity), np.int64(n_open))


def bfd_assign(lengths: np.ndarray, capacity: int) -> np.ndarray:
    """Best-fit decreasing: each item (longest first) into the fullest window it fits."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.empty(lengths.size, dtype=np.int64)
    free: List[Tuple[int, int]] = []  # sorted (remaining, window)
    count = 0
    for i in np.argsort(-lengths, kind="stable").tolist():
        need = int(lengths[i])
        pos = bisect.bisect_left(free, (need, -1))
        if pos < len(free):
            room, w = free.pop(pos)
        else:
            room, w = capacity, count
            count += 1
        out[i] = w
        if room - need > 0:
            bisect.insort(free, (room - need, w))
    return out


def segments_from_assignment(full, items, assignment: np.ndarray, num_windows: int, capacity: int,
                             doc_lengths: np.ndarray, method: str, order_key: np.ndarray = None) -> Packing:
    """A :class:`Packing` from whole-window pieces (one window each) plus packed items."""
    fd, fs, fl = full
    idoc, istart, ilen = items
    window = np.concatenate([np.arange(fd.size), assignment + fd.size]).astype(np.int64)
    doc = np.concatenate([fd, idoc])
    start = np.concatenate([fs, istart])
    length = np.concatenate([fl, ilen])
    key = np.concatenate([np.zeros(fd.size), -ilen if order_key is None else order_key]).astype(np.float64)
    order = np.lexsort((key, window))
    return Packing(capacity, window[order], doc[order], start[order], length[order],
                   np.asarray(doc_lengths, np.int64), method)


def concat_segments(order: np.ndarray, lengths: np.ndarray, capacity: int, method: str = "concat") -> Packing:
    """Concatenate documents in ``order`` into one stream and cut it every ``capacity`` tokens."""
    capacity = check_capacity(capacity)
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.asarray(order, dtype=np.int64)
    seq = lengths[order]
    begin = np.cumsum(seq) - seq
    end = begin + seq
    first_w, last_w = begin // capacity, (end - 1) // capacity
    pieces = last_w - first_w + 1
    doc = np.repeat(order, pieces)
    offset = np.arange(pieces.sum()) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    window = np.repeat(first_w, pieces) + offset
    lo = np.maximum(np.repeat(begin, pieces), window * capacity)
    hi = np.minimum(np.repeat(end, pieces), (window + 1) * capacity)
    start = lo - np.repeat(begin, pieces)
    return Packing(capacity, window, doc, start, hi - lo, lengths, method)


def similarity_chain(embeddings: np.ndarray, *, neighbours: int = 32) -> np.ndarray:
    """ICLM-style document order: walk to the most similar unvisited neighbour, else the next unvisited.

    Neighbours come from an exact inner-product faiss index (``neighbours`` per document).
    """
    import faiss

    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    n = x.shape[0]
    k = min(check_int(neighbours, "neighbours", minimum=1) + 1, n)
    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    _, nbrs = index.search(x, k)
    visited = np.zeros(n, dtype=bool)
    order = np.empty(n, dtype=np.int64)
    cursor = 0  # lowest index that may still be unvisited
    current = 0
    for step in range(n):
        visited[current] = True
        order[step] = current
        nxt = -1
        for j in nbrs[current].tolist():
            if j >= 0 and not visited[j]:
                nxt = j
                break
        if nxt < 0:
            while cursor < n and visited[cursor]:
                cursor += 1
            if cursor == n:
                break
            nxt = cursor
        current = nxt
    return order
