"""The static-plan LP bound: never above a replayed dispatch, equal to brute force where it is tight."""
import itertools

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra import dispatch
from sgl.systems.data.lobra_study import (gpu_seconds_lower_bound, lobra_compare, per_token_ceiling, replica_sets,
                                          replayed_steps, static_floor, static_plan_bound, step_time_bound)
from sgl.systems.seq import SeqStrategy, StrategyCost


def _pool():
    return [StrategyCost(SeqStrategy(tp=1, pp=1), 1e-6, 0.10, 5.0, 1000),
            StrategyCost(SeqStrategy(tp=1, pp=2), 2e-6, 0.045, 8.0, 1500),
            StrategyCost(SeqStrategy(tp=4, pp=1), 1e-6, 0.04, 20.0, 8000)]


def _partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1:]
        yield [[first]] + part


def _best_replica_time(p, lengths):
    if not lengths:
        return 0.0
    return min(p.replica_time(mbs) for mbs in _partitions(list(lengths)) if all(p.fits(mb) for mb in mbs))


def _brute_force(pool, replicas, lengths):
    """Exact least step time: every assignment of sequences to replicas, every micro-batching of each."""
    slots = [s for s, r in sorted(replicas.items()) for _ in range(r)]
    best = np.inf
    for assign in itertools.product(range(len(slots)), repeat=len(lengths)):
        per = [[int(L) for L, a in zip(lengths, assign) if a == k] for k in range(len(slots))]
        if any(sum(1 for L in mine if L > pool[slots[k]].capacity) for k, mine in enumerate(per)):
            continue
        best = min(best, max(_best_replica_time(pool[slots[k]], mine) for k, mine in enumerate(per)))
    return best


@pytest.mark.parametrize("pool,replicas,lengths", [
    ([StrategyCost(SeqStrategy(tp=1, pp=1), 0.0, 0.1, 7.0, 100)], {0: 1}, [50, 50, 30, 70]),   # full micro-batches
    ([StrategyCost(SeqStrategy(tp=1, pp=1), 0.0, 0.1, 7.0, 100)], {0: 2}, [100, 100, 100, 100]),  # balanced
    ([StrategyCost(SeqStrategy(tp=1, pp=2), 0.0, 0.1, 7.0, 100)], {0: 1}, [100, 100]),  # the 1F1B bubble
])
def test_bound_equals_brute_force_where_tight(pool, replicas, lengths):
    exact = _brute_force(pool, replicas, lengths)
    assert step_time_bound(pool, np.array(lengths), replicas) == pytest.approx(exact)


def test_bound_at_most_brute_force_and_continuous_at_most_fixed():
    rng = np.random.default_rng(3)
    pool = _pool()
    for _ in range(6):
        lengths = rng.integers(50, 1400, 5)
        for replicas in ({0: 1, 1: 1}, {1: 2}, {0: 2, 2: 1}):
            if lengths.max() > max(pool[s].capacity for s in replicas):
                continue
            exact = _brute_force(pool, replicas, lengths)
            bound = step_time_bound(pool, lengths, replicas)
            assert 0 < bound <= exact * (1 + 1e-9)
            devices = sum(pool[s].devices * r for s, r in replicas.items())
            assert step_time_bound(pool, lengths, None, devices) <= bound * (1 + 1e-9)


@pytest.mark.parametrize("microbatch", ["bucket", "tokens"])
def test_bound_at_most_the_dispatchers_replayed_time(microbatch):
    rng = np.random.default_rng(0)
    pool = _pool()
    lengths = np.concatenate([rng.integers(20, 400, 40), rng.integers(1000, 6000, 3)])
    for replicas in replica_sets(pool, 8, int(lengths.max())):
        work = dispatch(pool, replicas, lengths, (256, 512, 1000, 1500, 8000), time_limit=1.0, microbatch=microbatch)
        replayed = max(pool[s].replica_time(b) for (s, _), b in work.items())
        assert step_time_bound(pool, lengths, replicas) <= replayed * (1 + 1e-9)


def test_static_plan_bound_orders_and_caps_lobra():
    rng = np.random.default_rng(1)
    tasks = {"short": rng.integers(20, 400, 300), "long": rng.integers(3000, 7000, 50)}
    r = lobra_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, steps=2, bounds=(256, 512, 1000, 1500, 8000),
                      calibration_steps=1, time_limit=1.0, search=64, bound_sets=64)
    st = r["static_bound"]
    assert st["sets"] == len(replica_sets(_pool(), 8, int(tasks["long"].max())))
    assert st["continuous_gpu_seconds"] <= st["per_step_gpu_seconds"] * (1 + 1e-9)
    assert st["per_step_gpu_seconds"] <= st["gpu_seconds"] * (1 + 1e-9)
    assert st["gpu_seconds"] <= r["oracle_static"]["gpu_seconds"] * (1 + 1e-9)  # every static plan is above it
    assert st["gpu_seconds"] <= r["lobra"]["gpu_seconds"] * (1 + 1e-9)
    assert r["static_ceiling"] == pytest.approx(1 - st["gpu_seconds"] / r["homogeneous"]["gpu_seconds"])
    assert r["lower_bound_gpu_seconds"] <= st["continuous_gpu_seconds"] * (1 + 1e-9)  # it adds bubbles to that one
    without = lobra_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, steps=2, bounds=(256, 512, 1000, 1500, 8000),
                            calibration_steps=1, time_limit=1.0)
    assert without["static_bound"]["gpu_seconds"] is None  # only the real-count LP without bound_sets
    assert without["static_ceiling"] == pytest.approx(
        1 - without["static_bound"]["continuous_gpu_seconds"] / without["homogeneous"]["gpu_seconds"])


