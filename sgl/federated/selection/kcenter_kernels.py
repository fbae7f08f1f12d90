"""Numba kernels of HaCore's farthest-first (k-center) coreset in Hamming space, every class in one call.

Greedy k-center (Gonzalez 1985) per class: the first centre is the class's first initial medoid; each
next centre is the signature farthest from the centres chosen so far (a 2-approximation of the
smallest covering radius). It covers a class's boundary as well as its middle, where k-medoids puts
its medoids in the dense middle. Each row ends in the cluster of its nearest centre (ties to the
earlier centre), and the cluster sizes are the weights.

The traversal runs on the class's *distinct* signatures (rows with equal bits are one point): each
new centre updates every distinct signature's distance to its nearest centre and finds the next
farthest in one flat loop (popcount, compare, select and max over contiguous arrays, which LLVM
vectorises), ``O(u k W)`` for ``u`` distinct signatures. Once every distinct signature is a centre
(``k >= u``, e.g. diamonds at 64 bits), the remaining centres go one at a time to the signature with
the most rows per centre (D'Hondt's rule), and a signature's rows are split evenly, in row order,
between its centres, so the extra centres are other rows of the busiest signatures.

Host-only code: the arrays are numpy.

Example:
    >>> import numpy as np
    >>> words = np.array([[0b0000], [0b0001], [0b1111], [0b0111], [0b1100]], dtype=np.uint64)
    >>> centres, cluster = kcenter_classes(words, np.arange(5), np.array([0, 5]), np.array([3]), np.array([0]))
    >>> centres.tolist(), cluster.tolist()
    ([0, 2, 4], [0, 0, 1, 1, 2])
"""
from __future__ import annotations

import numpy as np
from numba import njit

from sgl.federated.selection.hamming_kernels import distinct_rows

__all__ = ["farthest_first", "kcenter_classes"]

