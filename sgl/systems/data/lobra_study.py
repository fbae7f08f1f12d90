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

>>> import numpy as np
>>> from sgl.systems.seq import hydraulis_pool
>>> pool = hydraulis_pool(16)
>>> round(compute_ceiling(pool, np.array([100, 200, 300]), homogeneous_replicas(pool, 16, 300)), 3)
0.102
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.data.lobra import bucketize_lengths, homogeneous_replicas, plan_replicas, simulate

__all__ = ["compute_ceiling", "sample_steps", "best_homogeneous", "lobra_compare", "DEFAULT_BOUNDS"]

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


def sample_steps(tasks: Mapping[str, np.ndarray], per_task: Mapping[str, int], steps: int, seed: int = 0) -> list:
    """``steps`` joint batches: ``per_task[k]`` lengths drawn (with replacement, seeded) from task ``k``."""
    check_int(steps, "steps", minimum=1, error=PlanError)
    for k in per_task:
        if k not in tasks or len(tasks[k]) == 0:
            raise PlanError(f"task {k!r} has no lengths; give a non-empty length list for it")
    rng = np.random.default_rng(seed)
    return [np.concatenate([rng.choice(np.asarray(tasks[k]), int(n)) for k, n in per_task.items() if n > 0])
            for _ in range(steps)]


def best_homogeneous(pool: Sequence, devices: int, longest: int, calib: Sequence[np.ndarray],
                     bounds: Sequence[int], time_limit: float = 2.0) -> Dict[int, int]:
    """The baseline: of the single schemes that hold ``longest`` on all ``devices``, the fastest on ``calib``."""
    options = [{s: devices // p.devices} for s, p in enumerate(pool)
               if p.capacity >= longest and devices % p.devices == 0]
    if not options:
        return homogeneous_replicas(pool, devices, longest)  # raises the PlanError that names the problem
    return min(options, key=lambda rep: simulate(pool, rep, calib, bounds, time_limit=time_limit)["total_s"])


def lobra_compare(pool: Sequence, devices: int, tasks: Mapping[str, np.ndarray], per_task: Mapping[str, int],
                  steps: int = 10, *, bounds: Optional[Sequence[int]] = None, seed: int = 0,
                  time_limit: float = 2.0, calibration_steps: int = 3) -> Dict:
    """LobRA (static MILP + per-step dispatch) vs the homogeneous scheme, modelled GPU-seconds.

    The static plan is chosen on ``calibration_steps`` batches drawn with another seed (never the
    replayed ones): candidates are the MILP's replica sets for the mean bucket counts and for each
    calibration batch, plus the homogeneous scheme; the one with the least replayed time wins.
    """
    check_int(devices, "devices", minimum=1, error=PlanError)
    check_int(calibration_steps, "calibration_steps", minimum=1, error=PlanError)
    cap = max(p.capacity for p in pool)
    tasks = {k: np.asarray(v)[np.asarray(v) <= cap] for k, v in tasks.items()}
    batches = sample_steps(tasks, per_task, steps, seed)
    calib = sample_steps(tasks, per_task, calibration_steps, seed + 7919)
    bounds = sorted({*(b for b in (bounds or DEFAULT_BOUNDS) if b < cap), cap})
    # a training job is configured for the datasets' longest sequence, whatever one step draws
    longest = int(max(np.max(v) for k, v in tasks.items() if per_task.get(k, 0) > 0))
    homo = best_homogeneous(pool, devices, longest, calib, bounds, time_limit)
    candidates = [homo]
    bucket, b = bucketize_lengths(np.concatenate(calib), bounds)
    top = int(bucketize_lengths(np.array([longest]), bounds)[0][0])
    mean_counts = np.ceil(np.bincount(bucket, minlength=len(b)) / calibration_steps).astype(int)
    for counts in [mean_counts] + [np.bincount(bucketize_lengths(x, bounds)[0], minlength=len(b)) for x in calib]:
        counts = counts.copy()
        counts[top] = max(counts[top], 1)  # some replica must hold the longest sequence any step can draw
        try:
            plan = plan_replicas(pool, devices, b, counts, time_limit=max(time_limit, 5.0))
        except PlanError:  # no replica set for this batch (e.g. its longest bucket fits one slot only)
            continue
        if plan.replicas not in candidates:
            candidates.append(plan.replicas)
    scored = [(simulate(pool, rep, calib, bounds, time_limit=time_limit)["total_s"], k, rep)
              for k, rep in enumerate(candidates)]
    _, _, chosen = min(scored)
    ours = simulate(pool, chosen, batches, bounds, time_limit=time_limit)
    base = simulate(pool, homo, batches, bounds, time_limit=time_limit)
    label = lambda rep: ", ".join(f"{r}x {pool[s].label}" for s, r in sorted(rep.items()))  # noqa: E731
    return {"devices": devices, "steps": steps, "per_task": dict(per_task), "bounds": [int(x) for x in bounds],
            "lobra": {**ours, "replicas": label(chosen)}, "homogeneous": {**base, "replicas": label(homo)},
            "candidates": {label(rep): t for t, _, rep in scored},
            "saving": 1.0 - ours["gpu_seconds"] / base["gpu_seconds"],
            "compute_ceiling": compute_ceiling(pool, np.concatenate(batches), homo)}
