"""Lower bounds for LobRA's method class: a static replica set with any per-step dispatch.

:func:`step_time_bound` / :func:`static_plan_bound` bound LobRA's own method class, a *static*
replica set with any per-step dispatch: for each replica set an LP lower bound on every step's
time (fractional sequences on the schemes that hold them, work spread over a scheme's replicas,
micro-batches full to the token, the 1F1B bubble of the longest micro-batch a scheme must run,
the step's longest sequence whole on one scheme), minimised over the sets of
:func:`replica_sets` and summed over steps; with more sets than enumerable, the LP with
real-valued replica counts bounds every set at once.

:func:`step_time_bound_integer` keeps integer replica counts but lets the set change every step
(bisection on the step time, one small feasibility MILP per probe), so it bounds every static
set too and stays cheap where the sets are too many to enumerate (32, 64 GPUs).
:func:`per_token_ceiling` is the closed-form cap of the any-plan bound against one scheme.

>>> import numpy as np
>>> from sgl.systems.data.lobra_pool import lora_pool
>>> pool = lora_pool(8)
>>> lengths = np.array([100, 300, 2000, 5000])
>>> one = step_time_bound(pool, lengths, {len(pool) - 1: 1})   # one tp8-pp1 replica
>>> any_set = step_time_bound_integer(pool, lengths, 8)
>>> 0 < any_set <= one * (1 + 1e-9)   # the integer bisection may land a rounding error above
True
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError

__all__ = ["step_time_bound", "step_time_bound_integer", "static_plan_bound", "per_token_ceiling"]


def _step_lp(pool: Sequence, schemes: list, lengths: np.ndarray, replicas: Optional[Mapping[int, int]],
             devices: int, home: int, hold: int = 0, counts_out: Optional[dict] = None) -> float:
    """One LP of :func:`step_time_bound`: the step's longest sequence on scheme ``home`` (ms; inf if infeasible).

    With real-valued counts (``replicas`` None) and a ``counts_out`` dict, the LP's counts
    ``v_s / T`` are written into it (used to seed integer replica sets).
    """
    import scipy.sparse as sp
    from scipy.optimize import linprog

    values, counts = np.unique(np.asarray(lengths, dtype=np.int64), return_counts=True)
    pairs = [(g, s) for g in range(values.size) for s in schemes if values[g] <= pool[s].capacity]
    P, S = len(pairs), len(schemes)
    # columns: x_gs (P), beta_s (S), v_s (S, replica-ms when replicas are continuous), T
    col_T = P + 2 * S
    beta = {s: P + i for i, s in enumerate(schemes)}
    v = {s: P + S + i for i, s in enumerate(schemes)}
    rows, cols, vals, r_hi = [], [], [], []
    eq_rows, eq_cols, eq_vals, eq_rhs = [], [], [], []
    row = 0

    def le(entries, rhs):
        nonlocal row
        for col, value in entries:
            rows.append(row)
            cols.append(col)
            vals.append(value)
        r_hi.append(rhs)
        row += 1

    load = {s: [] for s in schemes}
    for i, (g, s) in enumerate(pairs):
        p, L = pool[s], float(values[g])
        seq = p.a * L * L + p.b * L
        load[s].append((i, seq + p.c * L / p.capacity))
        mb = (seq + p.c) / counts[g]             # convex envelope of "max micro-batch >= seq + c if any is here"
        le([(i, mb), (beta[s], -1.0)], 0.0)
        le([(i, p.pp * mb), (col_T, -1.0)], 0.0)
    for s in schemes:
        p = pool[s]
        # replica-ms of scheme s: r_s·T (fixed r_s) or v_s (continuous replicas, Σ g_s v_s = N T) >= its work
        scale = [(col_T, -float(replicas[s]))] if replicas is not None else [(v[s], -1.0)]
        le(load[s] + [(beta[s], float(p.pp - 1))] + scale, 0.0)
    top = values.size - 1
    p = pool[home]
    first = p.a * float(values[top]) ** 2 + p.b * float(values[top]) + p.c
    le([(col_T, -1.0)], -p.pp * first)             # the longest sequence's micro-batch, counted pp times
    le([(beta[home], -1.0)], -first)
    if replicas is None:
        le([(col_T, 1.0), (v[home], -1.0)], 0.0)  # at least one whole replica of the scheme holding it
        if hold > 0:  # and one of a scheme that holds the data's longest sequence (Σ r_s >= 1 there)
            le([(col_T, 1.0)] + [(v[s], -1.0) for s in schemes if pool[s].capacity >= hold], 0.0)
    for g in range(values.size):
        entries = [i for i, (gg, _) in enumerate(pairs) if gg == g]
        eq_rows += [g] * len(entries)
        eq_cols += entries
        eq_vals += [1.0] * len(entries)
        eq_rhs.append(float(counts[g]))
    if replicas is None:
        eq_rows += [values.size] * (S + 1)
        eq_cols += [v[s] for s in schemes] + [col_T]
        eq_vals += [float(pool[s].devices) for s in schemes] + [-float(devices)]
        eq_rhs.append(0.0)
    n = col_T + 1
    lo = np.zeros(n)
    hi = np.full(n, np.inf)
    if replicas is not None:
        hi[P + S:P + 2 * S] = 0.0
    home_col = next(i for i, (g, s) in enumerate(pairs) if g == top and s == home)
    lo[home_col] = 1.0
    cost = np.zeros(n)
    cost[col_T] = 1.0
    res = linprog(cost, A_ub=sp.csr_matrix((vals, (rows, cols)), shape=(row, n)), b_ub=r_hi,
                  A_eq=sp.csr_matrix((eq_vals, (eq_rows, eq_cols)), shape=(len(eq_rhs), n)), b_eq=eq_rhs,
                  bounds=np.column_stack([lo, hi]), method="highs")
    if res.status != 0:
        return float("inf")
    if counts_out is not None and replicas is None and res.x[col_T] > 0:
        counts_out.update({s: float(res.x[v[s]] / res.x[col_T]) for s in schemes})
    return float(res.fun)


def step_time_bound(pool: Sequence, lengths: np.ndarray, replicas: Optional[Mapping[int, int]] = None,
                    devices: Optional[int] = None, hold: int = 0) -> float:
    """A lower bound (ms) on one step's time for *any* dispatch of ``lengths`` onto a static replica set.

    ``replicas`` ``{scheme: count}`` fixes the set; ``None`` lets the replica counts be any
    non-negative reals with ``Σ count·GPUs = devices`` (so it bounds every replica set at once).
    The LP: ``x_gs`` sequences of length ``L_g`` on scheme ``s`` (fractional, only where
    ``L_g <= cap_s``), and for every scheme ``r_s·T >= Σ_g x_gs·(t_s(L_g) + c_s·L_g/cap_s) +
    (pp_s − 1)·β_s`` (work spread perfectly over its replicas, micro-batches full to the token),
    with ``β_s`` and ``T / pp_s`` at least ``(t_s(L_g) + c_s)·x_gs / n_g`` (the convex envelope of
    "a replica holding one such sequence has a micro-batch at least that long"). The step's
    longest sequence goes whole to one scheme that holds it (each choice is one LP; the least
    wins): ``T >= pp·(t(L*) + c)``, and with continuous counts that scheme keeps a whole replica,
    as does (``hold > 0``) some scheme holding ``hold`` tokens (the data's longest sequence).
    Every dispatch of :func:`~sgl.systems.data.lobra.dispatch` (micro-batches, remainders,
    1F1B bubbles) takes at least this long.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return 0.0
    if replicas is None:
        devices = check_int(devices, "devices", minimum=1, error=PlanError)
        fixed = None
        schemes = [s for s, p in enumerate(pool) if p.devices <= devices]
    else:
        fixed = {s: r for s, r in replicas.items() if r > 0}
        schemes = sorted(fixed)
        devices = sum(pool[s].devices * r for s, r in fixed.items())
    longest = int(lengths.max())
    homes = [s for s in schemes if pool[s].capacity >= longest]
    if not homes:
        raise PlanError(f"a sequence of {longest} tokens fits no scheme of the replica set")
    return min(_step_lp(pool, schemes, lengths, fixed, devices, h, hold) for h in homes)


def static_plan_bound(pool: Sequence, devices: int, steps: Sequence[np.ndarray], longest: int,
                      limit: int = 256, integer: bool = False) -> Dict:
    """The fewest GPU-seconds any *static* replica set with any per-step dispatch could reach on ``steps``.

    ``gpu_seconds``: ``N · min_R Σ_steps step_time_bound(R)`` over every replica set ``R`` of
    :func:`replica_sets` that holds ``longest`` (``None`` when there are more than ``limit``);
    ``per_step_gpu_seconds``: the same with the set re-chosen every step (``Σ_steps min_R``, a
    weaker bound); ``continuous_gpu_seconds``: ``N · Σ_steps`` of the LP with real-valued replica
    counts (bounds every set at once, any ``N``); with ``integer``, ``integer_gpu_seconds``:
    ``N · Σ_steps`` :func:`step_time_bound_integer` (integer counts re-chosen every step; any ``N``).
    Each is at most the next one up: continuous <= integer <= per-step <= static <= any replayed
    static plan (integer = per-step up to the bisection's tolerance).
    """
    devices = check_int(devices, "devices", minimum=1, error=PlanError)
    continuous = sum(step_time_bound(pool, x, None, devices, hold=longest) for x in steps) * devices / 1000.0
    sets = replica_sets(pool, devices, longest, limit=limit)
    out: Dict = {"continuous_gpu_seconds": continuous, "sets": None if sets is None else len(sets),
                 "gpu_seconds": None, "replicas": None, "per_step_gpu_seconds": None, "integer_gpu_seconds": None}
    if integer:
        integer_ms = sum(step_time_bound_integer(pool, x, devices, hold=longest) for x in steps)
        out["integer_gpu_seconds"] = integer_ms * devices / 1000.0
    if sets:
        table = np.array([[step_time_bound(pool, x, rep) for x in steps] for rep in sets])
        best = int(np.argmin(table.sum(axis=1)))
        out.update(gpu_seconds=float(table[best].sum()) * devices / 1000.0, replicas=sets[best],
                   per_step_gpu_seconds=float(table.min(axis=0).sum()) * devices / 1000.0)
    return out


def per_token_ceiling(pool: Sequence, baseline: int, longest: Optional[int] = None) -> tuple:
    """``(sup_L 1 − min_s k_s(L) / k_base(L), L)`` over ``1 <= L <= longest``.

    ``k_s(L) = g_s·(t_s(L) + c_s·L/cap_s)``.

    ``k_s(L)`` is the any-plan bound's GPU-ms for one sequence on scheme ``s``. Every plan on any
    mix costs at least ``Σ_L min_s k_s(L) >= (1 − sup)·Σ_L k_base(L)``, and ``Σ_L k_base(L)`` is
    what the baseline scheme costs with full micro-batches and perfect balance; so against a
    baseline replayed that well no plan saves more than ``sup``, whatever the length distribution.
    """
    longest = int(pool[baseline].capacity if longest is None else longest)
    L = np.arange(1, longest + 1, dtype=np.float64)
    best = np.full(L.size, np.inf)
    for p in pool:
        fits = L <= p.capacity
        cost = p.devices * (p.a * L[fits] ** 2 + p.b * L[fits] + p.c * L[fits] / p.capacity)
        best[fits] = np.minimum(best[fits], cost)
    base = pool[baseline]
    ratio = 1.0 - best / (base.devices * (base.a * L ** 2 + base.b * L + base.c * L / base.capacity))
    k = int(np.argmax(ratio))
    return float(ratio[k]), int(L[k])


def _feasible_at(pool: Sequence, schemes: list, values: np.ndarray, counts: np.ndarray, devices: int, home: int,
                 T: float, time_limit: float, hold: int = 0) -> bool:
    """Is there an integer replica set (Σ r_s·g_s <= N) and a fractional dispatch finishing within ``T`` ms?

    The rows of :func:`step_time_bound`'s LP at a fixed ``T``, with ``r_s`` integer variables. A
    solver that stops on its time limit answers "feasible" (so the bisection stays a lower bound).
    """
    import scipy.sparse as sp
    from scipy.optimize import Bounds, LinearConstraint, milp

    top = values.size - 1
    hp = pool[home]
    first = hp.a * float(values[top]) ** 2 + hp.b * float(values[top]) + hp.c
    if T < hp.pp * first:
        return False
    pairs = [(g, s) for g in range(values.size) for s in schemes if values[g] <= pool[s].capacity]
    P, S = len(pairs), len(schemes)
    beta = {s: P + i for i, s in enumerate(schemes)}
    rep = {s: P + S + i for i, s in enumerate(schemes)}
    n = P + 2 * S
    lo, hi = np.zeros(n), np.full(n, np.inf)
    rows, cols, vals, r_lo, r_hi = [], [], [], [], []

    def add(entries, low, high):
        for col, value in entries:
            rows.append(len(r_lo))
            cols.append(col)
            vals.append(value)
        r_lo.append(low)
        r_hi.append(high)

    load = {s: [] for s in schemes}
    for i, (g, s) in enumerate(pairs):
        p, L = pool[s], float(values[g])
        seq = p.a * L * L + p.b * L
        load[s].append((i, seq + p.c * L / p.capacity))
        mb = (seq + p.c) / counts[g]
        add([(i, mb), (beta[s], -1.0)], -np.inf, 0.0)
        hi[i] = min(float(counts[g]), T / (p.pp * mb))       # T >= pp·mb·x
        if g == top and s == home:
            lo[i] = 1.0
    for s in schemes:
        p = pool[s]
        add(load[s] + [(beta[s], float(p.pp - 1)), (rep[s], -T)], -np.inf, 0.0)
        hi[rep[s]] = devices // p.devices
    lo[beta[home]] = first
    lo[rep[home]] = 1.0
    add([(rep[s], float(pool[s].devices)) for s in schemes], -np.inf, float(devices))
    if hold > 0:
        add([(rep[s], 1.0) for s in schemes if pool[s].capacity >= hold], 1.0, np.inf)
    for g in range(values.size):
        add([(i, 1.0) for i, (gg, _) in enumerate(pairs) if gg == g], float(counts[g]), float(counts[g]))
    if (lo > hi).any():
        return False
    integrality = np.zeros(n)
    integrality[P + S:] = 1
    A = sp.csr_matrix((vals, (rows, cols)), shape=(len(r_lo), n))
    res = milp(np.zeros(n), constraints=LinearConstraint(A, r_lo, r_hi), integrality=integrality,
               bounds=Bounds(lo, hi), options={"time_limit": time_limit})
    return res.status != 2  # 2: proven infeasible; optimal, or stopped early, count as feasible


def step_time_bound_integer(pool: Sequence, lengths: np.ndarray, devices: int, *, hold: int = 0,
                            tolerance: float = 1e-3, time_limit: float = 5.0) -> float:
    """A lower bound (ms) on one step's time for every replica set on ``devices`` GPUs and any dispatch.

    Like :func:`step_time_bound` with ``replicas=None`` but with *integer* replica counts
    (``Σ r_s·g_s <= N``, one replica at least of a scheme holding ``hold`` tokens), re-chosen for
    this step: the largest ``T`` proven infeasible by a
    bisection (relative ``tolerance``) from the real-count LP's value, so it lies between that
    LP and the best replica set's :func:`step_time_bound`.
    """
    devices = check_int(devices, "devices", minimum=1, error=PlanError)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return 0.0
    values, counts = np.unique(lengths, return_counts=True)
    schemes = [s for s, p in enumerate(pool) if p.devices <= devices]
    homes = [s for s in schemes if pool[s].capacity >= int(values[-1])]
    if not homes:
        raise PlanError(f"a sequence of {int(values[-1])} tokens fits no scheme of the pool")
    best = np.inf
    for home in homes:
        low = _step_lp(pool, schemes, lengths, None, devices, home, hold)
        if not np.isfinite(low) or low >= best:
            continue
        high = max(low, 1e-9) * 1.25
        while not _feasible_at(pool, schemes, values, counts, devices, home, high, time_limit, hold):
            low, high = high, high * 1.5
            if high > 1e12:
                break
        while high - low > tolerance * high:
            mid = 0.5 * (low + high)
            if _feasible_at(pool, schemes, values, counts, devices, home, mid, time_limit, hold):
                high = mid
            else:
                low = mid
        best = min(best, low)
    return float(best)


def replica_sets(pool: Sequence, devices: int, longest: int, limit: int = 256) -> Optional[list]:
    """Every replica-count map ``{scheme: count}`` with ``Σ count·GPUs = devices`` and a scheme holding ``longest``.

    ``None`` when there are more than ``limit`` of them (the caller then keeps the MILP's candidates).
    """
    check_int(limit, "limit", minimum=1, error=PlanError)
    out: list = []

    def extend(s: int, left: int, chosen: Dict[int, int]) -> bool:
        if left == 0:
            if any(pool[k].capacity >= longest for k in chosen):
                out.append(dict(chosen))
            return len(out) <= limit
        if s == len(pool):
            return True
        g = pool[s].devices
        for count in range(left // g, -1, -1):
            if count:
                chosen[s] = count
            if not extend(s + 1, left - count * g, chosen):
                return False
            chosen.pop(s, None)
        return True

    return out if extend(0, devices, {}) else None