_LOW = np.int64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _pop(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


# The three updates below repeat their fold step (keep the nearer centre, track the farthest) on purpose:
# a shared helper taking the arrays adds reference counting inside the loop, and the loop stops vectorising.
@njit(cache=True)
def _update1(w0, c0, t, dist, near):
    """Fold centre ``t`` (one word ``c0``) into the signatures ``w0`` (one word each; the caller passes
    slices: a loop over ``range(a, e)`` does not vectorise); returns the packed ``(distance << 32) |
    (2^32 - 1 - position)`` of the farthest of them (lowest position among ties)."""
    top = np.int64(-1)
    for i in range(w0.shape[0]):
        d = _pop(w0[i] ^ c0)
        better = d < dist[i]
        near[i] = t if better else near[i]
        nd = d if better else dist[i]
        dist[i] = nd
        top = max(top, (nd << 32) | (_LOW - i))
    return top


@njit(cache=True)
def _update2(w0, w1, c0, c1, t, dist, near):
    """:func:`_update1` for two-word signatures (the words as two flat arrays, so the loop vectorises)."""
    top = np.int64(-1)
    for i in range(w0.shape[0]):
        d = _pop(w0[i] ^ c0) + _pop(w1[i] ^ c1)
        better = d < dist[i]
        near[i] = t if better else near[i]
        nd = d if better else dist[i]
        dist[i] = nd
        top = max(top, (nd << 32) | (_LOW - i))
    return top


@njit(cache=True)
def _update(w, c, t, dist, near):
    """:func:`_update1` for signatures of any number of words (``c``: the centre's words)."""
    top = np.int64(-1)
    for i in range(w.shape[0]):
        d = np.int64(0)
        for s in range(w.shape[1]):
            d += _pop(w[i, s] ^ c[s])
        better = d < dist[i]
        near[i] = t if better else near[i]
        nd = d if better else dist[i]
        dist[i] = nd
        top = max(top, (nd << 32) | (_LOW - i))
    return top


@njit(cache=True)
def farthest_first(w, k, first, block=1024):
    """Greedy k-center of the distinct packed signatures ``w`` ``[u, W]`` from position ``first``: at most
    ``min(k, u)`` centres (it stops when every signature is a centre). Returns ``(centre positions in the
    order chosen, nearest centre of every signature [u])``; ties go to the earlier centre (assignment).

    The signatures are sorted by their distance ``q`` to the first centre (the pivot) and cut into blocks
    of ``block``, each with its farthest signature. A new centre ``c`` at the current farthest distance
    ``r`` can only take signatures with ``|q - q_c| < r`` (triangle inequality), so only those blocks are
    visited, and of those only the ones whose farthest signature lies beyond their ``q`` gap to ``c``."""
    u, nw = w.shape
    kk = min(k, u)
    nbits = 64 * nw
    q = np.empty(u, dtype=np.int64)
    for i in range(u):
        d = np.int64(0)
        for s in range(nw):
            d += _pop(w[i, s] ^ w[first, s])
        q[i] = d
    qstart = np.zeros(nbits + 2, dtype=np.int64)  # counting sort by q: value v at qstart[v]..qstart[v+1]-1
    for i in range(u):
        qstart[q[i] + 1] += 1
    for v in range(nbits + 1):
        qstart[v + 1] += qstart[v]
    fill = qstart[:-1].copy()
    perm = np.empty(u, dtype=np.int64)
    for i in range(u):
        perm[fill[q[i]]] = i
        fill[q[i]] += 1
    sw = np.empty((u, nw), dtype=w.dtype)
    sq = np.empty(u, dtype=np.int64)
    for p in range(u):
        sw[p] = w[perm[p]]
        sq[p] = q[perm[p]]
    w0 = sw[:, 0].copy()
    w1 = sw[:, 1].copy() if nw == 2 else np.empty(0, dtype=w.dtype)
    dist = sq.copy()
    near = np.zeros(u, dtype=np.int64)
    nblk = (u + block - 1) // block
    bmax = np.zeros(nblk, dtype=np.int64)
    barg = np.zeros(nblk, dtype=np.int64)
    for b in range(nblk):
        for i in range(b * block, min(u, (b + 1) * block)):
            if dist[i] > bmax[b]:
                bmax[b], barg[b] = dist[i], i
    cen = np.empty(kk, dtype=np.int64)
    cen[0] = 0  # the pivot sorts first (q = 0); any duplicate of it is not in w
    t = 1
    while t < kk:
        top = np.int64(-1)
        for b in range(nblk):
            top = max(top, (bmax[b] << 32) | (_LOW - barg[b]))
        r = top >> 32
        if r == 0:
            break
        g = _LOW - (top & _LOW)
        cen[t] = g
        qc = sq[g]
        lo = qstart[max(0, qc - r + 1)]
        hi = qstart[min(nbits, qc + r - 1) + 1]
        for b in range(lo // block, (hi - 1) // block + 1):
            a, e = b * block, min(u, (b + 1) * block)
            gap = sq[a] - qc if qc < sq[a] else (qc - sq[e - 1] if qc > sq[e - 1] else 0)
            if gap >= bmax[b]:
                continue
            if nw == 1:
                tb = _update1(w0[a:e], w0[g], t, dist[a:e], near[a:e])
            elif nw == 2:
                tb = _update2(w0[a:e], w1[a:e], w0[g], w1[g], t, dist[a:e], near[a:e])
            else:
                tb = _update(sw[a:e], sw[g].copy(), t, dist[a:e], near[a:e])
            bmax[b], barg[b] = tb >> 32, a + _LOW - (tb & _LOW)
        t += 1
    near_orig = np.empty(u, dtype=np.int64)
    for p in range(u):
        near_orig[perm[p]] = near[p]
    centres = np.empty(t, dtype=np.int64)
    for j in range(t):
        centres[j] = perm[cen[j]]
    return centres, near_orig


@njit(cache=True)
def _dhondt(counts, ncen, extra):
    """Give ``extra`` more centres, one at a time, to the signature with the most rows per centre (ties
    to the lowest position), never more centres than rows: a binary max-heap on ``counts / ncen``."""
    u = counts.shape[0]
    heap = np.empty(u, dtype=np.int64)
    size = 0
    for g in range(u):
        if ncen[g] < counts[g]:
            heap[size] = g
            size += 1
            i = size - 1
            while i > 0:
                p = (i - 1) // 2
                if _before(counts, ncen, heap[i], heap[p]):
                    heap[i], heap[p] = heap[p], heap[i]
                    i = p
                else:
                    break
    for _ in range(extra):
        g = heap[0]
        ncen[g] += 1
        if ncen[g] == counts[g]:  # full: drop it
            size -= 1
            heap[0] = heap[size]
        i = 0
        while True:
            a, b, best = 2 * i + 1, 2 * i + 2, i
            if a < size and _before(counts, ncen, heap[a], heap[best]):
                best = a
            if b < size and _before(counts, ncen, heap[b], heap[best]):
                best = b
            if best == i:
                break
            heap[i], heap[best] = heap[best], heap[i]
            i = best
    return ncen


@njit(cache=True, inline="always")
def _before(counts, ncen, g, h):
    left, right = counts[g] * ncen[h], counts[h] * ncen[g]  # counts[g]/ncen[g] > counts[h]/ncen[h]
    return left > right or (left == right and g < h)


@njit(cache=True)
def kcenter_classes(words, order, starts, ks, init, block=1024):
    """HaCore's k-center at the label owner, every class in one call: class ``c`` holds the rows
    ``order[starts[c]:starts[c + 1]]`` (ascending), gets ``ks[c]`` centres, the first at its first
    initial medoid ``init[sum(ks[:c])]`` (a position into its rows). Returns ``(centre row ids
    [sum(ks)], cluster of every row [n] in 0..sum(ks)-1)``: the clusters of class ``c`` are numbered
    from ``sum(ks[:c])`` in the order the centres were chosen."""
    centre_rows, cluster = np.empty(ks.sum(), dtype=np.int64), np.full(words.shape[0], -1, dtype=np.int64)
    off = 0
    for c in range(ks.shape[0]):
        rows = order[starts[c]:starts[c + 1]]
        k = ks[c]
        uniq, inv = distinct_rows(words[rows])
        cen, near = farthest_first(uniq, k, inv[init[off]], block)
        u = uniq.shape[0]
        if cen.shape[0] == k:  # every row to its signature's nearest centre, the centre at its first row
            first_row = np.full(u, -1, dtype=np.int64)
            for t in range(rows.shape[0]):
                if first_row[inv[t]] < 0:
                    first_row[inv[t]] = t
                cluster[rows[t]] = off + near[inv[t]]
            for j in range(k):
                centre_rows[off + j] = rows[first_row[cen[j]]]
        else:  # every signature is a centre (cen is a permutation): share out the rest, split the rows
            counts = np.zeros(u, dtype=np.int64)
            for t in range(rows.shape[0]):
                counts[inv[t]] += 1
            ncen = _dhondt(counts, np.ones(u, dtype=np.int64), k - u)
            slot = np.empty(u, dtype=np.int64)  # cluster number of each signature's first centre
            nxt = off + u
            for j in range(u):
                g = cen[j]
                slot[g] = off + j
            extra_slot = np.empty(u, dtype=np.int64)
            for j in range(u):
                g = cen[j]
                extra_slot[g] = nxt  # its extra centres take the next numbers, in centre order
                nxt += ncen[g] - 1
            seen = np.zeros(u, dtype=np.int64)
            for t in range(rows.shape[0]):  # row s of a signature's n rows goes to its part s * ncen // n
                g, r = inv[t], seen[inv[t]]
                part = r * ncen[g] // counts[g]
                num = slot[g] if part == 0 else extra_slot[g] + part - 1
                if r == 0 or part != (r - 1) * ncen[g] // counts[g]:
                    centre_rows[num] = rows[t]  # the first row of each part is its centre
                cluster[rows[t]] = num
                seen[g] += 1
        off += k
    return centre_rows, cluster
