"""Build VEND codes from sorted neighbour lists, all vertices at once (numpy, no Python loop per vertex).

A vertex of degree ``d <= max_exact`` gets its exact list. For a higher degree the encoder
scores every candidate code (VEND, ICDE'23) and keeps the best: a *window* of ``b`` consecutive
ids ``N[s..s+b-1]`` of the sorted neighbour list ``N`` certifies the interval ``[lo, hi]``
(``lo = N[s]``, or 0 for a left-most window; ``hi = N[s+b-1]``, or ``n - 1`` for a right-most one)
exactly, and the other neighbours go to a one-hash bitmap of ``H = P - 3 - LB - b VB`` bits with
``Z`` zero bits. The score counts the non-neighbours the code certifies,

    score(b, s) = (hi - lo + 1 - b)  +  (n - (hi - lo + 1)) * Z / H,

the exact count inside the window plus the expected count outside it (an id outside lands on
a zero bit with probability ``Z / H``); ``b = 0`` is the pure bitmap (``FULL_HASH``,
``score = n Z / H``).

For one ``b`` the encoder scores all windows of all vertices together: a bitmap slot empties
for window ``s`` exactly when all the neighbours hashed to it lie inside the window, i.e. for
``s`` in ``[last - b + 1, first]`` (positions of the slot's first and last neighbour), so a
difference array over window starts gives ``Z`` for every window in ``O(E)`` (after one sort of
the neighbours by hash, shared by all ``b``).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from sgl.analytics.vend.layout import FULL_HASH, LEFT, MIDDLE, RIGHT, CodeLayout, bitmap_slot, hash_ids, or_field

__all__ = ["encode_neighbors", "write_exact", "choose_windows", "row_entries"]


def row_entries(indptr: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(row, position-in-row)`` of every CSR entry."""
    deg = np.diff(indptr)
    rows = np.repeat(np.arange(deg.size, dtype=np.int64), deg)
    return rows, np.arange(rows.size, dtype=np.int64) - indptr[rows]


def write_exact(layout: CodeLayout, words: np.ndarray, rows: np.ndarray, indptr: np.ndarray,
                indices: np.ndarray) -> None:
    """Write decodable codes (flag, count, sorted ids) for the CSR ``rows`` into ``words``."""
    if rows.size == 0:
        return
    deg = np.diff(indptr)
    or_field(words, layout.k, rows, 0, 1, 1)
    or_field(words, layout.k, rows, 1, layout.count_bits, deg[rows])
    entry_row, position = row_entries(indptr)
    chosen = np.zeros(deg.size, dtype=bool)
    chosen[rows] = True
    keep = chosen[entry_row]
    or_field(words, layout.k, entry_row[keep], layout.exact_base + position[keep] * layout.id_bits,
             layout.id_bits, indices[keep])


class _SlotGroups:
    """Neighbours sorted once by (row, top 32 hash bits): for every bitmap size ``H`` the entries of
    one (row, slot) pair are then a contiguous run (the slot is monotone in the hash, see
    :func:`~sgl.analytics.vend.layout.bitmap_slot`), so no sort is needed per window size."""

    def __init__(self, seg: np.ndarray, position: np.ndarray, nbrs: np.ndarray) -> None:
        high = hash_ids(nbrs) >> np.uint64(32)
        order = np.lexsort((high, seg))
        self.seg, self.position, self.high = seg[order], position[order], high[order]
        self.new_row = np.concatenate(([True], self.seg[1:] != self.seg[:-1]))

    def spans(self, buckets: int):
        """Per occupied (row, slot): the row, and the first and last position of its neighbours."""
        slot = (self.high * np.uint64(buckets)) >> np.uint64(32)
        starts = np.flatnonzero(self.new_row | np.concatenate(([True], slot[1:] != slot[:-1])))
        return (self.seg[starts], np.minimum.reduceat(self.position, starts),
                np.maximum.reduceat(self.position, starts))


def _segment_argmax(score: np.ndarray, position: np.ndarray, ptr: np.ndarray, seg: np.ndarray):
    best = np.maximum.reduceat(score, ptr[:-1])
    big = np.iinfo(np.int64).max
    first = np.minimum.reduceat(np.where(score == best[seg], position, big), ptr[:-1])
    return best, first


