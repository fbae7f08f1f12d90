"""The executor's view of a step plan: phases of rank groups with a strategy, a degree and sequence ids.

:func:`as_exec_plan` turns what a planner returns (a :class:`~sgl.systems.seq.plan.StepPlan` from
FlexSP, Hydraulis, the dynamic mesh or per-step switching) or its dict form
(:meth:`StepPlan.to_dict`, or a hand-written plan file) into an :class:`ExecPlan` and checks it
against the process count.  A group is ``devices`` consecutive ranks (groups of a phase are laid
out one after another, as :meth:`StepPlan.device_load` counts them) that run ``devices / degree``
sequence-parallel replicas of ``degree`` ranks each; replica ``j`` takes the group's micro-batches
``j, j + r, j + 2r, …``.  A strategy is ``"ulysses"`` (all-to-all SP) or ``"ring"`` (ring-attention
CP); a :class:`SeqStrategy` with ``sp > 1`` is Ulysses, ``cp > 1`` ring, and ``sp = cp = 1`` plain
data parallelism.  The executor runs the small Transformer without tensor or pipeline parallelism
or activation checkpointing, so a plan that asks for them is refused.

Dict form (every key but ``phases`` optional; ``strategy`` may also be a label like
``"tp1-pp1-sp2-z3"``, in which case ``degree`` comes from it)::

    {"devices": 2, "phases": [[{"strategy": "ulysses", "degree": 2, "devices": 2,
                                "sequence_ids": [[0, 3], [1]]}]]}

>>> plan = as_exec_plan({"phases": [[{"strategy": "ring", "degree": 2, "sequence_ids": [[0, 1]]}],
...                                  [{"strategy": "tp1-pp1-sp1-z3", "devices": 1, "sequence_ids": [[2]]},
...                                   {"strategy": "ulysses", "degree": 1, "sequence_ids": [[3]]}]]}, 2)
>>> [(g.strategy, g.degree, g.ranks) for phase in plan.phases for g in phase]
[('ring', 2, (0, 1)), ('ulysses', 1, (0,)), ('ulysses', 1, (1,))]
>>> plan.sequence_ids()
[0, 1, 2, 3]
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from sgl.errors import PlanError
from sgl.systems.seq.plan import StepPlan

__all__ = ["STRATEGIES", "ExecGroup", "ExecPlan", "as_exec_plan"]

STRATEGIES = ("ulysses", "ring")
_LABEL = re.compile(r"^tp(\d+)-pp(\d+)-(sp|cp)(\d+)(-z\d)?(-ckpt)?$")


@dataclass(frozen=True)
class ExecGroup:
    """``ranks`` running ``len(ranks) / degree`` replicas of ``strategy`` on the micro-batches (sequence ids)."""

    strategy: str
    degree: int
    ranks: Tuple[int, ...]
    micro_batches: Tuple[Tuple[int, ...], ...]
    predicted_ms: float = 0.0

    def replicas(self) -> List[Tuple[Tuple[int, ...], Tuple[Tuple[int, ...], ...]]]:
        """``[(replica ranks, its micro-batches)]``: replica ``j`` takes micro-batches ``j::r``."""
        r = len(self.ranks) // self.degree
        return [(self.ranks[j * self.degree:(j + 1) * self.degree], self.micro_batches[j::r]) for j in range(r)]


@dataclass(frozen=True)
class ExecPlan:
    """Phases (run one after another) of groups (run side by side on disjoint ranks) for ``devices`` ranks."""

    method: str
    devices: int
    phases: Tuple[Tuple[ExecGroup, ...], ...]
    predicted_ms: float = 0.0

    def sequence_ids(self) -> List[int]:
        """Every sequence id of the plan, sorted."""
        return sorted(i for phase in self.phases for g in phase for mb in g.micro_batches for i in mb)

    def rank_groups(self) -> List[Tuple[int, ...]]:
        """Every multi-rank replica's ranks in plan order (the process groups the step needs)."""
        out: List[Tuple[int, ...]] = []
        for phase in self.phases:
            for g in phase:
                out += [ranks for ranks, _ in g.replicas() if len(ranks) > 1 and ranks not in out]
        return out


def _strategy_of(spec: Mapping, where: str) -> Tuple[str, Optional[int]]:
    name = spec.get("strategy", "ulysses")
    if not isinstance(name, str):
        raise PlanError(f"{where}: strategy must be a string, got {name!r}")
    if name in STRATEGIES:
        return name, None
    m = _LABEL.match(name)
    if m is None:
        raise PlanError(f"{where}: unknown strategy {name!r}; use one of {list(STRATEGIES)} or a label like "
                        f"'tp1-pp1-sp2-z3' / 'tp1-pp1-cp2-z3'")
    tp, pp, kind, degree = int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
    _check_runnable(tp, pp, bool(m.group(6)), name, where)
    return ("ring" if kind == "cp" else "ulysses"), degree