def test_integer_bound_sits_between_real_counts_and_every_static_set():
    rng = np.random.default_rng(2)
    tasks = {"short": rng.integers(20, 400, 300), "long": rng.integers(3000, 7000, 50)}
    kw = dict(steps=2, bounds=(256, 512, 1000, 1500, 8000), calibration_steps=1, time_limit=1.0)
    r = lobra_compare(_pool(), 8, tasks, {"short": 24, "long": 1}, integer_bound=True, **kw)
    st = r["static_bound"]
    assert st["gpu_seconds"] is None and st["integer_gpu_seconds"] is not None
    assert st["continuous_gpu_seconds"] <= st["integer_gpu_seconds"] * (1 + 1e-9)
    assert st["integer_gpu_seconds"] <= r["lobra"]["gpu_seconds"] * (1 + 1e-6)
    # the ceiling uses the tightest bound computed: the integer one here
    assert static_floor(st) == st["integer_gpu_seconds"]
    assert r["static_ceiling"] == pytest.approx(1 - st["integer_gpu_seconds"] / r["homogeneous"]["gpu_seconds"])
    replayed = replayed_steps(_pool(), tasks, {"short": 24, "long": 1}, kw["steps"], 0)[1]
    every = static_plan_bound(_pool(), 8, replayed, int(tasks["long"].max()), limit=64)
    assert st["integer_gpu_seconds"] <= every["gpu_seconds"] * (1 + 2e-3)  # bisection tolerance 1e-3
    with pytest.raises(PlanError, match="without any"):
        static_floor({"gpu_seconds": None, "continuous_gpu_seconds": None})


def test_bound_errors():
    with pytest.raises(PlanError, match="fits no scheme"):
        step_time_bound(_pool(), np.array([9000]), {0: 1})
    assert step_time_bound(_pool(), np.array([], dtype=int), {0: 1}) == 0.0
    assert static_plan_bound(_pool(), 8, [np.array([100, 200])], 5000)["sets"] > 0
    assert gpu_seconds_lower_bound(_pool(), [np.array([100, 200])]) > 0


def test_per_token_ceiling_by_hand_and_caps_the_any_plan_bound():
    pool = [StrategyCost(SeqStrategy(tp=1, pp=1), 0.0, 0.10, 5.0, 1000),
            StrategyCost(SeqStrategy(tp=4, pp=1), 0.0, 0.04, 20.0, 8000)]
    # linear costs: k_0 = 0.1 + 0.005 = 0.105 GPU-ms per token, k_1 = 4 * (0.04 + 0.0025) = 0.17
    sup, at = per_token_ceiling(pool, 1)
    assert sup == pytest.approx(1 - 0.105 / 0.17) and 1 <= at <= 8000
    rng = np.random.default_rng(2)
    steps = [rng.integers(1, 8000, 50)]
    bound = gpu_seconds_lower_bound(pool, steps)
    by_base = sum(4 * (0.04 + 20.0 / 8000) * float(x.sum()) for x in steps) / 1000
    assert bound >= (1 - sup) * by_base * (1 - 1e-12)


def test_integer_bound_between_real_counts_and_per_step_sets():
    rng = np.random.default_rng(4)
    pool = _pool()
    steps = [np.concatenate([rng.integers(20, 900, 30), rng.integers(1000, 6000, 2)]) for _ in range(2)]
    r = static_plan_bound(pool, 8, steps, 6500, integer=True)
    tol = 1 + 2e-3
    assert r["continuous_gpu_seconds"] <= r["integer_gpu_seconds"] * tol
    assert r["integer_gpu_seconds"] <= r["per_step_gpu_seconds"] * (1 + 1e-9)
    assert r["per_step_gpu_seconds"] <= r["integer_gpu_seconds"] * tol  # per step, the same optimum (bisection)
    # the data's longest sequence needs a tp4 replica in every set: without that the real-count LP is lower
    loose = sum(step_time_bound(pool, x, None, 8) for x in steps) * 8 / 1000
    assert loose <= r["continuous_gpu_seconds"] * (1 + 1e-9)
