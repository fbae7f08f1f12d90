"""A sequence cost model fitted on this machine by timing the executor itself, one fit per strategy.

:func:`fit_strategy` fits FlexSP's per-micro-batch form to measured steps of
:class:`~sgl.systems.seq.executor.VarlenStepExecutor` by non-negative least squares,

.. math:: T_{\\text{step}} = o + \\sum_{\\text{micro-batch } m} \\Bigl[c + \\sum_{i \\in m} (a s_i^2 + b s_i)\\Bigr],

where ``o`` is the per-step constant (gradient all-reduce, barrier).  :class:`FittedCostModel` is a
:class:`~sgl.systems.seq.cost.SeqCostModel` whose :meth:`strategy_cost` returns the fitted
``(a, b, c)`` for the strategies the executor runs (Ulysses SP / ring CP / DP, ``tp = pp = 1``, no
checkpointing) and a token capacity of ``budget × degree`` (the per-device token budget stands in
for memory), so every planner (FlexSP, Hydraulis, the dynamic mesh, switching) plans for the
machine that runs the plans; strategies without a fit get no capacity and leave the pools.
:class:`BudgetedCostModel` puts the same token budget on any other cost model (e.g. the one of a
saved :class:`~sgl.systems.seq.profile.MachineProfile`), keeping its times.

>>> fits = {("ulysses", 1): (1e-6, 1e-3, 0.5, 2.0), ("ulysses", 2): (5e-7, 8e-4, 1.0, 2.5)}
>>> model = FittedCostModel(fits, budget=1024, devices=2)
>>> [(p.label, p.capacity) for p in model.sp_pool()]
[('tp1-pp1-sp1-z3', 1024), ('tp1-pp1-sp2-z3', 2048)]
>>> model.cp_pool()[1:]
[]
>>> round(model.step_ms, 2)
2.25
>>> a, b, c, o = fit_strategy([([[100]], 1.3), ([[200]], 1.8), ([[50], [50]], 2.0), ([[400]], 3.0)])
>>> a >= 0 and b >= 0 and c >= 0 and o >= 0
True
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.seq.cost import SeqCostModel, SeqHardware, SeqModelSpec, SeqStrategy, StrategyCost

__all__ = ["FittedCostModel", "BudgetedCostModel", "fit_strategy", "strategy_key", "executed_step_ms"]


def strategy_key(strategy: SeqStrategy) -> Tuple[str, int]:
    """``("ring", cp)`` or ``("ulysses", sp)`` (``sp = 1``: plain data parallelism)."""
    return ("ring", strategy.cp) if strategy.cp > 1 else ("ulysses", strategy.sp)


def fit_strategy(samples: Sequence[Tuple[Sequence[Sequence[int]], float]]) -> Tuple[float, float, float, float]:
    """``(a, b, c, o)`` in ms from ``[(micro-batches as lists of lengths, measured step ms)]`` (module doc)."""
    if len(samples) < 4:
        raise PlanError(f"fitting a, b, c, o needs at least 4 timed steps, got {len(samples)}")
    rows, y = [], []
    for mbs, ms in samples:
        s = np.concatenate([np.asarray(mb, dtype=np.float64) for mb in mbs])
        rows.append([float((s * s).sum()), float(s.sum()), float(len(mbs)), 1.0])
        y.append(float(ms))
    from scipy.optimize import nnls

    design, y = np.asarray(rows), np.asarray(y)
    scale = np.maximum(design.max(axis=0), 1e-12)
    weight = 1.0 / np.maximum(y, 1e-9)[:, None]          # relative error: short steps count as much as long ones
    coef, _ = nnls(design / scale * weight, y * weight[:, 0])
    return tuple(float(v) for v in coef / scale)


def executed_step_ms(plan, model: SeqCostModel, step_ms: float = 0.0) -> float:
    """Predicted ms of the executor running ``plan``: each group (re-costed with ``model``) starts when
    all its ranks are free (its first collective waits for them), ranks follow their own groups
    with no barrier between phases, and the step ends with the slowest rank plus ``step_ms``.

    >>> import numpy as np
    >>> from sgl.systems.seq.plan import GroupWork, StepPlan
    >>> model = FittedCostModel({("ulysses", 1): (0, 1.0, 0, 0), ("ulysses", 2): (0, 0.5, 0, 0)}, 100, 2)
    >>> dp, sp = (model.strategy_cost(SeqStrategy(sp=d)) for d in (1, 2))
    >>> lengths = np.array([10, 1, 1, 10])
    >>> plan = StepPlan("x", [[GroupWork(dp, [[0]], lengths), GroupWork(dp, [[1]], lengths)],
    ...                       [GroupWork(dp, [[2]], lengths), GroupWork(dp, [[3]], lengths)]])
    >>> executed_step_ms(plan, model), plan.time       # no barrier: 11 ms, not 10 + 10
    (11.0, 20.0)
    """
    clock = np.zeros(model.devices)
    for phase in plan.phases:
        start = 0
        for g in phase:
            cost = model.strategy_cost(g.cost.strategy)
            t = cost.replica_time([g.lengths[mb] for mb in g.micro_batches])
            ranks = slice(start, start + g.devices)
            clock[ranks] = clock[ranks].max() + t
            start += g.devices
    return float(clock.max(initial=0.0) + step_ms)


class FittedCostModel(SeqCostModel):
    """A :class:`SeqCostModel` answering with measured fits (module doc).

    ``fits`` maps ``(strategy, degree)`` (``"ulysses"`` / ``"ring"``) to ``(a, b, c, o)`` ms;
    ``step_ms`` is the mean per-step constant ``o``, which the plans' modelled times leave out.
    """

    def __init__(self, fits: Dict[Tuple[str, int], Sequence[float]], budget: int, devices: int) -> None:
        super().__init__(SeqModelSpec(), SeqHardware(), devices)
        if not fits:
            raise PlanError("FittedCostModel needs at least one fitted strategy")
        self.fits = {k: tuple(float(x) for x in v) for k, v in fits.items()}
        self.budget = check_int(budget, "budget", 1, error=PlanError)
        self.step_ms = float(np.mean([v[3] for v in self.fits.values()]))

    def capacity(self, strategy: SeqStrategy) -> int:
        if strategy.tp != 1 or strategy.pp != 1 or strategy.ckpt or strategy_key(strategy) not in self.fits:
            return 0
        return self.budget * strategy.sp * strategy.cp

    def strategy_cost(self, strategy: SeqStrategy) -> StrategyCost:
        if strategy.devices > self.devices:
            raise PlanError(f"strategy {strategy.label} needs {strategy.devices} devices, the cluster has {self.devices}")
        a, b, c, _ = self.fits.get(strategy_key(strategy), (1.0, 1.0, 1.0, 0.0))
        return StrategyCost(strategy, a, b, c, self.capacity(strategy))

    def table(self) -> List[dict]:
        """The fits as rows (for printing)."""
        return [{"strategy": k[0], "degree": k[1], "a": v[0], "b": v[1], "c": v[2], "o": v[3]}
                for k, v in sorted(self.fits.items())]


class BudgetedCostModel(SeqCostModel):
    """``base``'s times with :class:`FittedCostModel`'s capacities (``budget × degree`` for SP / CP / DP,
    none for tp, pp or checkpointing); ``step_ms`` is the per-step constant the plans leave out.

    >>> from sgl.systems.seq import flexsp_cost_model
    >>> model = BudgetedCostModel(flexsp_cost_model(2, 80), budget=512, step_ms=3.0)
    >>> [(p.label, p.capacity) for p in model.cp_pool()]
    [('tp1-pp1-sp1-z3', 512), ('tp1-pp1-cp2-z3', 1024)]
    """

    def __init__(self, base: SeqCostModel, budget: int, step_ms: float = 0.0) -> None:
        super().__init__(base.model, base.hardware, base.devices)
        self.base = base
        self.budget = check_int(budget, "budget", 1, error=PlanError)
        self.step_ms = float(step_ms)

    def capacity(self, strategy: SeqStrategy) -> int:
        if strategy.tp != 1 or strategy.pp != 1 or strategy.ckpt:
            return 0
        return self.budget * strategy.sp * strategy.cp

    def strategy_cost(self, strategy: SeqStrategy) -> StrategyCost:
        cost = self.base.strategy_cost(strategy)
        return StrategyCost(strategy, cost.a, cost.b, cost.c, self.capacity(strategy))

    def table(self) -> List[dict]:
        out = []
        for key in (("ulysses", 1), ("ulysses", 2), ("ring", 2)):
            s = SeqStrategy(cp=key[1]) if key[0] == "ring" else SeqStrategy(sp=key[1])
            if s.devices <= self.devices:
                c = self.strategy_cost(s)
                out.append({"strategy": key[0], "degree": key[1], "a": c.a, "b": c.b, "c": c.c, "o": self.step_ms})
        return out
