"""The fitted cost model, the scaled batches and the measured-run bookkeeping (the spawn run is slow-only)."""
import os
from pathlib import Path

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.seq import SeqStrategy
from sgl.systems.seq.exec_plan import as_exec_plan
from sgl.systems.seq.fitted_cost import FittedCostModel, fit_strategy
from sgl.systems.seq.measure import (MeasuredRow, MeasureResult, MeasureSetup, measure_planners, plan_steps,
                                     scaled_batches)

FITS = {("ulysses", 1): (4e-4, 0.3, 20.0, 5.0), ("ulysses", 2): (2e-4, 0.17, 60.0, 5.0),
        ("ring", 2): (9e-4, 0.2, 40.0, 7.0)}


def test_fit_recovers_exact_coefficients():
    a, b, c, o = 3e-4, 0.25, 12.0, 4.0
    mbs = [[[64]], [[256]], [[512]], [[1024]], [[32] * 16], [[64], [64], [64]], [[256], [256]]]
    samples = [(m, o + sum(c + sum(a * s * s + b * s for s in mb) for mb in m)) for m in mbs]
    assert fit_strategy(samples) == pytest.approx((a, b, c, o), rel=1e-6)
    with pytest.raises(PlanError, match="at least 4"):
        fit_strategy(samples[:3])


def test_fitted_model_pools_and_capacity():
    model = FittedCostModel(FITS, budget=1024, devices=2)
    assert [(p.label, p.capacity) for p in model.sp_pool()] == [("tp1-pp1-sp1-z3", 1024), ("tp1-pp1-sp2-z3", 2048)]
    assert [p.label for p in model.cp_pool()] == ["tp1-pp1-sp1-z3", "tp1-pp1-cp2-z3"]
    assert model.strategy_cost(SeqStrategy(cp=2)).a == FITS[("ring", 2)][0]
    assert model.capacity(SeqStrategy(tp=2)) == 0 and model.capacity(SeqStrategy(sp=2, ckpt=True)) == 0
    assert model.step_ms == pytest.approx(17 / 3)
    with pytest.raises(PlanError, match="at least one"):
        FittedCostModel({}, 1024, 2)


def test_scaled_batches_cap_and_scale():
    rng = np.random.default_rng(0)
    raw = np.r_[rng.integers(1, 3000, 400), [60000, 100000, 40000]]
    setup = MeasureSetup(steps=2)
    batches = scaled_batches(raw, setup)
    assert len(batches) == 2
    assert all(b.min() >= 2 and b.max() <= setup.max_length for b in batches)
    assert all(np.array_equal(x, y) for x, y in zip(batches, scaled_batches(raw, setup)))     # seeded
    with pytest.raises(PlanError, match="exceeds what all 2 devices hold"):
        MeasureSetup(max_length=4096, budget=1024)
    with pytest.raises(PlanError, match="power of two"):
        MeasureSetup(devices=3)
    with pytest.raises(PlanError, match="arch must be 'tiny' or 'hf-llama'"):
        MeasureSetup(arch="hf-mixtral")


def test_planners_plan_executable_steps_on_the_fitted_model():
    setup = MeasureSetup(steps=2)
    model = FittedCostModel(FITS, setup.budget, setup.devices)
    batches = [np.array([1800, 700, 300, 120, 90, 60, 40, 30] * 2), np.array([900, 500, 200, 100, 50] * 3)]
    plans, statics = plan_steps(model, batches, setup)
    assert set(plans) == {"flexsp", "hydraulis", "mesh", "switch"}
    assert set(statics) == {"tp1-pp1-sp2-z3", "tp1-pp1-cp2-z3"}          # sp1 cannot hold max_length
    best_static = min(sum(p.time for p in v) for v in statics.values())
    for name, per_step in plans.items():
        for b, plan in zip(batches, per_step):
            ep = as_exec_plan(plan.to_dict(), setup.devices)
            assert ep.sequence_ids() == list(range(b.size)), name
        assert sum(p.time for p in per_step) <= best_static * 1.0001, name
    # FlexSP uses DP (sp1) replicas for short sequences when the fit says they are cheaper
    assert any(g.cost.strategy.sp == 1 for p in plans["flexsp"] for ph in p.phases for g in ph)
    with pytest.raises(PlanError, match="unknown planner"):
        plan_steps(model, batches, setup, ["galvatron"])


def test_result_ratios_and_median_error():
    rows = {"flexsp": MeasuredRow("flexsp", [100.0, 100.0], [110.0, 90.0])}
    statics = {"sp2": MeasuredRow("sp2", [150.0, 130.0], [120.0, 120.0]),
               "cp2": MeasuredRow("cp2", [300.0, 300.0], [200.0, 200.0])}
    res = MeasureResult(MeasureSetup(), rows, statics, [], 0.0, [])
    assert res.best_static().name == "sp2"
    assert res.ratio("flexsp") == pytest.approx(1.4)
    assert res.modelled_ratio("flexsp") == pytest.approx(240 / 200)
    assert sorted(res.errors()) == pytest.approx([10 / 130, 0.1, 0.1, 0.2, 1 / 3, 1 / 3])
    assert res.median_error == pytest.approx((0.1 + 0.2) / 2)


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="spawns 2 processes twice: set SGL_SLOW_TESTS=1")
@pytest.mark.parametrize("arch", ["tiny", "hf-llama"])
def test_measure_planners_end_to_end(arch):
    root = os.environ.get("SGL_TEST_DATA")
    path = Path(root or "") / "seqlen" / "wikipedia.txt"
    lengths = np.loadtxt(path, dtype=np.int64, max_rows=20000) if root and path.exists() else \
        np.random.default_rng(0).integers(1, 20000, 5000)
    setup = MeasureSetup(steps=1, repeats=1, max_length=128, budget=64, tokens_per_step=512, arch=arch)
    res = measure_planners(lengths, setup, timeout=300)
    assert set(res.planners) == {"flexsp", "hydraulis", "mesh", "switch"}
    assert all(m > 0 for r in res.planners.values() for m in r.measured_ms)
    assert res.median_error >= 0 and res.ratio("flexsp") > 0


def test_budgeted_model_keeps_times_and_sets_capacity():
    from sgl.systems.seq import flexsp_cost_model
    from sgl.systems.seq.fitted_cost import BudgetedCostModel

    base = flexsp_cost_model(2, 80)
    model = BudgetedCostModel(base, budget=300, step_ms=2.0)
    sp2 = model.strategy_cost(SeqStrategy(sp=2))
    assert (sp2.a, sp2.b, sp2.c) == pytest.approx(tuple(getattr(base.strategy_cost(SeqStrategy(sp=2)), x)
                                                         for x in "abc"))
    assert sp2.capacity == 600 and model.capacity(SeqStrategy(tp=2)) == 0
    assert [r["degree"] for r in model.table()] == [1, 2, 2]
