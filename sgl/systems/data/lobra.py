"""LobRA planning: heterogeneous fine-tuning replicas for multi-task LoRA, per-step dispatch, replay.

Schemes are the sequence module's :class:`~sgl.systems.seq.StrategyCost` (a (tp, pp) layout on
``g_s`` GPUs, per-sequence time ``a·L² + b·L``, micro-batch overhead ``c``, and a token capacity
that is also its longest sequence); no second cost model. Sequences of a step are grouped in
length buckets (bucket ``b`` has ``n_b`` sequences, the longest ``L_b``); a micro-batch of
scheme ``s`` holds ``m_bs = ⌊cap_s / L_b⌋`` of them.

**Static planner** (:func:`plan_replicas`, one HiGHS MILP): replica slots ``(s, k)``,
``k < N / g_s``, with binaries ``y_sk`` (slot used; ``y_sk >= y_s,k+1`` breaks symmetry), integer
dispatch counts ``n_bsk`` and micro-batch counts ``μ_bsk``::

    min T  s.t.  Σ_sk g_s·y_sk = N,   Σ_sk n_bsk = n_b,   n_bsk <= n_b·u_bsk,  u_bsk <= y_sk
                 (only if L_b <= cap_s),  n_bsk <= m_bs·μ_bsk,  z_sk >= u_bsk·(min(m_bs, n_b)·t_s(L_b) + c_s),
                 Σ_b t_s(L_b)·n_bsk + c_s·μ_bsk + (pp_s − 1)·z_sk <= T   for every slot,

``t_s(L) = a_s L² + b_s L``, so the replica counts (integers, Σ replicas·GPUs = N) minimise the
slowest replica's 1F1B time; the bubble ``(pp−1)·max T_j`` is bounded by the longest full
micro-batch of a bucket the replica serves.

**Dispatcher** (:func:`dispatch`): the same MILP with the replicas fixed, re-solved for each
step's real batch; sequences then go, longest first, into each replica's complete micro-batches
and a remainder micro-batch per bucket.
**Simulator** (:func:`simulate`): replays steps drawn from real length distributions; a step
takes the slowest replica's 1F1B time (``StrategyCost.replica_time``), and GPU-seconds are
``N · Σ step time``.

>>> from sgl.systems.seq import hydraulis_pool
>>> pool = hydraulis_pool(8)
>>> plan = plan_replicas(pool, 8, [300, 4000], [64, 2])
>>> sum(pool[i].devices * r for i, r in plan.replicas.items())
8
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError

__all__ = ["LobraPlan", "bucketize_lengths", "plan_replicas", "dispatch", "simulate", "homogeneous_replicas"]


@dataclass
class LobraPlan:
    """Replica counts per scheme index, per-slot dispatch ``{(s, k): counts per bucket}`` and the objective (ms)."""

    replicas: Dict[int, int]
    dispatch: Dict[tuple, np.ndarray] = field(default_factory=dict)
    time_ms: float = float("nan")
    status: str = ""


def bucketize_lengths(lengths: np.ndarray, boundaries: Sequence[int]) -> tuple:
    """``(bucket of each length, bucket upper bounds)``: bucket ``b`` holds lengths in ``(B_{b-1}, B_b]``."""
    bounds = np.asarray(sorted(boundaries), dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and lengths.max() > bounds[-1]:
        raise PlanError(f"a sequence of {int(lengths.max())} tokens is above the last bucket bound {bounds[-1]}")
    return np.searchsorted(bounds, lengths, side="left"), bounds


def _milp(pool, devices, bucket_len, bucket_count, fixed: Optional[Dict[int, int]], time_limit):
    import scipy.sparse as sp

    from sgl.systems.seq.milp import solve_milp

    L = np.asarray(bucket_len, dtype=np.float64)
    n = np.asarray(bucket_count, dtype=np.float64)
    B = L.size
    slots = [(s, k) for s, p in enumerate(pool) for k in range(devices // p.devices)]
    if not slots:
        raise PlanError(f"no scheme of the pool fits in {devices} devices")
    if (n > 0).any() and L[n > 0].max() > max(p.capacity for p in pool):
        raise PlanError(f"a bucket of {int(L[n > 0].max())} tokens is longer than every scheme's capacity "
                        f"({max(p.capacity for p in pool)}); add a scheme with more memory or drop those sequences")
    # columns: T, then per slot: y, n_b (B), mu_b (B), u_b (B: bucket used), z (bubble)
    width = 2 + 3 * B
    cols = 1 + len(slots) * width
    c = np.zeros(cols)
    c[0] = 1.0
    lo, hi = np.zeros(cols), np.full(cols, np.inf)
    integrality = np.ones(cols, dtype=bool)
    integrality[0] = False
    rows, r_lo, r_hi = [], [], []

    def add(entries, low, high):
        rows.append(entries)
        r_lo.append(low)
        r_hi.append(high)

    base = {slot: 1 + i * width for i, slot in enumerate(slots)}
    for (s, k), j in base.items():
        p = pool[s]
        hi[j] = 1.0
        integrality[j + 1 + 3 * B] = False
        if fixed is not None:
            lo[j] = hi[j] = 1.0 if k < fixed.get(s, 0) else 0.0
        per = np.maximum(1, p.capacity // np.maximum(L, 1)).astype(np.float64)
        z = j + 1 + 3 * B
        time_row = {0: -1.0, z: float(p.pp - 1)}
        for b in range(B):
            nb, mu, used = j + 1 + b, j + 1 + B + b, j + 1 + 2 * B + b
            hi[used] = 1.0
            if L[b] > p.capacity:
                hi[nb] = hi[mu] = hi[used] = 0.0
                continue
            seq = p.a * L[b] ** 2 + p.b * L[b]
            add({nb: 1.0, used: -n[b]}, -np.inf, 0.0)         # n_bsk <= n_b * u_bsk
            add({used: 1.0, j: -1.0}, -np.inf, 0.0)           # u_bsk <= y_sk
            add({nb: 1.0, mu: -per[b]}, -np.inf, 0.0)         # n <= m * mu
            add({used: min(per[b], max(n[b], 1.0)) * seq + p.c, z: -1.0}, -np.inf, 0.0)  # bubble >= largest mb of b
            time_row[nb] = seq
            time_row[mu] = p.c
        add(time_row, -np.inf, 0.0)
        if k > 0:
            add({j: 1.0, base[(s, k - 1)]: -1.0}, -np.inf, 0.0)
    add({j: float(pool[s].devices) for (s, k), j in base.items()}, devices, devices)
    for b in range(B):
        add({j + 1 + b: 1.0 for j in base.values()}, n[b], n[b])
    A = sp.lil_matrix((len(rows), cols))
    for i, entries in enumerate(rows):
        for col, value in entries.items():
            A[i, col] = value
    result = solve_milp(c, A.tocsr(), r_lo, r_hi, lo, hi, integrality, time_limit=time_limit)
    if result.x is None:
        raise PlanError(f"no replica plan for {devices} devices ({result.status}); the pool's GPU counts "
                        f"{sorted({p.devices for p in pool})} may not add up to {devices}")
    x = np.round(result.x).astype(np.int64)
    replicas: Dict[int, int] = {}
    plan_dispatch = {}
    for (s, k), j in base.items():
        if x[j]:
            replicas[s] = replicas.get(s, 0) + 1
            plan_dispatch[(s, k)] = x[j + 1:j + 1 + B]
    return LobraPlan(replicas, plan_dispatch, float(result.x[0]), result.status)


def plan_replicas(pool: Sequence, devices: int, bucket_len: Sequence[int], bucket_count: Sequence[int], *,
                  time_limit: float = 10.0) -> LobraPlan:
    """The static MILP of the module docstring for a representative step (bucket lengths and counts)."""
    check_int(devices, "devices", minimum=1, error=PlanError)
    return _milp(list(pool), devices, bucket_len, bucket_count, None, time_limit)


def homogeneous_replicas(pool: Sequence, devices: int, longest: int) -> Dict[int, int]:
    """The baseline: the fastest single scheme that holds ``longest`` tokens, on all ``devices``."""
    best, best_time = None, np.inf
    for s, p in enumerate(pool):
        if p.capacity >= longest and devices % p.devices == 0:
            t = (p.a * longest ** 2 + p.b * longest + p.c) * p.devices  # GPU-ms of the longest sequence
            if t < best_time:
                best, best_time = s, t
    if best is None:
        raise PlanError(f"no scheme holds {longest} tokens on {devices} devices")
    return {best: devices // pool[best].devices}


def dispatch(pool: Sequence, replicas: Dict[int, int], lengths: np.ndarray, boundaries: Sequence[int], *,
             time_limit: float = 2.0) -> Dict[tuple, List[List[int]]]:
    """One step: the MILP with fixed replicas, then micro-batches (complete ones, then a remainder) per bucket."""
    bucket, bounds = bucketize_lengths(lengths, boundaries)
    counts = np.bincount(bucket, minlength=bounds.size)
    longest = np.array([lengths[bucket == b].max() if counts[b] else bounds[b] for b in range(bounds.size)])
    devices = sum(pool[s].devices * r for s, r in replicas.items())
    plan = _milp(list(pool), devices, longest, counts, replicas, time_limit)
    order = np.argsort(-np.asarray(lengths), kind="stable")
    queues = {b: [int(lengths[i]) for i in order if bucket[i] == b] for b in range(bounds.size)}
    out: Dict[tuple, List[List[int]]] = {}
    for slot, per_bucket in plan.dispatch.items():
        p = pool[slot[0]]
        batches: List[List[int]] = []
        for b, count in enumerate(per_bucket.tolist()):
            take, queues[b] = queues[b][:count], queues[b][count:]
            per = max(1, p.capacity // int(max(longest[b], 1)))
            batches.extend(take[i:i + per] for i in range(0, len(take), per))
        out[slot] = batches
    return out


def simulate(pool: Sequence, replicas: Dict[int, int], steps: Sequence[np.ndarray], boundaries: Sequence[int],
             *, time_limit: float = 2.0) -> Dict[str, float]:
    """Replay ``steps`` (one length array each): total and mean step time (s) and GPU-seconds."""
    devices = sum(pool[s].devices * r for s, r in replicas.items())
    times = []
    for lengths in steps:
        work = dispatch(pool, replicas, np.asarray(lengths), boundaries, time_limit=time_limit)
        for (s, _), batches in work.items():
            if any(sum(mb) > pool[s].capacity for mb in batches):  # an invariant of dispatch()
                raise PlanError(f"a micro-batch exceeds the capacity of {pool[s].label}")
        times.append(max((pool[s].replica_time(batches) for (s, _), batches in work.items()), default=0.0))
    total_s = float(np.sum(times)) / 1000.0
    return {"steps": len(times), "step_s": total_s / max(len(times), 1), "total_s": total_s,
            "gpu_seconds": total_s * devices, "devices": devices}