def choose_windows(layout: CodeLayout, ptr: np.ndarray, nbrs: np.ndarray, *, bitmap: bool = True,
                   progress: bool = False):
    """Best ``(window size, window start, block type, score)`` per row of a CSR of high-degree rows.

    ``bitmap=False`` gives the range-filter baseline: the largest window, no bitmap.
    """
    n, rows = layout.num_nodes, ptr.size - 1
    seg, position = row_entries(ptr)
    deg = np.diff(ptr)
    best_score = np.full(rows, -np.inf)
    best_b = np.zeros(rows, dtype=np.int64)
    best_s = np.zeros(rows, dtype=np.int64)
    sizes = range(layout.max_window + 1) if bitmap else [layout.max_window]
    if progress:
        from tqdm.auto import tqdm

        sizes = tqdm(sizes, desc="VEND windows", unit="size", leave=False, disable=None)
    groups = _SlotGroups(seg, position, nbrs) if bitmap else None
    lo_id = np.where(position == 0, 0, nbrs)                 # a window starting at 0 is left-most
    room = deg[seg] - position                               # ids from this position to the row's end
    index = np.arange(nbrs.size)
    for b in sizes:
        buckets = int(layout.hash_bits(b)) if bitmap else 0
        zeros = 0.0
        if buckets > 0:
            group_row, first, last = groups.spans(buckets)
            zeros = (buckets - np.bincount(group_row, minlength=rows))[seg]
            if b > 0:
                # a slot empties for window starts s in [last - b + 1, first] (and s <= deg - b)
                lo = np.maximum(last - b + 1, 0)
                hi = np.minimum(first, deg[group_row] - b)
                ok = lo <= hi
                diff = (np.bincount(ptr[group_row[ok]] + lo[ok], minlength=nbrs.size + 1)
                        - np.bincount(ptr[group_row[ok]] + hi[ok] + 1, minlength=nbrs.size + 1))
                zeros = zeros + np.cumsum(diff)[:nbrs.size]
        if b == 0:
            if buckets == 0:
                continue
            score = np.where(position == 0, n * zeros / buckets, -np.inf)
        else:
            hi_id = np.where(room == b, n - 1, nbrs[np.minimum(index + b - 1, nbrs.size - 1)])
            span = hi_id - lo_id + 1
            score = (span - b) + ((n - span) * zeros / buckets if buckets else 0.0)
            score = np.where(room >= b, score, -np.inf)
        top, start = _segment_argmax(score, position, ptr, seg)
        better = top > best_score
        best_score[better], best_b[better], best_s[better] = top[better], b, start[better]
    kind = np.where(best_b == 0, FULL_HASH,
                    np.where(best_s == 0, LEFT, np.where(best_s == deg - best_b, RIGHT, MIDDLE)))
    return best_b, best_s, kind, best_score


def _write_windows(layout: CodeLayout, words: np.ndarray, rows: np.ndarray, ptr: np.ndarray,
                   nbrs: np.ndarray, bitmap: bool, progress: bool) -> None:
    size, start, kind, _ = choose_windows(layout, ptr, nbrs, bitmap=bitmap, progress=progress)
    k, vb = layout.k, layout.id_bits
    or_field(words, k, rows, 1, 2, kind)
    or_field(words, k, rows, 3, layout.size_bits, size)
    seg, position = row_entries(ptr)
    offset = position - start[seg]
    inside = (offset >= 0) & (offset < size[seg])
    or_field(words, k, rows[seg[inside]], layout.window_base + offset[inside] * vb, vb, nbrs[inside])
    if bitmap:
        buckets = layout.hash_bits(size)[seg]
        # a code with no bitmap bits left answers Uncertain outside its window: nothing to set
        hashed = ~inside & (buckets > 0)
        bit = bitmap_slot(nbrs[hashed], buckets[hashed])
        base = layout.window_base + size[seg[hashed]] * vb
        or_field(words, k, rows[seg[hashed]], base + bit, 1, 1)


def encode_neighbors(layout: CodeLayout, indptr: np.ndarray, indices: np.ndarray, *, bitmap: bool = True,
                     progress: bool = False) -> np.ndarray:
    """Codes, shape ``(rows, k)`` ``uint64``, for the sorted, duplicate-free CSR lists ``indptr/indices``."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    rows = indptr.size - 1
    words = np.zeros(rows * layout.k, dtype=np.uint64)
    deg = np.diff(indptr)
    exact = deg <= layout.max_exact
    write_exact(layout, words, np.flatnonzero(exact), indptr, indices)
    high = np.flatnonzero(~exact)
    if high.size:
        sub_deg = deg[high]
        ptr = np.zeros(high.size + 1, dtype=np.int64)
        np.cumsum(sub_deg, out=ptr[1:])
        seg, position = row_entries(ptr)
        nbrs = indices[indptr[high][seg] + position]
        _write_windows(layout, words, high, ptr, nbrs, bitmap, progress)
    return words.reshape(rows, layout.k)
