"""Measured, not modelled: FlexSP, Hydraulis, the dynamic mesh and switching executed against static strategies.

:func:`measure_planners` runs in four stages:

1. **lengths** -- global batches sampled from a real length sample (FlexSP's Wikipedia lengths)
   in its own units with FlexSP's cap ``source_max`` (longer sequences are dropped), then scaled by
   ``max_length / source_max`` so the longest possible sequence fits this machine;
2. **calibration** -- ``devices`` processes (:func:`sgl.comm.spawn`, gloo) time the executor on
   single-micro-batch and multi-micro-batch steps of every strategy it can run (DP, Ulysses SP and
   ring CP of every power-of-two degree), and :func:`~sgl.systems.seq.fitted_cost.fit_strategy`
   fits each; the planners get the resulting
   :class:`~sgl.systems.seq.fitted_cost.FittedCostModel`, whose per-device token budget
   ``budget`` makes sequences longer than it need SP;
3. **planning** -- FlexSP, Hydraulis, the dynamic mesh and per-step switching plan every step, and
   every static candidate (one strategy for the whole run that holds ``max_length``) gets its
   homogeneous plan (FlexSP's packing, as :func:`~sgl.systems.seq.compare.best_static`);
4. **execution** -- the same processes run every plan of every step ``repeats`` times
   (interleaved, so load from other programs spreads over all of them; the fastest repeat counts)
   with :class:`~sgl.systems.seq.executor.VarlenStepExecutor` on ``setup.arch``: TinyLM (``"tiny"``) or
   Hugging Face ``LlamaForCausalLM`` (``"hf-llama"``) with the shapes of preset ``setup.model``.

The calibration steps are run again among the plans in stage 4 and fitted again (the *same-window*
re-calibration: on a shared machine the load during stage 2 is not the load during stage 4).  The
result holds, per planner, measured and modelled ms per step, the best *measured* static strategy,
both ratios, and for every executed plan the measured time against two predictions
(:func:`~sgl.systems.seq.fitted_cost.executed_step_ms`: the plan's groups re-costed, ranks
synchronised only by their groups, plus the per-step constant): from the planning calibration and
from the same-window one.

>>> import numpy as np
>>> batches = scaled_batches(np.array([100, 4000, 300, 65536, 70000] * 20), MeasureSetup(steps=2))
>>> len(batches), int(max(b.max() for b in batches)) <= MeasureSetup().max_length
(2, True)
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.seq.lengths import GlobalBatchSampler, check_lengths

__all__ = ["MeasureSetup", "MeasuredRow", "MeasureResult", "measure_planners", "scaled_batches", "PLANNERS"]

PLANNERS = ("flexsp", "hydraulis", "mesh", "switch")


@dataclass(frozen=True)
class MeasureSetup:
    """Sizes of a measured run (defaults: 2 processes, about a minute and a half on 2 loaded cores)."""

    devices: int = 2
    steps: int = 3
    max_length: int = 2048           # the scaled longest sequence (tokens)
    source_max: int = 65536          # FlexSP's cap in the sample's own units
    budget: int = 1024               # tokens per device in one micro-batch (the memory stand-in)
    tokens_per_step: int = 6144      # scaled tokens per global batch
    model: str = "tiny"
    repeats: int = 2
    arch: str = "tiny"               # the executor's model: "tiny" (TinyLM) or "hf-llama" (LlamaForCausalLM)
    seed: int = 0
    time_limit: float = 0.2          # MILP seconds per micro-batch

    def __post_init__(self) -> None:
        for name in ("devices", "steps", "max_length", "source_max", "budget", "tokens_per_step", "repeats"):
            check_int(getattr(self, name), f"MeasureSetup.{name}", 1, error=PlanError)
        if self.arch not in ("tiny", "hf-llama"):
            raise PlanError(f"MeasureSetup.arch must be 'tiny' or 'hf-llama', got {self.arch!r}")
        if self.devices & (self.devices - 1):
            raise PlanError(f"MeasureSetup.devices must be a power of two, got {self.devices}")
        if self.max_length > self.budget * self.devices:
            raise PlanError(f"max_length {self.max_length} exceeds what all {self.devices} devices hold "
                            f"({self.budget} tokens each): raise budget or lower max_length")

    @property
    def scale(self) -> float:
        return self.max_length / self.source_max


@dataclass
class MeasuredRow:
    """One planner (or static strategy) over the run: per-step measured and predicted ms."""

    name: str
    measured_ms: List[float]
    predicted_ms: List[float]
    labels: List[str] = field(default_factory=list)
    window_ms: List[float] = field(default_factory=list)     # predicted by the same-window re-calibration

    @property
    def total(self) -> float:
        return float(sum(self.measured_ms))

    @property
    def predicted_total(self) -> float:
        return float(sum(self.predicted_ms))


@dataclass
class MeasureResult:
    """Rows of the planners and static candidates, the fits and the median prediction error."""

    setup: MeasureSetup
    planners: Dict[str, MeasuredRow]
    statics: Dict[str, MeasuredRow]
    fits: List[dict]
    step_ms: float
    lengths: List[List[int]]
    window_fits: List[dict] = field(default_factory=list)

    def best_static(self, measured: bool = True) -> MeasuredRow:
        key = (lambda r: r.total) if measured else (lambda r: r.predicted_total)
        return min(self.statics.values(), key=key)

    def ratio(self, name: str) -> float:
        """Best measured static ms / the planner's measured ms."""
        return self.best_static().total / self.planners[name].total

    def modelled_ratio(self, name: str) -> float:
        """Best modelled static / the planner's modelled ms (the cost model's view)."""
        return self.best_static(False).predicted_total / self.planners[name].predicted_total

    def errors(self, window: bool = False) -> List[float]:
        """``|pred - meas| / meas`` of every executed plan (``window``: the same-window re-calibration's)."""
        rows = list(self.planners.values()) + list(self.statics.values())
        return [abs(p - m) / m for r in rows for p, m in zip(r.window_ms if window else r.predicted_ms,
                                                               r.measured_ms)]

    @property
    def median_error(self) -> float:
        return float(statistics.median(self.errors()))

    @property
    def median_error_window(self) -> float:
        errors = self.errors(window=True)
        return float(statistics.median(errors)) if errors else float("nan")


