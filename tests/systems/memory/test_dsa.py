"""DSA: the MIP plan lies between the sum-of-live bound and first-fit, and is optimal on tiny traces."""
import json

import numpy as np
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.memory import (AllocTrace, best_fit, brute_force_dsa, caching_allocator_peak, check_plan,
                                first_fit, greedy_by_size, live_lower_bound, plan_bilevel, record_lm_trace, solve_dsa)
from sgl.systems.parallel import get_model_config
from sgl.systems.runtime import TinyLM, lm_loss


def _random_trace(rng, n):
    events, live, key = [], [], 0
    while key < n or live:
        if key < n and (not live or rng.random() < 0.55):
            events.append(("malloc", key, int(rng.integers(1, 9)) * 16))
            live.append(key)
            key += 1
        else:
            events.append(("free", live.pop(int(rng.integers(len(live))))))
    return AllocTrace.from_events(events)


@pytest.mark.parametrize("seed", range(6))
def test_mip_is_optimal_on_tiny_traces(seed):
    trace = _random_trace(np.random.default_rng(seed), 6)
    exact = brute_force_dsa(trace)
    plan = solve_dsa(trace, time_limit=10)
    check_plan(trace, plan)
    assert plan.peak == exact.peak
    assert live_lower_bound(trace) <= exact.peak <= first_fit(trace).peak


def test_first_fit_is_not_optimal_somewhere():
    # A classic: first-fit wastes a hole that the planner, knowing the future, avoids.
    gaps = [solve_dsa(_random_trace(np.random.default_rng(s), 7), time_limit=10).peak < first_fit(
        _random_trace(np.random.default_rng(s), 7)).peak for s in range(40)]
    assert any(gaps)


@pytest.fixture(scope="module")
def lm_trace():
    torch.manual_seed(0)
    model = TinyLM(get_model_config("tiny"))
    tokens = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(0))
    return record_lm_trace(model, tokens, lm_loss, torch.optim.Adam(model.parameters()))


def test_recorded_trace_has_layers_and_plans_between_bounds(lm_trace):
    assert len(lm_trace) > 100 and {"fwd:0", "bwd:3"} <= set(lm_trace.spans)
    lb, ff = live_lower_bound(lm_trace, 64), first_fit(lm_trace, 64).peak
    plan = plan_bilevel(lm_trace, time_limit=1, alignment=64)
    check_plan(lm_trace, plan, 64)
    assert lb <= plan.peak <= ff
    assert plan.levels["level1_solves"] == 2  # forward and backward of one layer, shared by all four
    assert best_fit(lm_trace, 64).peak >= lb and caching_allocator_peak(lm_trace) >= lb


def test_trace_roundtrip_and_bad_traces(tmp_path, lm_trace):
    lm_trace.save(tmp_path / "t.json")
    again = AllocTrace.load(tmp_path / "t.json")
    assert np.array_equal(again.size, lm_trace.size) and again.spans == lm_trace.spans
    with pytest.raises(ConfigError, match="before its malloc"):
        AllocTrace.from_events([("malloc", "a", 8), ("free", "b")])
    (tmp_path / "bad.json").write_text(json.dumps({"size": [4], "start": [3], "end": [1]}))
    with pytest.raises(ConfigError, match="free must follow its malloc"):
        AllocTrace.load(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not an allocation trace"):
        AllocTrace.load(tmp_path / "junk.json")
    with pytest.raises(ConfigError):
        brute_force_dsa(lm_trace)  # too many requests to enumerate


def test_caching_allocator_model_rules():
    mib = 1 << 20
    assert caching_allocator_peak(AllocTrace([100], [0], [1])) == 2 * mib          # small pool segment
    assert caching_allocator_peak(AllocTrace([3 * mib], [0], [1])) == 20 * mib     # 1-10 MiB: 20 MiB segment
    assert caching_allocator_peak(AllocTrace([11 * mib], [0], [1])) == 12 * mib    # rounded to 2 MiB
    # Two 6 MiB blocks share a 20 MiB segment; once both are free they merge and 12 MiB fits again.
    t = AllocTrace([6 * mib, 6 * mib, 12 * mib], [0, 1, 4], [2, 3, 5])
    assert caching_allocator_peak(t) == 20 * mib
    # A freed 6 MiB hole between live blocks cannot hold 8 MiB: a second segment is reserved,
    # while a plan that knows the future needs 20 MiB.
    t = AllocTrace([6 * mib, 6 * mib, 6 * mib, 8 * mib], [0, 1, 2, 4], [10, 3, 10, 10])
    assert caching_allocator_peak(t) == 40 * mib
    assert brute_force_dsa(t).peak == solve_dsa(t, time_limit=5).peak == 20 * mib == live_lower_bound(t)


def test_greedy_by_size_is_a_valid_plan_between_bound_and_exact():
    for s in range(30):
        trace = _random_trace(np.random.default_rng(100 + s), 6)
        plan = greedy_by_size(trace)
        check_plan(trace, plan)
        assert brute_force_dsa(trace).peak <= plan.peak
        assert solve_dsa(trace, time_limit=5).peak <= plan.peak     # the MIP starts from it
    beats_online = [greedy_by_size(t).peak < min(first_fit(t).peak, best_fit(t).peak)
                    for t in (_random_trace(np.random.default_rng(s), 7) for s in range(40))]
    assert any(beats_online)


def test_greedy_by_size_is_at_the_bound_on_a_recorded_training_step(lm_trace):
    plan = greedy_by_size(lm_trace, 64)
    check_plan(lm_trace, plan, 64)
    lb = live_lower_bound(lm_trace, 64)
    assert lb <= plan.peak <= lb + 64                                  # one alignment unit above optimal at most
    assert lb <= solve_dsa(lm_trace, time_limit=1, alignment=64).peak <= plan.peak
