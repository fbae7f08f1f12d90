"""Dynamic DP×CP mesh: per micro-batch, group the devices into ring-CP groups of different sizes.

A static 2-D mesh fixes ``N = dp × cp`` for the whole run, so ``cp`` must hold the longest
sequence the run will ever see and every short sequence pays that group's communication.
Treating data and context parallelism as one axis instead, each micro-batch gets its own
*grouping* ``g = (c_1 ≥ c_2 ≥ …)``, ``Σ c_j ≤ N``: short sequences go to groups of size 1
(inter-data partitioning, plain DP), long ones are split across a group of ``c`` devices
(intra-data partitioning, ring attention).  The planner minimises the modelled step time
*including the cost of regrouping*:

.. math:: T = \\sum_{\\text{micro-batch } m} \\Bigl[\\max_j T_{c_j}(S_{mj}) + R(g_{m-1}, g_m)\\Bigr],
          \\qquad R(g, g') = [g \\ne g']\\,(r + \\kappa\\,|\\mathrm{comms}(g') \\setminus \\mathcal{C}|),

where ``T_c`` is :class:`StrategyCost` time of a ring-CP group (``SeqStrategy(cp=c)``; ``c = 1``
is DP), ``r`` the re-binding cost of a grouping change, ``κ`` the one-time creation cost of a
communicator not yet in the cache ``C`` (groups sit on consecutive devices, largest first, so a
group is identified by ``(first device, size)``).  Per micro-batch the candidates are the MILP
grouping (FlexSP's formulation over the CP option list, :class:`FlexSPPlanner`), the previous
micro-batch's grouping refilled longest-first (no regrouping cost) and the static mesh's grouping;
the cheapest including ``R`` wins.  :meth:`DynamicMeshPlanner.static` is the baseline: one
``cp`` for the run that holds ``max_length``.

>>> import numpy as np
>>> from sgl.systems.seq import flexsp_cost_model
>>> planner = DynamicMeshPlanner(flexsp_cost_model(8, 80), devices=8, max_length=100000)
>>> batch = np.array([60000, 3000, 2500, 2000, 1500, 1000, 800, 600])
>>> plan = planner.plan(batch)
>>> plan.validate(batch, 8)
>>> plan.time <= planner.static([batch])[1][0].time
True
"""
from __future__ import annotations

import time
from typing import List, Optional, Sequence, Set, Tuple

import numpy as np

from sgl._checks import check_choice, check_int, check_real
from sgl.errors import PlanError
from sgl.systems.seq.cost import SeqCostModel, StrategyCost, longest_supported
from sgl.systems.seq.flexsp import FlexSPPlanner, check_fits
from sgl.systems.seq.lengths import check_lengths
from sgl.systems.seq._greedy import earliest_finish
from sgl.systems.seq.packing import blast, members_in_order
from sgl.systems.seq.plan import GroupWork, StepPlan

__all__ = ["DynamicMeshPlanner", "fill_groups", "layout"]


def layout(groups: Sequence[StrategyCost]) -> Tuple[Tuple[int, int], ...]:
    """``((first device, size), ...)`` of groups laid out largest first on consecutive devices."""
    out, start = [], 0
    for size in sorted((g.devices for g in groups), reverse=True):
        out.append((start, size))
        start += size
    return tuple(out)


def fill_groups(lengths: np.ndarray, idx: np.ndarray, groups: Sequence[StrategyCost]) -> Optional[List[GroupWork]]:
    """Longest-first onto the group finishing earliest among those with room; ``None`` if one does not fit."""
    order = idx[np.argsort(-lengths[idx], kind="stable")]
    owner, ok = earliest_finish(order, lengths, [g.c for g in groups], [g.a for g in groups],
                                [g.b for g in groups], [g.capacity for g in groups])
    if not ok:
        return None
    members = members_in_order(owner, order, len(groups))
    return [GroupWork(g, [m], lengths) for g, m in zip(groups, members) if m.size]


