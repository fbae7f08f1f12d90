"""Spindle: DAG validation, waves, rounding = brute force, packing bounds, schedules that respect the DAG."""
import itertools
import json

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data import (LinkModel, ScalingCurve, SpindleConfig, SpindleOp, SpindlePlanner, TaskDAG, big_pipeline,
                              continuous_makespan, even_split, load_dag, mtmm_dag, pack_wave, replay, round_allocation,
                              spindle_lower_bound, validate_schedule)
from sgl.systems.data.spindle_alloc import brute_force_concurrent
from sgl.systems.data.spindle_sim import Schedule, ScheduledOp


def _op(name, times=(2.0, 1.2, 0.8), gpus=(1, 2, 4), deps=(), task="t", out_mb=0.0):
    return SpindleOp(name, task, ScalingCurve(tuple(gpus), tuple(times)), tuple(deps), out_mb)


def _random_curve(rng, max_gpus):
    counts = sorted(rng.choice(np.arange(1, max_gpus + 1), size=rng.integers(1, max_gpus + 1), replace=False))
    return ScalingCurve(tuple(int(g) for g in counts), tuple(float(t) for t in rng.uniform(0.1, 5.0, len(counts))))


def test_curve_validation_and_effective_time():
    with pytest.raises(PlanError, match="as many times"):
        ScalingCurve((1, 2), (1.0,))
    with pytest.raises(PlanError, match="increase strictly"):
        ScalingCurve((2, 1), (1.0, 2.0))
    with pytest.raises(PlanError, match="time"):
        ScalingCurve((1,), (0.0,))
    c = ScalingCurve((2, 4, 8), (3.0, 4.0, 1.0))  # 4 GPUs slower than 2: the effective time keeps 2's
    assert c.time(1) == float("inf") and c.time(3) == 3.0 and c.time(4) == 3.0 and c.time(100) == 1.0
    assert c.gpus_for(3.0) == 2 and c.gpus_for(2.0) == 8 and c.gpus_for(0.5) is None
    amd = ScalingCurve.amdahl(8.0, 0.25, 0.0, (1, 2, 4))
    assert amd.times == pytest.approx((8.0, 5.0, 3.5))
    # relaxation: linear between counts, time-sharing below the smallest count
    assert amd.continuous_gpus(4.25) == pytest.approx(3.0) and amd.continuous_gpus(16.0) == pytest.approx(0.5)
    assert amd.continuous_gpus(3.0) == float("inf")


def test_dag_errors_name_the_problem():
    with pytest.raises(PlanError, match="cycle through"):
        TaskDAG([_op("a", deps=("c",)), _op("b", deps=("a",)), _op("c", deps=("b",)), _op("d")])
    with pytest.raises(PlanError, match="unknown operator"):
        TaskDAG([_op("a", deps=("zz",))])
    with pytest.raises(PlanError, match="twice"):
        TaskDAG([_op("a"), _op("a")])
    with pytest.raises(PlanError, match="itself"):
        TaskDAG([_op("a", deps=("a",))])
    with pytest.raises(PlanError, match="no operator"):
        TaskDAG([])


def test_cycle_message_lists_exactly_the_cycle():
    with pytest.raises(PlanError) as err:
        TaskDAG([_op("src"), _op("x", deps=("src", "z")), _op("y", deps=("x",)), _op("z", deps=("y",)),
                 _op("sink", deps=("z",))])
    names = str(err.value).split("cycle through ")[1].split("]")[0]
    assert sorted(eval(names + "]")) == ["x", "y", "z"]


def test_waves_are_kahn_levels():
    dag = mtmm_dag()
    waves = dag.waves()
    level = {i: k for k, w in enumerate(waves) for i in w}
    assert sorted(level) == list(range(len(dag.ops)))
    for v, preds in enumerate(dag.preds):
        assert all(level[u] < level[v] for u in preds)
        if preds:  # zero in-degree as soon as the previous level is removed
            assert max(level[u] for u in preds) == level[v] - 1
        else:
            assert level[v] == 0
    assert [len(w) for w in waves] == [7, 4, 4]


