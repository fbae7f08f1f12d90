"""Numba kernels of HaCore: signatures on each client, Hamming k-medoids of every class at the label owner.

At coreset sizes (thousands of rows, hundreds of medoids per class) fixed costs dominate, so every
step is a compiled loop on one thread (waking threads costs more than it saves on a shared machine;
the clients' signature kernels are in :mod:`sgl.federated.selection.signature_kernels`):

- :func:`nearest_scan`: every row's nearest medoid by an exact popcount scan, ``O(n k W)``;
- :func:`nearest_probe`: the inverted index. A medoid is filed under its *key*, the bits at
  ``key_pos``; a row looks only in the buckets whose key differs from its own by one of the
  ``flips`` masks (all masks of weight ``<= radius``) and falls back to the exact scan when they are
  all empty, ``O(n (|flips| + k |flips| / 2^|key_pos|) W)``;
- :func:`bitcount_medoids`: the medoid update by bit counting. In a cluster of ``n`` rows with ``c_b``
  ones at bit ``b``, a row's total Hamming distance to the cluster is ``sum_b (x_b ? n - c_b : c_b)``,
  so every cluster's exact medoid costs ``O(n · bits)`` instead of ``O(n^2)``;
- :func:`kmedoid_rounds`: the alternating rounds of one class in a single call, each distinct
  signature assigned once (a signature that is a medoid's own without a search; in the exact scan, a
  row whose medoid stayed compares only the medoids that moved);
- :func:`coreset_classes`: every class in one call (:func:`distinct_rows` by hashing,
  :func:`auto_index_bits` scan-or-index by a cost model, :func:`balanced_bits` for the keys);
  :func:`draw_initial` draws the initial medoids both coresets share.

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
from numba import njit

__all__ = ["flip_masks", "row_keys", "nearest_scan", "nearest_probe", "bitcount_medoids", "kmedoid_rounds",
           "distinct_rows", "draw_initial", "auto_index_bits", "balanced_bits",
           "coreset_classes"]


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
def _nearest1(x, cand, pos, m):
    """``(distance << 32) | position`` of the nearest of the first ``m`` one-word signatures ``cand``: a flat
    loop over 1-d arrays, which LLVM vectorises (popcount and min over several candidates at once)."""
    top = np.int64(1) << 62
    for c in range(m):
        top = min(top, (np.int64(_popcount(x ^ cand[c])) << 32) | pos[c])
    return top


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


@njit(cache=True)
def nearest_scan(words, med_words):
    """``(position of the nearest medoid [n], its Hamming distance [n])`` by an exact popcount scan."""
    n = words.shape[0]
    best = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=np.int64)
    for i in range(n):
        best[i], dist[i] = _scan_row(words, i, med_words)
    return best, dist


@njit(cache=True)
def _key_groups(keys):
    """Rows sorted by key and the start of each key's run: rows that share a key probe the same buckets."""
    n = keys.shape[0]
    order = np.argsort(keys, kind="mergesort")
    starts = np.empty(n + 1, dtype=np.int64)
    groups = 0
    for t in range(n):
        if t == 0 or keys[order[t]] != keys[order[t - 1]]:
            starts[groups] = t
            groups += 1
    starts[groups] = n
    return order, starts[:groups + 1]


