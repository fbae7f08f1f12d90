"""MEMO's bi-level memory plan: level 1 plans one layer's temporaries, level 2 the whole model.

Level 1 solves the DSA MIP (:func:`~sgl.systems.memory.dsa.solve_dsa`) on the requests that are
malloc'd and freed inside one layer's forward (or backward) span; the layer then needs one block of
its planned peak for that span.  Level 2 treats each such block as one request and plans it with
every request that crosses layers (skeletal activations, gradients, embedding, head, optimiser
state).  A transient request's address is its block's address plus its level-1 offset.  Layers
with the same request pattern (every layer of a uniform Transformer) share one level-1 solve.

>>> from sgl.systems.memory import AllocTrace
>>> t = AllocTrace([8, 2, 2, 8], [0, 1, 3, 6], [6, 2, 4, 7], spans={"fwd:0": [1, 5]})
>>> plan = plan_bilevel(t, time_limit=5)
>>> plan.peak, plan.levels["level1"]["fwd:0"]
(10, 2)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

import numpy as np

from sgl._checks import check_real
from sgl.systems.memory.dsa import DSAPlan, best_offline, check_plan, live_lower_bound, solve_dsa
from sgl.systems.memory.trace import AllocTrace

__all__ = ["BilevelPlan", "plan_bilevel"]


@dataclass
class BilevelPlan(DSAPlan):
    """A :class:`DSAPlan` of the full trace plus each level's peaks and solver statuses."""

    levels: Dict[str, Any] = field(default_factory=dict)


def _pattern(sub: AllocTrace, lo: int) -> Tuple[Any, ...]:
    return tuple(sub.size.tolist()), tuple((sub.start - lo).tolist()), tuple((sub.end - lo).tolist())


def plan_bilevel(trace: AllocTrace, time_limit: float = 10.0, alignment: int = 1, flat: bool = True,
                 max_flat_pairs: int = 100_000) -> BilevelPlan:
    """Level-1 plans per layer span (shared among identical layers), then one level-2 plan.

    ``time_limit`` is per MIP solve.  With ``flat`` the flat trace is planned too (its MIP when it
    has at most ``max_flat_pairs`` overlapping pairs, else the best replay) and the lower peak is
    returned (``method`` says which; ``levels`` has both peaks), so the plan never loses to
    first-fit.  A trace without spans is one level-2 plan.
    """
    check_real(time_limit, "plan_bilevel: time_limit (seconds)", 0.0, open_low=True)
    n = len(trace)
    owner = np.full(n, -1, dtype=np.int64)
    labels = sorted(trace.spans, key=lambda k: trace.spans[k][0])
    cache: Dict[Tuple[Any, ...], DSAPlan] = {}
    level1: Dict[str, int] = {}
    status1: Dict[str, str] = {}
    offsets = np.zeros(n, dtype=np.int64)
    blocks = []  # (label, size, lo, hi)
    for label in labels:
        lo, hi = trace.spans[label]
        idx = trace.transient(label)
        idx = idx[owner[idx] < 0]
        if len(idx) == 0:
            continue
        sub = trace.subset(idx)
        key = _pattern(sub, lo)
        if key not in cache:
            cache[key] = solve_dsa(sub, time_limit, alignment)
        plan = cache[key]
        owner[idx] = len(blocks)
        offsets[idx] = plan.address
        level1[label] = plan.peak
        status1[label] = plan.status
        blocks.append((label, plan.peak, lo, max(hi, lo + 1)))
    rest = np.nonzero(owner < 0)[0]
    size2 = np.concatenate([trace.size[rest], np.array([b[1] for b in blocks], dtype=np.int64)])
    start2 = np.concatenate([trace.start[rest], np.array([b[2] for b in blocks], dtype=np.int64)])
    end2 = np.concatenate([trace.end[rest], np.array([b[3] for b in blocks], dtype=np.int64)])
    # A block spans [lo, hi) in the same event clock: requests outside it that are live inside overlap it.
    top = AllocTrace(size2, start2, end2)
    plan2 = solve_dsa(top, time_limit, alignment)
    address = np.zeros(n, dtype=np.int64)
    address[rest] = plan2.address[: len(rest)]
    block_addr = plan2.address[len(rest):]
    inside = owner >= 0
    address[inside] = block_addr[owner[inside]] + offsets[inside]
    size = ((trace.size + alignment - 1) // alignment) * alignment
    peak = int((address + size).max()) if n else 0
    levels = {"level1": level1, "level1_status": status1, "level1_solves": len(cache), "level2_requests": len(top),
              "level2_status": plan2.status, "bilevel_peak": peak}
    result = BilevelPlan(address, peak, "bilevel", plan2.status, live_lower_bound(trace, alignment), levels)
    check_plan(trace, result, alignment)
    # A layer block holds its span's whole peak, so requests that outlive the layer cannot use the
    # block's holes: the composition can lose to an online allocator on the flat trace.  The flat
    # trace's own plan (its MIP from the best replay, when small enough) is the other candidate.
    if flat and n:
        pairs = len(trace.overlapping_pairs())
        if pairs <= max_flat_pairs:
            other = solve_dsa(trace, time_limit, alignment, max_pairs=max_flat_pairs)
        else:
            other = best_offline(trace, alignment)
        levels["flat_peak"], levels["flat_status"] = other.peak, other.status
        if other.peak < peak:
            result = BilevelPlan(other.address, other.peak, "flat", other.status, result.lower_bound, levels)
            check_plan(trace, result, alignment)
    return result