def scaled_batches(lengths, setup: MeasureSetup) -> List[np.ndarray]:
    """``setup.steps`` global batches of the sample, capped at ``source_max`` and scaled (module doc)."""
    lengths = check_lengths(lengths)
    sampler = GlobalBatchSampler(lengths, tokens_per_step=int(setup.tokens_per_step / setup.scale),
                                 seed=setup.seed, max_length=setup.source_max)
    return [np.maximum(2, np.round(b * setup.scale)).astype(np.int64) for b in sampler.batches(setup.steps)]


def _candidates(setup: MeasureSetup, heads: int) -> List[Tuple[str, int]]:
    out, d = [("ulysses", 1)], 2
    while d <= setup.devices:
        if heads % d == 0:
            out.append(("ulysses", d))
        out.append(("ring", d))
        d *= 2
    return out


def _calibration_steps(setup: MeasureSetup, degree: int) -> List[List[List[int]]]:
    """Micro-batch length lists for one group of ``degree`` ranks (short, long, packed, several)."""
    cap = setup.budget * degree
    mixed = [max(2, int(s * cap / 2048)) for s in (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)]   # ~cap/1.4
    return [[[64]], [[cap // 8]], [[cap // 4]], [[cap // 2]], [[cap * 3 // 4]], [[cap]], [[32] * (cap // 64)],
            [[64], [64], [64]], [[cap // 4], [cap // 4]], [mixed], [mixed[::2], mixed[1::2]]]


def _docs(lengths: Sequence[int], seed: int, vocab: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (int(n),), generator=g) for n in lengths]


def _group_plan(strategy: str, degree: int, devices: int, mbs: List[List[int]]):
    """Every replica of ``degree`` ranks runs the same micro-batches (all cores busy, as in a real step)."""
    groups, seqs = [], []
    for _ in range(devices // degree):
        ids = []
        for mb in mbs:
            ids.append(list(range(len(seqs), len(seqs) + len(mb))))
            seqs += mb
        groups.append({"strategy": strategy, "degree": degree, "sequence_ids": ids})
    return {"devices": devices, "phases": [groups]}, seqs


def _new_executor(setup: MeasureSetup):
    import torch

    from sgl.systems.parallel import get_model_config
    from sgl.systems.seq.executor import VarlenStepExecutor, build_varlen_model

    torch.set_num_threads(1)
    model = build_varlen_model(setup.arch, setup.model, setup.seed)
    return VarlenStepExecutor(model, arch=setup.arch), get_model_config(setup.model).vocab_size


def _calibrate_worker(rank: int, world: int, setup: MeasureSetup, candidates):
    ex, vocab = _new_executor(setup)
    per_key = [[(key, mbs) for mbs in _calibration_steps(setup, key[1])] for key in candidates]
    jobs = [job for group in zip(*per_key) for job in group]            # strategies interleaved
    best: Dict[int, float] = {}
    for r in range(setup.repeats + 2):                      # repeat 0 warms up; one more repeat than plans get
        for j, ((strategy, degree), mbs) in enumerate(jobs):
            plan, seqs = _group_plan(strategy, degree, world, mbs)
            ms = ex.step(plan, _docs(seqs, j, vocab)).seconds * 1e3
            if r:
                best[j] = min(best.get(j, np.inf), ms)
    return [(key, mbs, best[j]) for j, (key, mbs) in enumerate(jobs)]


def _execute_worker(rank: int, world: int, setup: MeasureSetup, jobs):
    ex, vocab = _new_executor(setup)
    best: Dict[int, float] = {}
    for r in range(setup.repeats + 1):
        for j, (seed, plan, lengths) in enumerate(jobs):
            if r == 0 and j > 0:
                break                                      # one warm-up step
            ms = ex.step(plan, _docs(lengths, seed, vocab)).seconds * 1e3
            if r:
                best[j] = min(best.get(j, np.inf), ms)
    return [best[j] for j in range(len(jobs))]


def plan_steps(model, batches: Sequence[np.ndarray], setup: MeasureSetup,
               planners: Sequence[str] = PLANNERS) -> Tuple[Dict[str, list], Dict[str, list]]:
    """``(planner plans, static plans)``: per name, one :class:`StepPlan` per step, on the fitted ``model``."""
    from sgl.systems.seq.flexsp import FlexSPPlanner
    from sgl.systems.seq.hydraulis import HydraulisPlanner
    from sgl.systems.seq.mesh import DynamicMeshPlanner
    from sgl.systems.seq.switching import SwitchingPlanner, switch_pool

    n = setup.devices
    pool = switch_pool(model, tps=(1,), ckpt=(False,))
    statics = {c.label: [FlexSPPlanner([c], n).homogeneous(b, c.devices, "lpt") for b in batches]
               for c in pool if c.capacity >= setup.max_length}
    if not statics:
        raise PlanError(f"no static strategy holds {setup.max_length} tokens: raise budget or devices")
    best = min(statics, key=lambda k: sum(p.time for p in statics[k]))
    fallback = next(c for c in pool if c.label == best)
    out: Dict[str, list] = {}
    for name in planners:
        if name == "flexsp":
            planner = FlexSPPlanner(model.sp_pool(), n, time_limit=setup.time_limit, bound_gap=0.01)
            out[name] = [planner.plan(b) for b in batches]
        elif name == "hydraulis":
            planner = HydraulisPlanner(model.sp_pool(), n, time_limit=min(setup.time_limit, 0.02))
            planner.build_replicas(np.concatenate(batches), max(1, int(np.mean([b.size for b in batches]))))
            out[name] = [planner.plan(b) for b in batches]
        elif name == "mesh":
            planner = DynamicMeshPlanner(model, n, max_length=setup.max_length, time_limit=setup.time_limit,
                                         groups="best", regroup_ms=0.0, comm_init_ms=0.0, fallback=fallback)
            out[name] = [planner.plan(b) for b in batches]
        elif name == "switch":
            out[name] = SwitchingPlanner(model, n, pool=pool, regroup_ms=0.0).plan(batches).plans
        else:
            raise PlanError(f"unknown planner {name!r}; choose from {list(PLANNERS)}")
    for name, plans in list(out.items()) + list(statics.items()):
        for b, p in zip(batches, plans):
            p.validate(b, n)
    return out, statics


def measure_planners(lengths, setup: MeasureSetup = MeasureSetup(), planners: Sequence[str] = PLANNERS,
                     timeout: float = 900.0, profile=None) -> MeasureResult:
    """Calibrate, plan, execute and compare (module doc); ``lengths`` is the raw length sample.

    ``profile``: a :class:`~sgl.systems.seq.profile.MachineProfile` to plan with
    instead of stage 2's fits (its cost model under the same token budget, its gradient all-reduce
    as the per-step constant; the step here runs no optimiser).
    """
    from sgl import comm
    from sgl.systems.parallel import get_model_config
    from sgl.systems.seq.fitted_cost import BudgetedCostModel, FittedCostModel, executed_step_ms, fit_strategy

    batches = scaled_batches(lengths, setup)
    cfg = get_model_config(setup.model)
    if profile is not None:     # a MachineProfile (MachineProfile.load(path)); duck-typed: profile imports us
        # the executor's own per-strategy fits when the profile has them, else its component model
        model = profile.fitted_cost_model(setup.devices, setup.budget) or BudgetedCostModel(
            profile.seq_cost_model(setup.devices), setup.budget, profile.gradient_sync_ms(setup.devices))
    else:
        candidates = _candidates(setup, cfg.num_heads)
        timed = comm.spawn(_calibrate_worker, setup.devices, setup, candidates, timeout=timeout)[0]
        fits = {key: fit_strategy([(mbs, ms) for k, mbs, ms in timed if k == key]) for key in candidates}
        model = FittedCostModel(fits, setup.budget, setup.devices)
    plans, statics = plan_steps(model, batches, setup, planners)
    # the plans, step-major (planners interleaved), with the calibration steps spread among them: the
    # same-window re-calibration sees the load the plans saw
    jobs, owners = [], []
    for name, per_step in list(plans.items()) + list(statics.items()):
        for step, plan in enumerate(per_step):
            jobs.append((1000 + step, plan.to_dict(), batches[step].tolist()))
            owners.append((name, step, plan))
    cal = []
    for key in _candidates(setup, cfg.num_heads):
        for mbs in _calibration_steps(setup, key[1]):
            plan, seqs = _group_plan(key[0], key[1], setup.devices, mbs)
            cal.append((key, mbs, (len(cal), plan, seqs)))
    step_major = sorted(range(len(jobs)), key=lambda j: (jobs[j][0], j))
    order = sorted([(i / len(jobs), 0, j) for i, j in enumerate(step_major)] +
                   [((k + 0.5) / len(cal), 1, k) for k in range(len(cal))])
    all_jobs = [jobs[j] if kind == 0 else cal[j][2] for _, kind, j in order]
    times = comm.spawn(_execute_worker, setup.devices, setup, all_jobs, timeout=timeout)[0]
    measured = {(kind, j): t for (_, kind, j), t in zip(order, times)}
    window_fits = {}
    for key in {c[0] for c in cal}:
        window_fits[key] = fit_strategy([(mbs, measured[(1, k)]) for k, (ck, mbs, _) in enumerate(cal) if ck == key])
    window = FittedCostModel(window_fits, setup.budget, setup.devices)
    rows: Dict[str, MeasuredRow] = {}
    for j, (name, step, plan) in enumerate(owners):
        row = rows.setdefault(name, MeasuredRow(name, [], []))
        row.measured_ms.append(measured[(0, j)])
        row.predicted_ms.append(executed_step_ms(plan, model, model.step_ms))
        row.window_ms.append(executed_step_ms(plan, window, window.step_ms))
        row.labels.append(_label(plan))
    return MeasureResult(setup, {k: rows[k] for k in plans}, {k: rows[k] for k in statics}, model.table(),
                         model.step_ms, [b.tolist() for b in batches], window.table())


def _label(plan) -> str:
    counts = plan.groups_summary()
    return ", ".join(f"{k.replace('tp1-pp1-', '').replace('-z3', '')}×{v}" for k, v in sorted(counts.items()))
