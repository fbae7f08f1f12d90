"""Build VEND codes from sorted neighbour lists, all vertices at once (numpy, no Python loop per vertex).

A vertex of degree ``d <= max_exact`` gets its exact list. For a higher degree the encoder
scores every candidate code (VEND, ICDE'23) and keeps the best: a *window* of ``b`` consecutive
ids ``N[s..s+b-1]`` of the sorted neighbour list ``N`` certifies the interval ``[lo, hi]``
(``lo = N[s]``, or 0 for a left-most window; ``hi = N[s+b-1]``, or ``n - 1`` for a right-most one)
exactly, and the other ``r = d - b`` neighbours go to a bitmap of ``H = P - 3 - LB - HB - b VB``
bits with ``Z`` zero bits and ``h`` hash functions. An id outside the window is certified when one
of its ``h`` bits is zero, with probability ``c = 1 - (1 - Z / H)^h``, so the score, the number of
non-neighbours the code certifies, is

    score(b, s) = (hi - lo + 1 - b)  +  (n - (hi - lo + 1)) * c,

the exact count inside the window plus the expected count outside it; ``b = 0`` is the pure
bitmap (``FULL_HASH``, ``score = n c``). With the paper's one hash (``hashes="one"``) ``c = Z / H``
and this is the paper's score. With ``hashes="optimal"`` the bitmap of every window size uses
the ``h`` in ``1..16`` minimising the expected false-positive rate ``(1 - exp(-h r / H))^h``
(:func:`hash_counts`; the integer next to ``ln 2 * H / r``), which depends on ``b`` but not on
``s``, and ``Z`` is still counted exactly for each window.

For one ``b`` the encoder scores all windows of all vertices together: a bitmap slot empties
for window ``s`` exactly when all the neighbours hashed to it (by any of the ``h`` functions)
lie inside the window, i.e. for ``s`` in ``[last - b + 1, first]`` (positions of the slot's first
and last neighbour), so a difference array over window starts gives ``Z`` for every window in
``O(h E)`` (after one sort of the (neighbour, hash function) pairs by hash, shared by all ``b``).
"""
from __future__ import annotations

from typing import Tuple

import math

import numpy as np

from sgl.analytics.vend.layout import (FULL_HASH, LEFT, MAX_HASHES, MIDDLE, RIGHT, CodeLayout, bitmap_slots, hash_keys,
                                       or_field)

__all__ = ["encode_neighbors", "write_exact", "choose_windows", "row_entries", "hash_counts"]
_LOW32 = np.uint64(0xFFFFFFFF)


