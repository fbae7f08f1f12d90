"""Kernels of :class:`sgl.samplers.NeighborSampler`'s parallel path (``threads=...``).

Every row draws from its own counter-based stream, ``splitmix64(key, node, draw)``, so the
sample depends on the seed and the node ids only — never on how rows are split among
threads: 1 and 2 threads give the same output.

One hop of an in-memory graph is three compiled passes, all writing into preallocated arrays:
:func:`hop_offsets` (each row's slot range), :func:`draw_rows` (Floyd's draws fused with the
gather of the neighbour ids, straight into the block's ``[2, E]`` edge index) and
:func:`relabel` (first-occurrence order, through a persistent ``node -> local`` map whose
entries carry the batch's stamp, so no pass ever resets it). Rows are random
nodes, so each starts with two dependent cache misses (``indptr``, then ``indices``); the
loops prefetch them a few rows ahead.

Threads: :func:`run_rows` splits the rows into chunks that the calling thread and helper
threads claim in turn, and cancels a helper that has not started by the time the work runs
out. A hop never waits for a thread the OS has not scheduled (a numba ``prange`` region
ends at a barrier that does: on a busy 2-core machine that cost ~10 ms per hop, 10x the
hop), and a forked worker process, whose helpers are gone, simply does all chunks itself.
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, Sequence

import numpy as np
from numba import njit

from sgl.ops._spmm_numba import _prefetch

__all__ = ["hop_offsets", "positions_rows", "positions_rows_at", "draw_rows", "relabel", "run_rows"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0
# prefetch distances (rows for indptr / a row's first neighbours, edges for the map);
# measured on the 1M-node bench graph: 16/8 rows, and 64 edges for the independent map lookups
_AHEAD = np.int64(16)
_AHEAD_ROW = np.int64(8)
_AHEAD_EDGE = np.int64(64)


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


@njit(cache=True, nogil=True)
def hop_offsets(indptr, nodes, fanout, replace, first):  # pragma: no cover - compiled
    """``first[r]`` = the first slot of row ``r`` (rows keep ``min(deg, fanout)`` edges, ``fanout``
    with ``replace`` when ``deg > 0``); returns the total number of slots."""
    total = 0
    n = nodes.size
    for r in range(n):
        if r + _AHEAD < n:
            _prefetch(indptr, np.uint64(nodes[r + _AHEAD]))
        v = nodes[r]
        deg = indptr[v + 1] - indptr[v]
        first[r] = total
        if replace:
            total += fanout if deg > 0 else 0
        else:
            total += deg if deg < fanout else fanout
    return total


@njit(inline="always", cache=True)
def _row_offsets(indptr, nodes, first, fanout, replace, key, buf, r):  # pragma: no cover - compiled
    """Draw row ``r``'s edge offsets (relative to its CSR start) into ``buf[first[r]:]``.

    Rows with ``deg <= fanout`` keep all edges in CSR order; larger rows draw a uniform
    ``fanout``-subset with Floyd's algorithm: step ``i`` draws ``t`` in ``[0, deg - fanout + i]``
    and replaces an offset the row already took by ``deg - fanout + i`` (never taken before),
    so no rejection loop. ``replace``: ``fanout`` independent draws. Returns ``(start, count)``.
    """
    v = nodes[r]
    start = indptr[v]
    return start, _draw_offsets(v, indptr[v + 1] - start, first[r], fanout, replace, key, buf)


@njit(inline="always", cache=True)
def _draw_offsets(v, deg, base, fanout, replace, key, buf):  # pragma: no cover - compiled
    """The draws of :func:`_row_offsets` for node id ``v`` of degree ``deg`` into ``buf[base:]``;
    returns the count. Only ``(key, v, deg)`` matter, not where the row is stored, so a process
    holding ``v``'s row under another index draws the same (:mod:`sgl.samplers.distributed`)."""
    if deg == 0:
        return 0
    if replace:
        for i in range(fanout):
            buf[base + i] = np.int64(_uniform(key, v, i) * deg)
        return fanout
    if deg <= fanout:
        for i in range(deg):
            buf[base + i] = i
        return deg
    for i in range(fanout):
        j = deg - fanout + i
        t = np.int64(_uniform(key, v, i) * (j + 1))
        for q in range(i):
            if buf[base + q] == t:
                t = j
                break
        buf[base + i] = t
    return fanout


@njit(inline="always", cache=True)
def _prefetch_rows(indptr, indices, nodes, r, hi):  # pragma: no cover - compiled
    if r + _AHEAD < hi:
        _prefetch(indptr, np.uint64(nodes[r + _AHEAD]))
    if r + _AHEAD_ROW < hi:
        _prefetch(indices, np.uint64(indptr[nodes[r + _AHEAD_ROW]]))


@njit(cache=True, nogil=True)
def positions_rows(indptr, nodes, first, fanout, replace, key, pos, lo, hi):  # pragma: no cover - compiled
    """Absolute edge positions of rows ``[lo, hi)`` into ``pos[first[r]:first[r] + count_r]``."""
    for r in range(lo, hi):
        if r + _AHEAD < hi:
            _prefetch(indptr, np.uint64(nodes[r + _AHEAD]))
        start, count = _row_offsets(indptr, nodes, first, fanout, replace, key, pos, r)
        base = first[r]
        for i in range(count):
            pos[base + i] += start


