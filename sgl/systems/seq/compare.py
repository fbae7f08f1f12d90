"""One entry point for the CLI and the benchmark: a planner over steps vs the best static strategy.

The static baseline is what a fixed-strategy run must use: one homogeneous strategy for every
step that holds the run's ``max_length`` (not only the longest sequence of the sampled steps: a
static run is configured for its context length and would run out of memory on the first
step holding a longer sequence).  For the FlexSP-model methods (``flexsp``, ``mesh``, ``switch``)
the static pool is every TP × Ulysses-SP and ring-CP size, with and without checkpointing
(:func:`static_pool`); for ``hydraulis`` it is Hydraulis' own 10-strategy pool.  The ratio is
``Σ static step time / Σ planned step time`` (modelled, the cost model's milliseconds).

>>> import numpy as np
>>> steps = [np.full(30, 3000), np.r_[100000, np.full(5, 2000)]]
>>> result = compare("switch", steps, devices=16, max_length=120000)
>>> result.ratio >= 1.0
True
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import PlanError
from sgl.systems.seq.cost import SeqCostModel, StrategyCost, flexsp_cost_model, hydraulis_pool
from sgl.systems.seq.flexsp import FlexSPPlanner, check_fits
from sgl.systems.seq.hydraulis import HydraulisPlanner
from sgl.systems.seq.lengths import check_lengths
from sgl.systems.seq.mesh import DynamicMeshPlanner
from sgl.systems.seq.plan import StepPlan
from sgl.systems.seq.switching import SwitchingPlanner, switch_pool

__all__ = ["METHODS", "Comparison", "compare", "static_pool", "best_static"]

METHODS = ("flexsp", "hydraulis", "mesh", "switch")


@dataclass
class Comparison:
    """Per-step modelled times of a method and of the best static strategy, solver seconds, plans."""

    method: str
    devices: int
    static_label: str
    static_ms: List[float]
    planned_ms: List[float]
    solver_seconds: List[float]
    plans: List[StepPlan]
    notes: List[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return float(sum(self.static_ms) / sum(self.planned_ms))

    @property
    def saved_ms_per_step(self) -> float:
        return float((sum(self.static_ms) - sum(self.planned_ms)) / len(self.planned_ms))

    def to_dict(self) -> dict:
        return {"method": self.method, "devices": self.devices, "static": self.static_label,
                "static_ms": [round(t, 3) for t in self.static_ms], "planned_ms": [round(t, 3) for t in self.planned_ms],
                "ratio": round(self.ratio, 4), "solver_seconds": [round(s, 4) for s in self.solver_seconds],
                "notes": self.notes, "steps": [p.to_dict() for p in self.plans]}


def static_pool(model: SeqCostModel) -> List[StrategyCost]:
    """TP × Ulysses-SP and ring-CP sizes, with and without checkpointing (no pipelining): :func:`switch_pool`."""
    return switch_pool(model)


def best_static(pool: Sequence[StrategyCost], batches: Sequence[np.ndarray], devices: int,
                max_length: int) -> tuple:
    """``(cost, per-step ms)`` of the best homogeneous strategy of ``pool`` holding ``max_length``."""
    check_fits(np.array([max_length]), pool)
    best = (np.inf, None, [])
    for cost in pool:
        if cost.capacity < max_length or cost.devices > devices:
            continue
        planner = FlexSPPlanner([cost], devices)
        times = [planner.homogeneous(b, cost.devices, "lpt").time for b in batches]
        if sum(times) < best[0]:
            best = (sum(times), cost, times)
    return best[1], best[2]


def compare(method: str, batches: Sequence, devices: int, memory_gb: float = 80.0, *,
            max_length: Optional[int] = None, time_limit: float = 0.5, sample: Optional[np.ndarray] = None,
            model: Optional[SeqCostModel] = None, mesh_groups: str = "best",
            hydraulis_ilp: bool = True, milp_patience: int = 3,
            mesh_fallback: bool = True, pool: Optional[Sequence[StrategyCost]] = None) -> Comparison:
    """Plan ``batches`` with ``method`` and compare with the best static strategy (module doc).

    ``sample`` (Hydraulis): the length sample its replica DP plans on (default: the batches);
    Hydraulis' packing ILPs get at most 20 ms each (its latency defaults); ``hydraulis_ilp=False``
    packs greedily only.
    ``mesh_groups``: the dynamic mesh's group kind (``ring``, ``ulysses``, ``best``); its notes
    also give the ratio against the static DP×CP mesh of the same group kind.
    ``milp_patience``: FlexSP / mesh MILPs are skipped after that many consecutive micro-batches
    on which they did not beat the balanced heuristic (retried every 8th; ``0`` always solves).
    ``mesh_fallback``: the dynamic mesh may run a step on the best static strategy instead
    (paying the mode-switch cost; :class:`DynamicMeshPlanner`); ``False`` gives the pure DP×CP mesh.
    ``pool`` (Hydraulis): its strategy pool instead of the published one, e.g. a machine profile's
    :meth:`~sgl.systems.seq.profile.MachineProfile.hydraulis_pool`.
    """
    check_choice(method, "method", METHODS, error=PlanError)
    devices = check_int(devices, "devices", 1, error=PlanError)
    batches = [check_lengths(b) for b in batches]
    if not batches:
        raise PlanError("no steps to plan: give at least one global batch")
    top = max(int(b.max()) for b in batches)
    max_length = top if max_length is None else max(check_int(max_length, "max_length", 1, error=PlanError), top)
    notes: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        if method == "hydraulis":
            pool = hydraulis_pool(devices, memory_gb * 2**30) if pool is None else list(pool)
            check_fits(np.array([max_length]), pool)
            planner = HydraulisPlanner(pool, devices, time_limit=min(time_limit, 0.02),
                                       max_ilp_sequences=160 if hydraulis_ilp else 0,
                                       ilp_patience=milp_patience)
            per_step = int(np.mean([b.size for b in batches]))
            planner.build_replicas(np.concatenate(batches) if sample is None else sample, max(1, per_step))
            plans = [planner.plan(b) for b in batches]
            static = min(((sum(t), c, t) for c in pool if c.capacity >= max_length
                          for t in [[planner.homogeneous(b, c).time for b in batches]]), key=lambda x: x[0])
            static_cost, static_ms = static[1], static[2]
        else:
            model = model or flexsp_cost_model(devices, memory_gb)
            static_cost, static_ms = best_static(static_pool(model), batches, devices, max_length)
            if method == "flexsp":
                planner = FlexSPPlanner(model.sp_pool(), devices, time_limit=time_limit, bound_gap=0.01,
                                        milp_patience=milp_patience)
                check_fits(np.array([max_length]), planner.pool)
                plans = [planner.plan(b) for b in batches]
            elif method == "mesh":
                mesh = DynamicMeshPlanner(model, devices, max_length=max_length, time_limit=time_limit,
                                          groups=mesh_groups, milp_patience=milp_patience,
                                          fallback=static_cost if mesh_fallback else None)
                plans = [mesh.plan(b) for b in batches]
                steady = sum(static_ms) / (sum(p.time for p in plans) - mesh.created_ms)
                notes.append(f"one-time communicator creation {mesh.created_ms:.0f} ms over the run; "
                             f"ratio without it {steady:.3f}x")
                if mesh_fallback:
                    used = sum(p.status.startswith("fallback") for p in plans)
                    notes.append(f"steps on the fallback {static_cost.label}: {used} of {len(plans)}")
                own, own_ms = best_static(mesh.pool, batches, devices, max_length)
                notes.append(f"vs the static DP x CP mesh ({own.label}): "
                             f"{sum(own_ms) / sum(p.time for p in plans):.3f}x")
            else:
                t0 = time.perf_counter()
                result = SwitchingPlanner(model, devices, pool=static_pool(model)).plan(batches)
                plans = result.plans
                for p in plans:
                    p.solver_seconds = (time.perf_counter() - t0) / len(plans)
                notes.append(f"switches: {result.switches}, switching cost {result.switch_ms:.1f} ms")
    for b, p in zip(batches, plans):
        p.validate(b, devices)
    notes += sorted({str(w.message) for w in caught})
    return Comparison(method, devices, static_cost.label, list(map(float, static_ms)), [p.time for p in plans],
                      [p.solver_seconds for p in plans], plans, notes)
