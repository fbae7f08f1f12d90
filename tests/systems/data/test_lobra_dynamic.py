"""Per-step reconfiguring LobRA plan: free switches never lose, impossible ones never happen, the bound holds."""
import math

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra import simulate
from sgl.systems.data.lobra_dynamic import dynamic_replay, lobra_dynamic_compare, reconfig_ms
from sgl.systems.data.lobra_study import gpu_seconds_lower_bound
from sgl.systems.seq import SeqStrategy, StrategyCost

BOUNDS = (256, 512, 1000, 2000, 8000)


def _pool():
    return [StrategyCost(SeqStrategy(tp=1, pp=1), 1e-6, 0.10, 5.0, 1000),
            StrategyCost(SeqStrategy(tp=2, pp=1), 1e-6, 0.05, 10.0, 2000),
            StrategyCost(SeqStrategy(tp=4, pp=1), 1e-6, 0.04, 20.0, 8000)]


SETS = [{2: 2}, {2: 1, 1: 2}, {2: 1, 0: 4}, {2: 1, 1: 1, 0: 2}]


def _steps(seed=0, n=4):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):  # alternate long-ish and short-only batches so that switching can pay
        short = rng.integers(20, 900, 30)
        out.append(np.concatenate([short, rng.integers(2500, 6000, 3 if i % 2 == 0 else 0)]))
    return out


def test_reconfig_cost_counts_only_replicas_that_change():
    pool = _pool()
    bytes_of = lambda tp, pp: 1e9 * 8 / (tp * pp)  # noqa: E731  8 GB of state split over tp·pp
    assert reconfig_ms(pool, {2: 2}, {2: 2}, 10.0, state_bytes=bytes_of) == 0.0
    assert reconfig_ms(pool, {2: 2}, {2: 1, 1: 2}, 10.0, state_bytes=bytes_of) == pytest.approx(4 / 10 * 1000)
    assert reconfig_ms(pool, {2: 1, 1: 2}, {2: 1, 1: 1, 0: 2}, 10.0, state_bytes=bytes_of) == pytest.approx(800)
    assert reconfig_ms(pool, {2: 2}, {2: 1, 0: 4}, math.inf, state_bytes=bytes_of) == 0.0
    for bad in (-1.0, 0.0):
        with pytest.raises(PlanError, match="bandwidth"):
            reconfig_ms(pool, {2: 2}, {2: 1, 1: 2}, bad)
    with pytest.raises(PlanError, match="bandwidth"):
        dynamic_replay(pool, SETS, _steps(), BOUNDS, bandwidth_gbps=-5.0)


def test_free_switches_never_cost_more_than_any_static_candidate():
    pool, steps = _pool(), _steps()
    d = dynamic_replay(pool, SETS, steps, BOUNDS, bandwidth_gbps=math.inf)
    assert d["reconfig_s"] == 0.0
    assert d["gpu_seconds"] <= min(d["static_gpu_seconds"]) * (1 + 1e-12)
    for k, rep in enumerate(SETS):  # the per-set static prices are the ordinary static replay
        assert d["static_gpu_seconds"][k] == pytest.approx(simulate(pool, rep, steps, BOUNDS,
                                                                    microbatch="tokens")["gpu_seconds"])
    assert d["gpu_seconds"] >= gpu_seconds_lower_bound(pool, steps) * (1 - 1e-12)


def test_prohibitive_switches_keep_the_static_plan():
    pool, steps = _pool(), _steps(1)
    for start in (0, 2):
        d = dynamic_replay(pool, SETS, steps, BOUNDS, start=SETS[start], bandwidth_gbps=1e-15)
        assert d["switches"] == 0 and d["choice"] == [start] * len(steps)
        assert d["gpu_seconds"] == pytest.approx(d["static_gpu_seconds"][start])


@pytest.mark.parametrize("bandwidth", [math.inf, 150.0, 1.0])
def test_dynamic_never_below_the_any_plan_bound(bandwidth):
    pool, steps = _pool(), _steps(2, 5)
    d = dynamic_replay(pool, SETS, steps, BOUNDS, bandwidth_gbps=bandwidth, adapters=2)
    assert d["gpu_seconds"] >= gpu_seconds_lower_bound(pool, steps) * (1 - 1e-12)
    assert d["switches"] <= len(steps) and len(d["choice"]) == len(steps)


def test_lobra_dynamic_compare_adds_a_dynamic_row():
    rng = np.random.default_rng(0)
    tasks = {"short": rng.integers(20, 400, 300), "long": rng.integers(3000, 7000, 50)}
    r = lobra_dynamic_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, steps=2, top=3, bandwidth_gbps=math.inf,
                              bounds=(256, 512, 1000, 4096), calibration_steps=1, time_limit=1.0,
                              microbatch="tokens", search=16)
    d = r["dynamic"]
    assert d["sets"][0] == r["candidate_sets"][0] and len(d["sets"]) <= 3
    assert d["static_gpu_seconds"][0] == pytest.approx(r["lobra"]["gpu_seconds"])  # same steps, same dispatcher
    assert d["gpu_seconds"] <= d["static_gpu_seconds"][0] * (1 + 1e-12)
    assert d["gpu_seconds"] >= r["lower_bound_gpu_seconds"] * (1 - 1e-12)
    assert d["saving"] == pytest.approx(1 - d["gpu_seconds"] / r["homogeneous"]["gpu_seconds"])
    with pytest.raises(PlanError, match="top"):
        lobra_dynamic_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, steps=1, top=0)
