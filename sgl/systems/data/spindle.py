"""Spindle: wavefront scheduling of a multi-task multi-modal step on ``N`` GPUs, and its baselines.

Pipeline (:class:`SpindlePlanner`):

1. wave decomposition of the operator DAG (:meth:`TaskDAG.waves`, zero in-degree sets);
2. per wave, makespan bisection ``Σ_i g_i(C*) = N``, GPU-count rounding and lane packing
   (:func:`~sgl.systems.data.spindle_alloc.pack_wave`);
3. device mapping: each lane (a GPU group of one width) gets a contiguous block of free devices,
   inside one node when it fits; ``mapping="exact"`` (default) places the lanes of all waves at
   once with the least total P2P time (:func:`~sgl.systems.data.spindle_map.exact_mapping`, a
   linearised quadratic-assignment MILP; instances too large for it keep the greedy rule, and
   ``SpindlePlanner.mapping_used`` says which was used), ``"p2p"`` is that greedy rule (lanes by incoming
   megabytes, each to the free block with the least P2P time,
   :class:`~sgl.systems.data.spindle_sim.LinkModel`), ``"first_fit"`` the lowest free block;
4. schedule: operators issued wave by wave and replayed without barriers
   (:func:`~sgl.systems.data.spindle_sim.replay`), checked by :func:`validate_schedule`.

Lower bound on any schedule (sub-linear curves): ``max(critical path with every operator at its
fastest, Σ_i min_g g·t̂_i(g) / N)``.

Baselines (same curves, same simulator): **one big pipeline** — every operator on all ``N``
GPUs, one after another (a single data/tensor/pipeline-parallel job over the union model, as
Megatron-LM or DeepSpeed run it); **even split** — each of the ``T`` tasks gets ``N/T`` GPUs
and runs its operators in turn on them.

>>> from sgl.systems.data.spindle_dag import mtmm_dag
>>> result = SpindlePlanner(mtmm_dag(), SpindleConfig(devices=16)).plan()
>>> result.makespan < big_pipeline(mtmm_dag(), 16).makespan
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from sgl._checks import check_choice, check_int
from sgl.errors import PlanError
from sgl.systems.data.spindle_alloc import WaveAllocation, pack_wave
from sgl.systems.data.spindle_dag import TaskDAG
from sgl.systems.data.spindle_map import exact_mapping, mapping_cost
from sgl.systems.data.spindle_sim import LinkModel, Schedule, replay, validate_schedule

__all__ = ["SpindleConfig", "SpindleResult", "SpindlePlanner", "big_pipeline", "even_split", "spindle_lower_bound",
           "compare_baselines"]

MAPPINGS = ("exact", "p2p", "first_fit")


@dataclass
class SpindleConfig:
    """Cluster size and links, and the device-mapping rule."""

    devices: int
    devices_per_node: int = 8
    intra_gbps: float = 150.0
    inter_gbps: float = 12.5
    mapping: str = "exact"
    grid: int = 48

    def __post_init__(self) -> None:
        check_int(self.devices, "devices", minimum=1, error=PlanError)
        check_int(self.grid, "grid", minimum=2, error=PlanError)
        check_choice(self.mapping, "mapping", MAPPINGS, error=PlanError)
        self.link = LinkModel(min(self.devices_per_node, self.devices), self.intra_gbps, self.inter_gbps)


@dataclass
class SpindleResult:
    """The replayed schedule, per-wave allocations (op indices of the DAG), bounds and the barrier makespan."""

    schedule: Schedule
    waves: List[Tuple[List[int], WaveAllocation]]
    barrier_makespan: float
    lower_bound: float
    devices: Dict[int, Tuple[int, ...]] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        return self.schedule.makespan

    def to_dict(self, dag: TaskDAG) -> Dict[str, Any]:
        waves = [{"ops": [dag.ops[i].name for i in ops], "makespan_s": a.makespan, "bound_s": a.lower_bound,
                  "method": a.method,
                  "lanes": [{"gpus": lane.width, "ops": [dag.ops[ops[k]].name for k in lane.ops]} for lane in a.lanes]}
                 for ops, a in self.waves]
        return {**self.schedule.to_dict(dag), "barrier_makespan_s": self.barrier_makespan,
                "lower_bound_s": self.lower_bound, "waves": waves}


def spindle_lower_bound(dag: TaskDAG, devices: int) -> float:
    """``max(critical path at the fastest counts <= N, Σ_i min area_i / N)``."""
    area = sum(min(g * op.curve.time(g) for g in op.curve.gpus if g <= devices) for op in dag.ops)
    return max(dag.critical_path(devices), area / devices)


def _blocks(width: int, free: Sequence[bool], per_node: int) -> List[Tuple[int, ...]]:
    """Contiguous free blocks of ``width`` devices (inside a node when ``width <= per_node``)."""
    n = len(free)
    out = []
    for s in range(n - width + 1):
        if width <= per_node and s // per_node != (s + width - 1) // per_node:
            continue
        if width > per_node and s % per_node:
            continue
        if all(free[s:s + width]):
            out.append(tuple(range(s, s + width)))
    if not out:  # fragmented: any free devices, lowest first
        ids = [d for d in range(n) if free[d]]
        if len(ids) >= width:
            out.append(tuple(ids[:width]))
    return out


class SpindlePlanner:
    """Wave decomposition → bisection + rounding + packing per wave → device mapping → replayed schedule."""

    def __init__(self, dag: TaskDAG, config: SpindleConfig) -> None:
        if not isinstance(dag, TaskDAG):
            raise PlanError(f"SpindlePlanner needs a TaskDAG; got {type(dag).__name__}")
        self.dag, self.config = dag, config
        self.mapping_used = ""  # "exact" where the MILP mapped every lane, else "greedy" / "first_fit"
        for op in dag.ops:
            if op.curve.min_gpus > config.devices:
                raise PlanError(f"operator {op.name!r} needs at least {op.curve.min_gpus} GPUs; the cluster has "
                                f"{config.devices}")

    def allocate(self) -> List[Tuple[List[int], WaveAllocation]]:
        n = self.config.devices
        return [(wave, pack_wave([self.dag.ops[i].curve for i in wave], n, self.config.grid))
                for wave in self.dag.waves()]

    def map_devices(self, waves: List[Tuple[List[int], WaveAllocation]]
                    ) -> Tuple[Dict[int, Tuple[int, ...]], List[int]]:
        """Device set per operator and the issue order (wave by wave, lanes in order)."""
        cfg, dag, link = self.config, self.dag, self.config.link
        placed: Dict[int, Tuple[int, ...]] = {}
        order: List[int] = []
        for ops, alloc in waves:
            free = [True] * cfg.devices

            def incoming(lane) -> float:
                return sum(dag.ops[p].out_mb for k in lane.ops for p in dag.preds[ops[k]])

            def cost(lane, block: Tuple[int, ...]) -> float:
                return sum(link.p2p(dag.ops[p].out_mb, placed[p], block) for k in lane.ops for p in dag.preds[ops[k]])

            for lane in sorted(alloc.lanes, key=lambda ln: (-incoming(ln), -ln.width)):
                blocks = _blocks(lane.width, free, link.devices_per_node)
                if not blocks:
                    raise PlanError(f"internal: no {lane.width} free devices in a wave using {alloc.gpus}")
                if cfg.mapping != "first_fit":
                    block = min(blocks, key=lambda b: (cost(lane, b), b[0]))
                else:
                    block = blocks[0]
                for d in block:
                    free[d] = False
                for k in lane.ops:
                    placed[ops[k]] = block
                    order.append(ops[k])
        self.mapping_used = "first_fit" if cfg.mapping == "first_fit" else "greedy"
        if cfg.mapping == "exact":
            self._exact(waves, placed)
        return placed, order

    def _exact(self, waves: List[Tuple[List[int], WaveAllocation]], placed: Dict[int, Tuple[int, ...]]) -> None:
        """Replace the greedy blocks in ``placed`` by the exact MILP's where it is small enough and not worse."""
        dag, link = self.dag, self.config.link
        lane_of, widths, wave_of, current = {}, [], [], []
        for w, (ops, alloc) in enumerate(waves):
            for lane in alloc.lanes:
                for k in lane.ops:
                    lane_of[ops[k]] = len(widths)
                widths.append(lane.width)
                wave_of.append(w)
                current.append(placed[ops[lane.ops[0]]] if lane.ops else tuple(range(lane.width)))
        edges: Dict[Tuple[int, int], List[float]] = {}
        for v, op in enumerate(dag.ops):
            for p in dag.preds[v]:
                if dag.ops[p].out_mb > 0:
                    edges.setdefault((lane_of[p], lane_of[v]), []).append(dag.ops[p].out_mb)
        blocks, cost = exact_mapping(widths, wave_of, edges, self.config.devices, link)
        greedy = mapping_cost(current, edges, link)
        if blocks is not None and cost <= greedy:
            for v, u in lane_of.items():
                placed[v] = blocks[u]
            self.mapping_used = "exact"

    def plan(self) -> SpindleResult:
        waves = self.allocate()
        placed, order = self.map_devices(waves)
        schedule = replay(self.dag, placed, order, self.config.link, self.config.devices,
                          label=f"spindle ({self.config.mapping})")
        validate_schedule(self.dag, schedule, self.config.devices, self.config.link)
        return SpindleResult(schedule, waves, float(sum(a.makespan for _, a in waves)),
                             spindle_lower_bound(self.dag, self.config.devices), placed)


