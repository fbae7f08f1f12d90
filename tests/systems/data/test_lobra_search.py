"""Extra LobRA candidates: valid replica sets, a hill climb that never worsens, a choice never worse on calibration."""
import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra import simulate
from sgl.systems.data.lobra_pool import lora_pool
from sgl.systems.data.lobra_search import (local_search, lp_counts, neighbours, rounded_sets, search_candidates,
                                           surrogate_ms)
from sgl.systems.data.lobra_study import lobra_compare
from sgl.systems.seq import SeqStrategy, StrategyCost


def _small():
    return [StrategyCost(SeqStrategy(tp=1, pp=1), 1e-6, 0.10, 5.0, 1000),
            StrategyCost(SeqStrategy(tp=2, pp=1), 1e-6, 0.05, 10.0, 2000),
            StrategyCost(SeqStrategy(tp=4, pp=1), 1e-6, 0.04, 20.0, 8000)]


def _gpus(pool, rep):
    return sum(pool[s].devices * r for s, r in rep.items())


def _calib(seed=0, n=2):
    rng = np.random.default_rng(seed)
    return [np.concatenate([rng.integers(20, 400, 40), rng.integers(1000, 5000, 6), [15000]]) for _ in range(n)]


@pytest.mark.parametrize("devices", [32, 64])
def test_rounded_lp_sets_are_valid_and_hold_the_longest(devices):
    pool = lora_pool(devices, adapters=3)
    calib = _calib()
    counts = lp_counts(pool, devices, calib, 15000)
    assert sum(pool[s].devices * r for s, r in counts.items()) == pytest.approx(devices, rel=1e-6)
    sets = rounded_sets(pool, counts, devices, 15000)
    assert sets
    for rep in sets:
        assert _gpus(pool, rep) == devices and all(r > 0 for r in rep.values())
        assert any(pool[s].capacity >= 15000 for s in rep)


def test_neighbours_keep_the_gpus_and_the_longest():
    pool = lora_pool(32, adapters=3)
    start = {9: 4}  # 4x tp8-pp1
    near = neighbours(pool, start, 15000)
    assert near and start not in near
    for rep in near:
        assert _gpus(pool, rep) == 32 and any(pool[s].capacity >= 15000 for s in rep)
        changed = {s for s in set(rep) | set(start) if rep.get(s, 0) != start.get(s, 0)}
        assert len(changed) == 2  # one move trades one scheme's GPUs for another's
    assert neighbours(pool, {9: 1}, 15000) == []  # every move would drop the only holder of 15k tokens


def test_local_search_never_worse_than_its_start_and_keeps_its_budget():
    pool = lora_pool(32, adapters=3)
    calib = _calib(1)
    start = {9: 4}
    found = local_search(pool, 32, 15000, calib, [start], max_evals=25, keep=4)
    scores = [v for v, _ in found]
    assert scores == sorted(scores) and len(found) <= 4
    assert scores[0] <= surrogate_ms(pool, start, calib) + 1e-9
    assert all(_gpus(pool, rep) == 32 for _, rep in found)
    assert found == local_search(pool, 32, 15000, calib, [start], max_evals=25, keep=4)  # deterministic
    with pytest.raises(PlanError, match="max_evals"):
        local_search(pool, 32, 15000, calib, [start], max_evals=0)


def test_surrogate_is_a_lower_bound_of_the_replayed_time():
    pool = _small()
    rng = np.random.default_rng(3)
    calib = [np.concatenate([rng.integers(20, 400, 20), [4000]])]
    bounds = (256, 512, 1000, 2000, 8000)
    for rep in search_candidates(pool, 8, 4000, calib, [{2: 2}], max_evals=20, keep=5):
        assert _gpus(pool, rep) == 8 and rep.get(2, 0) >= 1
        replayed = simulate(pool, rep, calib, bounds, microbatch="tokens")["total_s"] * 1000
        assert surrogate_ms(pool, rep, calib) <= replayed * (1 + 1e-9)


def test_choice_with_local_search_is_never_worse_on_calibration():
    rng = np.random.default_rng(0)
    tasks = {"short": rng.integers(20, 400, 300), "long": rng.integers(3000, 7000, 50)}
    kw = dict(steps=1, bounds=(256, 512, 1000, 4096), calibration_steps=1, time_limit=1.0, microbatch="tokens")
    old = lobra_compare(_small(), 8, tasks, {"short": 24, "long": 1}, **kw)
    new = lobra_compare(_small(), 8, tasks, {"short": 24, "long": 1}, local_search=30, local_keep=4, **kw)
    assert set(old["candidates"]) <= set(new["candidates"])
    assert set(new["local_candidates"]) <= set(new["candidates"])
    assert all("tp4" in label for label in new["local_candidates"])  # each holds the longest task length
    chosen = new["candidates"][new["lobra"]["replicas"]]
    assert chosen == min(new["candidates"].values())
    assert chosen <= min(old["candidates"].values()) * (1 + 1e-9)


def test_lpt_dispatch_places_every_sequence_once_within_capacity():
    from sgl.systems.data.lobra import dispatch, lpt_dispatch, step_time

    pool = _small()
    rng = np.random.default_rng(5)
    lengths = np.concatenate([rng.integers(20, 900, 40), rng.integers(1200, 1900, 4), [5000, 7000]])
    rep = {0: 2, 1: 1, 2: 1}
    work = lpt_dispatch(pool, rep, lengths)
    placed = sorted(x for batches in work.values() for mb in batches for x in mb)
    assert placed == sorted(lengths.tolist())
    assert all(sum(mb) <= pool[s].capacity for (s, _), batches in work.items() for mb in batches)
    bounds = (256, 512, 1000, 2000, 8000)
    plain = step_time(pool, dispatch(pool, rep, lengths, bounds, microbatch="tokens"))
    both = step_time(pool, dispatch(pool, rep, lengths, bounds, microbatch="tokens", lpt=True))
    assert both <= min(plain, step_time(pool, work)) * (1 + 1e-12)  # the faster of the two is kept
    with pytest.raises(PlanError, match="fits no replica"):
        lpt_dispatch(pool, {0: 8}, lengths)


def test_greedy_score_is_the_replay_of_a_real_dispatch():
    from sgl.systems.data.lobra_search import greedy_ms

    pool = _small()
    calib = _calib(4)
    calib = [x[x <= 8000] for x in calib]
    bounds = (256, 512, 1000, 2000, 8000)
    for rep in ({2: 2}, {2: 1, 1: 2}, {2: 1, 0: 4}):
        replayed = simulate(pool, rep, calib, bounds, microbatch="tokens", lpt=True)["total_s"] * 1000
        assert replayed <= greedy_ms(pool, rep, calib) * (1 + 1e-12)
    assert greedy_ms(pool, {0: 8}, calib) == float("inf")
    with pytest.raises(PlanError, match="score"):
        local_search(pool, 8, 4000, calib, [{2: 2}], score="best")