def test_rounding_equals_brute_force_on_tiny_waves():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        devices = int(rng.integers(2, 7))
        curves = [_random_curve(rng, devices) for _ in range(int(rng.integers(1, 4)))]
        widths = round_allocation(curves, devices)
        best = brute_force_concurrent(curves, devices)
        if widths is None:
            assert best == float("inf")
            continue
        assert sum(widths) <= devices
        assert max(c.time(w) for c, w in zip(curves, widths)) == pytest.approx(best)
        checked += 1
    assert checked > 40


def test_pack_wave_between_bound_and_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(30):
        devices = int(rng.integers(2, 9))
        curves = [ScalingCurve.amdahl(float(rng.uniform(0.5, 6)), float(rng.uniform(0, 0.4)), float(rng.uniform(0, .1)),
                                      (1, 2, 4, 8)) for _ in range(int(rng.integers(1, 6)))]
        wave = pack_wave(curves, devices)
        bound, g = continuous_makespan(curves, devices)
        assert wave.gpus <= devices
        assert sorted(k for lane in wave.lanes for k in lane.ops) == list(range(len(curves)))
        assert wave.makespan >= bound * (1 - 1e-9)
        if len(curves) <= 3:
            assert wave.makespan <= brute_force_concurrent(curves, devices) + 1e-12
        sequential = sum(c.time(devices) for c in curves)
        assert wave.makespan <= sequential + 1e-12


def test_bisection_meets_the_gpu_budget():
    curves = [ScalingCurve.amdahl(w, 0.05, 0.01, (1, 2, 4, 8, 16)) for w in (1.0, 3.0, 9.0)]
    c, g = continuous_makespan(curves, 12)
    assert g.sum() == pytest.approx(12, rel=1e-6)
    assert sum(cv.continuous_gpus(c * 0.99) for cv in curves) > 12   # any faster needs more than N


def _brute_force_barrier(dag, devices):
    """Exhaustive per-op GPU counts, every wave's operators at once, waves back to back."""
    total = 0.0
    for wave in dag.waves():
        total += brute_force_concurrent([dag.ops[i].curve for i in wave], devices)
    return total


def test_plan_on_tiny_dags_vs_brute_force_and_checks():
    rng = np.random.default_rng(2)
    for trial in range(12):
        n_ops, devices = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        ops = []
        for i in range(n_ops):
            deps = tuple(f"o{j}" for j in range(i) if rng.random() < 0.5)
            ops.append(SpindleOp(f"o{i}", f"t{i % 2}", _random_curve(rng, devices), deps, float(rng.uniform(0, 500))))
        dag = TaskDAG(ops)
        result = SpindlePlanner(dag, SpindleConfig(devices=devices, devices_per_node=2)).plan()
        validate_schedule(dag, result.schedule, devices, LinkModel(2))
        brute = _brute_force_barrier(dag, devices)
        assert result.barrier_makespan <= brute + 1e-9
        # no barriers: never later than the wave-by-wave plan plus the transfers it adds
        assert result.makespan <= result.barrier_makespan + result.schedule.p2p_seconds + 1e-9


def test_mtmm_plan_respects_dependencies_and_gpu_counts_and_beats_baselines():
    dag = mtmm_dag()
    config = SpindleConfig(devices=16)
    result = SpindlePlanner(dag, config).plan()
    sched = result.schedule
    validate_schedule(dag, sched, 16, config.link)
    for e in sched.entries:  # device counts are profiled counts, at most N at any instant
        assert len(e.devices) <= dag.ops[e.op].curve.max_gpus or len(e.devices) == 16
    times = sorted({e.start for e in sched.entries})
    for t in times:
        busy = sum(len(e.devices) for e in sched.entries if e.start <= t < e.end)
        assert busy <= 16
    big, even = big_pipeline(dag, 16), even_split(dag, 16)
    assert big.makespan == pytest.approx(sum(op.curve.time(16) for op in dag.ops))
    assert result.makespan >= spindle_lower_bound(dag, 16) * (1 - 1e-9)
    assert result.makespan < 0.8 * big.makespan and result.makespan < 0.9 * even.makespan
    out = result.to_dict(dag)
    assert len(out["ops"]) == len(dag.ops) and len(out["waves"]) == 3


def test_p2p_mapping_not_worse_than_first_fit():
    dag = mtmm_dag()
    for devices in (16, 32):
        p2p = SpindlePlanner(dag, SpindleConfig(devices=devices)).plan()
        ff = SpindlePlanner(dag, SpindleConfig(devices=devices, mapping="first_fit")).plan()
        assert p2p.schedule.p2p_seconds <= ff.schedule.p2p_seconds + 1e-12