def row_entries(indptr: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(row, position-in-row)`` of every CSR entry."""
    deg = np.diff(indptr)
    rows = np.repeat(np.arange(deg.size, dtype=np.int64), deg)
    return rows, np.arange(rows.size, dtype=np.int64) - indptr[rows]


def hash_counts(layout: CodeLayout, buckets, keys) -> np.ndarray:
    """Hash functions of a bitmap of ``buckets`` bits over ``keys`` neighbours (``int64``, broadcast).

    1 for the one-hash layout, an empty bitmap or no keys; otherwise the ``h`` in ``1..16`` with the
    least ``(1 - exp(-h r / H))^h`` (floor or ceiling of ``ln 2 * H / r``: the rate is unimodal in ``h``).
    Query and update recompute nothing: the encoder stores ``h`` in the code.
    """
    buckets, keys = np.broadcast_arrays(np.asarray(buckets, dtype=np.float64), np.asarray(keys, dtype=np.float64))
    if layout.hashes == "one":
        return np.ones(buckets.shape, dtype=np.int64)
    usable = (buckets > 0) & (keys > 0)
    load = np.where(usable, keys / np.where(usable, buckets, 1.0), 0.0)
    low = np.clip(np.floor(math.log(2) / np.where(usable, load, 1.0)), 1, MAX_HASHES)
    high = np.minimum(low + 1, MAX_HASHES)
    better = (1 - np.exp(-high * load)) ** high < (1 - np.exp(-low * load)) ** low
    return np.where(usable & better, high, np.where(usable, low, 1)).astype(np.int64)


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
    """(Neighbour, hash function) pairs sorted once by (row, 32-bit hash ``g_i``): for every bitmap
    size ``H`` the pairs of one (row, slot) are then a contiguous run (the slot is monotone in
    ``g_i``, see :func:`~sgl.analytics.vend.layout.bitmap_slots`), so no sort is needed per window size.

    ``copies`` is the number of hash functions each row may use (1 for every row: the one-hash codes).
    """

    def __init__(self, seg: np.ndarray, position: np.ndarray, nbrs: np.ndarray, copies: np.ndarray) -> None:
        high, step = hash_keys(nbrs)
        per_entry = copies[seg]
        ptr = np.zeros(per_entry.size + 1, dtype=np.int64)
        np.cumsum(per_entry, out=ptr[1:])
        entry, fn = row_entries(ptr)
        g = (high[entry] + fn.astype(np.uint64) * step[entry]) & _LOW32
        order = np.lexsort((g, seg[entry]))
        self.seg, self.position, self.g, self.fn = seg[entry][order], position[entry][order], g[order], fn[order]
        self.single = bool((copies <= 1).all())

    def spans(self, buckets: int, hashes: np.ndarray):
        """Per occupied (row, slot) of a bitmap of ``buckets`` bits whose row ``r`` uses ``hashes[r]``
        functions: the row, and the first and last position of the neighbours hashed there."""
        seg, position, g = self.seg, self.position, self.g
        if not self.single:
            keep = self.fn < hashes[seg]
            seg, position, g = seg[keep], position[keep], g[keep]
        slot = (g * np.uint64(buckets)) >> np.uint64(32)
        starts = np.flatnonzero(np.concatenate(([True], (seg[1:] != seg[:-1]) | (slot[1:] != slot[:-1]))))
        return seg[starts], np.minimum.reduceat(position, starts), np.maximum.reduceat(position, starts)


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
    # hash functions of each row's bitmap for every window size (1 for one hash)
    counts = hash_counts(layout, layout.hash_bits(np.arange(layout.max_window + 1))[None, :],
                         deg[:, None] - np.arange(layout.max_window + 1)[None, :])
    groups = _SlotGroups(seg, position, nbrs, counts.max(axis=1)) if bitmap else None
    lo_id = np.where(position == 0, 0, nbrs)                 # a window starting at 0 is left-most
    room = deg[seg] - position                               # ids from this position to the row's end
    index = np.arange(nbrs.size)
    for b in sizes:
        buckets = int(layout.hash_bits(b)) if bitmap else 0
        zeros = 0.0
        if buckets > 0:
            group_row, first, last = groups.spans(buckets, counts[:, b])
            zeros = (buckets - np.bincount(group_row, minlength=rows))[seg]
            if b > 0:
                # a slot empties for window starts s in [last - b + 1, first] (and s <= deg - b)
                lo = np.maximum(last - b + 1, 0)
                hi = np.minimum(first, deg[group_row] - b)
                ok = lo <= hi
                diff = (np.bincount(ptr[group_row[ok]] + lo[ok], minlength=nbrs.size + 1)
                        - np.bincount(ptr[group_row[ok]] + hi[ok] + 1, minlength=nbrs.size + 1))
                zeros = zeros + np.cumsum(diff)[:nbrs.size]
        if buckets == 0:
            certified = 0.0
        elif layout.hashes == "one":
            certified = zeros / buckets
        else:
            certified = 1.0 - (1.0 - zeros / buckets) ** counts[seg, b]
        if b == 0:
            if buckets == 0:
                continue
            score = np.where(position == 0, n * certified, -np.inf)
        else:
            hi_id = np.where(room == b, n - 1, nbrs[np.minimum(index + b - 1, nbrs.size - 1)])
            span = hi_id - lo_id + 1
            score = (span - b) + (n - span) * certified
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
        counts = hash_counts(layout, layout.hash_bits(size), np.diff(ptr) - size)
        if layout.hash_count_bits:
            or_field(words, k, rows, layout.hash_count_offset, layout.hash_count_bits, counts - 1)
        buckets = layout.hash_bits(size)[seg]
        # a code with no bitmap bits left answers Uncertain outside its window: nothing to set
        hashed = np.flatnonzero(~inside & (buckets > 0))
        keys = hash_keys(nbrs[hashed])
        base = layout.window_base + size[seg[hashed]] * vb
        for i in range(int(counts.max(initial=1))):
            on = counts[seg[hashed]] > i
            bit = bitmap_slots((keys[0][on], keys[1][on]), buckets[hashed[on]], i)
            or_field(words, k, rows[seg[hashed[on]]], base[on] + bit, 1, 1)


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
