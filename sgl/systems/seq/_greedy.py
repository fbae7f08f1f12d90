"""Compiled inner loops of the sequence planners' greedy assignments (numba, cached on disk).

The planners call these once per candidate grouping per micro-batch; in Python the per-sequence
loop (an ``argmin`` over the groups for every sequence) was most of the solver latency. Both
loops are sequential by nature (each choice depends on the loads left by the previous ones), so
they are compiled rather than vectorised. Results are identical to the Python loops they replace
(same float64 arithmetic, first index on ties): ``tests/systems/seq/test_greedy.py``.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["earliest_finish", "bin_assign"]

_MODES = {"ffd": 0, "bfd": 1, "lpt": 2}


@lru_cache(maxsize=None)
def _kernels():
    from numba import njit          # imported on first use: ``import sgl.systems.seq`` stays light

    @njit(cache=True)
    def earliest(order, lengths, load0, ga, gb, caps):
        owner = np.full(lengths.size, -1, np.int64)
        tokens = np.zeros(load0.size, np.int64)
        load = load0.copy()
        for i in order:
            s = lengths[i]
            best, where = np.inf, -1
            for j in range(load.size):
                if tokens[j] + s > caps[j]:
                    continue
                f = load[j] + ga[j] * s * s + gb[j] * s
                if f < best:
                    best, where = f, j
            if where < 0:
                return owner, False
            owner[i] = where
            tokens[where] += np.int64(s)
            load[where] = best
        return owner, True

    @njit(cache=True)
    def bins(order, lengths, weights, groups, capacity, mode):
        owner = np.full(lengths.size, -1, np.int64)
        tokens = np.zeros(groups, np.int64)
        load = np.zeros(groups)
        for i in order:
            s = lengths[i]
            where = -1
            key = np.inf
            for g in range(groups):
                room = capacity - tokens[g]
                if room < s:
                    continue
                if mode == 0:
                    where = g
                    break
                value = room if mode == 1 else load[g]
                if value < key:
                    key, where = value, g
            if where < 0:
                return owner, False
            owner[i] = where
            tokens[where] += s
            load[where] += weights[i]
        return owner, True

    return earliest, bins


def earliest_finish(order: np.ndarray, lengths: np.ndarray, load0: np.ndarray, a: np.ndarray, b: np.ndarray,
                    caps: np.ndarray):
    """Each sequence of ``order`` in turn to the group finishing earliest (``load + a·s² + b·s``)
    among those with token room. Returns ``(owner per sequence, ok)``; ``ok`` is False when a
    sequence fits no group (``owner`` is then partial)."""
    earliest, _ = _kernels()
    return earliest(np.ascontiguousarray(order, dtype=np.int64), np.asarray(lengths, dtype=np.float64),
                    np.asarray(load0, dtype=np.float64), np.asarray(a, dtype=np.float64),
                    np.asarray(b, dtype=np.float64), np.asarray(caps, dtype=np.float64))


def bin_assign(order: np.ndarray, lengths: np.ndarray, weights: np.ndarray, groups: int, capacity: int,
               method: str):
    """First-fit (``ffd``), best-fit (``bfd``, least room left) or least-loaded (``lpt``) bin per
    sequence of ``order``, never over ``capacity`` tokens. Returns ``(owner, ok)``."""
    _, bins = _kernels()
    return bins(np.ascontiguousarray(order, dtype=np.int64), np.asarray(lengths, dtype=np.int64),
                np.asarray(weights, dtype=np.float64), int(groups), int(capacity), _MODES[method])