@njit(cache=True)
def _probe(words, keys, order, starts, med_words, med_pos, med_keys, nkeys, flips, match, best, dist):
    """Nearest medoid of every row through the buckets ``key ^ flips``; ``match[i] >= 0`` is a medoid with the
    row's own signature (distance 0, nothing to probe). ``med_pos`` are the positions reported for the
    medoid words (increasing), so a tie goes to the lowest position."""
    k, nw = med_words.shape[0], words.shape[1]
    ptr = np.zeros(nkeys + 1, dtype=np.int64)
    for j in range(k):
        ptr[med_keys[j] + 1] += 1
    for b in range(1, ptr.shape[0]):
        ptr[b] += ptr[b - 1]
    fill = ptr[:-1].copy()
    bucket = np.empty(k, dtype=np.int64)  # medoid positions, grouped by key, increasing within a bucket
    bucket_words = np.empty((k, nw), dtype=words.dtype)  # their words in the same order: a sequential read
    for j in range(k):
        q = fill[med_keys[j]]
        bucket[q] = med_pos[j]
        bucket_words[q] = med_words[j]
        fill[med_keys[j]] += 1
    cand = np.empty(k, dtype=np.int64)
    cand_words = np.empty((k, nw), dtype=words.dtype)
    one = nw == 1  # the common case (<= 64 bits): flat 1-d candidate arrays
    cand1 = np.empty(k, dtype=words.dtype)
    med1 = med_words[:, 0].copy()
    for g in range(starts.shape[0] - 1):
        start, stop = starts[g], starts[g + 1]
        todo = 0
        for t in range(start, stop):
            i = order[t]
            if match[i] >= 0:
                best[i], dist[i] = match[i], 0
            else:
                todo += 1
        if todo == 0:
            continue
        key = keys[order[start]]
        m = 0  # gather the probed buckets' medoids once per key
        for f in range(flips.shape[0]):
            b = key ^ flips[f]
            for q in range(ptr[b], ptr[b + 1]):
                cand[m] = bucket[q]
                if one:
                    cand1[m] = bucket_words[q, 0]
                else:
                    cand_words[m] = bucket_words[q]
                m += 1
        for t in range(start, stop):
            i = order[t]
            if match[i] >= 0:
                continue
            if one:
                top = _nearest1(words[i, 0], cand1, cand, m) if m else _nearest1(words[i, 0], med1, med_pos, k)
            else:
                top = np.int64(1) << 62
                if m == 0:  # every probed bucket empty: exact scan
                    for j in range(k):
                        top = min(top, (_distance(words, i, med_words, j) << 32) | med_pos[j])
                else:
                    for c in range(m):
                        top = min(top, (_distance(words, i, cand_words, c) << 32) | cand[c])
            best[i], dist[i] = top & 0xFFFFFFFF, top >> 32


@njit(cache=True)
def nearest_probe(words, med_words, key_pos, flips):
    """Like :func:`nearest_scan`, but a row only compares the medoids in the buckets ``key ^ flips``."""
    n, k = words.shape[0], med_words.shape[0]
    keys = row_keys(words, key_pos)
    order, starts = _key_groups(keys)
    best = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=np.int64)
    _probe(words, keys, order, starts, med_words, np.arange(k), row_keys(med_words, key_pos),
           1 << key_pos.shape[0], flips, np.full(n, -1, dtype=np.int64), best, dist)
    return best, dist


@njit(cache=True)
def bitcount_medoids(bits, assign, k):
    """Row id of each cluster's exact Hamming medoid: ``bits`` is the ``uint8 [n, nbits]`` 0/1 signature
    matrix, ``assign`` in ``0..k-1`` with every cluster non-empty. A row's total distance to its cluster,
    ``sum_b (x_b ? n - c_b : c_b) = sum_b c_b + sum_b x_b (n - 2 c_b)``, is a dot product per row
    (``int32`` counters: the inner loops over the bits vectorise)."""
    n, nbits = bits.shape
    ones = np.zeros((k, nbits), dtype=np.int32)
    count = np.zeros(k, dtype=np.int32)
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
        gain = np.int32(0)
        for b in range(nbits):
            gain += bits[i, b] * ones[c, b]
        total = base[c] + gain
        if total < cost[c]:
            cost[c], med[c] = total, i
    return med


