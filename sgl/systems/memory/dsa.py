"""Dynamic Storage Allocation on a trace: the MEMO MIP, allocator replays and the lower bound.

Given requests ``i`` of ``S_i`` bytes live over ``[start_i, end_i)``, a plan gives each an address
``A_i >= 0`` so that requests live at the same time never share bytes; its peak is
``M = max_i A_i + S_i``.  MEMO solves this offline as a MIP (one binary ``z_ij`` per pair of
overlapping requests, big-M ``M_cap``)::

    min M   s.t.  A_i + S_i <= A_j + z_ij * M_cap,   A_j + S_j <= A_i + (1 - z_ij) * M_cap,
                  A_i + S_i <= M,  A_i >= 0,  z_ij in {0, 1}

solved here with HiGHS under a time limit and warm-started from the best of the online replays
and the offline greedy-by-size placement, so the plan is never worse than any of them (and
is optimal, without a solve, when greedy-by-size meets the bound).  :func:`live_lower_bound` is
``max_t sum_{i live at t} S_i`` (no plan beats it); :func:`first_fit` / :func:`best_fit` replay
the trace with an online allocator; :func:`greedy_by_size` places it offline, largest first;
:func:`brute_force_dsa` is exact for tiny traces (every optimal plan is reproduced by placing the
requests in some order, each at its lowest free address, so the best order is optimal).

>>> from sgl.systems.memory import AllocTrace
>>> t = AllocTrace([4, 4, 4], [0, 1, 3], [2, 4, 5])   # 0 and 1 overlap, 1 and 2 overlap
>>> live_lower_bound(t), first_fit(t).peak, solve_dsa(t, time_limit=5).peak
(8, 8, 8)
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.memory.trace import AllocTrace

__all__ = ["DSAPlan", "live_lower_bound", "first_fit", "best_fit", "greedy_by_size", "best_offline",
           "solve_dsa", "brute_force_dsa",
           "check_plan", "caching_allocator_peak"]


@dataclass
class DSAPlan:
    """Addresses of a trace's requests; ``peak = max(address + size)``; ``status`` of the solver."""

    address: np.ndarray
    peak: int
    method: str
    status: str = "replay"
    lower_bound: int = 0


