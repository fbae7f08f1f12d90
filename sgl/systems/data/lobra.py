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

``microbatch="tokens"`` replaces the per-bucket micro-batch counts by one per slot,
``Σ_b L̄_b·n_bsk <= cap_s·μ_sk`` with ``c_s·μ_sk`` in the time row, and prices bucket ``b`` at its
mean ``a·mean(L²) + b·mean(L)`` (:func:`bucket_moments`) instead of at ``L_b``.

**Dispatcher** (:func:`dispatch`): the same MILP with the replicas fixed, re-solved for each
step's real batch; sequences then go, longest first, into each replica's complete micro-batches
and a remainder micro-batch per bucket (``"tokens"``: each bucket dealt evenly over its slots).
A replica's sequences are also packed first-fit decreasing on their real lengths across buckets
(remainders share micro-batches); it keeps the faster of the two micro-batchings. If the MILP
finds no point in its time limit, a greedy dispatch (longest first, to the replica that would
finish it earliest) keeps the step feasible.
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

from sgl._checks import check_choice, check_int
from sgl.errors import PlanError

MICROBATCH_MODELS = ("bucket", "tokens")

__all__ = ["MICROBATCH_MODELS", "bucket_moments", "LobraPlan", "bucketize_lengths", "plan_replicas", "dispatch",
           "simulate", "homogeneous_replicas", "lpt_dispatch", "step_time"]


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


