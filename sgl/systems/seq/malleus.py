"""Malleus: straggler-aware TP grouping, pipeline layout and the two ILPs, with re-planning.

Device ``i`` runs at straggling rate ``r_i`` (1 = nominal, :mod:`~sgl.systems.seq.straggler`).
A TP group ``g`` of ``t`` devices runs one layer of one micro-batch in
``y_g = τ·(1 + ω_t)·max_{i∈g} r_i / t`` (``τ`` the layer time on one device, ``ω_t`` the TP
overhead).  The planner

1. **groups** each node's devices (sorted by rate) into ``q`` normal TP groups of size ``tp``
   of the fastest devices and the rest into halving groups (``tp/2, tp/4, …``, binary
   decomposition of the count), for every ``q``; devices slower than ``suspend`` are left idle;
2. **lays out** pipelines: the straggler groups are placed first by a DFS over the ``dp``
   pipelines with symmetry pruning (a group goes to an already used pipeline or the first empty
   one), then the normal groups go one by one to the pipeline with the least throughput;
3. **ILP 1** per pipeline (layers per stage): ``min max_j (y_j l_j + f_j)`` s.t. ``Σ_j l_j = L``,
   ``l_j >= 1`` and per-device memory ``l_j (s + a (S - j)) / t_j + e_j <= C`` (model states
   ``s``, 1F1B keeps ``S - j`` micro-batches of activations ``a``, embedding ``e`` on the first and
   last stage; ``f_j`` the stage's fixed part, :meth:`MalleusModel.fixed_ms`: the embedding's time on the
   first stage, the LM head's and loss's on the last, at the stage's rate -- the stages costed as they run);
4. **ILP 2** (micro-batches per pipeline): ``min max_i o_i (m_i + S_i - 1)`` s.t.
   ``Σ_i m_i = B``, ``m_i >= 1`` (``o_i`` ILP 1's optimum: the pipeline's slowest stage);

and keeps the best (grouping, layout) by step time ``max_i o_i (m_i + S_i - 1)``.
:meth:`MalleusPlanner.oblivious` is the straggler-oblivious plan (uniform groups, layers and
micro-batches, evaluated at the true rates); :meth:`MalleusPlanner.replan` plans for new rates
and reports the model-state volume that moves (each device receives the parts of its new layer
shards it did not hold); with ``amortize_steps`` it trades step time against migration time
(keeping the old layout and re-splitting only the micro-batches moves nothing).
:func:`plan_any_layout` re-plans the whole hybrid plan: the best over every ``(tp, pp)`` layout.
Both ILPs use HiGHS (:func:`~sgl.systems.seq.milp.solve_milp`).

>>> import numpy as np
>>> planner = MalleusPlanner(MalleusModel(), devices=16, tp=4, pp=2)
>>> rates = np.ones(16); rates[0] = 5.0
>>> plan = planner.plan(rates)
>>> round(planner.oblivious(rates).step_ms / plan.step_ms, 2) > 1.5
True
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.seq.milp import solve_milp
from sgl.systems.seq.straggler import check_rates

__all__ = ["MalleusModel", "MalleusPlan", "MalleusPlanner", "layers_ilp", "microbatch_ilp", "migration_mb",
           "migration_by_device", "hybrid_layouts", "plan_any_layout"]


@dataclass(frozen=True)
class MalleusModel:
    """Per-layer constants (defaults: LLaMA-7B, 4K-token micro-batches, FlexSP's A100 figures)."""

    layers: int = 32
    layer_ms: float = (5.128e-6 * 4096 ** 2 + 0.1839576 * 4096) / 32    # fwd + bwd of one layer, one device
    state_mb: float = 7.0 * 16 * 1024 / 32                                 # model states of one layer
    act_mb: float = 4.71 * 4096 / 32                                       # activations of one layer, one micro-batch
    embed_mb: float = 2 * 4096 * 32000 * 16 / 2**20                        # embedding / LM head states
    memory_mb: float = 80 * 1024.0
    micro_batches: int = 64
    tp_overhead: Dict[int, float] = field(default_factory=lambda: {1: 0.0, 2: 0.05, 4: 0.10, 8: 0.18})
    embed_ms: float = 0.0            # embedding fwd + bwd of one micro-batch, one device (first stage)
    head_ms: float = 0.0             # final norm + LM head + loss fwd + bwd of one micro-batch (last stage)

    def __post_init__(self) -> None:
        check_int(self.layers, "MalleusModel.layers", 1, error=PlanError)
        check_int(self.micro_batches, "MalleusModel.micro_batches", 1, error=PlanError)
        for name in ("layer_ms", "state_mb", "act_mb", "memory_mb"):
            check_real(getattr(self, name), f"MalleusModel.{name}", 0.0, open_low=True, error=PlanError)
        for name in ("embed_ms", "head_ms"):
            check_real(getattr(self, name), f"MalleusModel.{name}", 0.0, error=PlanError)

    def overhead(self, t: int) -> float:
        return float(self.tp_overhead.get(t, max(self.tp_overhead.values())))

    def fixed_ms(self, j: int, stages: int, rate: float) -> float:
        """Stage ``j``'s per-micro-batch time outside its layers: the embedding on the first stage, the
        head and loss on the last, at the stage's slowest ``rate`` (replicated in a TP group: not split)."""
        return (self.embed_ms * (j == 0) + self.head_ms * (j == stages - 1)) * rate


@dataclass
class MalleusPlan:
    """Pipelines (stages = device lists), layers per stage, micro-batches per pipeline, step time."""

    pipelines: List[List[List[int]]]
    layers: List[List[int]]
    micro_batches: List[int]
    step_ms: float
    stage_ms: List[float]
    idle: List[int]
    migration_mb: float = 0.0

    def to_dict(self) -> dict:
        return {"step_time_ms": round(self.step_ms, 3), "migration_mb": round(self.migration_mb, 1),
                "idle_devices": self.idle, "micro_batches": self.micro_batches,
                "pipelines": [[{"devices": st, "layers": l} for st, l in zip(p, ls)]
                              for p, ls in zip(self.pipelines, self.layers)]}

    def device_load(self, devices: int, model: MalleusModel, rates: np.ndarray) -> np.ndarray:
        """Busy ms per device in one step (its stage's layers × micro-batches × its own speed)."""
        load = np.zeros(devices)
        for stages, ls, m in zip(self.pipelines, self.layers, self.micro_batches):
            for j, (st, l) in enumerate(zip(stages, ls)):
                t = len(st)
                load[st] = m * (l * model.layer_ms * (1 + model.overhead(t)) / t
                                + model.fixed_ms(j, len(stages), 1.0)) * rates[st]
        return load


def layers_ilp(y: Sequence[float], mem_per_layer: Sequence[float], mem_free: Sequence[float], layers: int,
               time_limit: float = 1.0, fixed: Optional[Sequence[float]] = None) -> Tuple[Optional[List[int]], float]:
    """ILP 1: integer layers per stage minimising ``max_j (y_j l_j + f_j)`` under per-stage memory
    (``fixed`` = ``f``, each stage's time outside its layers, default 0); ``(None, inf)`` if infeasible."""
    S = len(y)
    f = [0.0] * S if fixed is None else [float(v) for v in fixed]
    caps = [int(np.floor(free / m)) if m > 0 else layers for free, m in zip(mem_free, mem_per_layer)]
    if any(c < 1 for c in caps) or sum(caps) < layers or S > layers:
        return None, float("inf")
    rows, cols, vals = [], [], []
    for j in range(S):                         # y_j l_j - M <= 0
        rows += [j, j]; cols += [j, S]; vals += [float(y[j]), -1.0]
    rows += [S] * S; cols += list(range(S)); vals += [1.0] * S
    A = sp.csr_matrix((vals, (rows, cols)), shape=(S + 1, S + 1))
    lo = [-np.inf] * S + [float(layers)]
    hi = [-fj for fj in f] + [float(layers)]
    c = np.zeros(S + 1); c[-1] = 1.0
    integ = np.ones(S + 1, dtype=bool); integ[-1] = False
    res = solve_milp(c, A, lo, hi, np.r_[np.ones(S), 0.0], np.r_[np.asarray(caps, float), np.inf], integ,
                     time_limit=time_limit, gap=1e-6)
    if res.x is None:
        if res.status == "infeasible":
            return None, float("inf")
        ls = _greedy_min_max(y, [1] * S, caps, layers, [fj / yj for fj, yj in zip(f, y)])  # solver failure
    else:
        ls = [int(round(v)) for v in res.x[:S]]
    return ls, float(max(yj * lj + fj for yj, lj, fj in zip(y, ls, f)))


def _greedy_min_max(w: Sequence[float], start: Sequence[int], caps: Sequence[float], total: int,
                    offset: Sequence[float] = ()) -> List[int]:
    """Exact min of ``max_i w_i (n_i + offset_i)`` over ``start <= n <= caps``, ``Σ n = total``:
    add units one by one where the resulting term is smallest (optimal for increasing separable terms)."""
    n = list(start)
    off = list(offset) or [0.0] * len(n)
    for _ in range(total - sum(n)):
        cand = [(w[i] * (n[i] + 1 + off[i]), i) for i in range(len(n)) if n[i] < caps[i]]
        n[min(cand)[1]] += 1
    return n


def microbatch_ilp(o: Sequence[float], stages: Sequence[int], total: int, time_limit: float = 1.0
                   ) -> Tuple[List[int], float]:
    """ILP 2: ``m_i >= 1`` with ``Σ m_i = total`` minimising ``max_i o_i (m_i + S_i - 1)``."""
    P = len(o)
    if total < P:
        raise PlanError(f"{total} micro-batches cannot feed {P} pipelines: give at least one per pipeline")
    rows, cols, vals = [], [], []
    for i in range(P):
        rows += [i, i]; cols += [i, P]; vals += [float(o[i]), -1.0]
    rows += [P] * P; cols += list(range(P)); vals += [1.0] * P
    A = sp.csr_matrix((vals, (rows, cols)), shape=(P + 1, P + 1))
    lo = [-np.inf] * P + [float(total)]
    hi = [-float(o[i]) * (stages[i] - 1) for i in range(P)] + [float(total)]
    c = np.zeros(P + 1); c[-1] = 1.0
    integ = np.ones(P + 1, dtype=bool); integ[-1] = False
    res = solve_milp(c, A, lo, hi, np.r_[np.ones(P), 0.0], np.r_[np.full(P, float(total)), np.inf], integ,
                     time_limit=time_limit, gap=1e-6)
    if res.x is None:        # always feasible: a solver failure (HiGHS "Solve error") -> the exact greedy
        m = _greedy_min_max(o, [1] * P, [total] * P, total, [s - 1 for s in stages])
    else:
        m = [int(round(v)) for v in res.x[:P]]
    return m, float(max(oi * (mi + si - 1) for oi, mi, si in zip(o, m, stages)))


class MalleusPlanner:
    """Straggler-aware plans for ``devices = dp·pp·tp`` devices in nodes of ``node_size`` (module doc)."""

    def __init__(self, model: MalleusModel, devices: int, tp: int, pp: int, *, node_size: int = 8,
                 suspend: float = 8.0, time_limit: float = 1.0, max_layouts: int = 64) -> None:
        self.model = model
        self.devices = check_int(devices, "devices", 1, error=PlanError)
        self.tp = check_int(tp, "tp", 1, error=PlanError)
        self.pp = check_int(pp, "pp", 1, error=PlanError)
        self.node_size = check_int(node_size, "node_size", 1, error=PlanError)
        if self.devices % (self.tp * self.pp) or self.node_size % self.tp:
            raise PlanError(f"{devices} devices do not split into tp={tp} x pp={pp} x dp, or a node of "
                            f"{node_size} does not hold whole TP groups")
        if self.pp > model.layers:
            raise PlanError(f"pp={pp} stages for {model.layers} layers: give pp <= layers")
        self.dp = self.devices // (self.tp * self.pp)
        self.suspend = check_real(suspend, "suspend", 1.0, error=PlanError)
        self.time_limit = time_limit
        self.max_layouts = max_layouts

    # ------------------------------------------------------------------ evaluation
    def _group_y(self, group: Sequence[int], rates: np.ndarray) -> float:
        t = len(group)
        return self.model.layer_ms * (1 + self.model.overhead(t)) * float(rates[list(group)].max()) / t

    def _pipeline(self, stages: List[List[int]], rates: np.ndarray) -> Tuple[Optional[List[int]], float]:
        m, S = self.model, len(stages)
        y = [self._group_y(st, rates) for st in stages]
        per_layer = [(m.state_mb + m.act_mb * (S - j)) / len(st) for j, st in enumerate(stages)]
        free = [m.memory_mb - (m.embed_mb / len(st) if j in (0, S - 1) else 0.0) for j, st in enumerate(stages)]
        fixed = [m.fixed_ms(j, S, float(rates[list(st)].max())) for j, st in enumerate(stages)]
        return layers_ilp(y, per_layer, free, m.layers, self.time_limit, fixed)

    def _stage_times(self, stages: List[List[int]], layers: Sequence[int], rates: np.ndarray) -> float:
        """The slowest stage's per-micro-batch time of ``stages`` holding ``layers`` (fixed parts included)."""
        return max(self._group_y(st, rates) * l + self.model.fixed_ms(j, len(stages), float(rates[list(st)].max()))
                   for j, (st, l) in enumerate(zip(stages, layers)))

    def _evaluate(self, pipelines: List[List[List[int]]], rates: np.ndarray, idle: List[int]) -> Optional[MalleusPlan]:
        layers, o = [], []
        for stages in pipelines:
            ls, oi = self._pipeline(stages, rates)
            if ls is None:
                return None
            layers.append(ls)
            o.append(oi)
        mbs, step = microbatch_ilp(o, [len(p) for p in pipelines], self.model.micro_batches, self.time_limit)
        return MalleusPlan(pipelines, layers, mbs, step, o, idle)

    # ------------------------------------------------------------------ plans
    def oblivious(self, rates) -> MalleusPlan:
        """Uniform plan (consecutive TP groups, even layers and micro-batches) timed at ``rates``."""
        rates = check_rates(rates, self.devices)
        groups = [list(range(g * self.tp, (g + 1) * self.tp)) for g in range(self.devices // self.tp)]
        pipelines = [groups[i * self.pp:(i + 1) * self.pp] for i in range(self.dp)]
        L, B = self.model.layers, self.model.micro_batches
        layers = [[L // self.pp + (1 if j < L % self.pp else 0) for j in range(self.pp)]] * self.dp
        mbs = [B // self.dp + (1 if i < B % self.dp else 0) for i in range(self.dp)]
        o = [self._stage_times(p, ls, rates) for p, ls in zip(pipelines, layers)]
        step = max(oi * (mi + self.pp - 1) for oi, mi in zip(o, mbs))
        return MalleusPlan(pipelines, [list(x) for x in layers], mbs, float(step), o, [])

    def node_groupings(self, node: Sequence[int], rates: np.ndarray) -> List[Tuple[List[List[int]], List[List[int]], List[int]]]:
        """Candidate ``(normal groups, straggler groups, idle)`` of one node, ``q`` = normal group count."""
        order = sorted(node, key=lambda d: (rates[d], d))
        active = [d for d in order if rates[d] < self.suspend]
        idle = [d for d in order if rates[d] >= self.suspend]
        out = []
        for q in range(len(active) // self.tp, -1, -1):
            normal = [active[k * self.tp:(k + 1) * self.tp] for k in range(q)]
            rest, small, size = active[q * self.tp:], [], self.tp // 2
            while rest and size >= 1:
                while len(rest) >= size:
                    small.append(rest[:size])
                    rest = rest[size:]
                size //= 2
            out.append((normal, small, idle + rest))
            if all(rates[d] == rates[active[0]] for d in active) or len(out) >= 3:
                break                                  # a uniform node: the standard grouping only
        return out

    def _layouts(self, normal: List[List[int]], small: List[List[int]]):
        """DFS over pipeline placements of the straggler groups (symmetry-pruned), then balance the rest."""
        dp = self.dp
        count = 0

        def dfs(i, assign, used):
            nonlocal count
            if count >= self.max_layouts:
                return
            if i == len(small):
                count += 1
                yield list(assign)
                return
            for p in range(min(used + 1, dp)):
                assign.append(p)
                yield from dfs(i + 1, assign, max(used, p + 1))
                assign.pop()

        yield from dfs(0, [], 0)

    def _candidates(self, rates: np.ndarray):
        """Every evaluated (grouping, layout) plan for ``rates``."""
        nodes = [list(range(s, min(s + self.node_size, self.devices))) for s in range(0, self.devices, self.node_size)]
        options = [self.node_groupings(n, rates) for n in nodes]
        for choice in itertools.product(*options):
            normal = [g for c in choice for g in c[0]]
            small = [g for c in choice for g in c[1]]
            idle = sorted(d for c in choice for d in c[2])
            if len(normal) + len(small) < self.dp:
                continue
            for placement in self._layouts(normal, small):
                pipes: List[List[List[int]]] = [[] for _ in range(self.dp)]
                for g, p in zip(small, placement):
                    pipes[p].append(g)
                speed = [sum(1.0 / self._group_y(g, rates) for g in p) for p in pipes]
                for g in sorted(normal, key=lambda g: self._group_y(g, rates)):
                    p = int(np.argmin([s if len(pp_) < self.model.layers else np.inf for s, pp_ in zip(speed, pipes)]))
                    pipes[p].append(g)
                    speed[p] += 1.0 / self._group_y(g, rates)
                if any(not p for p in pipes):
                    continue
                # straggler groups first, then the normal groups
                plan = self._evaluate([sorted(p, key=lambda g: -self._group_y(g, rates)) for p in pipes], rates, idle)
                if plan is not None:
                    yield plan

    def step_ms(self, plan: MalleusPlan, rates) -> float:
        """``plan``'s modelled step time at ``rates``, its layers and micro-batches unchanged."""
        rates = check_rates(rates, self.devices)
        return float(max(self._stage_times(p, ls, rates) * (m + len(p) - 1)
                         for p, ls, m in zip(plan.pipelines, plan.layers, plan.micro_batches)))

    def plan(self, rates) -> MalleusPlan:
        """The best straggler-aware plan for ``rates`` (module doc)."""
        rates = check_rates(rates, self.devices)
        best: Optional[MalleusPlan] = None
        for plan in self._candidates(rates):
            if best is None or plan.step_ms < best.step_ms - 1e-9:
                best = plan
        if best is None:
            raise PlanError("Malleus found no feasible plan: the devices left cannot hold the model's layers in "
                            "memory; give more memory, fewer layers or a larger tp")
        return best

    def _kept(self, previous: MalleusPlan, rates: np.ndarray, relayer: bool) -> Optional[MalleusPlan]:
        """``previous``'s pipelines at the new rates: micro-batches re-solved (no state moves), and
        with ``relayer`` the layers per stage too."""
        if relayer:
            return self._evaluate(previous.pipelines, rates, list(previous.idle))
        o = [self._stage_times(p, ls, rates) for p, ls in zip(previous.pipelines, previous.layers)]
        mbs, step = microbatch_ilp(o, [len(p) for p in previous.pipelines], self.model.micro_batches,
                                   self.time_limit)
        return MalleusPlan(previous.pipelines, [list(x) for x in previous.layers], mbs, step, o, list(previous.idle))

    def replan(self, previous: MalleusPlan, rates, *, amortize_steps: Optional[int] = None,
               bandwidth_gbps: float = 8.7) -> MalleusPlan:
        """Plan for new ``rates``; ``migration_mb`` = model-state MB the devices must receive.

        Candidates: every fresh plan, and ``previous``'s layout with re-solved micro-batches (nothing
        moves) or re-solved layers.  Without ``amortize_steps`` the fastest wins (ties: less
        migration); with it, the smallest ``step_ms + max_device_MB / bandwidth / amortize_steps``
        (the migration paid once, spread over the steps until the next change).
        """
        rates = check_rates(rates, self.devices)
        check_real(bandwidth_gbps, "bandwidth_gbps", 0.0, open_low=True, error=PlanError)
        cands = list(self._candidates(rates)) + [c for c in (self._kept(previous, rates, False),
                                                             self._kept(previous, rates, True)) if c is not None]
        if not cands:
            raise PlanError("Malleus found no feasible plan for the new rates")
        best, best_key = None, None
        for plan in cands:
            per_device = migration_by_device(previous, plan, self.model.state_mb)
            plan.migration_mb = float(sum(per_device.values()))
            if amortize_steps is None:
                key = (round(plan.step_ms, 6), plan.migration_mb)
            else:
                worst = max(per_device.values(), default=0.0)
                key = (plan.step_ms + worst / bandwidth_gbps * 1000.0 / 1024.0 / check_int(
                    amortize_steps, "amortize_steps", 1, error=PlanError), plan.migration_mb)
            if best_key is None or key < best_key:
                best, best_key = plan, key
        return best


def hybrid_layouts(model: MalleusModel, devices: int, node_size: Optional[int] = None) -> List[Tuple[int, int]]:
    """Every ``(tp, pp)`` a :class:`MalleusPlanner` accepts for ``devices`` (``tp`` dividing the node)."""
    node = devices if node_size is None else node_size
    return [(tp, pp) for tp in range(1, devices + 1) for pp in range(1, model.layers + 1)
            if devices % (tp * pp) == 0 and node % tp == 0]


def plan_any_layout(model: MalleusModel, devices: int, rates, *, layouts: Optional[Sequence[Tuple[int, int]]] = None,
                    node_size: Optional[int] = None, **kwargs) -> Tuple[MalleusPlan, Tuple[int, int]]:
    """Malleus re-planning the whole hybrid plan: the best :meth:`MalleusPlanner.plan` over every
    ``(tp, pp)`` layout (default :func:`hybrid_layouts`) for ``rates``, and that layout.  With uniform
    rates it is the straggler-oblivious planner's own choice.

    >>> plan, layout = plan_any_layout(MalleusModel(layers=4, micro_batches=8), 2, [1.0, 1.0])
    >>> layout, plan.micro_batches                     # two data-parallel replicas: no bubble, no TP cost
    ((1, 1), [4, 4])
    """
    rates = check_rates(rates, devices)
    best: Optional[Tuple[MalleusPlan, Tuple[int, int]]] = None
    for tp, pp in (hybrid_layouts(model, devices, node_size) if layouts is None else layouts):
        planner = MalleusPlanner(model, devices, tp, pp, node_size=node_size or devices, **kwargs)
        try:
            plan = planner.plan(rates)
        except PlanError:
            continue
        if best is None or plan.step_ms < best[0].step_ms - 1e-9:
            best = (plan, (tp, pp))
    if best is None:
        raise PlanError(f"Malleus found no feasible plan for {devices} devices in any layout: give more memory "
                        f"or fewer layers")
    return best


def _shards(plan: MalleusPlan) -> Dict[int, Dict[int, Tuple[float, float]]]:
    """device -> layer -> [lo, hi) fraction of that layer's states it holds."""
    out: Dict[int, Dict[int, Tuple[float, float]]] = {}
    for stages, ls in zip(plan.pipelines, plan.layers):
        first = 0
        for st, l in zip(stages, ls):
            t = len(st)
            for k, d in enumerate(st):
                mine = out.setdefault(int(d), {})
                for layer in range(first, first + l):
                    mine[layer] = (k / t, (k + 1) / t)
            first += l
    return out


def migration_by_device(old: MalleusPlan, new: MalleusPlan, state_mb: float) -> Dict[int, float]:
    """MB each device receives: the parts of its new layer shards it did not hold before."""
    before, after = _shards(old), _shards(new)
    out: Dict[int, float] = {}
    for d, layers in after.items():
        held = before.get(d, {})
        total = 0.0
        for layer, (lo, hi) in layers.items():
            plo, phi = held.get(layer, (0.0, 0.0))
            total += (hi - lo - max(0.0, min(hi, phi) - max(lo, plo))) * state_mb
        out[d] = total
    return out


def migration_mb(old: MalleusPlan, new: MalleusPlan, state_mb: float) -> float:
    """Σ over devices and layers of the part of the new shard the device did not hold before."""
    return float(sum(migration_by_device(old, new, state_mb).values()))
