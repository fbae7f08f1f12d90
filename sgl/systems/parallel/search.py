"""Galvatron / Galvatron-BMW / OSDP plan search.

For every task -- global batch ``B``, micro-batch count ``chunks``, pipeline degree ``pp`` --
the search

1. enumerates the strategy space of that ``pp`` (dropping strategies whose DP degree does
   not divide the micro-batch);
2. runs, for each pipeline stage, the layer-wise DP of :mod:`sgl.systems.parallel.dp` once over
   the largest possible layer count, which yields the stage's best time for *every* layer
   count and memory budget (stages differ in micro-batches in flight and embedding/head);
3. picks the stage partition: ``even`` (Galvatron), ``memory`` (Galvatron-BMW's
   memory-balanced split), ``bmw`` (Galvatron-BMW's refinement: start from the memory-balanced
   and even splits and move single boundary layers towards the time-balanced split while the
   pipeline time drops), or ``exact`` (default: the optimal split for the pipeline formula
   below, by a DP over stages for every bound on the slowest stage -- it makes plans monotone
   in the budget, which a local search cannot promise);
4. composes the pipeline, ``sum_k t_k + (chunks - 1) * max_k t_k`` with ``t_k`` a stage's time
   per micro-batch, and keeps the plan of highest throughput ``B / time``.

The embedding/LM head's options (vocabulary-TP degree, ZeRO-3) are searched with each stage;
ZeRO-3 is among them only where the space has ZeRO-3 at all (``full``, ``sdp``, OSDP), so
``3d`` plans are Megatron-style throughout.

OSDP (``mode="osdp"``) is the same search restricted to ``pp = tp = 1`` with per-layer
replicate / shard / shard-with-operator-splitting choices.

>>> from sgl.systems.parallel import PlanSearchConfig, search_plan
>>> plan = search_plan(PlanSearchConfig(model="llama-7b", num_nodes=1, devices_per_node=8, memory_gb=40,
...                                     batch_sizes=(32,), granularity_mb=64))
>>> plan.global_bsz, len(plan.strategies), plan.throughput > 0
(32, 32, True)
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan
from sgl.systems.parallel.cost import CostModel, CostOptions, OtherOption
from sgl.systems.parallel.dp import best_time_by_budget, solve_layers
from sgl.systems.parallel.model import get_model_config
from sgl.systems.parallel.partition import (even_division, exact_partition, minimax_partition, pipeline_time,
                                            refine_partition)
from sgl.systems.parallel.profiles import HardwareProfile, ModelProfile, load_builtin_profiles
from sgl.systems.parallel.search_config import BASELINES, PlanSearchConfig, PlanSearchResult
from sgl.systems.parallel.space import ClusterSpec, Strategy, enumerate_strategies, powers_of_two, space_shards

__all__ = ["PlanSearcher", "search_plan"]


@dataclass
class _Task:
    pp: int
    global_bsz: int
    chunks: int


class _Prep(NamedTuple):
    """Arrays shared by the stages of one task; ``embed_sdp``: whether the embedding/head may take ZeRO-3."""

    strategies: List[Strategy]
    cls: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    embed_sdp: bool


class PlanSearcher:
    """Holds the cost model of one (model, cluster, profiles) and searches plans for budgets.

    Args:
        config: the search settings.
        profile: model profile (default: shipped A100 profile of ``config.model``).
        hardware: hardware profile (default: shipped A100 files for the cluster shape).
    """

    def __init__(self, config: PlanSearchConfig, profile: ModelProfile | None = None,
                 hardware: HardwareProfile | None = None) -> None:
        config.validate()
        self.config = config
        self.model = get_model_config(config.model)
        self.cluster = ClusterSpec(config.num_nodes, config.devices_per_node)
        if profile is None or hardware is None:
            p, h = load_builtin_profiles(self.model, config.num_nodes, config.devices_per_node, config.profile_dir)
            profile = profile or p
            hardware = hardware or h
        options = CostOptions(pipeline_type=config.pipeline_type, default_dp_type=config.default_dp_type,
                              bct_fct_coe=config.bct_fct_coe, bytes_per_value=config.bytes_per_value)
        self.cost = CostModel(self.model, profile, hardware, self.cluster, options)
        n = self.cluster.num_devices
        if config.max_tp is not None:
            self.model.check_tp(config.max_tp, vocab_tp=1)
        self._max_pp = min(n, config.max_pp or n, self.model.num_layers)

    # ------------------------------------------------------------------ tasks
    def _strategies(self, pp: int, space: Optional[str] = None) -> List[Strategy]:
        c = self.config
        n = self.cluster.num_devices
        max_tp = c.max_tp
        if max_tp is None:
            # Largest power-of-two TP degree that divides heads and FFN width.
            max_tp = 1
            while max_tp * 2 <= n and self.model.num_heads % (max_tp * 2) == 0 \
                    and self.model.ffn_hidden_size % (max_tp * 2) == 0:
                max_tp *= 2
        if c.mode == "osdp":
            if pp != 1:
                return []
            return [s for s in enumerate_strategies(self.cluster, 1, space="sdp", ckpt=c.ckpt, max_tp=1,
                                                    osdp_splits=tuple(c.osdp_splits))] + \
                   [s for s in enumerate_strategies(self.cluster, 1, space="dp", ckpt=c.ckpt, max_tp=1)
                    if not s.sdp and s.dp > 1]
        sp_modes = (False, True) if c.sp_space == "tp+sp" else (False,)
        return enumerate_strategies(self.cluster, pp, space=space or c.space, ckpt=c.ckpt, max_tp=max_tp,
                                    sp_modes=sp_modes, tp_consec_choices=c.tp_consec_choices)

    def pipeline_degrees(self) -> List[int]:
        """The pipeline degrees searched (powers of two up to the cluster/model limit; 1 for OSDP)."""
        return [1] if self.config.mode == "osdp" else powers_of_two(self._max_pp)

    def tasks(self) -> List[_Task]:
        out = []
        for pp in self.pipeline_degrees():
            for b in sorted(set(self.config.batch_sizes)):
                for chunks in powers_of_two(min(b, self.config.max_chunks)):
                    if b % chunks or (pp > 1 and chunks < pp):
                        continue
                    out.append(_Task(pp, b, chunks))
        return out

    def _units(self, mb: np.ndarray | float) -> np.ndarray:
        return np.ceil(np.asarray(mb) / self.config.granularity_mb - 1e-9).astype(np.int64)

    def _budget_units(self, memory_gb: float) -> int:
        usable = memory_gb * (1.0 - self.config.reserve_fraction)
        return int(math.floor(usable * 1024.0 / self.config.granularity_mb + 1e-9))

    def _embed_sdp_allowed(self, baseline: Optional[str]) -> bool:
        """ZeRO-3 on the embedding/head only where the space (or baseline) has ZeRO-3 at all: not in 3d, dp, tp, ..."""
        if self.config.mode == "osdp":
            return True
        return baseline == "sdp" if baseline is not None else space_shards(self.config.space)

    def _prepare(self, task: _Task, strategies: List[Strategy], embed_sdp: bool = True) -> Optional[_Prep]:
        """Arrays shared by all stages of a task, or None when no strategy fits the batch."""
        strategies = [s for s in strategies if task.global_bsz % (task.chunks * s.dp) == 0]
        if not strategies:
            return None
        layouts = sorted({s.layout for s in strategies})
        cls = np.array([layouts.index(s.layout) for s in strategies])
        intra = self.cost.layer_time(strategies, task.global_bsz, task.chunks)
        inter = self.cost.transition_time(layouts, task.pp, task.global_bsz, task.chunks)
        return _Prep(strategies, cls, intra, inter, embed_sdp)

    def _other(self, task: _Task, stage: int, embed_sdp: bool):
        opts = self.cost.other_options(task.pp, sdp=embed_sdp)
        costs = [self.cost.other_cost(o, task.pp, stage, task.global_bsz, task.chunks) for o in opts]
        return opts, np.array([c[0] for c in costs]), np.array([c[1] for c in costs])

    # ------------------------------------------------------------------ search
    def _stage_tables(self, task: _Task, prep, budget: int, uniform: bool):
        """``tables[j, k, n]``: ms of stage ``k`` holding ``n`` layers with embedding/head option ``j``."""
        strategies, cls, intra, inter, embed_sdp = prep
        L = self.model.num_layers
        n_max = L - task.pp + 1
        p2p = self.cost.p2p_time(task.pp, task.global_bsz, task.chunks)
        opts = self.cost.other_options(task.pp, sdp=embed_sdp)
        tables = np.full((len(opts), task.pp, n_max + 1), np.inf)
        ounits = np.zeros((task.pp, len(opts)), dtype=np.int64)
        for k in range(task.pp):
            mem = self._units(self.cost.layer_memory(strategies, task.global_bsz, task.chunks, k))
            costs = [self.cost.other_cost(o, task.pp, k, task.global_bsz, task.chunks) for o in opts]
            ounits[k] = self._units(np.array([c[0] for c in costs]))
            if uniform:
                n = np.arange(1, n_max + 1)[:, None]
            else:
                keep = _undominated(intra, mem, cls)
                by_budget = best_time_by_budget(np.tile(intra[keep], (n_max, 1)), np.tile(mem[keep], (n_max, 1)),
                                                cls[keep], inter, budget)
            for j, (ou, (_, ot)) in enumerate(zip(ounits[k], costs)):
                if ou > budget:
                    continue
                if uniform:
                    # Same strategy on every layer: n * mem[s] units, n * intra[s] ms.
                    fits = n * mem[None, :] <= budget - ou
                    t = np.where(fits, n * intra[None, :], np.inf).min(axis=1)
                else:
                    t = by_budget[:, budget - ou]
                tables[j, k, 1:] = t + ot + p2p
        return opts, tables, ounits

    def _partition(self, task: _Task, tables, prep, budget: int) -> Tuple[float, List[int]]:
        L, pp = self.model.num_layers, task.pp
        if pp == 1:
            return float(tables[0][L]), [L]
        if not np.isfinite(tables[:, 1]).all():
            return math.inf, even_division(L, pp)

        def cost(division: Sequence[int]) -> float:
            return pipeline_time([tables[k][n] for k, n in enumerate(division)], task.chunks)

        even = even_division(L, pp)
        mode = self.config.partition
        if mode == "even":
            return cost(even), even
        memory = self._memory_balanced(task, prep)
        if mode == "memory":
            return cost(memory), memory
        if mode == "exact":
            division = exact_partition(np.asarray(tables), L, task.chunks)
            return (cost(division), division) if division else (math.inf, even)
        # Galvatron-BMW refinement from the memory- and even-balanced starts.
        return refine_partition(cost, (memory, even), even)

    def _memory_balanced(self, task: _Task, prep) -> List[int]:
        """Split minimising the largest stage's minimum memory (Galvatron-BMW's memory-balanced start)."""
        strategies = prep[0]
        L, pp = self.model.num_layers, task.pp
        per_layer, fixed = [], []
        for k in range(pp):
            per_layer.append(float(self.cost.layer_memory(strategies, task.global_bsz, task.chunks, k).min()))
            fixed.append(float(self._other(task, k, prep.embed_sdp)[1].min()))
        return minimax_partition(per_layer, fixed, L)

    def _task_variants(self, tasks, baseline, filt):
        """(task, reserved units, strategies) to run; OSDP reserves each possible gather buffer.

        The peak of gathered ZeRO-3 weights is a maximum over layers, not a sum, so OSDP mode
        runs the DP once per cap: strategies whose buffer fits under the cap, budget minus cap.
        """
        n = self.cluster.num_devices
        for task in tasks:
            strategies = self._strategies(task.pp, "full" if baseline else None)
            if filt is not None:
                strategies = [s for s in strategies if filt(s, n)]
            if self.config.mode != "osdp" or not strategies:
                yield task, 0, strategies
                continue
            buffers = self._units(self.cost.gather_buffer(strategies))
            for cap in sorted(set(buffers.tolist())):
                yield task, int(cap), [s for s, b in zip(strategies, buffers) if b <= cap]

    def _task_min_memory(self, task: _Task, prep) -> float:
        """Least memory units any plan of this task needs on its most loaded stage."""
        per_layer, fixed = [], []
        for k in range(task.pp):
            mem = self._units(self.cost.layer_memory(prep[0], task.global_bsz, task.chunks, k))
            per_layer.append(float(mem.min()))
            fixed.append(float(self._units(self._other(task, k, prep.embed_sdp)[1]).min()))
        division = minimax_partition(per_layer, fixed, self.model.num_layers)
        return max(n * m + f for n, m, f in zip(division, per_layer, fixed))

    def min_feasible_memory_mb(self, tasks: Optional[List[_Task]] = None, space: Optional[str] = None,
                               uniform_filter=None, embed_sdp: bool = True) -> float:
        """Smallest per-device budget (MB, in search units) for which some task has a plan."""
        best = math.inf
        for task in tasks or self.tasks():
            strategies = self._strategies(task.pp, space)
            if uniform_filter is not None:
                strategies = [s for s in strategies if uniform_filter(s, self.cluster.num_devices)]
            caps = [0]
            if self.config.mode == "osdp" and strategies:
                buffers = self._units(self.cost.gather_buffer(strategies))
                caps = sorted(set(buffers.tolist()))
            for cap in caps:
                allowed = strategies
                if self.config.mode == "osdp":
                    allowed = [s for s, b in zip(strategies, buffers) if b <= cap]
                prep = self._prepare(task, allowed, embed_sdp)
                if prep is None:
                    continue
                best = min(best, (self._task_min_memory(task, prep) + cap) * self.config.granularity_mb)
        return best

    def search(self, memory_gb: Optional[float] = None, *, baseline: Optional[str] = None) -> PlanSearchResult:
        """Best plan within ``memory_gb`` (default: the config's budget).

        ``baseline`` (one of :data:`BASELINES`) restricts to that pure strategy, the same on every
        layer with an even pipeline split, for comparisons under the same cost model.
        """
        memory_gb = self.config.memory_gb if memory_gb is None else memory_gb
        if not memory_gb > 0:
            raise PlanError(f"memory budget must be > 0 GB, got {memory_gb!r}")
        if baseline is not None and baseline not in BASELINES:
            raise PlanError(f"unknown baseline {baseline!r}; choose one of {sorted(BASELINES)}")
        started = time.perf_counter()
        full_budget = self._budget_units(memory_gb)
        n = self.cluster.num_devices
        filt = BASELINES.get(baseline) if baseline else None
        embed_sdp = self._embed_sdp_allowed(baseline)
        best: Optional[Tuple[float, _Task, list, object, tuple]] = None
        tasks = self.tasks()
        # Largest batches first: they usually win, and their throughput prunes the rest.
        tasks.sort(key=lambda t: (-t.global_bsz, t.chunks, t.pp))
        evaluated = 0
        for task, cap_units, strategies in self._task_variants(tasks, baseline, filt):
            budget = full_budget - cap_units
            prep = self._prepare(task, strategies, embed_sdp)
            if prep is None or budget < 0:
                continue
            # Lower bound on the pipeline time: every layer at its fastest, no memory limit,
            # perfectly balanced stages: sum_k T_k / c * (1 + (c - 1) / pp).
            fastest = float(prep[2].min()) * self.model.num_layers
            lower = fastest / task.chunks * (1 + (task.chunks - 1) / task.pp)
            if best is not None and task.global_bsz / lower <= best[0]:
                continue
            if self._task_min_memory(task, prep) > budget:
                continue
            evaluated += 1
            opts, tables, ounits = self._stage_tables(task, prep, budget, uniform=filt is not None)
            for j, option in enumerate(opts):
                if filt is not None:
                    division = even_division(self.model.num_layers, task.pp)
                    t = pipeline_time([tables[j, k, m] for k, m in enumerate(division)], task.chunks)
                else:
                    t, division = self._partition(task, tables[j], prep, budget)
                if not math.isfinite(t):
                    continue
                throughput = task.global_bsz / t
                if best is None or throughput > best[0] + 1e-12:
                    best = (throughput, task, division, prep, option, ounits[:, j], budget)
        if best is None:
            smallest = self.min_feasible_memory_mb(space="full" if baseline else None, uniform_filter=filt,
                                                   embed_sdp=embed_sdp)
            what = f"baseline {baseline!r}" if baseline else f"search space {self.config.space!r}"
            if not math.isfinite(smallest):
                candidates = [s for t in self.tasks() for s in self._strategies(t.pp, "full" if baseline else None)
                              if filt is None or filt(s, n)]
                if not candidates:
                    raise PlanError(
                        f"{what} has no strategy for {self.model.name} on {n} devices: TP degrees are limited to "
                        f"those dividing num_heads={self.model.num_heads} and ffn_hidden_size="
                        f"{self.model.ffn_hidden_size}")
                raise PlanError(f"no strategy of {what} fits the batch sizes {list(self.config.batch_sizes)} on "
                                f"{n} devices; allow larger batches or another space")
            raise PlanError(
                f"memory budget {memory_gb:g} GB per device is infeasible for {self.model.name} on "
                f"{self.cluster.num_nodes}x{self.cluster.devices_per_node} devices ({what}); the smallest feasible "
                f"budget is {math.ceil(smallest / 1024.0 / (1.0 - self.config.reserve_fraction) * 100) / 100:.2f} GB"
            )
        label = baseline or ("osdp" if self.config.mode == "osdp" else self.config.space)
        plan = self._build_plan(best, best[-1], memory_gb, uniform=filt is not None, label=label)
        return PlanSearchResult(plan, evaluated, time.perf_counter() - started)

    def _build_plan(self, best, budget: int, memory_gb: float, uniform: bool, label: str) -> Plan:
        _, task, division, prep, option, ounits, _ = best
        strategies, cls, intra, inter, _ = prep
        layers: List[Strategy] = []
        for k, n_k in enumerate(division):
            mem = self._units(self.cost.layer_memory(strategies, task.global_bsz, task.chunks, k))
            room = budget - int(ounits[k])
            if uniform:
                t_best, s_best = math.inf, 0
                for s in range(len(strategies)):
                    if n_k * mem[s] <= room and n_k * intra[s] < t_best:
                        t_best, s_best = n_k * intra[s], s
                choice = [s_best] * n_k
            else:
                choice = solve_layers(np.tile(intra, (n_k, 1)), np.tile(mem, (n_k, 1)), cls, inter, room).choice
            layers.extend(strategies[c] for c in choice)
        plan = Plan(self.cluster.num_nodes, self.cluster.devices_per_node, task.pp, list(division), task.chunks,
                    task.global_bsz, layers, pipeline_type=self.config.pipeline_type,
                    default_dp_type=self.config.default_dp_type, vtp=option.vtp, embed_sdp=option.sdp,
                    model=self.model.name, memory_gb=memory_gb, space=label)
        plan.time_ms, plan.stage_memory_mb, plan.stage_time_ms = self._evaluate(plan)
        return plan

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, plan: Plan) -> Tuple[float, List[float]]:
        """(iteration ms, per-stage MB) of any plan under this cost model (Galvatron JSON round trip).

        The plan's own ``pipeline_type`` and ``default_dp_type`` are used, and its embedding/head
        settings (``vtp``, ZeRO-3 from ``vocab_sdp`` / ``embed_sdp``, Ulysses from ``vsp``).
        """
        time_ms, mems, _ = self._evaluate(plan)
        return time_ms, mems

    def _cost_for(self, plan: Plan) -> CostModel:
        """This searcher's cost model, with the plan's pipeline schedule and default DP type."""
        options = self.cost.options
        if (plan.pipeline_type, plan.default_dp_type) == (options.pipeline_type, options.default_dp_type):
            return self.cost
        options = replace(options, pipeline_type=plan.pipeline_type, default_dp_type=plan.default_dp_type)
        return CostModel(self.model, self.cost.profile, self.cost.hardware, self.cluster, options)

    def _evaluate(self, plan: Plan) -> Tuple[float, List[float], List[float]]:
        if plan.num_devices != self.cluster.num_devices:
            raise PlanError(f"plan is for {plan.num_devices} devices, the searcher for {self.cluster.num_devices}")
        if len(plan.strategies) != self.model.num_layers:
            raise PlanError(f"plan has {len(plan.strategies)} layers, model {self.model.name} has {self.model.num_layers}")
        if any(c > 1 for c in plan.layer_cp()) or plan.vcp > 1:
            raise PlanError(f"the plan uses context parallelism (cp_sizes_enc {plan.layer_cp()}, vcp {plan.vcp}), which "
                            "SGL's cost model does not model; it can be read, shown and re-saved, not evaluated")
        cost = self._cost_for(plan)
        option = OtherOption(plan.vtp, plan.embed_sdp, plan.vsp)
        p2p = cost.p2p_time(plan.pp, plan.global_bsz, plan.chunks)
        times, mems = [], []
        start = 0
        for k, n_k in enumerate(plan.pp_division):
            layer_s = plan.strategies[start:start + n_k]
            start += n_k
            uniq = sorted(set(layer_s))
            layouts = sorted({s.layout for s in uniq})
            intra = cost.layer_time(uniq, plan.global_bsz, plan.chunks)
            mem = cost.layer_memory(uniq, plan.global_bsz, plan.chunks, k)
            inter = cost.transition_time(layouts, plan.pp, plan.global_bsz, plan.chunks)
            idx = [uniq.index(s) for s in layer_s]
            t = sum(intra[i] for i in idx)
            t += sum(inter[layouts.index(uniq[a].layout), layouts.index(uniq[b].layout)] for a, b in zip(idx, idx[1:]))
            om, ot = cost.other_cost(option, plan.pp, k, plan.global_bsz, plan.chunks)
            times.append(t + ot + p2p)
            buffer = float(cost.gather_buffer(uniq).max()) if plan.space == "osdp" else 0.0
            mems.append(float(sum(mem[i] for i in idx) + om + buffer))
        return pipeline_time(times, plan.chunks), mems, times


def search_plan(config: PlanSearchConfig, profile: ModelProfile | None = None,
                hardware: HardwareProfile | None = None) -> Plan:
    """One-call search: the best :class:`Plan` for ``config``."""
    return PlanSearcher(config, profile, hardware).search().plan


def _undominated(intra: np.ndarray, mem: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Indices of strategies not beaten in both time and memory by one of the same layout class.

    Dropping them cannot change the DP's optimum: the dominating strategy has the same
    transition costs and is at least as good on both axes.
    """
    keep = []
    for s in range(len(intra)):
        same = (cls == cls[s]) & (intra <= intra[s]) & (mem <= mem[s])
        strictly = same & ((intra < intra[s]) | (mem < mem[s]))
        ties_before = same & (intra == intra[s]) & (mem == mem[s]) & (np.arange(len(intra)) < s)
        if not strictly.any() and not ties_before.any():
            keep.append(s)
    return np.array(keep, dtype=np.int64)