def _milp(pool, devices, bucket_len, bucket_count, fixed: Optional[Dict[int, int]], time_limit,
          microbatch: str = "bucket", moments: Optional[tuple] = None):
    import scipy.sparse as sp

    from sgl.systems.seq.milp import solve_milp

    L = np.asarray(bucket_len, dtype=np.float64)
    n = np.asarray(bucket_count, dtype=np.float64)
    B = L.size
    # per-bucket mean length and mean squared length for the time and token terms (default: the bound)
    if moments is None:
        mean_len, mean_sq = L, L ** 2
    else:
        mean_len, mean_sq = np.asarray(moments[0], dtype=np.float64), np.asarray(moments[1], dtype=np.float64)
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
            mean_seq = p.a * mean_sq[b] + p.b * mean_len[b]
            add({nb: 1.0, used: -n[b]}, -np.inf, 0.0)         # n_bsk <= n_b * u_bsk
            add({used: 1.0, j: -1.0}, -np.inf, 0.0)           # u_bsk <= y_sk
            if microbatch == "bucket":
                add({nb: 1.0, mu: -per[b]}, -np.inf, 0.0)     # n <= m * mu
                time_row[mu] = p.c
            add({used: min(per[b], max(n[b], 1.0)) * seq + p.c, z: -1.0}, -np.inf, 0.0)  # bubble >= largest mb of b
            time_row[nb] = mean_seq
        if microbatch == "tokens":  # one micro-batch count per slot: Σ_b L_b n_b <= cap · μ (column mu_0)
            mu = j + 1 + B
            for b in range(1, B):
                hi[j + 1 + B + b] = 0.0
            add({**{j + 1 + b: float(mean_len[b]) for b in range(B) if L[b] <= p.capacity}, mu: -float(p.capacity)},
                -np.inf, 0.0)
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
                  time_limit: float = 10.0, microbatch: str = "bucket",
                  moments: Optional[tuple] = None) -> LobraPlan:
    """The static MILP of the module docstring for a representative step (bucket lengths and counts).

    ``microbatch="tokens"`` counts a slot's micro-batches by tokens across buckets
    (``Σ_b L_b·n_bsk <= cap_s·μ_sk``, one ``μ`` per slot) instead of per bucket, the model of the
    first-fit-decreasing micro-batching that :func:`dispatch` can use; ``moments`` (per-bucket
    mean length and mean squared length, :func:`bucket_moments`) then price a bucket's sequences
    at their mean instead of at the bound ``L_b`` (which still decides where they fit).
    """
    check_int(devices, "devices", minimum=1, error=PlanError)
    check_choice(microbatch, "microbatch", MICROBATCH_MODELS, error=PlanError)
    return _milp(list(pool), devices, bucket_len, bucket_count, None, time_limit, microbatch, moments)


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
             time_limit: float = 2.0, repack: bool = True,
             microbatch: str = "bucket", lpt: bool = False) -> Dict[tuple, List[List[int]]]:
    """One step: the MILP with fixed replicas, then micro-batches (complete ones, then a remainder) per bucket.

    With ``repack`` a replica's sequences are also packed first-fit decreasing on their real
    lengths across buckets (the remainders of several buckets share a micro-batch, and a bucket's
    shorter sequences fill the room its bound ``L_b`` leaves); the replica keeps whichever of the
    two micro-batchings has the shorter 1F1B time, so a step never gets slower. With ``lpt`` the
    greedy dispatch of :func:`lpt_dispatch` is built too and the step keeps whichever of the two
    has the shorter step time (the MILP prices buckets, not real lengths, and may stop on its time
    limit with many replicas, e.g. 32-64 GPUs).
    """
    bucket, bounds = bucketize_lengths(lengths, boundaries)
    lengths = np.asarray(lengths, dtype=np.int64)
    counts = np.bincount(bucket, minlength=bounds.size)
    longest = np.array([lengths[bucket == b].max() if counts[b] else bounds[b] for b in range(bounds.size)])
    devices = sum(pool[s].devices * r for s, r in replicas.items())
    check_choice(microbatch, "microbatch", MICROBATCH_MODELS, error=PlanError)
    moments = None
    if microbatch == "tokens":  # the step's real lengths are known: model each bucket by its mean
        moments = bucket_moments(lengths, bucket, longest)
    try:
        plan = _milp(list(pool), devices, longest, counts, replicas, time_limit, microbatch, moments)
    except PlanError:  # no MILP point within the time limit (a loaded machine): a feasible greedy dispatch
        plan = LobraPlan(dict(replicas), _greedy_counts(pool, replicas, lengths, bucket, bounds.size))
    order = np.argsort(-lengths, kind="stable")
    queues = {b: [int(lengths[i]) for i in order if bucket[i] == b] for b in range(bounds.size)}
    if microbatch == "tokens":  # deal each bucket evenly so every slot's share has about the bucket's mean
        shares = _deal(queues, plan.dispatch)
    out: Dict[tuple, List[List[int]]] = {}
    for slot, per_bucket in plan.dispatch.items():
        p = pool[slot[0]]
        batches: List[List[int]] = []
        for b, count in enumerate(per_bucket.tolist()):
            if microbatch == "tokens":
                take = shares[slot][b]
            else:
                take, queues[b] = queues[b][:count], queues[b][count:]
            per = max(1, p.capacity // int(max(longest[b], 1)))
            batches.extend(take[i:i + per] for i in range(0, len(take), per))
        if repack or microbatch == "tokens":
            merged = _first_fit_decreasing([x for mb in batches for x in mb], p.capacity)
            if p.replica_time(merged) < p.replica_time(batches):
                batches = merged
        out[slot] = batches
    if lpt:
        other = lpt_dispatch(pool, replicas, lengths)
        if step_time(pool, other) < step_time(pool, out):
            out = other
    return out


def step_time(pool: Sequence, work: Dict[tuple, List[List[int]]]) -> float:
    """The step's time (ms): the slowest replica's 1F1B time over its micro-batches."""
    return max((pool[s].replica_time(batches) for (s, _), batches in work.items()), default=0.0)


def _lpt_assign(pool: Sequence, replicas: Dict[int, int], lengths: np.ndarray,
                overhead: bool) -> tuple:
    """Longest first, each sequence to the replica that holds it and would finish it earliest.

    A sequence costs ``t_s(L)`` (plus ``c_s·L/cap_s``, its share of a full micro-batch's overhead,
    with ``overhead``). Returns ``(slots, slot index per sequence, sequence order)``.
    """
    slots = [(s, k) for s, r in sorted(replicas.items()) for k in range(r)]
    schemes = [pool[s] for s, _ in slots]
    caps = np.array([p.capacity for p in schemes])
    a, b = np.array([p.a for p in schemes]), np.array([p.b for p in schemes])
    c = np.array([p.c for p in schemes]) if overhead else np.zeros(len(slots))
    load = np.zeros(len(slots))
    order = np.argsort(-lengths, kind="stable")
    where = np.empty(lengths.size, dtype=np.int64)
    for i in order:
        x = float(lengths[i])
        finish = np.where(caps >= x, load + (a * x * x + b * x + c * x / caps), np.inf)
        j = int(np.argmin(finish))
        if not np.isfinite(finish[j]):
            raise PlanError(f"a sequence of {int(lengths[i])} tokens fits no replica of the plan")
        load[j] = finish[j]
        where[i] = j
    return slots, where, order


def lpt_dispatch(pool: Sequence, replicas: Dict[int, int], lengths: np.ndarray) -> Dict[tuple, List[List[int]]]:
    """Greedy dispatch on real lengths (:func:`_lpt_assign` with each sequence's micro-batch overhead share);
    each replica then packs its sequences first-fit decreasing."""
    lengths = np.asarray(lengths, dtype=np.int64)
    slots, where, order = _lpt_assign(pool, replicas, lengths, overhead=True)
    got: List[List[int]] = [[] for _ in slots]
    for i in order:
        got[where[i]].append(int(lengths[i]))
    return {slot: _first_fit_decreasing(g, pool[slot[0]].capacity) for slot, g in zip(slots, got)}


def _greedy_counts(pool: Sequence, replicas: Dict[int, int], lengths: np.ndarray, bucket: np.ndarray,
                   buckets: int) -> Dict[tuple, np.ndarray]:
    """:func:`_lpt_assign` on ``t_s(L)`` alone, as per-bucket counts per replica."""
    slots, where, _ = _lpt_assign(pool, replicas, np.asarray(lengths), overhead=False)
    out = {slot: np.zeros(buckets, dtype=np.int64) for slot in slots}
    for i, j in enumerate(where):
        out[slots[j]][bucket[i]] += 1
    return out


def bucket_moments(lengths: np.ndarray, bucket: np.ndarray, fallback: np.ndarray) -> tuple:
    """Per bucket ``(mean L, mean L²)`` of ``lengths`` (``fallback`` for an empty bucket)."""
    lengths = np.asarray(lengths, dtype=np.float64)
    B = len(fallback)
    count = np.bincount(bucket, minlength=B).astype(np.float64)
    safe = np.maximum(count, 1.0)
    fallback = np.asarray(fallback, dtype=np.float64)
    mean = np.where(count > 0, np.bincount(bucket, lengths, minlength=B) / safe, fallback)
    square = np.where(count > 0, np.bincount(bucket, lengths ** 2, minlength=B) / safe, fallback ** 2)
    return mean, square


def _deal(queues: Dict[int, List[int]], counts: Dict[tuple, np.ndarray]) -> Dict[tuple, Dict[int, List[int]]]:
    """Each bucket's sequences (longest first) to the slots, each next one to the slot furthest behind its count."""
    shares: Dict[tuple, Dict[int, List[int]]] = {slot: {} for slot in counts}
    for b, queue in queues.items():
        want = {slot: int(c[b]) for slot, c in counts.items() if c[b] > 0}
        got = dict.fromkeys(want, 0)
        for slot in want:
            shares[slot][b] = []
        for x in queue:
            slot = max(want, key=lambda k: ((want[k] - got[k]) / want[k], -list(want).index(k)))
            shares[slot][b].append(x)
            got[slot] += 1
    for slot in shares:
        for b in range(len(next(iter(counts.values())))):
            shares[slot].setdefault(b, [])
    return shares


def _first_fit_decreasing(lengths: List[int], capacity: int) -> List[List[int]]:
    """Micro-batches of real lengths across buckets: each sequence into the first one it fits (longest first)."""
    batches: List[List[int]] = []
    room: List[int] = []
    for x in sorted(lengths, reverse=True):
        for i, r in enumerate(room):
            if x <= r:
                batches[i].append(x)
                room[i] -= x
                break
        else:
            batches.append([x])
            room.append(capacity - x)
    return batches


def simulate(pool: Sequence, replicas: Dict[int, int], steps: Sequence[np.ndarray], boundaries: Sequence[int],
             *, time_limit: float = 2.0, repack: bool = True, microbatch: str = "bucket",
             lpt: bool = False) -> Dict[str, float]:
    """Replay ``steps`` (one length array each): total and mean step time (s) and GPU-seconds."""
    devices = sum(pool[s].devices * r for s, r in replicas.items())
    times = []
    for lengths in steps:
        work = dispatch(pool, replicas, np.asarray(lengths), boundaries, time_limit=time_limit, repack=repack,
                        microbatch=microbatch, lpt=lpt)
        for (s, _), batches in work.items():
            if any(sum(mb) > pool[s].capacity for mb in batches):  # an invariant of dispatch()
                raise PlanError(f"a micro-batch exceeds the capacity of {pool[s].label}")
        times.append(max((pool[s].replica_time(batches) for (s, _), batches in work.items()), default=0.0))
    total_s = float(np.sum(times)) / 1000.0
    return {"steps": len(times), "step_s": total_s / max(len(times), 1), "total_s": total_s,
            "gpu_seconds": total_s * devices, "devices": devices}
