"""A LobRA plan that may change its replica set between steps, paying for each reconfiguration.

LobRA keeps one static replica set for the whole job; :mod:`~sgl.systems.data.lobra_bound`
shows that on 16 GPUs no static set can save 30 % against the homogeneous scheme. This module
lets the set change at step boundaries. Before step ``i`` runs its batch is known (LobRA's
dispatcher uses it the same way), so for each candidate set ``R`` the dispatcher's step time
``T_i(R)`` is computed and the plan takes::

    R_i = argmin_R  T_i(R) + reconfig(R_{i−1}, R)

(greedy, this step's batch only, no look-ahead; ``R_0`` is the static plan's set, set up once
like any static plan's). **Reconfiguration cost** (:func:`reconfig_ms`): the replicas of
``R_{i−1}`` and ``R`` that are the same scheme stay put (``min`` of the two counts per scheme);
every GPU of every other replica of ``R`` receives its whole new shard of model state, the frozen
bf16 base weights plus the adapters' weights, gradients, fp32 masters and Adam moments
(:func:`~sgl.systems.data.lobra_pool.lora_states_bytes` for its ``(tp, pp)``), at
``bandwidth_gbps`` per GPU, all GPUs in parallel, so the step pays ``max_GPU bytes / bandwidth``.
Default 150 GB/s: NVLink within a node, as Spindle's ``intra_gbps``; every 8-GPU node holds a
whole copy of the frozen base in any layout of these ≤ 8-GPU schemes, so a re-shard can be fed
inside the node. That is an optimistic figure (no overlap loss, no allocator or communicator
set-up time); a reload over PCIe from host memory (about 25 GB/s) is the pessimistic one — both
are a parameter. A 7B tp1-pp1 shard (about 15.5 GB with three rank-16 adapters) then takes about
0.10 s at 150 GB/s, a tp8-pp1 shard about 0.013 s.

>>> from sgl.systems.data.lobra_pool import lora_pool
>>> pool = lora_pool(16, adapters=3)
>>> round(reconfig_ms(pool, {9: 2}, {9: 1, 7: 2}, 150.0, adapters=3), 1)  # two tp4-pp1 replicas re-sharded
25.9
>>> reconfig_ms(pool, {9: 2}, {9: 2}, 150.0)
0.0
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.data.lobra import simulate
from sgl.systems.data.lobra_pool import lora_states_bytes

__all__ = ["DEFAULT_BANDWIDTH_GBPS", "reconfig_ms", "dynamic_replay", "lobra_dynamic_compare"]

#: per-GPU re-shard bandwidth (GB/s, 10^9 bytes): NVLink inside a node, as Spindle's intra-node default
DEFAULT_BANDWIDTH_GBPS = 150.0


def _check_bandwidth(bandwidth_gbps: float) -> float:
    return check_real(bandwidth_gbps, "bandwidth_gbps (re-shard GB/s per GPU; use > 0, math.inf for free switches)",
                      0.0, open_low=True, error=PlanError)


def reconfig_ms(pool: Sequence, old: Mapping[int, int], new: Mapping[int, int], bandwidth_gbps: float, *,
                rank: int = 16, adapters: int = 1,
                state_bytes: Optional[Callable[[int, int], float]] = None) -> float:
    """Milliseconds to go from replica set ``old`` to ``new`` (module docstring); 0 when they are equal.

    ``state_bytes(tp, pp)`` is the model state one GPU of a ``(tp, pp)`` replica holds (default:
    the LoRA memory model with ``adapters`` rank-``rank`` adapters).
    """
    bandwidth_gbps = _check_bandwidth(bandwidth_gbps)
    if state_bytes is None:
        state_bytes = lambda tp, pp: lora_states_bytes(tp, pp, rank, adapters)  # noqa: E731
    moved = [s for s, r in new.items() if r > min(r, old.get(s, 0))]
    if not moved or math.isinf(bandwidth_gbps):
        return 0.0
    worst = max(state_bytes(pool[s].strategy.tp, pool[s].pp) for s in moved)
    return float(worst / (bandwidth_gbps * 1e9) * 1000.0)


def dynamic_replay(pool: Sequence, sets: Sequence[Mapping[int, int]], steps: Sequence[np.ndarray],
                   boundaries: Sequence[int], *, start: Optional[Mapping[int, int]] = None,
                   bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS, rank: int = 16, adapters: int = 1,
                   state_bytes: Optional[Callable[[int, int], float]] = None, time_limit: float = 2.0,
                   microbatch: str = "tokens", lpt: bool = False) -> Dict:
    """Replay ``steps``, each on the set of ``sets`` with the least step time + reconfiguration (greedy).

    Returns GPU-seconds (``N · Σ (step + reconfiguration)``), the reconfiguration seconds, the
    number of switches, the set index of every step, and ``static_gpu_seconds``: each set kept for
    every step, priced from the same dispatches (so the comparison with a static plan uses one
    replay). ``start`` (default ``sets[0]``) is the set before the first step.
    """
    _check_bandwidth(bandwidth_gbps)
    sets = [dict(rep) for rep in sets]
    if not sets:
        raise PlanError("dynamic_replay needs at least one candidate replica set")
    devices = {sum(pool[s].devices * r for s, r in rep.items()) for rep in sets}
    if len(devices) != 1:
        raise PlanError(f"the candidate replica sets use different GPU counts {sorted(devices)}; give sets for one N")
    (n_gpus,) = devices
    previous = dict(start) if start is not None else sets[0]
    if previous not in sets:
        sets.append(previous)
    kw = dict(time_limit=time_limit, microbatch=microbatch, lpt=lpt)
    # the dispatcher's step time of every set on every step (each step's own batch only)
    table = np.array([[simulate(pool, rep, [x], boundaries, **kw)["total_s"] * 1000.0 for rep in sets]
                      for x in steps])
    move = np.array([[reconfig_ms(pool, a, b, bandwidth_gbps, rank=rank, adapters=adapters, state_bytes=state_bytes)
                      for b in sets] for a in sets])
    at = sets.index(previous)
    choice, total, switch_ms = [], 0.0, 0.0
    for row in table:
        cost = row + move[at]
        best = int(np.argmin(cost))
        if cost[best] >= cost[at]:  # ties keep the current set
            best = at
        total += float(cost[best])
        switch_ms += float(move[at, best])
        choice.append(best)
        at = best
    return {"gpu_seconds": total * n_gpus / 1000.0, "total_s": total / 1000.0, "reconfig_s": switch_ms / 1000.0,
            "switches": int(sum(a != b for a, b in zip([sets.index(previous)] + choice[:-1], choice))),
            "choice": choice, "sets": sets, "devices": n_gpus,
            "static_gpu_seconds": [float(table[:, k].sum()) * n_gpus / 1000.0 for k in range(len(sets))]}


def lobra_dynamic_compare(pool: Sequence, devices: int, tasks: Mapping[str, np.ndarray], per_task: Mapping[str, int],
                          steps: int = 10, *, top: int = 4, bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS,
                          rank: int = 16, adapters: Optional[int] = None, **compare_kw) -> Dict:
    """:func:`~sgl.systems.data.lobra_study.lobra_compare` plus a ``"dynamic"`` entry.

    The dynamic plan chooses per step among the ``top`` static candidates with the least
    calibration time (chosen on the calibration batches, as the static plan is; the static choice
    is the first and the set before step one). ``dynamic["saving"]`` is against the same
    homogeneous replay as LobRA's; ``dynamic["static_gpu_seconds"]`` re-prices LobRA's static set
    from the dynamic plan's own dispatches.
    """
    from sgl.systems.data.lobra_study import lobra_compare, replayed_steps

    check_int(top, "top", minimum=1, error=PlanError)
    _check_bandwidth(bandwidth_gbps)
    r = lobra_compare(pool, devices, tasks, per_task, steps, **compare_kw)
    _, batches = replayed_steps(pool, tasks, per_task, steps, compare_kw.get("seed", 0))  # lobra_compare's steps
    bounds = r["bounds"]
    sets = r["candidate_sets"][:top]
    d = dynamic_replay(pool, sets, batches, bounds, start=sets[0], bandwidth_gbps=bandwidth_gbps, rank=rank,
                       adapters=len(tasks) if adapters is None else adapters,
                       time_limit=compare_kw.get("time_limit", 2.0), microbatch=compare_kw.get("microbatch", "bucket"),
                       lpt=compare_kw.get("lpt", False))
    base = r["homogeneous"]["gpu_seconds"]
    r["dynamic"] = {**d, "bandwidth_gbps": bandwidth_gbps, "saving": 1.0 - d["gpu_seconds"] / base,
                    "static_saving": 1.0 - d["static_gpu_seconds"][0] / base}
    return r
