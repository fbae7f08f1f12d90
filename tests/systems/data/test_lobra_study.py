"""LobRA comparison: the compute ceiling by hand, seeded sampling, plan chosen on calibration batches only."""
import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra_study import compute_ceiling, lobra_compare, sample_steps
from sgl.systems.seq import SeqStrategy, StrategyCost


def _pool():
    return [StrategyCost(SeqStrategy(tp=1, pp=1), 1e-6, 0.10, 5.0, 1000),   # cheap per token, short only
            StrategyCost(SeqStrategy(tp=4, pp=1), 1e-6, 0.04, 20.0, 8000)]  # holds long, 0.16 GPU-ms/token


def test_compute_ceiling_by_hand():
    pool = _pool()
    lengths = np.array([100, 500, 4000])
    per = lambda s, L: pool[s].devices * (pool[s].a * L * L + pool[s].b * L)  # noqa: E731
    best = per(0, 100) + per(0, 500) + per(1, 4000)
    base = sum(per(1, L) for L in lengths)
    assert compute_ceiling(pool, lengths, {1: 2}) == pytest.approx(1 - best / base)
    assert compute_ceiling(pool, np.array([4000]), {1: 2}) == pytest.approx(0.0)
    with pytest.raises(PlanError, match="fits no scheme"):
        compute_ceiling(pool, np.array([9000]), {1: 2})


def test_sample_steps_seeded_and_errors():
    tasks = {"a": np.arange(1, 50), "b": np.arange(100, 200)}
    one, two = sample_steps(tasks, {"a": 3, "b": 2}, 4, seed=5), sample_steps(tasks, {"a": 3, "b": 2}, 4, seed=5)
    assert all((x == y).all() for x, y in zip(one, two)) and all(x.size == 5 for x in one)
    with pytest.raises(PlanError, match="no lengths"):
        sample_steps({"a": np.array([], dtype=int)}, {"a": 1}, 1)


def test_lobra_compare_keeps_the_cheaper_plan_on_calibration():
    rng = np.random.default_rng(0)
    tasks = {"short": rng.integers(20, 400, 300), "long": rng.integers(3000, 7000, 50)}
    r = lobra_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, steps=2, bounds=(256, 512, 1000, 4096),
                      calibration_steps=1, time_limit=1.0)
    assert r["homogeneous"]["replicas"] == "2x tp4-pp1-sp1-z3"   # the only scheme that holds the long task
    assert r["lobra"]["replicas"] in r["candidates"]
    assert all("tp4" in label for label in r["candidates"])  # every candidate holds the longest task length
    assert r["candidates"][r["lobra"]["replicas"]] == min(r["candidates"].values())
    assert r["saving"] == pytest.approx(1 - r["lobra"]["gpu_seconds"] / r["homogeneous"]["gpu_seconds"])
    assert r["lobra"]["devices"] == 8
