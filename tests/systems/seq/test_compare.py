"""compare(): the static baseline holds the run's max length; ratios; bad input."""
import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.seq.compare import best_static, compare, static_pool
from sgl.systems.seq.cost import flexsp_cost_model


def test_static_baseline_must_hold_the_max_length():
    steps = [np.full(40, 3000), np.full(30, 4000)]
    free = compare("switch", steps, devices=16)                       # static only needs 4000 tokens
    held = compare("switch", steps, devices=16, max_length=200_000)  # a run configured for 200K
    pool = {p.label: p for p in static_pool(flexsp_cost_model(16, 80))}
    assert pool[held.static_label].capacity >= 200_000 and pool[free.static_label].capacity >= 4000
    assert sum(held.static_ms) > sum(free.static_ms)                  # holding 200K costs the static plan
    assert held.planned_ms == pytest.approx(free.planned_ms)          # the per-step planner does not care
    assert held.ratio > free.ratio >= 0.999
    cost, times = best_static(static_pool(flexsp_cost_model(16, 80)), steps, 16, 4000)
    assert sum(times) == pytest.approx(sum(free.static_ms)) and cost.label == free.static_label
    assert held.to_dict()["ratio"] == round(held.ratio, 4)


def test_compare_bad_input():
    with pytest.raises(PlanError, match="method"):
        compare("megatron", [np.array([100])], devices=8)
    with pytest.raises(PlanError, match="no steps"):
        compare("flexsp", [], devices=8)
    with pytest.raises(PlanError, match="longest supported length"):
        compare("flexsp", [np.array([100])], devices=8, max_length=10**8)
