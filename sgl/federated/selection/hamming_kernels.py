"""Numba kernels of HaCore's Hamming k-medoids on packed ``uint64`` signatures.

At coreset sizes (thousands of rows, hundreds of medoids per class) the fixed costs of building a
faiss index every round dominate, so the three steps run as compiled loops over the words:

- :func:`nearest_scan`: every row's nearest medoid by an exact popcount scan, ``O(n k W)``;
- :func:`nearest_probe`: the inverted index. A medoid is filed under its *key*, the bits at
  ``key_pos``; a row looks only in the buckets whose key differs from its own by one of the
  ``flips`` masks (all masks of weight ``<= radius``) and falls back to the exact scan when they are
  all empty, ``O(n (|flips| + k |flips| / 2^|key_pos|) W)``;
- :func:`bitcount_medoids`: the medoid update by bit counting. In a cluster of ``n`` rows with ``c_b``
  ones at bit ``b``, a row's total Hamming distance to the cluster is ``sum_b (x_b ? n - c_b : c_b)``,
  so every cluster's exact medoid costs ``O(n · bits)`` instead of ``O(n^2)``;
- :func:`kmedoid_rounds`: the alternating rounds of one class in a single call, each distinct
  signature assigned once.

Ties go to the lowest medoid position (assignment) and the lowest row (update). Host-only code:
the arrays are numpy.

Example:
    >>> import numpy as np
    >>> words = np.array([[0b0000], [0b0011], [0b1111], [0b1110]], dtype=np.uint64)
    >>> best, dist = nearest_scan(words, words[[0, 2]])
    >>> best.tolist(), dist.tolist()
    ([0, 0, 1, 1], [0, 2, 0, 1])
    >>> bits = np.array([[0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 1, 1]], dtype=np.uint8)
    >>> bitcount_medoids(bits, np.array([0, 0, 1, 1]), 2).tolist()
    [0, 2]
"""
from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import numpy as np
from numba import njit, prange

__all__ = ["flip_masks", "row_keys", "nearest_scan", "nearest_probe", "bitcount_medoids", "kmedoid_rounds"]


def flip_masks(key_bits: int, radius: int) -> np.ndarray:
    """``int64`` XOR masks of every key within Hamming ``radius`` (``1 + 9 + 36 = 46`` for 9 bits, radius 2)."""
    out = _flip_masks(int(key_bits), int(radius))
    out.flags.writeable = False
    return out


@lru_cache(maxsize=64)
def _flip_masks(key_bits: int, radius: int) -> np.ndarray:
    out = [0]
    for r in range(1, min(radius, key_bits) + 1):
        out += [sum(1 << b for b in c) for c in combinations(range(key_bits), r)]
    return np.array(out, dtype=np.int64)


@njit(cache=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True)
def _distance(a, i, b, j):
    d = np.int64(0)
    for w in range(a.shape[1]):
        d += np.int64(_popcount(a[i, w] ^ b[j, w]))
    return d


@njit(cache=True)
def row_keys(words, key_pos):
    """``int64 [n]``: each row's key, bit ``t`` of the key = signature bit ``key_pos[t]``."""
    n = words.shape[0]
    keys = np.zeros(n, dtype=np.int64)
    for i in range(n):
        key = 0
        for t in range(key_pos.shape[0]):
            b = key_pos[t]
            key |= np.int64((words[i, b >> 6] >> np.uint64(b & 63)) & np.uint64(1)) << t
        keys[i] = key
    return keys


@njit(cache=True)
def _scan_row(words, i, med_words):
    best = np.int64(1) << 62  # (distance << 32) | position: one min keeps the lowest position among ties
    for j in range(med_words.shape[0]):
        best = min(best, (_distance(words, i, med_words, j) << 32) | j)
    return best & 0xFFFFFFFF, best >> 32


@njit(cache=True, parallel=True)
def nearest_scan(words, med_words):
    """``(position of the nearest medoid [n], its Hamming distance [n])`` by an exact popcount scan."""
    n = words.shape[0]
    best = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=np.int64)
    for i in prange(n):
        best[i], dist[i] = _scan_row(words, i, med_words)
    return best, dist