def test_validate_schedule_catches_broken_schedules():
    dag = TaskDAG([_op("a", out_mb=0), _op("b", deps=("a",))])
    good = replay(dag, {0: (0, 1), 1: (0, 1)}, [0, 1], LinkModel(2), 2)
    validate_schedule(dag, good, 2)
    early = Schedule([good.entries[0], ScheduledOp(1, (0, 1), 0.5, 0.5 + 1.2)], 2)
    with pytest.raises(PlanError, match="before its input"):
        validate_schedule(dag, early, 2)
    overlap = Schedule([ScheduledOp(0, (0, 1), 0.0, 1.2), ScheduledOp(1, (1, 2), 1.0, 2.2)], 3)
    with pytest.raises(PlanError):
        validate_schedule(dag, overlap, 3)
    with pytest.raises(PlanError, match="exactly once"):
        validate_schedule(dag, Schedule([good.entries[0]], 2), 2)
    with pytest.raises(PlanError, match="before its input"):
        replay(dag, {0: (0,), 1: (1,)}, [1, 0], LinkModel(2), 2)


def test_link_model_and_baseline_errors():
    link = LinkModel(devices_per_node=2, intra_gbps=100.0, inter_gbps=10.0)
    assert link.p2p(1000.0, (0, 1), (0, 1)) == 0.0
    assert link.p2p(1000.0, (0,), (1,)) == pytest.approx(0.01)     # same node
    assert link.p2p(1000.0, (0,), (2, 3)) == pytest.approx(0.05)   # other node, 0.5 GB each
    with pytest.raises(PlanError, match="one GPU per task"):
        even_split(mtmm_dag(), 3)
    with pytest.raises(PlanError, match="at least 4 GPUs"):
        SpindlePlanner(TaskDAG([_op("a", gpus=(4,), times=(1.0,))]), SpindleConfig(devices=2))
    with pytest.raises(PlanError, match="mapping"):
        SpindleConfig(devices=4, mapping="random")


def test_dag_json_round_trip_and_errors(tmp_path):
    dag = mtmm_dag()
    path = tmp_path / "dag.json"
    path.write_text(json.dumps(dag.to_dict()))
    again = load_dag(path)
    assert [o.name for o in again.ops] == [o.name for o in dag.ops]
    assert again.ops[3].curve.times == pytest.approx(dag.ops[3].curve.times)
    amd = TaskDAG.from_dict({"ops": [{"name": "x", "amdahl": {"work": 2.0, "serial": 0.5}}]})
    assert amd.ops[0].curve.time(2) == pytest.approx(1.5)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="not valid JSON"):
        load_dag(bad)
    with pytest.raises(PlanError, match="does not exist"):
        load_dag(tmp_path / "missing.json")
    with pytest.raises(PlanError, match="'gpus' and 'times'"):
        TaskDAG.from_dict({"ops": [{"name": "x"}]})
    with pytest.raises(PlanError, match="cycle"):
        TaskDAG.from_dict({"ops": [{"name": "x", "gpus": [1], "times": [1], "deps": ["y"]},
                                   {"name": "y", "gpus": [1], "times": [1], "deps": ["x"]}]})


def test_random_larger_dags_give_valid_schedules_above_the_bound():
    rng = np.random.default_rng(7)
    for devices in (6, 16):
        ops = []
        for i in range(30):
            picks = rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False) if i else []
            deps = tuple(f"o{j}" for j in picks)
            curve = ScalingCurve.amdahl(float(rng.uniform(0.2, 5.0)), float(rng.uniform(0.0, 0.3)),
                                        float(rng.uniform(0.0, 0.05)), (1, 2, 4, 8))
            ops.append(SpindleOp(f"o{i}", f"t{i % 4}", curve, deps, float(rng.uniform(0, 200))))
        dag = TaskDAG(ops)
        config = SpindleConfig(devices=devices, devices_per_node=4)
        result = SpindlePlanner(dag, config).plan()
        validate_schedule(dag, result.schedule, devices, config.link)
        assert result.makespan >= spindle_lower_bound(dag, devices) * (1 - 1e-9)
        assert result.makespan <= big_pipeline(dag, devices).makespan + result.schedule.p2p_seconds + 1e-9