@njit(cache=True)
def kmedoid_rounds(uniq, inv, bits, med, iters, key_pos, flips):
    """``iters`` alternating rounds (assign, update) and a final assignment, in one call.

    ``uniq`` are the distinct packed signatures and ``inv`` each row's index into them (rows with one
    signature are assigned once), ``bits`` the rows' ``uint8`` 0/1 signatures, ``med`` the initial medoid
    rows; an empty ``key_pos`` means the exact scan. A signature that is some medoid's own is assigned to
    the lowest such medoid without a search, and medoids that repeat a lower medoid's signature are left
    out of the search (they can only tie with it, and ties go to the lowest position): the result is the
    plain assignment's. Returns ``(medoid rows [k], assignment [n])``; every medoid is assigned to its own
    cluster."""
    k, m, nw = med.shape[0], uniq.shape[0], uniq.shape[1]
    probe = key_pos.shape[0] > 0
    keys = row_keys(uniq, key_pos)  # signatures never change: keys and key groups are set up once
    order, starts = _key_groups(keys)
    match = np.empty(m, dtype=np.int64)
    near = np.empty(m, dtype=np.int64)
    dist = np.empty(m, dtype=np.int64)
    assign = np.empty(inv.shape[0], dtype=np.int64)
    prev = np.full(k, -1, dtype=np.int64)  # the medoids of the previous assignment
    for rnd in range(iters + 1):
        match[:] = -1
        for c in range(k - 1, -1, -1):
            match[inv[med[c]]] = c
        distinct, fresh = 0, 0
        for c in range(k):
            if match[inv[med[c]]] == c:
                distinct += 1
                fresh += med[c] != prev[c]
        med_pos = np.empty(distinct, dtype=np.int64)
        med_words = np.empty((distinct, nw), dtype=uniq.dtype)
        med_keys = np.empty(distinct, dtype=np.int64)
        new_pos = np.empty(fresh, dtype=np.int64)
        new_words = np.empty((fresh, nw), dtype=uniq.dtype)
        j, f = 0, 0
        for c in range(k):
            u = inv[med[c]]
            if match[u] == c:
                med_pos[j], med_words[j], med_keys[j] = c, uniq[u], keys[u]
                j += 1
                if med[c] != prev[c]:
                    new_pos[f], new_words[f] = c, uniq[u]
                    f += 1
        if probe:
            _probe(uniq, keys, order, starts, med_words, med_pos, med_keys, 1 << key_pos.shape[0], flips, match,
                   near, dist)
        else:
            # exact scan; a row whose nearest medoid stayed only needs the medoids that moved: the rest were
            # all farther (or tied at a higher position) last round
            med1, new1 = med_words[:, 0].copy(), new_words[:, 0].copy()
            for i in range(m):
                if match[i] >= 0:
                    near[i], dist[i] = match[i], 0
                    continue
                kept = rnd > 0 and prev[near[i]] == med[near[i]]
                if nw == 1:
                    if kept:
                        top = min((dist[i] << 32) | near[i], _nearest1(uniq[i, 0], new1, new_pos, fresh))
                    else:
                        top = _nearest1(uniq[i, 0], med1, med_pos, distinct)
                else:
                    top = (dist[i] << 32) | near[i] if kept else np.int64(1) << 62
                    for j in range(fresh if kept else distinct):
                        if kept:
                            top = min(top, (_distance(uniq, i, new_words, j) << 32) | new_pos[j])
                        else:
                            top = min(top, (_distance(uniq, i, med_words, j) << 32) | med_pos[j])
                near[i], dist[i] = top & 0xFFFFFFFF, top >> 32
        prev[:] = med
        for i in range(inv.shape[0]):
            assign[i] = near[inv[i]]
        for c in range(k):
            assign[med[c]] = c
        if rnd < iters:
            med = bitcount_medoids(bits, assign, k)
    return med, assign


# ---------------------------------------------------------------- k-medoids of every class, at the label owner


@njit(cache=True)
def _unpack(words, nbits):
    n = words.shape[0]
    bits = np.empty((n, nbits), dtype=np.uint8)
    for i in range(n):
        for b in range(nbits):
            bits[i, b] = (words[i, b >> 6] >> np.uint64(b & 63)) & np.uint64(1)
    return bits


@njit(cache=True)
def _mix(h):
    """splitmix64's finaliser: a well-spread 64-bit hash."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True)
def distinct_rows(words):
    """``(distinct rows in order of first appearance, each row's index into them)``, through an
    open-addressing hash table of the rows' words: ``O(n)``, no sort."""
    n, nw = words.shape
    size = 1
    while size < 2 * n:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)  # slot -> index of the distinct row
    first = np.empty(n, dtype=np.int64)
    inv = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        h = np.uint64(0x9E3779B97F4A7C15)
        for w in range(nw):
            h = _mix(h ^ words[i, w])
        slot = h & mask
        while True:
            g = table[slot]
            if g < 0:
                table[slot] = m
                first[m] = i
                inv[i] = m
                m += 1
                break
            j = first[g]
            same = True
            for w in range(nw):
                if words[i, w] != words[j, w]:
                    same = False
                    break
            if same:
                inv[i] = g
                break
            slot = (slot + np.uint64(1)) & mask
    uniq = np.empty((m, nw), dtype=words.dtype)
    for g in range(m):
        uniq[g] = words[first[g]]
    return uniq, inv