def _check_runnable(tp: int, pp: int, ckpt: bool, label: str, where: str) -> None:
    if tp != 1 or pp != 1 or ckpt:
        raise PlanError(f"{where}: the varlen executor runs SP / CP / DP groups only (tp = pp = 1, no "
                        f"checkpointing), got {label}; plan with a pool of sp_pool() / cp_pool() strategies")


def _int(value, name: str, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise PlanError(f"{where}: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _group_from_dict(spec, start: int, where: str) -> ExecGroup:
    if not isinstance(spec, Mapping):
        raise PlanError(f"{where}: a group must be a dict with 'strategy' and 'sequence_ids', got {type(spec).__name__}")
    strategy, label_degree = _strategy_of(spec, where)
    degree = _int(spec.get("degree", label_degree or spec.get("devices", 1)), "degree", where, 1)
    if label_degree is not None and degree != label_degree:
        raise PlanError(f"{where}: degree {degree} contradicts the strategy label {spec['strategy']!r}")
    devices = _int(spec.get("devices", degree), "devices", where, 1)
    if devices % degree:
        raise PlanError(f"{where}: the SP/CP degree {degree} does not divide the group's {devices} devices; "
                        f"give devices as a multiple of degree")
    ranks = spec.get("ranks")
    if ranks is None:
        ranks = tuple(range(start, start + devices))
    else:
        ranks = tuple(_int(r, "a rank", where, 0) for r in ranks)
        if len(ranks) != devices or len(set(ranks)) != devices:
            raise PlanError(f"{where}: ranks {list(ranks)} must be {devices} distinct ranks (the group's devices)")
    mbs = spec.get("sequence_ids")
    if not isinstance(mbs, (list, tuple)):
        raise PlanError(f"{where}: sequence_ids must be a list of micro-batches (lists of sequence ids), got {mbs!r}")
    micro = tuple(tuple(_int(i, "a sequence id", where, 0) for i in mb) for mb in mbs if len(mb))
    return ExecGroup(strategy, degree, ranks, micro, float(spec.get("time_ms", 0.0)))


def _group_from_work(work, start: int, where: str) -> ExecGroup:
    s = work.cost.strategy
    _check_runnable(s.tp, s.pp, s.ckpt, work.cost.label, where)
    strategy, degree = ("ring", s.cp) if s.cp > 1 else ("ulysses", s.sp)
    micro = tuple(tuple(int(i) for i in mb) for mb in work.micro_batches if len(mb))
    return ExecGroup(strategy, degree, tuple(range(start, start + degree)), micro, float(work.time))


def as_exec_plan(plan: Union[StepPlan, Mapping], devices: int) -> ExecPlan:
    """The :class:`ExecPlan` of ``plan`` for ``devices`` processes, validated (module doc)."""
    devices = _int(devices, "devices", "as_exec_plan", 1)
    if isinstance(plan, StepPlan):
        method, phases_in, predicted, declared = plan.method, plan.phases, plan.time, None
        make = _group_from_work
    elif isinstance(plan, Mapping):
        if not isinstance(plan.get("phases"), (list, tuple)):
            raise PlanError("a plan dict needs 'phases': a list of phases, each a list of groups")
        method, phases_in = str(plan.get("method", "plan")), plan["phases"]
        predicted = float(plan.get("step_time_ms", 0.0))
        declared = plan.get("devices")
        make = _group_from_dict
    else:
        raise PlanError(f"expected a StepPlan or its dict form, got {type(plan).__name__}")
    if declared is not None and _int(declared, "devices", "the plan", 1) != devices:
        raise PlanError(f"the plan is for {declared} devices but {devices} processes run it; plan for the "
                        f"process count (world size) or start {declared} processes")
    phases = []
    for p, phase in enumerate(phases_in):
        groups, start = [], 0
        for k, spec in enumerate(phase):
            g = make(spec, start, f"phase {p} group {k}")
            start = max(start, max(g.ranks) + 1)
            groups.append(g)
        used = [r for g in groups for r in g.ranks]
        if used and max(used) >= devices:
            raise PlanError(f"phase {p} of the {method} plan needs {max(used) + 1} devices but {devices} processes "
                            f"run it; plan for the process count (world size)")
        if len(set(used)) != len(used):
            raise PlanError(f"phase {p} of the {method} plan puts two groups on one rank")
        phases.append(tuple(groups))
    out = ExecPlan(method, devices, tuple(phases), predicted)
    ids = out.sequence_ids()
    if not ids:
        raise PlanError(f"the {method} plan holds no sequence")
    if len(set(ids)) != len(ids):
        dup = next(i for i, j in zip(ids, ids[1:]) if i == j)
        raise PlanError(f"sequence {dup} appears more than once in the {method} plan")
    return out
