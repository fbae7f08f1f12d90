"""The plan every sequence planner returns, and the checks the tests run on it.

A :class:`StepPlan` is one training step: a list of *phases* run one after another (FlexSP's
micro-batches, each with its own SP groups), each phase a list of :class:`GroupWork` run in
parallel on disjoint devices. A group runs its micro-batches with 1F1B, so its time is
:meth:`StrategyCost.replica_time`. Step time = ``Σ_phase max_group time + switch_ms``.

>>> import numpy as np
>>> from sgl.systems.seq import flexsp_cost_model, SeqStrategy
>>> from sgl.systems.seq.plan import GroupWork, StepPlan
>>> cost = flexsp_cost_model(4).strategy_cost(SeqStrategy(sp=2))
>>> lengths = np.array([1000, 3000, 2000])
>>> plan = StepPlan("demo", [[GroupWork(cost, [np.array([0, 2])], lengths), GroupWork(cost, [np.array([1])], lengths)]])
>>> plan.validate(lengths, devices=4)
>>> plan.time == max(cost.micro_batch_time([1000, 2000]), cost.micro_batch_time([3000]))
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from sgl.errors import PlanError
from sgl.systems.seq.cost import StrategyCost

__all__ = ["GroupWork", "StepPlan"]


@dataclass
class GroupWork:
    """One replica / SP group: its strategy cost and the sequence indices of each micro-batch."""

    cost: StrategyCost
    micro_batches: List[np.ndarray]
    lengths: np.ndarray                  # the step's lengths (indices point into it)
    time: float = field(init=False)

    def __post_init__(self) -> None:
        self.micro_batches = [np.asarray(mb, dtype=np.int64) for mb in self.micro_batches if len(mb)]
        self.time = self.cost.replica_time([self.lengths[mb] for mb in self.micro_batches])

    @property
    def devices(self) -> int:
        return self.cost.devices

    def to_dict(self) -> dict:
        return {"strategy": self.cost.label, "devices": self.devices, "time_ms": round(self.time, 3),
                "micro_batches": [[int(self.lengths[i]) for i in mb] for mb in self.micro_batches],
                "sequence_ids": [mb.tolist() for mb in self.micro_batches]}


@dataclass
class StepPlan:
    """Phases of parallel groups for one step (module doc); ``status`` records the solver outcome."""

    method: str
    phases: List[List[GroupWork]]
    switch_ms: float = 0.0
    solver_seconds: float = 0.0
    status: str = "heuristic"
    notes: List[str] = field(default_factory=list)

    @property
    def time(self) -> float:
        return float(sum(max((g.time for g in phase), default=0.0) for phase in self.phases) + self.switch_ms)

    def device_load(self, devices: int) -> np.ndarray:
        """Busy ms per device (groups laid out on consecutive devices in each phase)."""
        load = np.zeros(devices)
        for phase in self.phases:
            start = 0
            for g in phase:
                load[start:start + g.devices] += g.time
                start += g.devices
        return load

    def validate(self, lengths: Sequence[int], devices: int) -> None:
        """Every sequence exactly once, each phase within ``devices``, every micro-batch within memory."""
        lengths = np.asarray(lengths)
        seen = np.zeros(lengths.size, dtype=np.int64)
        for p, phase in enumerate(self.phases):
            used = sum(g.devices for g in phase)
            if used > devices:
                raise PlanError(f"phase {p} of the {self.method} plan uses {used} devices > {devices}")
            for g in phase:
                for mb in g.micro_batches:
                    np.add.at(seen, mb, 1)
                    tokens = int(lengths[mb].sum())
                    if tokens > g.cost.capacity:
                        raise PlanError(f"a {g.cost.label} micro-batch holds {tokens} tokens > capacity "
                                        f"{g.cost.capacity}")
        if np.any(seen != 1):
            bad = int(np.flatnonzero(seen != 1)[0])
            raise PlanError(f"sequence {bad} is assigned {int(seen[bad])} times in the {self.method} plan")

    def to_dict(self) -> dict:
        return {"method": self.method, "step_time_ms": round(self.time, 3), "switch_ms": round(self.switch_ms, 3),
                "solver_seconds": round(self.solver_seconds, 4), "status": self.status, "notes": list(self.notes),
                "phases": [[g.to_dict() for g in phase] for phase in self.phases]}

    def groups_summary(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for phase in self.phases:
            for g in phase:
                out[g.cost.label] = out.get(g.cost.label, 0) + 1
        return out
