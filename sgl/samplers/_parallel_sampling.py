"""numba kernel of :class:`sgl.samplers.NeighborSampler`'s parallel path (``threads=...``).

Every row draws from its own counter-based stream, ``splitmix64(key, node, draw)``, so the
sample depends on the seed and the node ids only — never on how rows are split among
threads: 1 and 2 threads give the same output.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0


@njit(inline="always", cache=True)
def _mix(z):  # pragma: no cover - compiled
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(inline="always", cache=True)
def _uniform(key, node, draw):  # pragma: no cover - compiled
    """A float in [0, 1) from the (key, node, draw) counter."""
    z = _mix(key + np.uint64(node) * _GOLDEN) + np.uint64(draw) * _GOLDEN
    return np.float64(_mix(z) >> np.uint64(11)) * _INV53


@njit(parallel=True, cache=True, nogil=True)
def sample_positions(indptr, nodes, first, fanout, replace, key, pos):  # pragma: no cover - compiled
    """Fill ``pos[first[r]:first[r] + count_r]`` with the sampled edge positions of row ``r``.

    Rows with ``deg <= fanout`` keep all edges in CSR order; larger rows draw a uniform
    ``fanout``-subset with Floyd's algorithm (``replace``: ``fanout`` independent draws).
    """
    for r in prange(nodes.size):
        v = nodes[r]
        start = indptr[v]
        deg = indptr[v + 1] - start
        base = first[r]
        if deg == 0:
            continue
        if replace:
            for i in range(fanout):
                pos[base + i] = start + np.int64(_uniform(key, v, i) * deg)
            continue
        if deg <= fanout:
            for i in range(deg):
                pos[base + i] = start + i
            continue
        for i in range(fanout):
            j = deg - fanout + i
            t = np.int64(_uniform(key, v, i) * (j + 1))
            for q in range(i):
                if pos[base + q] == start + t:
                    t = j
                    break
            pos[base + i] = start + t


def set_threads(threads: int) -> int:
    workers = max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(workers)
    return workers