@njit(cache=True, nogil=True)
def positions_rows_at(indptr, rows, ids, first, fanout, replace, key, pos, lo, hi):  # pragma: no cover - compiled
    """:func:`positions_rows` for rows stored at ``indptr[rows[r]]`` but drawn as node ``ids[r]``:
    a partition's local CSR samples its nodes exactly as the whole graph's CSR does."""
    for r in range(lo, hi):
        if r + _AHEAD < hi:
            _prefetch(indptr, np.uint64(rows[r + _AHEAD]))
        start = indptr[rows[r]]
        base = first[r]
        count = _draw_offsets(ids[r], indptr[rows[r] + 1] - start, base, fanout, replace, key, pos)
        for i in range(count):
            pos[base + i] += start


@njit(cache=True, nogil=True)
def draw_rows(indptr, indices, nodes, first, fanout, replace, key, src, dst, lo, hi):  # pragma: no cover - compiled
    """Rows ``[lo, hi)``: sampled neighbour ids into ``src``, the row index into ``dst``.

    The draws are :func:`positions_rows`'s (the offsets wait in ``src`` until the row is
    drawn), so ``src == indices[positions]``.
    """
    for r in range(lo, hi):
        _prefetch_rows(indptr, indices, nodes, r, hi)
        start, count = _row_offsets(indptr, nodes, first, fanout, replace, key, src, r)
        base = first[r]
        for i in range(count):
            src[base + i] = indices[start + src[base + i]]
            dst[base + i] = r


@njit(cache=True, nogil=True)
def relabel(src, mapping, stamp, nodes, count):  # pragma: no cover - compiled
    """Replace global ids in ``src`` by local ones, in place.

    ``mapping[v]`` is ``stamp << 32 | local`` for the nodes of this batch; any other value
    (-1, or an earlier batch's stamp) means unseen, so the map is never reset. An unseen id
    gets the next local id ``count`` and is appended to ``nodes``: new nodes come in order of
    first occurrence in ``src``. ``nodes`` must have room for every new id; returns the new
    ``count``.
    """
    tag = np.int64(stamp) << np.int64(32)
    low = np.int64(0xFFFFFFFF)
    n = src.size
    for i in range(n):
        if i + _AHEAD_EDGE < n:
            _prefetch(mapping, np.uint64(src[i + _AHEAD_EDGE]))
        s = src[i]
        entry = mapping[s]
        if (entry >> np.int64(32)) == stamp:
            src[i] = entry & low
        else:
            mapping[s] = tag | count
            nodes[count] = s
            src[i] = count
            count += 1
    return count


_POOL: Optional[ThreadPoolExecutor] = None
_POOL_KEY = (0, 0)  # (pid, workers) the pool was made for
_POOL_LOCK = threading.Lock()
#: chunks per thread: enough that a late helper still finds work, few enough that the
#: per-call dispatch (~µs) stays small next to a chunk
CHUNKS_PER_THREAD = 4


def _helpers(workers: int) -> ThreadPoolExecutor:
    global _POOL, _POOL_KEY
    with _POOL_LOCK:
        pid = os.getpid()
        if _POOL is None or _POOL_KEY[0] != pid or _POOL_KEY[1] < workers:
            if _POOL is not None and _POOL_KEY[0] == pid:
                _POOL.shutdown(wait=False)
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sgl-sampler")
            _POOL_KEY = (pid, workers)
        return _POOL


def run_rows(kernel: Callable[..., Any], args: Sequence[Any], n_rows: int, threads: int) -> None:
    """``kernel(*args, lo, hi)`` over the rows ``[0, n_rows)`` on up to ``threads`` threads.

    The calling thread works too; each thread claims the next chunk of rows until none is
    left, and the call returns once every chunk is done: it waits only for chunks a helper is
    running, never for a helper that has not started. Which thread draws a row changes
    nothing in the output (each row writes only its own slots).
    """
    if threads <= 1 or n_rows < 2:
        kernel(*args, 0, n_rows)
        return
    n_chunks = min(n_rows, threads * CHUNKS_PER_THREAD)
    bounds = [n_rows * c // n_chunks for c in range(n_chunks + 1)]
    claim = itertools.count().__next__  # both counters are atomic under the GIL
    finish = itertools.count(1).__next__
    all_done = threading.Event()
    errors: list = []

    def work() -> None:
        chunk = claim()
        while chunk < n_chunks:
            try:
                kernel(*args, bounds[chunk], bounds[chunk + 1])
            except BaseException as exc:  # re-raised by the calling thread
                errors.append(exc)
            if finish() == n_chunks:
                all_done.set()
            chunk = claim()

    pool = _helpers(threads - 1)
    for _ in range(threads - 1):
        pool.submit(work)
    work()
    all_done.wait()
    if errors:
        raise errors[0]
