"""Malleus: both ILPs equal brute force, straggler-aware plans vs oblivious, re-planning, bad rates."""
import itertools

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.seq.malleus import (MalleusModel, MalleusPlanner, _greedy_min_max, layers_ilp, migration_mb,
                                     microbatch_ilp)
from sgl.systems.seq.straggler import check_rates, straggler_setting, straggling_rates


def test_layers_ilp_equals_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(6):
        S, L = int(rng.integers(2, 4)), int(rng.integers(4, 9))
        y = rng.uniform(1, 5, S)
        per_layer = rng.uniform(1, 3, S)
        free = rng.uniform(4, 12, S)
        ls, best = layers_ilp(y, per_layer, free, L)
        brute = min((max(a * b for a, b in zip(y, c)) for c in itertools.product(range(1, L + 1), repeat=S)
                     if sum(c) == L and all(ci * m <= f for ci, m, f in zip(c, per_layer, free))), default=np.inf)
        assert best == pytest.approx(brute)
        if ls is not None:
            assert sum(ls) == L and all(l * m <= f + 1e-9 for l, m, f in zip(ls, per_layer, free))


def test_microbatch_ilp_equals_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(6):
        P, B = int(rng.integers(2, 4)), int(rng.integers(4, 12))
        o, S = rng.uniform(1, 4, P), rng.integers(1, 4, P)
        m, best = microbatch_ilp(o, S, B)
        brute = min(max(oi * (mi + si - 1) for oi, mi, si in zip(o, c, S))
                    for c in itertools.product(range(1, B + 1), repeat=P) if sum(c) == B)
        assert best == pytest.approx(brute) and sum(m) == B
        g = _greedy_min_max(o, [1] * P, [B] * P, B, [si - 1 for si in S])      # the solver-failure fallback
        assert max(oi * (gi + si - 1) for oi, gi, si in zip(o, g, S)) == pytest.approx(brute)
    with pytest.raises(PlanError, match="at least one per pipeline"):
        microbatch_ilp([1.0, 1.0, 1.0], [1, 1, 1], 2)


def test_plans_beat_the_oblivious_plan_under_stragglers():
    planner = MalleusPlanner(MalleusModel(), devices=32, tp=8, pp=2)
    none = straggler_setting("none", 32)
    assert planner.plan(none).step_ms == pytest.approx(planner.oblivious(none).step_ms)
    for name, floor in (("one-5x", 1.5), ("node-2x", 1.2), ("mixed", 1.5)):
        rates = straggler_setting(name, 32)
        plan, base = planner.plan(rates), planner.oblivious(rates)
        assert base.step_ms / plan.step_ms >= floor, name
        used = sorted(d for p in plan.pipelines for st in p for d in st) + plan.idle
        assert sorted(used) == list(range(32))                            # every device once
        assert all(sum(ls) == 32 for ls in plan.layers) and sum(plan.micro_batches) == 64
        load = plan.device_load(32, planner.model, rates)
        assert load.max() <= plan.step_ms
    assert planner.plan(straggler_setting("one-8x", 32)).idle == [0]       # suspended above the threshold


def test_replan_reports_migration():
    planner = MalleusPlanner(MalleusModel(), devices=16, tp=4, pp=2)
    first = planner.plan(np.ones(16))
    same = planner.replan(first, np.ones(16))
    assert same.migration_mb == 0.0
    rates = np.ones(16)
    rates[5] = 4.0
    moved = planner.replan(first, rates)
    assert moved.migration_mb > 0 and moved.step_ms < planner.oblivious(rates).step_ms
    assert migration_mb(moved, moved, 10.0) == 0.0
    assert moved.to_dict()["migration_mb"] == round(moved.migration_mb, 1)


def test_replan_trades_migration_against_step_time():
    planner = MalleusPlanner(MalleusModel(), devices=8, tp=2, pp=2, node_size=4)
    first = planner.oblivious(np.ones(8))
    rates = np.ones(8)
    rates[5] = 1.3                                  # a mild straggler: moving states may not pay off
    fastest = planner.replan(first, rates)
    once = planner.replan(first, rates, amortize_steps=1)
    forever = planner.replan(first, rates, amortize_steps=10**9)
    assert fastest.step_ms <= once.step_ms and once.migration_mb <= fastest.migration_mb
    assert forever.step_ms == pytest.approx(fastest.step_ms)
    assert once.migration_mb < fastest.migration_mb / 10     # re-solved layers of the kept layout
    huge = planner.replan(first, rates, amortize_steps=1, bandwidth_gbps=1e-3)
    assert huge.migration_mb == 0.0 and huge.pipelines == first.pipelines   # only micro-batches re-split
    assert sum(once.micro_batches) == 64 and once.step_ms < planner.oblivious(rates).step_ms
    with pytest.raises(PlanError, match="amortize_steps"):
        planner.replan(first, rates, amortize_steps=0)


def test_bad_rates_and_layouts():
    with pytest.raises(PlanError, match="> 0"):
        check_rates([1.0, 0.0])
    with pytest.raises(PlanError, match="> 0"):
        check_rates([1.0, -2.0])
    with pytest.raises(PlanError, match="one per device"):
        MalleusPlanner(MalleusModel(), 16, 4, 2).plan(np.ones(8))
    with pytest.raises(PlanError, match="do not split"):
        MalleusPlanner(MalleusModel(), 12, 8, 1)
    with pytest.raises(PlanError, match="no feasible plan"):
        MalleusPlanner(MalleusModel(memory_mb=1000.0), 16, 4, 2).plan(np.ones(16))
    assert straggling_rates([3.0, 6.0]).tolist() == [1.0, 2.0]
    with pytest.raises(PlanError, match="setting"):
        straggler_setting("slow", 8)
