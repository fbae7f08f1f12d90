"""Spindle's per-wave resource allocation: makespan bisection, GPU-count rounding, lane packing.

For one wave (operators with no dependency among them) on ``N`` GPUs:

1. **Bisection** (:func:`continuous_makespan`): the relaxation lets operator ``i`` take a real
   number of GPUs ``g_i(C)`` (:meth:`ScalingCurve.continuous_gpus`: linear between profiled
   counts, time-sharing below the smallest). ``Σ_i g_i(C)`` decreases in ``C``; bisection finds
   the ``C*`` with ``Σ_i g_i(C*) = N`` — the wave's lower bound when the curves' areas
   ``g·t(g)`` grow with ``g`` (sub-linear speed-up, the usual case).
2. **Rounding** (:func:`round_allocation`): integer counts from the profiled ones. For a target
   ``C`` every operator needs ``ĝ_i(C) = min{g ∈ G_i : t̂_i(g) <= C}``; the optimum of
   ``min max_i t̂_i(g_i) s.t. Σ g_i <= N`` is the smallest candidate ``C ∈ {t̂_i(g)}`` with
   ``Σ ĝ_i(C) <= N`` (binary search over the sorted candidates, all ``>= C*``; exact, checked
   against brute force). Spare
   GPUs then go, one profiled step at a time, to the slowest operators (shorter wave tail).
3. **Packing** (:func:`pack_wave`): when the operators cannot all run at once (more operators
   than GPUs, or ``Σ g_min > N``, or stacking is faster), operators are stacked in *lanes* (a lane
   = a GPU group of one width running its operators one after another): for a target ``C``,
   first-fit decreasing puts each operator (widest ``ĝ_i(C)`` first) into the narrowest open lane
   of width ``>= ĝ_i(C)`` where it still ends by ``C`` at that width, or opens a lane of ``ĝ_i(C)``.
   Targets are the candidate set plus a geometric grid; running the wave's operators one after
   another on all ``N`` GPUs is always a candidate. The best packing is kept.

>>> from sgl.systems.data.spindle_dag import ScalingCurve
>>> curves = [ScalingCurve.amdahl(8.0, 0.0, 0.0, (1, 2, 4)), ScalingCurve.amdahl(2.0, 0.0, 0.0, (1, 2, 4))]
>>> round(continuous_makespan(curves, 5)[0], 6)      # 8/g + 2/(5-g) = minimal at 4 + 1 GPUs
2.0
>>> wave = pack_wave(curves, 5)
>>> wave.makespan, [lane.width for lane in wave.lanes]
(2.0, [4, 1])
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.data.spindle_dag import ScalingCurve

__all__ = ["Lane", "WaveAllocation", "continuous_makespan", "round_allocation", "pack_wave", "wave_gpu_seconds",
           "brute_force_concurrent"]


@dataclass
class Lane:
    """``width`` GPUs running ``ops`` (indices into the wave) one after another; ``times`` per op."""

    width: int
    ops: List[int] = field(default_factory=list)
    times: List[float] = field(default_factory=list)

    @property
    def busy(self) -> float:
        return float(sum(self.times))


@dataclass
class WaveAllocation:
    """Lanes of one wave (``Σ width <= N``), its makespan, the relaxation's bound ``C*`` and the method."""

    lanes: List[Lane]
    makespan: float
    lower_bound: float
    method: str

    @property
    def gpus(self) -> int:
        return sum(lane.width for lane in self.lanes)

    def width_of(self) -> dict:
        """``{op index in the wave: GPUs}``."""
        return {op: lane.width for lane in self.lanes for op in lane.ops}


def _check(curves: Sequence[ScalingCurve], devices: int) -> None:
    check_int(devices, "devices", minimum=1, error=PlanError)
    if not curves:
        raise PlanError("a wave needs at least one operator")
    for k, c in enumerate(curves):
        if c.min_gpus > devices:
            raise PlanError(f"operator {k} needs at least {c.min_gpus} GPUs but the cluster has {devices}")


def continuous_makespan(curves: Sequence[ScalingCurve], devices: int, iters: int = 100) -> Tuple[float, np.ndarray]:
    """``(C*, g(C*))`` with ``Σ g_i(C*) = N`` (or ``C* = max_i t_i(g_max)`` when GPUs are left over)."""
    _check(curves, devices)

    def need(c: float) -> np.ndarray:
        return np.array([cv.continuous_gpus(c) for cv in curves])

    lo = max(cv.time(cv.max_gpus) for cv in curves)
    if need(lo).sum() <= devices:
        return lo, need(lo)
    hi = max(max(cv.time(cv.min_gpus) for cv in curves),
             sum(cv.min_gpus * cv.time(cv.min_gpus) for cv in curves) / devices)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if need(mid).sum() > devices:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi, need(hi)


def _widths(curves: Sequence[ScalingCurve], limit: float) -> Optional[List[int]]:
    out = []
    for cv in curves:
        g = cv.gpus_for(limit)
        if g is None:
            return None
        out.append(g)
    return out