class DynamicMeshPlanner:
    """Per-micro-batch DP×CP groupings on ``devices`` devices (module doc).

    ``regroup_ms`` (``r``) and ``comm_init_ms`` (``κ``) are assumptions, not paper constants:
    re-binding a prepared grouping costs little, creating a communicator costs ~100 ms once.
    ``groups``: ``"ring"`` (ring-attention CP groups, the dynamic-mesh paper's setting),
    ``"ulysses"`` (Ulysses SP groups) or ``"best"`` (per size the cheaper of the two).
    """

    def __init__(self, model: SeqCostModel, devices: int, *, max_length: Optional[int] = None,
                 regroup_ms: float = 2.0, comm_init_ms: float = 100.0, time_limit: float = 0.5,
                 use_milp: bool = True, max_buckets: int = 16, tolerance: float = 0.02,
                 groups: str = "ring", milp_patience: int = 0, fallback: Optional[StrategyCost] = None,
                 bandwidth_gbps: float = 8.7) -> None:
        self.devices = check_int(devices, "devices", 1, error=PlanError)
        check_choice(groups, "groups", ("ring", "ulysses", "best"), error=PlanError)
        ring = model.cp_pool(devices)
        if groups == "ring":
            self.pool = ring
        else:
            uly = {p.devices: p for p in model.sp_pool(devices)}
            self.pool = [uly.get(r.devices, r) if groups == "ulysses" or (r.devices in uly and
                         uly[r.devices].b <= r.b) else r for r in ring]
        if not self.pool:
            raise PlanError("no ring-CP group size holds a token in memory: give more memory or fewer parameters")
        self.regroup_ms = check_real(regroup_ms, "regroup_ms", 0.0, error=PlanError)
        self.comm_init_ms = check_real(comm_init_ms, "comm_init_ms", 0.0, error=PlanError)
        self.use_milp = bool(use_milp)
        self.flex = FlexSPPlanner(self.pool, self.devices, time_limit=time_limit, max_buckets=max_buckets,
                                  tolerance=tolerance, bound_gap=0.01, milp_patience=milp_patience)
        self.model = model
        self.fallback = fallback
        self.bandwidth_gbps = check_real(bandwidth_gbps, "bandwidth_gbps", 0.0, open_low=True, error=PlanError)
        if fallback is not None and (fallback.devices > self.devices or fallback.pp != 1):
            raise PlanError(f"the fallback strategy {fallback.label} must use at most {self.devices} devices and pp = 1")
        self.max_length = None if max_length is None else check_int(max_length, "max_length", 1, error=PlanError)
        if self.max_length is not None:
            check_fits(np.array([self.max_length]), self.pool)
        self.reset()

    def reset(self) -> None:
        """Forget the previous grouping; the cache holds only the static mesh's communicators
        (every run creates those at start-up, so they cost the dynamic plan nothing extra)."""
        self._last: Optional[List[StrategyCost]] = None
        self._comms: Set[Tuple[int, int]] = set()
        self._mode: Optional[str] = None            # "dynamic" or "fallback" (None before the first step)
        self.created_ms = 0.0                       # one-time communicator creation charged so far
        if self.max_length is not None:
            static = self.static_cp()
            self._comms.update(layout([static] * (self.devices // static.devices)))

    def static_cp(self, max_length: Optional[int] = None) -> StrategyCost:
        """The static mesh's group: the smallest ``cp`` holding ``max_length`` (fewest ring hops)."""
        top = max_length or self.max_length
        if top is None:
            raise PlanError("the static mesh needs the run's max_length (the longest sequence it must hold)")
        check_fits(np.array([top]), self.pool)
        return next(p for p in self.pool if p.capacity >= top)

    def static(self, batches: Sequence[np.ndarray], max_length: Optional[int] = None
               ) -> Tuple[StrategyCost, List[StepPlan]]:
        """Best static 2-D mesh (one ``cp`` for the run, every ``cp`` holding ``max_length`` tried)."""
        top = max_length or self.max_length or max(int(np.max(b)) for b in batches)
        best: Tuple[float, Optional[StrategyCost], List[StepPlan]] = (np.inf, None, [])
        for cost in self.pool:
            if cost.capacity < top:
                continue
            plans = [self.flex.homogeneous(b, cost.devices, "lpt") for b in batches]
            total = sum(p.time for p in plans)
            if total < best[0]:
                best = (total, cost, plans)
        if best[1] is None:
            check_fits(np.array([top]), self.pool)
        return best[1], best[2]

    def regroup_cost(self, previous: Optional[Sequence[StrategyCost]], groups: Sequence[StrategyCost]) -> float:
        """``R(previous, groups)`` against the current communicator cache."""
        new = layout(groups)
        if previous is not None and layout(previous) == new:
            return 0.0
        fresh = sum(1 for c in new if c not in self._comms)
        return (self.regroup_ms if previous is not None else 0.0) + self.comm_init_ms * fresh

    def _candidates(self, lengths: np.ndarray, idx: np.ndarray) -> List[Tuple[str, List[GroupWork]]]:
        out: List[Tuple[str, List[GroupWork]]] = []
        if self.use_milp:
            groups, status, _ = self.flex.solve_micro_batch(lengths, idx)
            out.append((status, groups))
        else:
            heuristic = self.flex._heuristic(lengths, idx)
            if heuristic is not None:
                out.append(("heuristic", heuristic))
        if self._last is not None:
            again = fill_groups(lengths, idx, self._last)
            if again is not None:
                out.append(("kept grouping", again))
        if self.max_length is not None:
            static = self.static_cp()
            filled = fill_groups(lengths, idx, [static] * (self.devices // static.devices))
            if filled is not None:
                out.append(("static grouping", filled))
        if not out:
            raise PlanError(f"no grouping holds a micro-batch of {idx.size} sequences ({int(lengths[idx].sum())} "
                            f"tokens) on {self.devices} devices")
        return out

    def mode_switch_ms(self) -> float:
        """Cost of changing between the dynamic groupings (tp 1) and the fallback strategy."""
        fb, pool = self.fallback.strategy, self.pool[0].strategy
        if (fb.tp, fb.pp, fb.zero) == (pool.tp, pool.pp, pool.zero):
            return self.regroup_ms
        return self.regroup_ms + self.model.states_mb(fb) / self.bandwidth_gbps * 1000.0 / 1024.0

    def plan(self, lengths) -> StepPlan:
        """The dynamic mesh plan of one global batch (keeps the grouping state for the next call)."""
        lengths = check_lengths(lengths)
        t0 = time.perf_counter()
        if self.fallback is None:
            before = len(self._comms)
            plan = self._dynamic(lengths, t0)
            self.created_ms += self.comm_init_ms * (len(self._comms) - before)
            return plan
        state = (self._last, set(self._comms))
        if int(lengths.max()) > self.fallback.capacity:
            dynamic, static = self._dynamic(lengths, t0), None
        else:
            dynamic = self._dynamic(lengths, t0) if int(lengths.max()) <= longest_supported(self.pool) else None
            static = FlexSPPlanner([self.fallback], self.devices).homogeneous(lengths, self.fallback.devices, "lpt")
        sigma = self.mode_switch_ms()
        # decide on the steady-state cost: communicators created this step are a one-time cost that
        # later dynamic steps reuse, so they do not count against the dynamic mode (they stay in its plan)
        fresh = 0.0 if dynamic is None else self.comm_init_ms * (len(self._comms) - len(state[1]))
        cost_dyn = np.inf if dynamic is None else dynamic.time - fresh + (sigma if self._mode == "fallback" else 0.0)
        cost_fb = np.inf if static is None else static.time + (sigma if self._mode == "dynamic" else 0.0)
        if cost_fb < cost_dyn:
            self._last, self._comms = state
            self._last = None                    # the next dynamic step starts from a fresh grouping
            static.switch_ms += sigma if self._mode == "dynamic" else 0.0
            static.method, static.status = "mesh", f"fallback {self.fallback.label}"
            static.solver_seconds = time.perf_counter() - t0
            self._mode = "fallback"
            return static
        dynamic.switch_ms += sigma if self._mode == "fallback" else 0.0
        self.created_ms += fresh
        dynamic.solver_seconds = time.perf_counter() - t0
        self._mode = "dynamic"
        return dynamic

    def _dynamic(self, lengths: np.ndarray, t0: float) -> StepPlan:
        check_fits(lengths, self.pool)
        phases, switch, statuses = [], 0.0, []
        for idx in blast(lengths, self.flex.cluster_capacity):
            idx = np.sort(idx)
            scored = []
            for status, groups in self._candidates(lengths, idx):
                costs = [g.cost for g in groups]
                scored.append((max(g.time for g in groups) + self.regroup_cost(self._last, costs), status, groups))
            total, status, groups = min(scored, key=lambda s: s[0])
            costs = [g.cost for g in groups]
            switch += self.regroup_cost(self._last, costs)
            self._comms.update(layout(costs))
            # keep the full grouping (idle groups included) so the next micro-batch can reuse it
            self._last = costs
            phases.append(groups)
            statuses.append(status)
        plan = StepPlan("mesh", phases, switch_ms=switch, solver_seconds=time.perf_counter() - t0,
                        status=", ".join(sorted(set(statuses))))
        plan.notes.append(f"groupings: {[sorted((g.devices for g in p), reverse=True) for p in phases]}")
        return plan