@njit(cache=True, parallel=True)
def nearest_probe(words, med_words, key_pos, flips):
    """Like :func:`nearest_scan`, but a row only compares the medoids in the buckets ``key ^ flips``."""
    n, k, nw = words.shape[0], med_words.shape[0], words.shape[1]
    keys = row_keys(words, key_pos)
    med_keys = row_keys(med_words, key_pos)
    ptr = np.zeros((1 << key_pos.shape[0]) + 1, dtype=np.int64)
    for j in range(k):
        ptr[med_keys[j] + 1] += 1
    for b in range(1, ptr.shape[0]):
        ptr[b] += ptr[b - 1]
    fill = ptr[:-1].copy()
    bucket = np.empty(k, dtype=np.int64)  # medoid positions, grouped by key, increasing within a bucket
    bucket_words = np.empty((k, nw), dtype=words.dtype)  # their words in the same order: a sequential read
    for j in range(k):
        p = fill[med_keys[j]]
        bucket[p] = j
        bucket_words[p] = med_words[j]
        fill[med_keys[j]] += 1
    best = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=np.int64)
    # rows that share a key probe the same buckets: gather those medoids once per key, then scan them;
    # the key groups are independent, so they run in parallel
    order = np.argsort(keys, kind="mergesort")
    starts = np.empty(n + 1, dtype=np.int64)
    groups = 0
    for t in range(n):
        if t == 0 or keys[order[t]] != keys[order[t - 1]]:
            starts[groups] = t
            groups += 1
    starts[groups] = n
    for g in prange(groups):
        start, stop = starts[g], starts[g + 1]
        key = keys[order[start]]
        cand = np.empty(k, dtype=np.int64)
        cand_words = np.empty((k, nw), dtype=words.dtype)
        m = 0
        for f in range(flips.shape[0]):
            b = key ^ flips[f]
            for p in range(ptr[b], ptr[b + 1]):
                cand[m] = bucket[p]
                cand_words[m] = bucket_words[p]
                m += 1
        for t in range(start, stop):
            i = order[t]
            if m == 0:  # every probed bucket empty: exact scan
                best[i], dist[i] = _scan_row(words, i, med_words)
                continue
            top = np.int64(1) << 62
            for c in range(m):
                top = min(top, (_distance(words, i, cand_words, c) << 32) | cand[c])
            best[i], dist[i] = top & 0xFFFFFFFF, top >> 32
    return best, dist


@njit(cache=True)
def bitcount_medoids(bits, assign, k):
    """Row id of each cluster's exact Hamming medoid: ``bits`` is the ``uint8 [n, nbits]`` 0/1 signature
    matrix, ``assign`` in ``0..k-1`` with every cluster non-empty. A row's total distance to its cluster,
    ``sum_b (x_b ? n - c_b : c_b) = sum_b c_b + sum_b x_b (n - 2 c_b)``, is a dot product per row."""
    n, nbits = bits.shape
    ones = np.zeros((k, nbits), dtype=np.int64)
    count = np.zeros(k, dtype=np.int64)
    for i in range(n):
        c = assign[i]
        count[c] += 1
        for b in range(nbits):
            ones[c, b] += bits[i, b]
    base = np.zeros(k, dtype=np.int64)
    for c in range(k):
        for b in range(nbits):
            base[c] += ones[c, b]
            ones[c, b] = count[c] - 2 * ones[c, b]  # from here on: the gain of a one at bit b
    med = np.full(k, -1, dtype=np.int64)
    cost = np.full(k, np.int64(1) << 62, dtype=np.int64)
    for i in range(n):
        c = assign[i]
        total = base[c]
        for b in range(nbits):
            total += bits[i, b] * ones[c, b]
        if total < cost[c]:
            cost[c], med[c] = total, i
    return med


@njit(cache=True)
def kmedoid_rounds(uniq, inv, bits, med, iters, key_pos, flips):
    """``iters`` alternating rounds (assign, update) and a final assignment, in one call.

    ``uniq`` are the distinct packed signatures and ``inv`` each row's index into them (rows with one
    signature are assigned once), ``bits`` the rows' ``uint8`` 0/1 signatures, ``med`` the initial medoid
    rows; an empty ``key_pos`` means the exact scan. Returns ``(medoid rows [k], assignment [n])``; every
    medoid is assigned to its own cluster."""
    k = med.shape[0]
    assign = np.empty(inv.shape[0], dtype=np.int64)
    for rnd in range(iters + 1):
        med_words = np.empty((k, uniq.shape[1]), dtype=uniq.dtype)
        for c in range(k):
            med_words[c] = uniq[inv[med[c]]]
        if key_pos.shape[0] == 0:
            near = nearest_scan(uniq, med_words)[0]
        else:
            near = nearest_probe(uniq, med_words, key_pos, flips)[0]
        for i in range(inv.shape[0]):
            assign[i] = near[inv[i]]
        for c in range(k):
            assign[med[c]] = c
        if rnd < iters:
            med = bitcount_medoids(bits, assign, k)
    return med, assign