@njit(cache=True)
def draw_initial(starts, ks, seed):
    """Initial medoids of every class: ``k_c`` of its ``n_c`` positions, uniformly without replacement (a
    partial Fisher-Yates shuffle driven by splitmix64 from ``seed``), ascending within each class;
    the classes' positions concatenated."""
    total = 0
    for c in range(ks.shape[0]):
        total += ks[c]
    out = np.empty(total, dtype=np.int64)
    state = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
    off = 0
    for c in range(ks.shape[0]):
        n, k = starts[c + 1] - starts[c], ks[c]
        perm = np.arange(n)
        for j in range(k):
            state += np.uint64(0x9E3779B97F4A7C15)
            r = j + np.int64(_mix(state) % np.uint64(n - j))
            perm[j], perm[r] = perm[r], perm[j]
        out[off:off + k] = np.sort(perm[:k])
        off += k
    return out


@njit(cache=True)
def auto_index_bits(k, distinct, nbits):
    """Key bits by a cost model in units of one (vectorised) popcount comparison, fitted on this module's
    kernels: an exact scan costs ``distinct · k``; a probe round with ``b`` key bits costs ``distinct · (1200
    + k · F(b) / 2^b)`` (a row's bucket gathering and short scan, then the medoids in its buckets) plus
    ``7 · min(distinct, 2^b) · F(b)`` (``F(b) = 1 + b + b(b-1)/2`` keys within radius 2). 0 (the scan) when
    it is cheapest, else 9 bits or more, up to 16."""
    best, best_cost = 0, float(distinct) * k
    for b in range(min(9, nbits), min(nbits, 16) + 1):
        f = 1.0 + b + b * (b - 1) / 2.0
        cost = distinct * (1200.0 + k * f / 2.0 ** b) + 7.0 * min(distinct, 2 ** b) * f
        if cost < best_cost:
            best, best_cost = b, cost
    return best


@njit(cache=True)
def balanced_bits(bits, index_bits, perm):
    """The ``index_bits`` signature bits whose share of ones is nearest 1/2 (ties in the order ``perm``),
    ascending: the keys then spread the medoids over the buckets."""
    n, nbits = bits.shape
    ones = np.zeros(nbits, dtype=np.int64)
    for i in range(n):
        for b in range(nbits):
            ones[b] += bits[i, b]
    balance = np.empty(nbits, dtype=np.int64)
    for t in range(nbits):
        balance[t] = abs(2 * ones[perm[t]] - n)
    pick = perm[np.argsort(balance, kind="mergesort")[:index_bits]]
    return np.sort(pick)


@njit(cache=True)
def coreset_classes(words, nbits, order, starts, ks, init, iters, index_bits, flip_table, flip_count, perm):
    """HaCore at the label owner, every class in one call: class ``c`` holds the rows
    ``order[starts[c]:starts[c + 1]]`` (ascending), gets ``ks[c]`` medoids from the initial positions
    ``init[sum(ks[:c]):sum(ks[:c + 1])]`` (into its rows), and runs :func:`kmedoid_rounds` on its distinct
    signatures with ``index_bits`` key bits (``-1``: :func:`auto_index_bits`; ``0``: the exact scan) and
    the masks ``flip_table[b, :flip_count[b]]``. Returns ``(medoid row ids [sum(ks)], cluster of every
    row [n] in 0..sum(ks)-1)``: the clusters of class ``c`` are numbered from ``sum(ks[:c])``."""
    med_rows, cluster = np.empty(ks.sum(), dtype=np.int64), np.full(words.shape[0], -1, dtype=np.int64)
    off = 0
    for c in range(ks.shape[0]):
        rows = order[starts[c]:starts[c + 1]]
        k = ks[c]
        w = words[rows]
        bits = _unpack(w, nbits)
        uniq, inv = distinct_rows(w)
        ib = auto_index_bits(k, uniq.shape[0], nbits) if index_bits < 0 else index_bits
        key_pos = balanced_bits(bits, ib, perm) if ib > 0 else np.zeros(0, dtype=np.int64)
        med, assign = kmedoid_rounds(uniq, inv, bits, init[off:off + k].copy(), iters, key_pos,
                                     flip_table[ib, :flip_count[ib]])
        for j in range(k):
            med_rows[off + j] = rows[med[j]]
        for t in range(rows.shape[0]):
            cluster[rows[t]] = off + assign[t]
        off += k
    return med_rows, cluster
