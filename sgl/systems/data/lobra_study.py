"""LobRA end to end on length distributions: plan, replay, baseline, and the ceiling of the saving.

:func:`lobra_compare` samples ``steps`` joint batches (``per_task[k]`` sequences of task ``k``
each step, seeded), plans replicas with the MILP (:func:`plan_replicas`; candidates chosen on
separate calibration batches), replays every step with the per-step dispatcher
(:func:`simulate`) and does the same for the homogeneous baseline (of the single schemes that
hold the tasks' longest sequence, on all GPUs, the fastest on the calibration batches). Every
candidate keeps a replica that holds that longest sequence, so any step can be dispatched.

:func:`compute_ceiling` is the most the *compute term* allows: every sequence on the scheme
with the fewest GPU-milliseconds for it, ``min_s g_s·(a_s L² + b_s L)`` over schemes that hold
``L``, against the baseline scheme's ``g·(a L² + b L)``. It leaves out pipeline bubbles and the
per-micro-batch overhead ``c`` (which a deep-pipeline baseline pays and a planner can avoid, so
a measured saving may exceed it). When a token costs about as many GPU-ms on every scheme (the
7B Hydraulis pool: 0.18 on tp1-pp2, 0.22 on tp4, 0.26 on tp8), this ceiling is low whatever the
planner does.

:func:`gpu_seconds_lower_bound` is the exact floor for *any* plan on the same cost model. A step
of a plan with replicas ``j`` (scheme ``s_j``, ``g_j`` GPUs, ``Σ_j g_j = N``) takes
``T = max_j T_j`` with ``T_j = Σ_mb (Σ_{L∈mb} t_s(L) + c_s) + (pp_s − 1)·max_mb(...)``, so

    N·T >= Σ_j g_j·T_j >= Σ_j g_j·(Σ_{L∈j} t_{s_j}(L) + c_{s_j}·⌈Σ_{L∈j} L / cap_{s_j}⌉)
        >= Σ_L min_{s: cap_s >= L} g_s·(a_s L² + b_s L + c_s·L / cap_s)

(perfect balance, every sequence on its cheapest scheme, no bubbles, micro-batches filled to the
token). Every replayed plan, LobRA's and the homogeneous one, costs at least this many
GPU-seconds on the same steps; ``1 − bound / homogeneous`` is the largest saving any
heterogeneous plan could report against the baseline.

:func:`~sgl.systems.data.lobra_bound.static_plan_bound` bounds LobRA's own method class (a static
replica set with any per-step dispatch); ``lobra_compare`` reports it as ``static_bound``.

>>> import numpy as np
>>> from sgl.systems.seq import hydraulis_pool
>>> pool = hydraulis_pool(16)
>>> round(compute_ceiling(pool, np.array([100, 200, 300]), homogeneous_replicas(pool, 16, 300)), 3)
0.102
>>> round(gpu_seconds_lower_bound(pool, [np.array([100, 200, 300])]), 4)
0.1341
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.data.lobra import bucket_moments, bucketize_lengths, homogeneous_replicas, plan_replicas, simulate
from sgl.systems.data.lobra_bound import per_token_ceiling, replica_sets, static_plan_bound, step_time_bound  # noqa: F401

__all__ = ["static_floor", "compute_ceiling", "gpu_seconds_lower_bound", "replica_sets", "sample_steps", "best_homogeneous",
           "lobra_compare", "DEFAULT_BOUNDS", "step_time_bound", "static_plan_bound",
           "per_token_ceiling"]

DEFAULT_BOUNDS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _gpu_ms(pool: Sequence, s: int, lengths: np.ndarray) -> np.ndarray:
    p = pool[s]
    return p.devices * (p.a * lengths.astype(np.float64) ** 2 + p.b * lengths)


def compute_ceiling(pool: Sequence, lengths: np.ndarray, baseline: Mapping[int, int]) -> float:
    """``1 - Σ_L min_s GPU-ms_s(L) / Σ_L GPU-ms_base(L)`` (see the module docstring)."""
    lengths = np.asarray(lengths)
    if lengths.size == 0:
        raise PlanError("compute_ceiling needs at least one sequence length")
    (base,) = list(baseline)
    best = np.full(lengths.size, np.inf)
    for s, p in enumerate(pool):
        fits = lengths <= p.capacity
        best[fits] = np.minimum(best[fits], _gpu_ms(pool, s, lengths[fits]))
    if not np.isfinite(best).all():
        raise PlanError(f"a sequence of {int(lengths.max())} tokens fits no scheme of the pool")
    return float(1.0 - best.sum() / _gpu_ms(pool, base, lengths).sum())


def gpu_seconds_lower_bound(pool: Sequence, steps: Sequence[np.ndarray]) -> float:
    """``Σ_steps Σ_L min_s g_s·(a_s L² + b_s L + c_s L / cap_s) / 1000`` (see the module docstring)."""
    total = 0.0
    for lengths in steps:
        lengths = np.asarray(lengths, dtype=np.float64)
        best = np.full(lengths.size, np.inf)
        for p in pool:
            fits = lengths <= p.capacity
            cost = p.devices * (p.a * lengths[fits] ** 2 + p.b * lengths[fits] + p.c * lengths[fits] / p.capacity)
            best[fits] = np.minimum(best[fits], cost)
        if not np.isfinite(best).all():
            raise PlanError(f"a sequence of {int(lengths.max())} tokens fits no scheme of the pool")
        total += float(best.sum())
    return total / 1000.0


def sample_steps(tasks: Mapping[str, np.ndarray], per_task: Mapping[str, int], steps: int, seed: int = 0) -> list:
    """``steps`` joint batches: ``per_task[k]`` lengths drawn (with replacement, seeded) from task ``k``."""
    check_int(steps, "steps", minimum=1, error=PlanError)
    for k in per_task:
        if k not in tasks or len(tasks[k]) == 0:
            raise PlanError(f"task {k!r} has no lengths; give a non-empty length list for it")
    rng = np.random.default_rng(seed)
    return [np.concatenate([rng.choice(np.asarray(tasks[k]), int(n)) for k, n in per_task.items() if n > 0])
            for _ in range(steps)]


def replayed_steps(pool: Sequence, tasks: Mapping[str, np.ndarray], per_task: Mapping[str, int], steps: int,
                   seed: int) -> tuple:
    """``(tasks, batches)``: the tasks without sequences longer than every scheme holds, and the
    ``steps`` joint batches :func:`lobra_compare` replays for ``seed``."""
    cap = max(p.capacity for p in pool)
    kept = {k: np.asarray(v)[np.asarray(v) <= cap] for k, v in tasks.items()}
    return kept, sample_steps(kept, per_task, steps, seed)


def best_homogeneous(pool: Sequence, devices: int, longest: int, calib: Sequence[np.ndarray],
                     bounds: Sequence[int], time_limit: float = 2.0, microbatch: str = "bucket",
                     lpt: bool = False) -> Dict[int, int]:
    """The baseline: of the single schemes that hold ``longest`` on all ``devices``, the fastest on ``calib``."""
    options = [{s: devices // p.devices} for s, p in enumerate(pool)
               if p.capacity >= longest and devices % p.devices == 0]
    if not options:
        return homogeneous_replicas(pool, devices, longest)  # raises the PlanError that names the problem
    return min(options, key=lambda rep: simulate(pool, rep, calib, bounds, time_limit=time_limit,
                                                 microbatch=microbatch, lpt=lpt)["total_s"])


def static_floor(static: Mapping) -> float:
    """The tightest GPU-seconds bound of a :func:`static_plan_bound` result (per-set, else integer, else continuous)."""
    for key in ("gpu_seconds", "integer_gpu_seconds", "continuous_gpu_seconds"):
        if static.get(key) is not None:
            return float(static[key])
    raise PlanError("a static bound without any GPU-seconds figure")


def lobra_compare(pool: Sequence, devices: int, tasks: Mapping[str, np.ndarray], per_task: Mapping[str, int],
                  steps: int = 10, *, bounds: Optional[Sequence[int]] = None, seed: int = 0,
                  time_limit: float = 2.0, calibration_steps: int = 3, microbatch: str = "bucket",
                  search: int = 0, bound_sets: int = 0, local_search: int = 0, local_keep: int = 6,
                  lpt: bool = False, integer_bound: bool = False) -> Dict:
    """LobRA (static MILP + per-step dispatch) vs the homogeneous scheme, modelled GPU-seconds.

    The static plan is chosen on ``calibration_steps`` batches drawn with another seed (never the
    replayed ones): candidates are the MILP's replica sets for the mean bucket counts and for each
    calibration batch, the MILP's set for ``N/k`` GPUs and ``1/k`` of the mean counts repeated
    ``k`` times (``k = 2, 4, …`` while ``N/k >= 8`` GPUs; on 32-64 GPUs the whole-cluster MILP
    rarely gets near its optimum within its time limit), plus the homogeneous scheme; the one with
    the least replayed time wins.
    ``microbatch="tokens"`` plans and dispatches with token-counted micro-batches and each
    bucket's mean length (:func:`~sgl.systems.data.lobra.plan_replicas`,
    :func:`~sgl.systems.data.lobra.dispatch`); the baseline is replayed the same way. With
    ``search > 0`` and at most ``search`` replica sets (:func:`replica_sets`), every one of them is
    a candidate too: the static choice is then exact on the calibration batches, and
    ``oracle_static`` (every set replayed on the replayed steps themselves, the best static plan
    in hindsight for this dispatcher) is reported beside it. Where the sets are too many for that
    (32, 64 GPUs) and ``local_search > 0``, :func:`~sgl.systems.data.lobra_search.search_candidates`
    adds the ``local_keep`` best sets of a hill climb (at most ``local_search`` sets scored by a
    greedy-dispatch replay of the calibration batches) from the static LP's rounded real-valued counts
    and from every candidate above; they are replayed on the calibration batches like the rest
    (``local_candidates`` names them), so the choice is never worse there than without them.
    ``lpt`` lets every replay (LobRA's, the baseline's, the calibration scores) keep the greedy
    dispatch of :func:`~sgl.systems.data.lobra.lpt_dispatch` for a step where it is faster. ``static_bound`` is
    :func:`static_plan_bound` on the replayed steps (per-set LPs when there are at most
    ``bound_sets`` replica sets, else only the continuous-count LP) and ``static_ceiling`` the most
    any static replica set with any dispatch could save against the replayed baseline.
    ``integer_bound`` adds the integer-count bound (:func:`step_time_bound_integer` on every
    replayed step, integer replica counts re-chosen per step): tighter than the continuous LP and
    cheap where the sets are too many to enumerate; the static ceiling then uses the tightest
    bound computed.
    """
    check_int(devices, "devices", minimum=1, error=PlanError)
    check_int(calibration_steps, "calibration_steps", minimum=1, error=PlanError)
    cap = max(p.capacity for p in pool)
    tasks, batches = replayed_steps(pool, tasks, per_task, steps, seed)
    calib = sample_steps(tasks, per_task, calibration_steps, seed + 7919)
    bounds = sorted({*(b for b in (bounds or DEFAULT_BOUNDS) if b < cap), cap})
    # a training job is configured for the datasets' longest sequence, whatever one step draws
    longest = int(max(np.max(v) for k, v in tasks.items() if per_task.get(k, 0) > 0))
    run = dict(time_limit=time_limit, microbatch=microbatch, lpt=lpt)
    homo = best_homogeneous(pool, devices, longest, calib, bounds, time_limit, microbatch, lpt)
    candidates = [homo]
    bucket, b = bucketize_lengths(np.concatenate(calib), bounds)
    top = int(bucketize_lengths(np.array([longest]), bounds)[0][0])
    mean_counts = np.ceil(np.bincount(bucket, minlength=len(b)) / calibration_steps).astype(int)
    everything = np.concatenate(calib)
    # plans of the MILP on the whole cluster (mean counts, each calibration batch), then on sub-clusters of
    # N/2, N/4, ... GPUs (the mean counts shared out) repeated k times: smaller MILPs that finish in their limit
    hold_gpus = min(p.devices for p in pool if p.capacity >= longest)
    splits = [k for k in (2, 4, 8, 16, 32) if devices % k == 0 and devices // k >= max(hold_gpus, 8)]
    for draw, k in [(None, 1)] + [(x, 1) for x in calib] + [(None, k) for k in splits]:
        counts = mean_counts if draw is None else np.bincount(bucketize_lengths(draw, bounds)[0], minlength=len(b))
        counts = np.ceil(counts / k).astype(int)
        counts[top] = max(counts[top], 1)  # some replica must hold the longest sequence any step can draw
        lens, moments = b, None
        if microbatch == "tokens":  # each bucket by its real longest and mean lengths on the calibration draws
            sample = everything if draw is None else np.asarray(draw)
            which = bucketize_lengths(sample, bounds)[0]
            lens = np.array([sample[which == k].max() if (which == k).any() else b[k] for k in range(len(b))])
            lens[top] = max(int(lens[top]), longest)
            moments = bucket_moments(sample, which, lens)
        try:
            plan = plan_replicas(pool, devices // k, lens, counts, time_limit=max(time_limit, 5.0),
                                 microbatch=microbatch, moments=moments)
        except PlanError:  # no replica set for this batch (e.g. its longest bucket fits one slot only)
            continue
        replicas = {s: r * k for s, r in plan.replicas.items()}
        if replicas not in candidates:
            candidates.append(replicas)
    every = replica_sets(pool, devices, longest, limit=search) if search > 0 else None
    candidates += [rep for rep in (every or []) if rep not in candidates]
    local = []
    if local_search > 0 and not every:  # too many sets to enumerate: a hill climb scored on the calibration draws
        from sgl.systems.data.lobra_search import search_candidates

        local = [rep for rep in search_candidates(pool, devices, longest, calib, candidates, max_evals=local_search,
                                                  keep=local_keep) if rep not in candidates]
        candidates += local
    scored = [(simulate(pool, rep, calib, bounds, **run)["total_s"], k, rep) for k, rep in enumerate(candidates)]
    _, _, chosen = min(scored)
    ours = simulate(pool, chosen, batches, bounds, **run)
    base = simulate(pool, homo, batches, bounds, **run)
    oracle = None
    if every:  # the best static replica set in hindsight: every set replayed on the replayed steps themselves
        oracle = min((simulate(pool, rep, batches, bounds, **run)["gpu_seconds"], k) for k, rep in enumerate(every))
        oracle = {"gpu_seconds": oracle[0], "replicas": every[oracle[1]]}
    bound = gpu_seconds_lower_bound(pool, batches)
    static = static_plan_bound(pool, devices, batches, longest, limit=max(bound_sets, 1), integer=integer_bound)
    if bound_sets <= 0:
        static.update(gpu_seconds=None, replicas=None, per_step_gpu_seconds=None, sets=None)
    floor = static_floor(static)
    ceiling = 1.0 - bound / base["gpu_seconds"]
    label = lambda rep: ", ".join(f"{r}x {pool[s].label}" for s, r in sorted(rep.items()))  # noqa: E731
    return {"devices": devices, "steps": steps, "per_task": dict(per_task), "bounds": [int(x) for x in bounds],
            "lobra": {**ours, "replicas": label(chosen)}, "homogeneous": {**base, "replicas": label(homo)},
            "candidates": {label(rep): t for t, _, rep in scored},
            "candidate_sets": [rep for _, _, rep in sorted(scored, key=lambda x: x[:2])],  # by calibration time
            "saving": 1.0 - ours["gpu_seconds"] / base["gpu_seconds"],
            "microbatch": microbatch, "lpt": lpt, "searched": len(candidates),
            "local_candidates": [label(rep) for rep in local],
            "oracle_static": None if oracle is None else {"gpu_seconds": oracle["gpu_seconds"],
                                                          "replicas": label(oracle["replicas"])},
            "compute_ceiling": compute_ceiling(pool, np.concatenate(batches), homo),
            "lower_bound_gpu_seconds": bound, "ceiling": ceiling,
            "static_bound": {**static, "replicas": None if static["replicas"] is None else label(static["replicas"])},
            "static_ceiling": 1.0 - floor / base["gpu_seconds"],
            "share_of_ceiling": (1.0 - ours["gpu_seconds"] / base["gpu_seconds"]) / ceiling if ceiling > 0 else 0.0}

