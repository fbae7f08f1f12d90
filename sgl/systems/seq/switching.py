"""Per-step strategy switching: one homogeneous strategy per step from a small pool, switching cost included.

A static system trains every step with the strategy that holds the run's longest sequence.
Here step ``t`` picks strategy ``k_t`` from a pool (TP × Ulysses-SP and ring CP × checkpointing,
ZeRO-3; the same pool the static baseline picks from, so switching is never worse than it),
and changing strategy between steps costs ``σ(k, k')``:

* ``k`` and ``k'`` differ only in the SP / CP degree or checkpointing: ZeRO-3 shards the model
  states over all devices either way, so only the communication groups change: ``σ = r``;
* the TP / PP layout or ZeRO stage changes: every device receives its new shard of the model
  states, ``σ = r + states_MB(k') / bw`` (``bw`` the inter-node bandwidth, FlexSP's 8.7 GB/s).

With ``T_t(k)`` the step's modelled time under ``k`` (:meth:`FlexSPPlanner.homogeneous`, LPT
assignment, ``∞`` when a sequence does not fit), the offline choice (the loader knows the
upcoming global batches) is the Viterbi recursion

.. math:: D_t(k) = T_t(k) + \\min_j \\bigl(D_{t-1}(j) + σ(j, k)\\bigr), \\qquad D_0(k) = T_0(k),

and the online choice (``lookahead=False``) is greedy: ``k_t = argmin_k T_t(k) + σ(k_{t-1}, k)``.

>>> import numpy as np
>>> from sgl.systems.seq import flexsp_cost_model
>>> planner = SwitchingPlanner(flexsp_cost_model(16, 80), devices=16)
>>> steps = [np.full(40, 3000), np.r_[200000, np.full(8, 2000)], np.full(40, 3000)]
>>> result = planner.plan(steps)
>>> result.total_ms <= planner.static(steps)[1]
True
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.seq.cost import SeqCostModel, StrategyCost
from sgl.systems.seq.flexsp import FlexSPPlanner, check_fits
from sgl.systems.seq.lengths import check_lengths
from sgl.systems.seq.plan import StepPlan

__all__ = ["SwitchingPlanner", "SwitchingResult", "switch_pool"]


def switch_pool(model: SeqCostModel, tps: Sequence[int] = (1, 2, 4, 8), ckpt: Sequence[bool] = (False, True),
                ring: bool = True) -> List[StrategyCost]:
    """TP × Ulysses-SP (all powers of two, ``tp·sp <= N``) and ring-CP sizes (``ring``), × checkpointing;
    ZeRO-3, no pipelining."""
    out = []
    for tp, c in itertools.product(tps, ckpt):
        if tp <= model.devices:
            out += model.sp_pool(tp=tp, ckpt=c)
    if ring:
        for c in ckpt:
            out += [p for p in model.cp_pool(ckpt=c) if p.devices > 1]      # cp = 1 is sp = 1
    if not out:
        raise PlanError("the switching pool is empty: no strategy holds a token in memory")
    return out


@dataclass
class SwitchingResult:
    """Chosen strategy per step, the step plans (``switch_ms`` set) and the totals."""

    strategies: List[StrategyCost]
    plans: List[StepPlan]
    switches: int

    @property
    def total_ms(self) -> float:
        return float(sum(p.time for p in self.plans))

    @property
    def switch_ms(self) -> float:
        return float(sum(p.switch_ms for p in self.plans))

    def to_dict(self) -> dict:
        return {"method": "switch", "total_ms": round(self.total_ms, 3), "switch_ms": round(self.switch_ms, 3),
                "switches": self.switches, "strategies": [s.label for s in self.strategies],
                "steps": [p.to_dict() for p in self.plans]}


class SwitchingPlanner:
    """Per-step choice from ``pool`` (default :func:`switch_pool`) on ``devices`` devices (module doc)."""

    def __init__(self, model: SeqCostModel, devices: int, *, pool: Optional[Sequence[StrategyCost]] = None,
                 bandwidth_gbps: float = 8.7, regroup_ms: float = 2.0) -> None:
        self.devices = check_int(devices, "devices", 1, error=PlanError)
        self.model = model
        self.pool = [p for p in (pool if pool is not None else switch_pool(model))
                     if p.devices <= self.devices and p.pp == 1]
        if not self.pool:
            raise PlanError("no strategy of the pool fits the cluster with pp = 1")
        self.bandwidth_gbps = check_real(bandwidth_gbps, "bandwidth_gbps", 0.0, open_low=True, error=PlanError)
        self.regroup_ms = check_real(regroup_ms, "regroup_ms", 0.0, error=PlanError)
        self._planners = [FlexSPPlanner([p], self.devices) for p in self.pool]

    def switch_cost(self, a: StrategyCost, b: StrategyCost) -> float:
        """``σ(a, b)`` in ms (module doc)."""
        sa, sb = a.strategy, b.strategy
        if sa == sb:
            return 0.0
        if (sa.tp, sa.pp, sa.zero) == (sb.tp, sb.pp, sb.zero):
            return self.regroup_ms
        return self.regroup_ms + self.model.states_mb(sb) / self.bandwidth_gbps * 1000.0 / 1024.0

    def step_times(self, batches: Sequence[np.ndarray]) -> Tuple[np.ndarray, List[List[Optional[StepPlan]]]]:
        """``T[t, k]`` (``inf`` where a sequence does not fit) and the homogeneous plans."""
        T = np.full((len(batches), len(self.pool)), np.inf)
        plans: List[List[Optional[StepPlan]]] = [[None] * len(self.pool) for _ in batches]
        for t, b in enumerate(batches):
            top = int(b.max())
            for k, (cost, planner) in enumerate(zip(self.pool, self._planners)):
                if cost.capacity >= top:
                    plans[t][k] = planner.homogeneous(b, cost.devices, "lpt")
                    T[t, k] = plans[t][k].time
        return T, plans

    def plan(self, batches: Sequence, *, lookahead: bool = True) -> SwitchingResult:
        """Strategies for ``batches`` (Viterbi with ``lookahead``, else greedy online)."""
        batches = [check_lengths(b) for b in batches]
        if not batches:
            raise PlanError("no steps to plan: give at least one global batch")
        check_fits(np.array([max(int(b.max()) for b in batches)]), self.pool)
        T, plans = self.step_times(batches)
        K = len(self.pool)
        sigma = np.array([[self.switch_cost(a, b) for b in self.pool] for a in self.pool])
        if lookahead:
            D = T[0].copy()
            back = np.zeros((len(batches), K), dtype=np.int64)
            for t in range(1, len(batches)):
                cand = D[:, None] + sigma                        # from j to k
                back[t] = np.argmin(cand, axis=0)
                D = cand[back[t], np.arange(K)] + T[t]
            path = [int(np.argmin(D))]
            for t in range(len(batches) - 1, 0, -1):
                path.append(int(back[t, path[-1]]))
            path = path[::-1]
        else:
            path = [int(np.argmin(T[0]))]
            for t in range(1, len(batches)):
                path.append(int(np.argmin(T[t] + sigma[path[-1]])))
        out, switches = [], 0
        for t, k in enumerate(path):
            plan = plans[t][k]
            plan.method = "switch"
            if t and path[t - 1] != k:
                plan.switch_ms = float(sigma[path[t - 1], k])
                switches += 1
            out.append(plan)
        return SwitchingResult([self.pool[k] for k in path], out, switches)

    def static(self, batches: Sequence, max_length: Optional[int] = None) -> Tuple[StrategyCost, float]:
        """The best single strategy of the pool for all steps that holds ``max_length``; ``(cost, total ms)``."""
        batches = [check_lengths(b) for b in batches]
        top = max_length or max(int(b.max()) for b in batches)
        check_fits(np.array([top]), self.pool)
        T, _ = self.step_times(batches)
        ok = np.array([p.capacity >= top for p in self.pool])
        totals = np.where(ok, T.sum(axis=0), np.inf)
        k = int(np.argmin(totals))
        return self.pool[k], float(totals[k])
