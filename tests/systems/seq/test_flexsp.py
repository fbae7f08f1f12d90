"""FlexSP: blaster, bucketing, MILP vs brute force, baselines, bad input."""
import itertools
import warnings

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.seq import GlobalBatchSampler, SeqModelSpec, flexsp_cost_model, read_lengths
from sgl.systems.seq.flexsp import FlexSPPlanner
from sgl.systems.seq.packing import assign, blast, bucketize, min_max_partition


def test_min_max_partition_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.integers(1, 50, rng.integers(3, 8)).astype(float)
        m = int(rng.integers(1, v.size + 1))
        best, starts = min_max_partition(v, m)
        brute = min(max(v[a:b].sum() for a, b in zip((0,) + cuts, cuts + (v.size,)))
                    for cuts in itertools.combinations(range(1, v.size), m - 1))
        assert best == pytest.approx(brute)
        assert len(starts) == m and starts[0] == 0


def test_blaster_and_buckets():
    lengths = np.array([900, 100, 500, 300, 700, 200])
    mbs = blast(lengths, capacity=1000)
    assert sorted(np.concatenate(mbs).tolist()) == list(range(6))
    assert all(lengths[mb].sum() <= 1000 for mb in mbs) and len(mbs) == 4   # contiguous in sorted order: [900] [700] [500] [300 200 100]
    bounds, which = bucketize(lengths, max_buckets=3)
    assert np.all(lengths <= bounds[which]) and bounds.size == 3
    with pytest.raises(PlanError, match="exceeds"):
        blast(np.array([5000]), capacity=1000)
    with pytest.raises(PlanError, match="empty"):
        blast(np.array([], dtype=np.int64), capacity=1000)


def test_assignments_respect_capacity():
    lengths = np.array([8, 7, 6, 5, 4, 3, 2, 1])
    for method in ("random", "ffd", "bfd", "lpt"):
        bins = assign(lengths, 3, 14, method)
        if bins is not None:
            assert sorted(np.concatenate(bins).tolist()) == list(range(8))
            assert all(lengths[b].sum() <= 14 for b in bins)
    assert assign(lengths, 2, 10, "ffd") is None


def _brute_force(lengths, pool, devices):
    """Min over groupings (multisets of SP sizes within `devices`) and assignments of the makespan."""
    best = np.inf
    sizes = [p for p in pool]
    for count in range(1, len(lengths) + 1):
        for combo in itertools.combinations_with_replacement(range(len(sizes)), count):
            if sum(sizes[i].devices for i in combo) > devices:
                continue
            groups = [sizes[i] for i in combo]
            for labels in itertools.product(range(count), repeat=len(lengths)):
                if len(set(labels)) < count:
                    continue
                t = 0.0
                ok = True
                for g, cost in enumerate(groups):
                    mine = [l for l, lab in zip(lengths, labels) if lab == g]
                    if sum(mine) > cost.capacity:
                        ok = False
                        break
                    t = max(t, cost.micro_batch_time(mine))
                if ok:
                    best = min(best, t)
    return best


def test_milp_equals_brute_force_on_tiny_cases():
    model = flexsp_cost_model(devices=4, memory_gb=2.0, model=SeqModelSpec(params_b=0.1))  # long ones need SP
    pool = model.sp_pool()
    rng = np.random.default_rng(5)
    planner = FlexSPPlanner(pool, devices=4, time_limit=10.0, max_buckets=8, tolerance=0.0)
    checked = 0
    for _ in range(4):
        lengths = rng.integers(50, int(pool[-1].capacity * 0.45), 4)
        idx = np.arange(lengths.size)
        if lengths.sum() > planner.cluster_capacity:
            continue
        groups, status, _ = planner.solve_micro_batch(lengths, idx)
        got = max(g.time for g in groups)
        assert got == pytest.approx(_brute_force(lengths, pool, 4), rel=1e-6)
        checked += 1
    assert checked >= 3


def test_flexsp_plan_is_valid_deterministic_and_beats_homogeneous(data_path):
    lengths = read_lengths(data_path("seqlen", "wikipedia.txt"))
    model = flexsp_cost_model(devices=16, memory_gb=80)
    planner = FlexSPPlanner(model.sp_pool(), devices=16, time_limit=0.3)
    batch = GlobalBatchSampler(lengths, tokens_per_step=16 * 8192, seed=2, max_length=100_000).batches(1)[0]
    batch = np.concatenate([batch, [90_000]])          # a long-tail sequence forces SP >= 8 on a static plan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        plan = planner.plan(batch)
        again = planner.plan(batch)
    plan.validate(batch, devices=16)
    assert plan.time == again.time
    sp, homo = planner.best_homogeneous([batch])
    assert sp >= 8 and plan.time <= homo[0].time
    for method in ("random", "ffd", "bfd", "lpt"):
        base = planner.homogeneous(batch, sp, method)
        base.validate(batch, devices=16)
        assert plan.time <= base.time + 1e-6


def test_too_long_names_longest_supported():
    model = flexsp_cost_model(devices=8, memory_gb=80)
    planner = FlexSPPlanner(model.sp_pool(), devices=8)
    longest = max(p.capacity for p in model.sp_pool())
    with pytest.raises(PlanError, match=f"longest supported length is {longest}"):
        planner.plan(np.array([100, longest + 1]))


def test_infeasible_memory():
    model = flexsp_cost_model(devices=8, memory_gb=1.0)     # model states alone exceed 1 GiB
    with pytest.raises(PlanError, match="at least one SP size"):
        FlexSPPlanner(model.sp_pool(), devices=8)


def test_solver_timeout_falls_back_and_says_so():
    model = flexsp_cost_model(devices=64, memory_gb=80)
    planner = FlexSPPlanner(model.sp_pool(), devices=64, time_limit=1e-3)
    batch = GlobalBatchSampler(np.arange(500, 5000, 7), batch_size=300, seed=0).batches(1)[0]
    with pytest.warns(RuntimeWarning, match="time limit"):
        plan = planner.plan(batch)
    plan.validate(batch, devices=64)
    assert "time" in plan.status or "heuristic" in plan.status
