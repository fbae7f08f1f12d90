"""Spindle schedules: device sets per operator, the P2P link model, a replaying simulator and a checker.

A schedule says, for every operator, which devices run it and in which order operators are
issued. :func:`replay` executes it event by event: an operator starts when all its devices are
free and every input has arrived, ``start_v = max(max_{d ∈ D_v} free_d, max_{u -> v} end_u + p2p(u, v))``,
and ends ``t̂_v(|D_v|)`` later. So a wave-by-wave plan runs *without* wave barriers: an operator
of the next wave starts as soon as its own inputs and devices are ready (never later than with
barriers).

P2P model (:class:`LinkModel`): ``u``'s output (``out_mb``) is sharded over ``D_u``; each device of
``D_v`` receives ``out_mb / |D_v|`` — nothing if it is in ``D_u``, over the intra-node link if a
device of ``D_u`` is on its node, over the inter-node link otherwise; the transfer takes the
slowest device's time (links in parallel).

>>> from sgl.systems.data.spindle_dag import ScalingCurve, SpindleOp, TaskDAG
>>> dag = TaskDAG([SpindleOp("a", "t", ScalingCurve((1,), (1.0,)), out_mb=1000.0),
...                SpindleOp("b", "t", ScalingCurve((1,), (1.0,)), deps=("a",))])
>>> link = LinkModel(devices_per_node=1, intra_gbps=100.0, inter_gbps=10.0)
>>> replay(dag, {0: (0,), 1: (1,)}, [0, 1], link).makespan     # 1 s + 1 GB over 10 GB/s + 1 s
2.1
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.data.spindle_dag import TaskDAG

__all__ = ["LinkModel", "ScheduledOp", "Schedule", "replay", "validate_schedule"]


@dataclass(frozen=True)
class LinkModel:
    """Nodes of ``devices_per_node`` GPUs; intra-node and inter-node bandwidths in GB/s (10^9 bytes)."""

    devices_per_node: int = 8
    intra_gbps: float = 150.0
    inter_gbps: float = 12.5

    def __post_init__(self) -> None:
        check_int(self.devices_per_node, "devices_per_node", minimum=1, error=PlanError)
        check_real(self.intra_gbps, "intra-node bandwidth (GB/s)", 0.0, open_low=True, error=PlanError)
        check_real(self.inter_gbps, "inter-node bandwidth (GB/s)", 0.0, open_low=True, error=PlanError)

    def node(self, device: int) -> int:
        return device // self.devices_per_node

    def p2p(self, mb: float, src: Sequence[int], dst: Sequence[int]) -> float:
        """Seconds to move ``mb`` megabytes sharded over ``src`` to ``dst`` (0 when ``dst ⊆ src``)."""
        if mb <= 0 or not dst:
            return 0.0
        src_set, src_nodes = set(src), {self.node(d) for d in src}
        share = mb / 1e3 / len(dst)  # GB per receiving device
        worst = 0.0
        for d in dst:
            if d in src_set:
                continue
            bw = self.intra_gbps if self.node(d) in src_nodes else self.inter_gbps
            worst = max(worst, share / bw)
        return worst


@dataclass(frozen=True)
class ScheduledOp:
    op: int
    devices: Tuple[int, ...]
    start: float
    end: float
    wait_p2p: float = 0.0   # seconds of input transfer on the critical input


@dataclass
class Schedule:
    """Every operator with its devices and times; ``makespan`` and the total P2P seconds on edges."""

    entries: List[ScheduledOp]
    num_devices: int
    p2p_seconds: float = 0.0
    label: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        return round(max(e.end for e in self.entries), 12) if self.entries else 0.0

    def gpu_seconds(self) -> float:
        """Busy GPU-seconds (operators × devices × duration)."""
        return float(sum(len(e.devices) * (e.end - e.start) for e in self.entries))

    def utilisation(self) -> float:
        return self.gpu_seconds() / (self.num_devices * self.makespan) if self.makespan > 0 else 0.0

    def to_dict(self, dag: TaskDAG) -> Dict[str, Any]:
        return {"label": self.label, "devices": self.num_devices, "makespan_s": self.makespan,
                "p2p_seconds": self.p2p_seconds, "utilisation": self.utilisation(), **self.extra,
                "ops": [{"name": dag.ops[e.op].name, "task": dag.ops[e.op].task, "devices": list(e.devices),
                         "start_s": e.start, "end_s": e.end} for e in sorted(self.entries, key=lambda x: x.start)]}


def replay(dag: TaskDAG, devices: Mapping[int, Sequence[int]], order: Sequence[int], link: LinkModel,
           num_devices: int = 0, label: str = "") -> Schedule:
    """Event replay of ``devices[op]`` issued in ``order`` (a topological order); see the module docstring."""
    if sorted(order) != list(range(len(dag.ops))):
        raise PlanError("the issue order must list every operator exactly once")
    n = num_devices or (max(max(d) for d in devices.values()) + 1)
    free = np.zeros(n)
    end = np.full(len(dag.ops), np.nan)
    entries, p2p_total = [], 0.0
    for v in order:
        devs = tuple(int(d) for d in devices[v])
        if not devs or min(devs) < 0 or max(devs) >= n or len(set(devs)) != len(devs):
            raise PlanError(f"operator {dag.ops[v].name!r} has an invalid device set {devs} on {n} devices")
        ready, wait = 0.0, 0.0
        for u in dag.preds[v]:
            if np.isnan(end[u]):
                raise PlanError(f"issue order runs {dag.ops[v].name!r} before its input {dag.ops[u].name!r}")
            cost = link.p2p(dag.ops[u].out_mb, devices[u], devs)
            p2p_total += cost
            if end[u] + cost > ready:
                ready, wait = end[u] + cost, cost
        start = max(ready, float(free[list(devs)].max()))
        duration = dag.ops[v].curve.time(len(devs))
        if not np.isfinite(duration):
            raise PlanError(f"operator {dag.ops[v].name!r} cannot run on {len(devs)} GPUs "
                            f"(its curve starts at {dag.ops[v].curve.min_gpus})")
        end[v] = start + duration
        free[list(devs)] = end[v]
        entries.append(ScheduledOp(v, devs, start, float(end[v]), wait))
    return Schedule(entries, n, p2p_total, label)


def validate_schedule(dag: TaskDAG, schedule: Schedule, num_devices: int, link: LinkModel = None,
                      tol: float = 1e-9) -> None:
    """Raise :class:`PlanError` unless every operator runs once, on valid devices, after its inputs, without overlap."""
    seen = [e.op for e in schedule.entries]
    if sorted(seen) != list(range(len(dag.ops))):
        raise PlanError(f"the schedule must run each of the {len(dag.ops)} operators exactly once")
    by_op = {e.op: e for e in schedule.entries}
    for e in schedule.entries:
        name = dag.ops[e.op].name
        devs = e.devices
        if not devs or min(devs) < 0 or max(devs) >= num_devices or len(set(devs)) != len(devs):
            raise PlanError(f"{name!r} runs on devices {e.devices}, not distinct ids in [0, {num_devices})")
        want = dag.ops[e.op].curve.time(len(e.devices))
        if abs((e.end - e.start) - want) > tol * max(1.0, want):
            raise PlanError(f"{name!r} lasts {e.end - e.start:.6g} s but its curve gives {want:.6g} s on "
                            f"{len(e.devices)} GPUs")
        for u in dag.preds[e.op]:
            arrive = by_op[u].end + (link.p2p(dag.ops[u].out_mb, by_op[u].devices, e.devices) if link else 0.0)
            if e.start < arrive - tol:
                raise PlanError(f"{name!r} starts at {e.start:.6g} s before its input {dag.ops[u].name!r} "
                                f"arrives ({arrive:.6g} s)")
    for d in range(num_devices):
        spans = sorted((e.start, e.end, e.op) for e in schedule.entries if d in e.devices)
        for (s0, e0, a), (s1, e1, b) in zip(spans, spans[1:]):
            if s1 < e0 - tol:
                raise PlanError(f"device {d} runs {dag.ops[a].name!r} and {dag.ops[b].name!r} at the same time")