def big_pipeline(dag: TaskDAG, devices: int, link: Optional[LinkModel] = None) -> Schedule:
    """Every operator on all ``devices`` GPUs, in topological order."""
    check_int(devices, "devices", minimum=1, error=PlanError)
    everything = tuple(range(devices))
    sched = replay(dag, {i: everything for i in range(len(dag.ops))}, dag.topological(),
                   link or LinkModel(min(8, devices)), devices, label="one big pipeline")
    return sched


def even_split(dag: TaskDAG, devices: int, link: Optional[LinkModel] = None) -> Schedule:
    """Each task on its own ``N/T`` GPUs (remainder to the first tasks), its operators in turn."""
    check_int(devices, "devices", minimum=1, error=PlanError)
    tasks = dag.tasks
    if devices < len(tasks):
        raise PlanError(f"an even split needs at least one GPU per task: {len(tasks)} tasks, {devices} GPUs")
    base, extra = divmod(devices, len(tasks))
    groups, first = {}, 0
    for k, task in enumerate(tasks):
        size = base + (1 if k < extra else 0)
        groups[task] = tuple(range(first, first + size))
        first += size
    placed = {}
    for i, op in enumerate(dag.ops):
        placed[i] = groups[op.task]
        if op.curve.min_gpus > len(placed[i]):
            raise PlanError(f"even split gives task {op.task!r} {len(placed[i])} GPUs; {op.name!r} needs "
                            f"{op.curve.min_gpus}")
    return replay(dag, placed, dag.topological(), link or LinkModel(min(8, devices)), devices, label="even split")


