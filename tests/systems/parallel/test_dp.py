import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.parallel import (ClusterSpec, CostModel, best_time_by_budget, brute_force_layers,
                                  enumerate_strategies, load_builtin_profiles, solve_layers)


def _random_case(rng, layers, strategies, classes):
    intra = rng.random((layers, strategies))
    mem = rng.integers(0, 6, (layers, strategies))
    cls = rng.integers(0, classes, strategies)
    cls[:classes] = np.arange(classes)
    inter = rng.random((classes, classes))
    np.fill_diagonal(inter, 0.0)
    return intra, mem, cls, inter


def test_dp_equals_brute_force_random():
    rng = np.random.default_rng(0)
    for _ in range(150):
        layers, strategies = int(rng.integers(1, 5)), int(rng.integers(1, 6))
        case = _random_case(rng, layers, strategies, int(rng.integers(1, strategies + 1)))
        budget = int(rng.integers(0, 15))
        dp = solve_layers(*case, budget=budget)
        bf = brute_force_layers(*case, budget=budget)
        if np.isinf(bf.time):
            assert np.isinf(dp.time)
            continue
        assert dp.time == pytest.approx(bf.time)
        # the back-pointers give a plan with exactly that cost and memory
        intra, mem, cls, inter = case
        t = sum(intra[i, s] for i, s in enumerate(dp.choice))
        t += sum(inter[cls[a], cls[b]] for a, b in zip(dp.choice, dp.choice[1:]))
        assert t == pytest.approx(dp.time)
        assert dp.memory == sum(mem[i, s] for i, s in enumerate(dp.choice)) <= budget
        table = best_time_by_budget(*case, budget=budget)
        assert table[-1, budget] == pytest.approx(bf.time, rel=1e-5)


def test_dp_equals_brute_force_on_real_cost_model_4_layers_4_devices():
    """4 layers x every strategy of 4 devices (pp=1), with real A100 costs of a LLaMA-7B layer."""
    model, _ = load_builtin_profiles("llama-7b")
    from sgl.systems.parallel import HardwareProfile
    hw = HardwareProfile(1, 4, {(4, 1): 150.0, (2, 1): 140.0, (2, 0): 120.0}, {2: 100.0, 4: 90.0}, 1.1)
    cost = CostModel("llama-7b", model, hw, ClusterSpec(1, 4))
    strategies = enumerate_strategies(ClusterSpec(1, 4), 1)
    layouts = sorted({s.layout for s in strategies})
    cls = np.array([layouts.index(s.layout) for s in strategies])
    intra = np.tile(cost.layer_time(strategies, 8, 2), (4, 1))
    mem = np.tile(np.ceil(cost.layer_memory(strategies, 8, 2, 0) / 64).astype(int), (4, 1))
    inter = cost.transition_time(layouts, 1, 8, 2)
    assert len(strategies) == 14 and inter.max() > 0
    for budget in (int(mem.min() * 4), int(np.median(mem) * 4), int(mem.max() * 4)):
        dp = solve_layers(intra, mem, cls, inter, budget)
        bf = brute_force_layers(intra, mem, cls, inter, budget)
        assert dp.time == pytest.approx(bf.time)


def test_best_time_by_budget_is_monotone():
    rng = np.random.default_rng(1)
    table = best_time_by_budget(*_random_case(rng, 6, 5, 3), budget=30)
    finite = np.where(np.isfinite(table), table, 1e9)
    assert (np.diff(finite, axis=1) <= 1e-6).all()


def test_shape_errors():
    with pytest.raises(PlanError, match="classes"):
        solve_layers(np.zeros((2, 3)), np.zeros((2, 3), int), np.array([0, 1]), np.zeros((2, 2)), 5)
    with pytest.raises(PlanError, match="inter"):
        solve_layers(np.zeros((2, 2)), np.zeros((2, 2), int), np.array([0, 1]), np.zeros((3, 3)), 5)
