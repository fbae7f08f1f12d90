"""Malleus: both ILPs equal brute force, straggler-aware plans vs oblivious, re-planning, bad rates."""
import itertools

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.seq.malleus import (MalleusModel, MalleusPlan, MalleusPlanner, _greedy_min_max, hybrid_layouts,
                                     layers_ilp, migration_mb, microbatch_ilp, plan_any_layout)
from sgl.systems.seq.malleus_oracle import oracle_ceiling, splits
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


def test_layers_ilp_with_fixed_parts_equals_brute_force():
    rng = np.random.default_rng(2)
    for _ in range(6):
        S, L = int(rng.integers(2, 4)), int(rng.integers(4, 9))
        y, fixed = rng.uniform(1, 5, S), rng.uniform(0, 6, S)
        ls, best = layers_ilp(y, [0.0] * S, [1.0] * S, L, fixed=fixed)
        brute = min(max(a * b + f for a, b, f in zip(y, c, fixed))
                    for c in itertools.product(range(1, L + 1), repeat=S) if sum(c) == L)
        assert best == pytest.approx(brute) and sum(ls) == L


def _small(**kw):
    base = dict(layers=6, layer_ms=1.0, micro_batches=12, state_mb=1.0, act_mb=0.1, embed_mb=0.0, memory_mb=1e6)
    return MalleusModel(**(base | kw))


def test_fixed_parts_move_a_layer_off_the_last_stage():
    ones = np.ones(2)
    assert MalleusPlanner(_small(), 2, 1, 2, node_size=2).plan(ones).layers == [[3, 3]]
    heavy_head = MalleusPlanner(_small(head_ms=2.0, embed_ms=0.1), 2, 1, 2, node_size=2)
    plan = heavy_head.plan(ones)
    assert plan.layers == [[4, 2]]                         # 4 + 0.1 vs 2 + 2 per micro-batch
    assert plan.step_ms == pytest.approx(13 * 4.1) == heavy_head.step_ms(plan, ones)
    obl = heavy_head.oblivious(ones)                       # the uniform split keeps 3 : 3 and pays the head
    assert obl.layers == [[3, 3]] and obl.step_ms == pytest.approx(13 * 5.0)
    load = plan.device_load(2, heavy_head.model, ones)
    assert load.tolist() == pytest.approx([12 * 4.1, 12 * 4.0])
    with pytest.raises(PlanError, match="head_ms"):
        _small(head_ms=-1.0)


def test_any_layout_plan_is_the_best_over_every_layout():
    plan, layout = plan_any_layout(_small(), 2, np.ones(2))
    assert layout == (1, 1) and plan.micro_batches == [6, 6]          # replicas: no bubble, no TP cost
    assert hybrid_layouts(_small(), 2) == [(1, 1), (1, 2), (2, 1)]
    tight = _small(memory_mb=4.0)                     # 6 layers no longer fit one device: TP 2 is fastest
    plan, layout = plan_any_layout(tight, 2, np.ones(2))
    best = min(MalleusPlanner(tight, 2, tp, pp, node_size=2).plan(np.ones(2)).step_ms for tp, pp in ((1, 2), (2, 1)))
    assert layout == (2, 1) and plan.step_ms == pytest.approx(best)
    rates = np.array([2.0, 1.0])
    aware, _ = plan_any_layout(_small(), 2, rates)
    assert aware.micro_batches == [8, 4] and aware.pipelines == [[[1]], [[0]]]   # the fast replica takes 8
    with pytest.raises(PlanError, match="any layout"):
        plan_any_layout(_small(memory_mb=0.5), 2, np.ones(2))


def test_oracle_brute_forces_micro_batch_splits_and_skips_tp_groups():
    obl = MalleusPlan([[[0]], [[1]]], [[6], [6]], [6, 6], 0.0, [0.0, 0.0], [])
    aware = MalleusPlan([[[1]], [[0]]], [[6], [6]], [7, 5], 0.0, [0.0, 0.0], [])
    out = oracle_ceiling(obl, aware, {0: 120.0, 1: 60.0}, {0: 100.0, 1: 70.0}, 130.0)
    assert out["kind"] == "dp" and out["ours"] == [5, 7] and out["best"] == [4, 8]
    assert out["residue_ms"] == pytest.approx(10.0) and out["ceiling"] == pytest.approx(130.0 / 90.0)
    assert out["ceiling"] >= out["ours_at_residue"]
    tp = MalleusPlan([[[0, 1]]], [[6]], [12], 0.0, [0.0], [])
    assert oracle_ceiling(tp, aware, {0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0}, 1.0) is None
    assert splits(4, 2) == [[1, 3], [2, 2], [3, 1]]


def test_oracle_pp_fits_per_layer_and_fixed_parts_and_survives_noise():
    obl = MalleusPlan([[[0], [1]]], [[3, 3]], [12], 0.0, [0.0], [])
    aware = MalleusPlan([[[0], [1]]], [[2, 4]], [12], 0.0, [0.0], [])
    # rank 0: 2 ms/layer/mb + 0.1 embedding; rank 1: 1 ms/layer/mb + 1.0 head -> per step x12
    out = oracle_ceiling(obl, aware, {0: 12 * 6.1, 1: 12 * 4.0}, {0: 12 * 4.1, 1: 12 * 5.0}, 90.0)
    assert out["per_layer_ms"] == pytest.approx([2.0, 1.0]) and out["fixed_ms"] == pytest.approx([0.1, 1.0])
    assert out["best"] == [2, 4] and out["oblivious_model_ms"] == pytest.approx(12 * 6.1 + 4.0)
    noisy = oracle_ceiling(obl, aware, {0: 12 * 6.1, 1: 12 * 4.0}, {0: 12 * 4.1, 1: 12 * 3.9}, 90.0)
    assert noisy["per_layer_ms"][1] == pytest.approx(7.9 / 7) and noisy["fixed_ms"][1] == 0.0   # no free layers
    assert noisy["best"] != [1, 5]
