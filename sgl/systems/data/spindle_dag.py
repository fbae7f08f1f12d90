"""Spindle's input: a DAG of stage operators, each with a time-vs-GPUs scaling curve.

A multi-task multi-modal (MT-MM) training step is a DAG of *stage operators* ("MetaOps" in
the Spindle code): per task, modality encoders (vision, audio, text) feed an LLM backbone
stage, which feeds the task's head. Every operator ``i`` has a profiled curve
``t_i(g)`` = its time on ``g`` GPUs, known at a few GPU counts ``g ∈ G_i`` (e.g. 1, 2, 4, 8);
running on ``g`` GPUs when only ``g' < g`` helps leaves ``g - g'`` idle, so the effective time
is ``t̂_i(g) = min_{g' ∈ G_i, g' <= g} t_i(g')``. An edge ``u -> v`` carries ``u``'s output
(``out_mb`` megabytes) from ``u``'s devices to ``v``'s.

:meth:`TaskDAG.waves` is the wave decomposition: wave 0 is the set of operators with zero
in-degree, wave ``k`` those whose in-degree becomes zero once waves ``< k`` are removed
(Kahn levels). A cycle is a :class:`~sgl.errors.PlanError` that names the operators on it.

JSON (``load_dag`` / ``TaskDAG.to_dict``)::

    {"ops": [{"name": "t0.vision", "task": "t0", "gpus": [1, 2, 4], "times": [0.9, 0.5, 0.3],
              "deps": [], "out_mb": 64},
             {"name": "t0.llm", "task": "t0", "amdahl": {"work": 4.0, "serial": 0.02, "comm": 0.01},
              "deps": ["t0.vision"]}]}

>>> dag = TaskDAG([SpindleOp("a", "t", ScalingCurve((1, 2), (2.0, 1.2))),
...                SpindleOp("b", "t", ScalingCurve((1, 2), (1.0, 0.6)), deps=("a",))])
>>> [[dag.ops[i].name for i in w] for w in dag.waves()]
[['a'], ['b']]
>>> dag.ops[0].curve.time(3)          # 3 GPUs: the 2-GPU time, one GPU idle
1.2
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import PlanError

__all__ = ["ScalingCurve", "SpindleOp", "TaskDAG", "load_dag", "mtmm_dag", "random_dag"]


@dataclass(frozen=True)
class ScalingCurve:
    """Profiled times ``times[j]`` (seconds) of one operator on ``gpus[j]`` GPUs (increasing counts)."""

    gpus: Tuple[int, ...]
    times: Tuple[float, ...]

    def __post_init__(self) -> None:
        gpus = tuple(check_int(g, "scaling-curve GPU count", minimum=1, error=PlanError) for g in self.gpus)
        times = tuple(check_real(t, "scaling-curve time", 0.0, math.inf, open_low=True, open_high=True,
                                 error=PlanError) for t in self.times)
        if not gpus or len(gpus) != len(times):
            raise PlanError(f"a scaling curve needs as many times as GPU counts (>= 1); got {len(gpus)} GPU "
                            f"counts and {len(times)} times")
        if any(b <= a for a, b in zip(gpus, gpus[1:])):
            raise PlanError(f"scaling-curve GPU counts must increase strictly; got {list(gpus)}")
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "_g", np.array(gpus, dtype=np.float64))
        object.__setattr__(self, "_t", np.minimum.accumulate(np.array(times, dtype=np.float64)))

    @classmethod
    def amdahl(cls, work: float, serial: float = 0.05, comm: float = 0.0,
               gpus: Sequence[int] = (1, 2, 4, 8)) -> "ScalingCurve":
        """``t(g) = work·(serial + (1 - serial)/g) + comm·log2(g)`` at each count in ``gpus``."""
        check_real(work, "work", 0.0, open_low=True, error=PlanError)
        check_real(serial, "serial fraction", 0.0, 1.0, error=PlanError)
        check_real(comm, "comm", 0.0, error=PlanError)
        return cls(tuple(gpus), tuple(work * (serial + (1 - serial) / g) + comm * math.log2(g) for g in gpus))

    @property
    def min_gpus(self) -> int:
        return self.gpus[0]

    @property
    def max_gpus(self) -> int:
        return self.gpus[-1]

    def time(self, g: int) -> float:
        """Effective time on ``g`` GPUs (``inf`` below the smallest profiled count)."""
        j = int(np.searchsorted(self._g, g, side="right")) - 1
        return math.inf if j < 0 else float(self._t[j])

    def gpus_for(self, limit: float) -> Optional[int]:
        """The fewest profiled GPUs whose effective time is ``<= limit`` (``None`` when none is)."""
        ok = np.nonzero(self._t <= limit * (1 + 1e-12))[0]
        return int(self.gpus[ok[0]]) if ok.size else None

    def continuous_gpus(self, limit: float) -> float:
        """GPUs needed to finish within ``limit`` in the relaxation (``inf`` if faster than ``t(max)``).

        Between profiled counts the time is linear in ``g``; above ``t(min)`` the operator may share
        its ``g_min`` GPUs in time, needing ``g_min · t(g_min) / limit`` (its area over ``limit``).
        """
        g, t = self._g, self._t
        if limit < t[-1] * (1 - 1e-12):
            return math.inf
        if limit >= t[0]:
            return float(g[0] * t[0] / limit)
        j = int(np.searchsorted(-t, -limit, side="left"))  # first index with t[j] <= limit (t non-increasing)
        j = max(j, 1)
        t0, t1, g0, g1 = t[j - 1], t[j], g[j - 1], g[j]
        if t0 == t1:
            return float(g1)
        return float(g0 + (t0 - limit) / (t0 - t1) * (g1 - g0))

    def to_dict(self) -> Dict[str, Any]:
        return {"gpus": list(self.gpus), "times": list(self.times)}


@dataclass(frozen=True)
class SpindleOp:
    """One stage operator: a name, its task, a scaling curve, its dependencies and its output size (MB)."""

    name: str
    task: str
    curve: ScalingCurve
    deps: Tuple[str, ...] = ()
    out_mb: float = 0.0
    modality: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PlanError(f"an operator needs a non-empty name; got {self.name!r}")
        object.__setattr__(self, "deps", tuple(self.deps))
        check_real(self.out_mb, f"out_mb of operator {self.name!r}", 0.0, error=PlanError)


@dataclass
class TaskDAG:
    """Validated operator DAG (unique names, known dependencies, no cycle); ``preds[i]`` are indices."""

    ops: List[SpindleOp]
    preds: List[Tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        self.ops = list(self.ops)
        if not self.ops:
            raise PlanError("the task DAG has no operator; give at least one")
        index: Dict[str, int] = {}
        for i, op in enumerate(self.ops):
            if not isinstance(op, SpindleOp):
                raise PlanError(f"DAG entries must be SpindleOp; entry {i} is {type(op).__name__}")
            if op.name in index:
                raise PlanError(f"operator name {op.name!r} appears twice; names must be unique")
            index[op.name] = i
        self.index = index
        preds = []
        for op in self.ops:
            missing = [d for d in op.deps if d not in index]
            if missing:
                raise PlanError(f"operator {op.name!r} depends on unknown operator(s) {missing}")
            if op.name in op.deps:
                raise PlanError(f"operator {op.name!r} depends on itself (a cycle of length 1)")
            preds.append(tuple(dict.fromkeys(index[d] for d in op.deps)))
        self.preds = preds
        self.succs: List[List[int]] = [[] for _ in self.ops]
        for v, ps in enumerate(preds):
            for u in ps:
                self.succs[u].append(v)
        self._waves = self._levels()

    def _levels(self) -> List[List[int]]:
        indeg = np.array([len(p) for p in self.preds])
        wave = [i for i in range(len(self.ops)) if indeg[i] == 0]
        waves, placed = [], 0
        while wave:
            waves.append(wave)
            placed += len(wave)
            nxt = []
            for u in wave:
                for v in self.succs[u]:
                    indeg[v] -= 1
                    if indeg[v] == 0:
                        nxt.append(v)
            wave = sorted(nxt)
        if placed < len(self.ops):
            raise PlanError(f"the task DAG has a cycle through {self._cycle(indeg)}; remove a dependency on it")
        return waves

    def _cycle(self, indeg: np.ndarray) -> List[str]:
        """Names on one cycle among the operators Kahn's algorithm could not place."""
        left = {i for i in range(len(self.ops)) if indeg[i] > 0}
        node = min(left)
        seen: Dict[int, int] = {}
        path: List[int] = []
        while node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = next(p for p in self.preds[node] if p in left)
        return [self.ops[i].name for i in reversed(path[seen[node]:])]

    def waves(self) -> List[List[int]]:
        """Operator indices per wave (zero in-degree sets, Kahn levels)."""
        return [list(w) for w in self._waves]

    def topological(self) -> List[int]:
        return [i for w in self._waves for i in w]

    @property
    def tasks(self) -> List[str]:
        return list(dict.fromkeys(op.task for op in self.ops))

    def critical_path(self, gpus: int) -> float:
        """Longest dependency chain with every operator on ``gpus`` GPUs (a makespan lower bound)."""
        finish = np.zeros(len(self.ops))
        for i in self.topological():
            start = max((finish[p] for p in self.preds[i]), default=0.0)
            finish[i] = start + self.ops[i].curve.time(gpus)
        return float(finish.max())

    def to_dict(self) -> Dict[str, Any]:
        return {"ops": [{"name": op.name, "task": op.task, **op.curve.to_dict(), "deps": list(op.deps),
                         "out_mb": op.out_mb, "modality": op.modality} for op in self.ops]}

    @classmethod
    def from_dict(cls, data: Any) -> "TaskDAG":
        if not isinstance(data, dict) or not isinstance(data.get("ops"), list):
            raise PlanError('a DAG file is a JSON object {"ops": [...]}; see sgl.systems.data.spindle_dag')
        ops = []
        for k, raw in enumerate(data["ops"]):
            if not isinstance(raw, dict) or "name" not in raw:
                raise PlanError(f"DAG op {k} must be an object with a 'name'; got {raw!r}")
            if "amdahl" in raw:
                spec = raw["amdahl"]
                if not isinstance(spec, dict) or "work" not in spec:
                    raise PlanError(f"op {raw['name']!r}: 'amdahl' needs {{'work': ..., 'serial': ..., 'comm': ...}}")
                curve = ScalingCurve.amdahl(float(spec["work"]), float(spec.get("serial", 0.05)),
                                            float(spec.get("comm", 0.0)), tuple(spec.get("gpus", (1, 2, 4, 8))))
            elif "gpus" in raw and "times" in raw:
                curve = ScalingCurve(tuple(raw["gpus"]), tuple(raw["times"]))
            else:
                raise PlanError(f"op {raw['name']!r} needs 'gpus' and 'times' lists or an 'amdahl' object")
            deps = raw.get("deps", [])
            if isinstance(deps, str) or not isinstance(deps, (list, tuple)):
                raise PlanError(f"op {raw['name']!r}: 'deps' must be a list of operator names; got {deps!r}")
            ops.append(SpindleOp(str(raw["name"]), str(raw.get("task", raw["name"])), curve, tuple(deps),
                                 float(raw.get("out_mb", 0.0)), str(raw.get("modality", ""))))
        return cls(ops)


