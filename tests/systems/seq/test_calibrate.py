"""Cost-model calibration on this machine: fitted coefficients, profiler activations, usable by a planner."""
import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.runtime import profile_model
from sgl.systems.seq import FlexSPPlanner
from sgl.systems.seq.calibrate import calibrate_cost_model


def test_calibration_fits_and_plugs_into_a_planner():
    model, report = calibrate_cost_model("tiny", lengths=(32, 96, 384), repeats=2, devices=2, memory_gb=1.0)
    assert min(report["alpha1"], report["alpha2"], report["beta"]) >= 0
    assert report["measured_ms"][-1] > report["measured_ms"][0]             # 12x the tokens costs more
    assert np.all(np.diff(report["fitted_ms"]) > 0)
    prof = profile_model("tiny", batch_size=1, repeats=1, max_tp=1)
    assert report["act_mb_per_token"] == pytest.approx(prof.act_mb[1] / 32 * 4)   # tiny: seq 32, 4 layers
    planner = FlexSPPlanner(model.sp_pool(), devices=2)
    batch = np.array([300, 200, 120, 60])
    plan = planner.plan(batch)
    plan.validate(batch, 2)
    assert plan.time == pytest.approx(max(g.time for g in plan.phases[0]))
    with pytest.raises(PlanError, match="two sequence lengths"):
        calibrate_cost_model("tiny", lengths=(64,))