def compare_baselines(dag: TaskDAG, config: SpindleConfig) -> Dict[str, Any]:
    """Spindle's makespan (every mapping) vs the two baselines, with speed-ups ``1 - spindle/baseline``."""
    planner = SpindlePlanner(dag, config)
    result = planner.plan()
    other = {m: SpindlePlanner(dag, SpindleConfig(config.devices, config.devices_per_node, config.intra_gbps,
                                                  config.inter_gbps, m, config.grid)).plan()
             for m in MAPPINGS if m != config.mapping}
    other[config.mapping] = result
    first_fit = other["first_fit"]
    rows = {"spindle": result.makespan, "spindle_first_fit": first_fit.makespan, "mapping": config.mapping,
            "mapping_used": planner.mapping_used, "waves": len(result.waves),
            "barrier": result.barrier_makespan, "lower_bound": result.lower_bound,
            "p2p_seconds": result.schedule.p2p_seconds, "p2p_seconds_first_fit": first_fit.schedule.p2p_seconds,
            "p2p_seconds_by_mapping": {m: r.schedule.p2p_seconds for m, r in other.items()},
            "makespan_by_mapping": {m: r.makespan for m, r in other.items()},
            "big_pipeline": big_pipeline(dag, config.devices, config.link).makespan}
    try:
        rows["even_split"] = even_split(dag, config.devices, config.link).makespan
    except PlanError:
        rows["even_split"] = float("nan")
    for name in ("big_pipeline", "even_split"):
        rows[f"faster_than_{name}"] = 1.0 - rows["spindle"] / rows[name]
    return rows
