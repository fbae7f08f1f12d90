"""Numba kernels of HaCore's client side: each client's column statistics and its packed SimHash bits.

A client reads its ``[n, d]`` block twice (:func:`client_stats`: column means, then the mean centred
row norm that sets its share of the bits and the scale of its hyperplane offsets) and once more to
write its bits (:func:`simhash_into`); no projected ``[n, bits]`` matrix is ever formed. Host-only code:
the arrays are numpy.

Example:
    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> words = np.zeros((3, 1), dtype=np.uint64)
    >>> simhash_into(x, np.array([[1.0, 0.0], [0.0, 1.0]]), np.zeros(2), 0, words)  # bit t: x . rt[t] > 0
    >>> words[:, 0].tolist()
    [1, 2, 0]
    >>> client_stats(x)[0].round(3).tolist()
    [0.0, 0.333]
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["client_stats", "simhash_into"]


@njit(cache=True, fastmath=True)
def client_stats(x):
    """``(column means [d], mean centred row norm)`` of one client's ``[n, d]`` block, in two passes
    (``fastmath``: the row norms' sums may be reassociated, so they vectorise)."""
    n, d = x.shape
    m = np.zeros(d)
    for i in range(n):
        for f in range(d):
            m[f] += x[i, f]
    m /= n
    total = 0.0
    for i in range(n):
        t = 0.0
        for f in range(d):
            v = x[i, f] - m[f]
            t += v * v
        total += np.sqrt(t)
    return m, total / n


@njit(cache=True, fastmath=True)
def simhash_into(x, rt, shift, first, words):
    """Set bit ``first + t`` of every row's packed ``words`` to ``1[x_i . rt[t] > shift[t]]`` (``rt`` is
    ``[bits, d]``), in one pass over the client's ``[n, d]`` block, with no projected matrix. The rows go
    in transposed chunks of 256, so each dot product vectorises over the rows, four bits at a time (one
    load of the block feeds four products); each word is written once. The products are float32 (twice
    the lanes): only the sign of a random projection is kept, and rounding can flip it only for a row
    within about 1e-6 (relative) of a hyperplane."""
    n, d = x.shape
    b = rt.shape[0]
    chunk = 256
    xt = np.empty((d, chunk), dtype=np.float32)
    s = np.empty((4, chunk), dtype=np.float32)
    acc = np.zeros(chunk, dtype=np.uint64)
    r32 = rt.astype(np.float32)
    for s0 in range(0, n, chunk):
        m = min(chunk, n - s0)
        for i in range(m):
            for f in range(d):
                xt[f, i] = x[s0 + i, f]
        t = 0
        while t < b:  # the bits that land in one word
            pos = first + t
            lo = pos & 63
            span = min(b - t, 64 - lo)
            acc[:m] = 0
            u = 0
            while u < span:
                g = min(4, span - u)
                s[:, :m] = 0.0
                for f in range(d):
                    c0 = r32[t + u, f]
                    c1 = r32[t + u + 1, f] if g > 1 else np.float32(0.0)
                    c2 = r32[t + u + 2, f] if g > 2 else np.float32(0.0)
                    c3 = r32[t + u + 3, f] if g > 3 else np.float32(0.0)
                    for i in range(m):
                        v = xt[f, i]
                        s[0, i] += v * c0
                        s[1, i] += v * c1
                        s[2, i] += v * c2
                        s[3, i] += v * c3
                for q in range(g):
                    thr, bit = shift[t + u + q], np.uint64(1) << np.uint64(lo + u + q)
                    for i in range(m):
                        if s[q, i] > thr:
                            acc[i] |= bit
                u += g
            for i in range(m):
                words[s0 + i, pos >> 6] |= acc[i]
            t += span