def _aligned(size: np.ndarray, alignment: int) -> np.ndarray:
    return ((size + alignment - 1) // alignment) * alignment


def new_highs(time_limit: float) -> "highspy.Highs":
    """A silent HiGHS instance (banner muted by :func:`sgl.systems.seq.milp.quiet_highs`) with a time limit."""
    from sgl.systems.seq.milp import quiet_highs

    h = quiet_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("threads", 1)
    return h


def live_lower_bound(trace: AllocTrace, alignment: int = 1) -> int:
    """``max_t`` of the bytes live at event ``t``: a bound below every plan's peak."""
    if len(trace) == 0:
        return 0
    size = _aligned(trace.size, alignment)
    horizon = int(max(trace.end.max(), trace.start.max())) + 2
    delta = np.zeros(horizon, dtype=np.int64)
    np.add.at(delta, trace.start, size)
    np.add.at(delta, trace.end, -size)
    return int(np.cumsum(delta).max())


def _replay(trace: AllocTrace, alignment: int, best: bool) -> DSAPlan:
    size = _aligned(trace.size, alignment)
    events = sorted([(int(e), 0, i) for i, e in enumerate(trace.end)] +
                    [(int(s), 1, i) for i, s in enumerate(trace.start)])
    live: dict = {}  # index -> (address, size), kept to scan holes in address order
    address = np.zeros(len(trace), dtype=np.int64)
    peak = 0
    for _, kind, i in events:
        if kind == 0:
            live.pop(i, None)
            continue
        blocks = sorted(live.values())
        chosen, gap_best, cursor = None, None, 0
        for a, s in blocks:
            gap = a - cursor
            if gap >= size[i]:
                if not best:
                    chosen = cursor
                    break
                if gap_best is None or gap < gap_best:
                    chosen, gap_best = cursor, gap
            cursor = max(cursor, a + s)
        if chosen is None:
            chosen = cursor
        address[i] = chosen
        live[i] = (chosen, int(size[i]))
        peak = max(peak, chosen + int(size[i]))
    return DSAPlan(address, peak, "best-fit" if best else "first-fit", lower_bound=live_lower_bound(trace, alignment))


def first_fit(trace: AllocTrace, alignment: int = 1) -> DSAPlan:
    """Online first-fit: each malloc takes the lowest-address hole that holds it."""
    return _replay(trace, alignment, best=False)


def best_fit(trace: AllocTrace, alignment: int = 1) -> DSAPlan:
    """Online best-fit: each malloc takes the smallest hole that holds it (else the top)."""
    return _replay(trace, alignment, best=True)


def greedy_by_size(trace: AllocTrace, alignment: int = 1) -> DSAPlan:
    """Offline greedy by size (TFLite's GreedyBySize, Pisarchyk & Lee 2020): knowing the whole trace,
    place the requests largest first, each at the lowest address free over its whole lifetime.

    On the benchmark's training-step traces of the small Transformer it meets the sum-of-live bound
    (so it is optimal there); on the tiny preset's it is one 64 B alignment unit above it.

    >>> from sgl.systems.memory import AllocTrace
    >>> t = AllocTrace([2, 3, 3], [1, 3, 2], [3, 6, 5])   # online first-fit and best-fit leave a hole
    >>> first_fit(t).peak, best_fit(t).peak, greedy_by_size(t).peak, live_lower_bound(t)
    (8, 8, 6, 6)
    """
    n = len(trace)
    size = _aligned(trace.size, alignment).astype(np.int64)
    start, end = trace.start, trace.end
    order = np.lexsort((start, -size))            # largest first, earlier first among equals
    address = np.zeros(n, dtype=np.int64)
    placed = np.zeros(n, dtype=bool)
    for i in order:
        others = np.flatnonzero(placed & (start < end[i]) & (start[i] < end))
        cursor = 0
        if len(others):
            lo = address[others]
            k = np.argsort(lo, kind="stable")
            lo, hi = lo[k], lo[k] + size[others][k]
            prev = np.concatenate([[0], np.maximum.accumulate(hi)[:-1]])
            fits = np.flatnonzero(lo - prev >= size[i])
            cursor = int(prev[fits[0]]) if len(fits) else int(hi.max())
        address[i] = cursor
        placed[i] = True
    peak = int((address + size).max()) if n else 0
    return DSAPlan(address, peak, "greedy-by-size", lower_bound=live_lower_bound(trace, alignment))


def best_offline(trace: AllocTrace, alignment: int = 1) -> DSAPlan:
    """The lowest-peak plan of first-fit, best-fit and greedy-by-size (the MIP's warm start)."""
    return min(first_fit(trace, alignment), best_fit(trace, alignment), greedy_by_size(trace, alignment),
               key=lambda p: p.peak)


def check_plan(trace: AllocTrace, plan: DSAPlan, alignment: int = 1) -> None:
    """Raise :class:`ConfigError` if two overlapping requests share bytes or the peak is wrong."""
    size = _aligned(trace.size, alignment)
    a = plan.address
    for i, j in trace.overlapping_pairs():
        if a[i] < a[j] + size[j] and a[j] < a[i] + size[i]:
            raise ConfigError(f"plan places overlapping requests {i} and {j} on shared bytes")
    if (a < 0).any() or (len(a) and int((a + size).max()) != plan.peak):
        raise ConfigError("plan peak does not match its addresses")


def _gravity(trace: AllocTrace, order: tuple, size: np.ndarray, overlap: np.ndarray) -> tuple:
    address = np.zeros(len(size), dtype=np.int64)
    placed: list = []
    for i in order:
        blocks = sorted((address[j], address[j] + size[j]) for j in placed if overlap[i, j])
        cursor = 0
        for lo, hi in blocks:
            if lo - cursor >= size[i]:
                break
            cursor = max(cursor, hi)
        address[i] = cursor
        placed.append(i)
    return int((address + size).max()), address


def brute_force_dsa(trace: AllocTrace, alignment: int = 1) -> DSAPlan:
    """The exact optimum by trying every placement order (``n <= 8``)."""
    n = len(trace)
    check_int(n, "brute_force_dsa: number of requests", 1, 8)
    size = _aligned(trace.size, alignment)
    overlap = (trace.start[:, None] < trace.end[None, :]) & (trace.start[None, :] < trace.end[:, None])
    best = min((_gravity(trace, order, size, overlap) for order in itertools.permutations(range(n))),
               key=lambda r: r[0])
    return DSAPlan(best[1], best[0], "brute-force", "optimal", live_lower_bound(trace, alignment))


def solve_dsa(trace: AllocTrace, time_limit: float = 10.0, alignment: int = 1,
              max_pairs: int = 200_000) -> DSAPlan:
    """MEMO's DSA MIP with HiGHS, warm-started from the best of first-fit, best-fit and greedy-by-size.

    ``status`` is HiGHS' model status (``Optimal``, ``Time limit reached``, ...); the returned
    plan is the solver's incumbent, or the warm start when the solver found nothing better.
    """
    import highspy

    check_real(time_limit, "solve_dsa: time_limit (seconds)", 0.0, open_low=True)
    n = len(trace)
    lb = live_lower_bound(trace, alignment)
    warm = best_offline(trace, alignment)
    if n <= 1 or warm.peak == lb:
        return DSAPlan(warm.address, warm.peak, "mip", f"Optimal ({warm.method} meets the lower bound)", lb)
    pairs = trace.overlapping_pairs()
    if len(pairs) > max_pairs:
        raise ConfigError(f"solve_dsa: {len(pairs)} overlapping pairs exceed max_pairs={max_pairs}; plan one "
                          "layer at a time (plan_bilevel) or raise max_pairs")
    size = _aligned(trace.size, alignment).astype(float)
    cap = float(warm.peak)
    m = len(pairs)
    # columns: A_0..A_{n-1}, M, z_0..z_{m-1}
    ncol = n + 1 + m
    cost = np.zeros(ncol)
    cost[n] = 1.0
    lower = np.zeros(ncol)
    lower[n] = lb
    upper = np.concatenate([cap - size, [cap], np.ones(m)])
    rows_idx, rows_val, rlo, rhi = [], [], [], []
    for k, (i, j) in enumerate(pairs):
        z = n + 1 + k
        rows_idx.append([i, j, z]); rows_val.append([1.0, -1.0, -cap]); rlo.append(-math.inf); rhi.append(-size[i])
        rows_idx.append([j, i, z]); rows_val.append([1.0, -1.0, cap]); rlo.append(-math.inf); rhi.append(cap - size[j])
    for i in range(n):
        rows_idx.append([i, n]); rows_val.append([1.0, -1.0]); rlo.append(-math.inf); rhi.append(-size[i])
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = ncol, len(rlo)
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, upper
    lp.row_lower_, lp.row_upper_ = np.array(rlo), np.array(rhi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.cumsum([0] + [len(r) for r in rows_idx]).astype(np.int32)
    lp.a_matrix_.index_ = np.concatenate(rows_idx).astype(np.int32)
    lp.a_matrix_.value_ = np.concatenate(rows_val)
    lp.integrality_ = [highspy.HighsVarType.kContinuous] * (n + 1) + [highspy.HighsVarType.kInteger] * m
    h = new_highs(time_limit)
    h.passModel(lp)
    wa = warm.address.astype(float)
    z0 = (wa[pairs[:, 0]] >= wa[pairs[:, 1]] + size[pairs[:, 1]]).astype(float)
    sol = highspy.HighsSolution()
    sol.col_value = list(np.concatenate([wa, [float(warm.peak)], z0]))
    sol.value_valid = True
    h.setSolution(sol)
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    values = np.asarray(h.getSolution().col_value)
    if len(values) == ncol:
        address = np.round(values[:n]).astype(np.int64)
        peak = int((address + size.astype(np.int64)).max())
        candidate = DSAPlan(address, peak, "mip", status, lb)
        try:
            check_plan(trace, candidate, alignment)
        except ConfigError:
            candidate = None
        if candidate is not None and candidate.peak <= warm.peak:
            return candidate
    return DSAPlan(warm.address, warm.peak, "mip", f"{status} (kept the {warm.method} warm start)", lb)


def caching_allocator_peak(trace: AllocTrace) -> int:
    """Reserved-bytes peak of a replay of PyTorch's CUDA caching allocator's rules (a model).

    Sizes round up to 512 B; requests <= 1 MiB come from 2 MiB segments, requests <= 10 MiB from
    20 MiB segments, larger ones from their own segment rounded to 2 MiB; a malloc takes the
    smallest free block of its pool that fits (then the lowest address) and splits it (small pool:
    a remainder >= 512 B, large pool: > 1 MiB); a free block merges with free neighbours of its
    segment; segments are never released (no ``empty_cache``), so fragmentation shows as reserved
    bytes above the live bytes.
    """
    size = _aligned(trace.size, 512)
    events = sorted([(int(e), 0, i) for i, e in enumerate(trace.end)] +
                    [(int(s), 1, i) for i, s in enumerate(trace.start)])
    segments: list = []  # each: {"pool", "blocks": [[offset, size, owner or None], ...]}
    where: dict = {}
    reserved = 0
    for _, kind, i in events:
        s = int(size[i])
        pool = "small" if s <= 1 << 20 else "large"
        if kind == 0:
            if i not in where:
                continue
            seg = segments[where.pop(i)]
            blocks = seg["blocks"]
            k = next(j for j, b in enumerate(blocks) if b[2] == i)
            blocks[k][2] = None
            if k + 1 < len(blocks) and blocks[k + 1][2] is None:
                blocks[k][1] += blocks.pop(k + 1)[1]
            if k > 0 and blocks[k - 1][2] is None:
                blocks[k - 1][1] += blocks.pop(k)[1]
            continue
        best = None
        for si, seg in enumerate(segments):
            if seg["pool"] != pool:
                continue
            for k, b in enumerate(seg["blocks"]):
                if b[2] is None and b[1] >= s and (best is None or b[1] < best[0]):
                    best = (b[1], si, k)
        if best is None:
            seg_size = 2 << 20 if pool == "small" else (20 << 20 if s <= 10 << 20 else -(-s // (2 << 20)) * (2 << 20))
            segments.append({"pool": pool, "blocks": [[0, seg_size, None]]})
            reserved += seg_size
            best = (seg_size, len(segments) - 1, 0)
        _, si, k = best
        block = segments[si]["blocks"][k]
        rest = block[1] - s
        if rest >= 512 and (pool == "small" or rest > 1 << 20):
            segments[si]["blocks"].insert(k + 1, [block[0] + s, rest, None])
            block[1] = s
        block[2] = i
        where[i] = si
    return reserved