def load_dag(path: Any) -> TaskDAG:
    """Read a DAG JSON file (format in the module docstring)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PlanError(f"DAG file {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise PlanError(f"DAG file {path} is not valid JSON: {err}") from None
    return TaskDAG.from_dict(data)


#: (modality, encoder work in seconds on 1 GPU, serial fraction, comm s/doubling, output MB)
_ENCODERS = {"vision": (1.6, 0.10, 0.010, 48.0), "audio": (1.0, 0.15, 0.008, 32.0), "text": (0.4, 0.25, 0.004, 16.0)}


def mtmm_dag(tasks: Sequence[Tuple[str, Sequence[str], float]] = (
        ("caption", ("vision",), 8.0), ("vqa", ("vision", "text"), 6.0), ("asr", ("audio",), 5.0),
        ("avqa", ("audio", "vision", "text"), 10.0)),
        gpus: Sequence[int] = (1, 2, 4, 8, 16), llm_serial: float = 0.01, llm_comm: float = 0.02,
        head_work: float = 0.3) -> TaskDAG:
    """A synthetic MT-MM step: per task, one encoder per modality -> LLM backbone -> head.

    ``tasks`` = ``(name, modalities, LLM work in GPU-seconds)``. Encoders are small and scale
    poorly (serial fractions 0.10–0.25), the LLM stage is large and scales well: the heterogeneity
    Spindle's per-wave allocation exploits. Curves are Amdahl-style (:meth:`ScalingCurve.amdahl`),
    capped at the counts in ``gpus``.
    """
    ops: List[SpindleOp] = []
    for name, modalities, llm_work in tasks:
        encs = []
        for m in modalities:
            if m not in _ENCODERS:
                raise PlanError(f"unknown modality {m!r}; use one of {sorted(_ENCODERS)}")
            work, serial, comm, out = _ENCODERS[m]
            encs.append(f"{name}.{m}")
            ops.append(SpindleOp(encs[-1], name, ScalingCurve.amdahl(work, serial, comm, gpus[:4]),
                                 out_mb=out, modality=m))
        ops.append(SpindleOp(f"{name}.llm", name, ScalingCurve.amdahl(llm_work, llm_serial, llm_comm, gpus),
                             tuple(encs), out_mb=64.0, modality="llm"))
        ops.append(SpindleOp(f"{name}.head", name, ScalingCurve.amdahl(head_work, 0.3, 0.002, gpus[:3]),
                             (f"{name}.llm",), out_mb=0.0, modality="head"))
    return TaskDAG(ops)


def random_dag(rng, devices: int) -> "TaskDAG":
    """A small random DAG (3–6 operators, Amdahl curves on 1/2/4 GPUs, two tasks) for mapping checks."""
    ops = []
    for i in range(int(rng.integers(3, 7))):
        deps = tuple(f"o{j}" for j in range(i) if rng.random() < 0.5)
        curve = ScalingCurve.amdahl(float(rng.uniform(0.5, 3.0)), float(rng.uniform(0.05, 0.4)), 0.0,
                                    tuple(g for g in (1, 2, 4) if g <= devices))
        ops.append(SpindleOp(f"o{i}", f"t{i % 2}", curve, deps, float(rng.uniform(50, 800))))
    return TaskDAG(ops)
