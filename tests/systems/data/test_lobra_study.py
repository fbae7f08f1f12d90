"""LobRA comparison: the compute ceiling by hand, seeded sampling, plan chosen on calibration batches only."""
import itertools

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra import simulate
from sgl.systems.data.lobra_study import (compute_ceiling, gpu_seconds_lower_bound, lobra_compare, replica_sets,
                                          sample_steps)
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


def test_lower_bound_by_hand_and_tight_when_the_plan_is_perfect():
    pool = _pool()
    steps = [np.array([100, 500, 4000]), np.array([900])]
    per = lambda s, L: pool[s].devices * (pool[s].a * L * L + pool[s].b * L + pool[s].c * L / pool[s].capacity)  # noqa
    by_hand = (min(per(0, 100), per(1, 100)) + min(per(0, 500), per(1, 500)) + per(1, 4000)
               + min(per(0, 900), per(1, 900))) / 1000
    assert gpu_seconds_lower_bound(pool, steps) == pytest.approx(by_hand)
    # one linear scheme, pp 1, micro-batches filled to the token, one replica: the bound is reached exactly
    one = [StrategyCost(SeqStrategy(tp=2, pp=1), 0.0, 0.1, 7.0, 100)]
    filled = [np.array([50, 50, 30, 70]), np.array([100, 60, 40])]
    replayed = simulate(one, {0: 1}, filled, [100], microbatch="tokens")["gpu_seconds"]
    assert gpu_seconds_lower_bound(one, filled) == pytest.approx(replayed)
    assert gpu_seconds_lower_bound(one, [np.array([50, 30])]) < \
        simulate(one, {0: 1}, [np.array([50, 30])], [100])["gpu_seconds"]  # a part-full micro-batch costs c
    with pytest.raises(PlanError, match="fits no scheme"):
        gpu_seconds_lower_bound(pool, [np.array([9000])])


def test_replica_sets_match_brute_force():
    pool = _pool() + [StrategyCost(SeqStrategy(tp=2, pp=1), 1e-6, 0.05, 10.0, 2000)]
    sets = replica_sets(pool, 8, 4000)
    brute = [{s: n for s, n in enumerate(c) if n} for c in itertools.product(range(9), range(3), range(5))
             if sum(n * p.devices for n, p in zip(c, pool)) == 8 and c[1] > 0]
    assert sorted(map(sorted, map(dict.items, sets))) == sorted(map(sorted, map(dict.items, brute)))
    assert replica_sets(pool, 8, 4000, limit=len(brute) - 1) is None
    assert replica_sets(pool, 8, 9000) == []


@pytest.mark.parametrize("microbatch", ["bucket", "tokens"])
def test_no_plan_beats_the_lower_bound(microbatch):
    rng = np.random.default_rng(0)
    tasks = {"short": rng.integers(20, 400, 300), "long": rng.integers(3000, 7000, 50)}
    r = lobra_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, steps=2, bounds=(256, 512, 1000, 4096),
                      calibration_steps=1, time_limit=1.0, microbatch=microbatch, search=16)
    bound = r["lower_bound_gpu_seconds"]
    assert 0 < bound <= r["lobra"]["gpu_seconds"] <= r["homogeneous"]["gpu_seconds"] * 1.5
    assert bound <= r["homogeneous"]["gpu_seconds"] and bound <= r["oracle_static"]["gpu_seconds"]
    assert r["oracle_static"]["gpu_seconds"] <= r["homogeneous"]["gpu_seconds"]  # the baseline is one of the sets
    assert r["ceiling"] == pytest.approx(1 - bound / r["homogeneous"]["gpu_seconds"])
    assert r["share_of_ceiling"] == pytest.approx(r["saving"] / r["ceiling"])
    assert r["searched"] >= len(replica_sets(_pool(), 8, 3000))