def round_allocation(curves: Sequence[ScalingCurve], devices: int) -> Optional[List[int]]:
    """Integer GPUs per operator minimising the max time with all running at once (``None``: cannot).

    Exact: the smallest candidate time whose per-operator minimal counts fit in ``N``; then spare
    GPUs go to the slowest operators while a profiled step fits.
    """
    _check(curves, devices)
    if sum(cv.min_gpus for cv in curves) > devices:
        return None
    cands = np.unique([cv.time(g) for cv in curves for g in cv.gpus])
    lo, hi = 0, len(cands) - 1  # cands[-1] = max over t(g_min): always fits when Σ g_min <= N
    while lo < hi:
        mid = (lo + hi) // 2
        w = _widths(curves, float(cands[mid]))
        if w is not None and sum(w) <= devices:
            hi = mid
        else:
            lo = mid + 1
    widths = _widths(curves, float(cands[lo]))
    spare = devices - sum(widths)
    while spare > 0:  # spare GPUs: next profiled count for the slowest operator that still fits
        order = sorted(range(len(curves)), key=lambda i: -curves[i].time(widths[i]))
        for i in order:
            bigger = [g for g in curves[i].gpus if g > widths[i] and g - widths[i] <= spare
                      and curves[i].time(g) < curves[i].time(widths[i])]
            if bigger:
                spare -= bigger[0] - widths[i]
                widths[i] = bigger[0]
                break
        else:
            break
    return widths


def _lanes_for(curves: Sequence[ScalingCurve], devices: int, limit: float) -> Optional[List[Lane]]:
    """First-fit decreasing lanes for target ``limit`` (``None`` if it does not fit on ``N`` GPUs)."""
    widths = _widths(curves, limit)
    if widths is None:
        return None
    times = [cv.time(w) for cv, w in zip(curves, widths)]
    lanes: List[Lane] = []
    free = devices
    for i in sorted(range(len(curves)), key=lambda k: (-widths[k], -times[k], k)):
        # an open lane at least as wide (narrowest first) where the op, at that width, still fits
        for lane in sorted(lanes, key=lambda ln: ln.width):
            t = curves[i].time(lane.width)
            if lane.width >= widths[i] and lane.busy + t <= limit * (1 + 1e-12):
                lane.ops.append(i)
                lane.times.append(t)
                break
        else:
            if widths[i] > free:
                return None
            lanes.append(Lane(widths[i], [i], [times[i]]))
            free -= widths[i]
    return lanes


def pack_wave(curves: Sequence[ScalingCurve], devices: int, grid: int = 48) -> WaveAllocation:
    """The best of: rounded concurrent allocation, lane packings over candidate targets, all-on-N in turn."""
    _check(curves, devices)
    bound, _ = continuous_makespan(curves, devices)
    best: Optional[WaveAllocation] = None

    def keep(lanes: Optional[List[Lane]], method: str) -> None:
        nonlocal best
        if lanes is None:
            return
        span = max(lane.busy for lane in lanes)
        if best is None or span < best.makespan * (1 - 1e-12):
            best = WaveAllocation(lanes, span, bound, method)

    widths = round_allocation(curves, devices)
    if widths is not None:
        keep([Lane(w, [i], [cv.time(w)]) for i, (cv, w) in enumerate(zip(curves, widths))], "concurrent")
    full = [min(devices, cv.max_gpus) for cv in curves]
    keep([Lane(devices, list(range(len(curves))), [cv.time(g) for cv, g in zip(curves, full)])], "sequential")
    if widths is None or len(curves) > 1:
        upper = best.makespan
        cands = np.unique([cv.time(g) for cv in curves for g in cv.gpus])
        cands = cands[(cands >= bound * (1 - 1e-12)) & (cands <= upper)]
        if upper > bound:
            cands = np.concatenate([cands, np.geomspace(bound, upper, grid)])
        for limit in np.unique(cands):
            keep(_lanes_for(curves, devices, float(limit)), "lanes")
    assert best is not None
    return best


def wave_gpu_seconds(alloc: WaveAllocation) -> float:
    """GPU-seconds the wave keeps busy (for utilisation reports)."""
    return float(sum(lane.width * lane.busy for lane in alloc.lanes))


def idle_fraction(alloc: WaveAllocation, devices: int) -> float:
    return 1.0 - wave_gpu_seconds(alloc) / (devices * alloc.makespan) if alloc.makespan > 0 else 0.0


def brute_force_concurrent(curves: Sequence[ScalingCurve], devices: int) -> float:
    """Exhaustive ``min max_i t̂_i(g_i)`` over profiled counts with ``Σ g_i <= N`` (tiny waves; tests)."""
    import itertools

    best = math.inf
    for combo in itertools.product(*[cv.gpus for cv in curves]):
        if sum(combo) <= devices:
            best = min(best, max(cv.time(g) for cv, g in zip(curves, combo)))
    return best
