"""LobRA planner: the MILP equals brute force, dispatch respects capacities, replay on real lengths."""
import itertools
import math
import os

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra import (_greedy_counts, bucketize_lengths, dispatch, homogeneous_replicas, plan_replicas,
                                    simulate)
from sgl.systems.seq import SeqStrategy, StrategyCost, hydraulis_pool, read_lengths


def _pool():
    return [StrategyCost(SeqStrategy(tp=1, pp=2), 2e-6, 0.09, 30.0, 700),
            StrategyCost(SeqStrategy(tp=4, pp=1), 1e-6, 0.05, 50.0, 4000)]


def _brute_force(pool, devices, lengths, counts, tokens=False):
    best = math.inf
    sequences = [b for b, n in enumerate(counts) for _ in range(n)]
    for x0 in range(devices // pool[0].devices + 1):
        for x1 in range(devices // pool[1].devices + 1):
            if x0 * pool[0].devices + x1 * pool[1].devices != devices:
                continue
            slots = [0] * x0 + [1] * x1
            for choice in itertools.product(range(len(slots)), repeat=len(sequences)):
                load = np.zeros((len(slots), len(counts)), dtype=int)
                ok = True
                for seq, slot in zip(sequences, choice):
                    if lengths[seq] > pool[slots[slot]].capacity:
                        ok = False
                        break
                    load[slot, seq] += 1
                if not ok:
                    continue
                worst = 0.0
                for slot, s in enumerate(slots):
                    p = pool[s]
                    per = [max(1, p.capacity // length) for length in lengths]
                    seq = [p.a * length ** 2 + p.b * length for length in lengths]
                    if tokens:  # one micro-batch count per replica, by tokens across buckets
                        t = sum(n * seq[b] for b, n in enumerate(load[slot])) + \
                            p.c * math.ceil(sum(n * lengths[b] for b, n in enumerate(load[slot])) / p.capacity)
                    else:
                        t = sum(n * seq[b] + p.c * math.ceil(n / per[b]) for b, n in enumerate(load[slot]))
                    bubble = max([min(per[b], counts[b]) * seq[b] + p.c for b, n in enumerate(load[slot]) if n],
                                 default=0.0)  # the largest micro-batch a bucket can fill
                    worst = max(worst, t + (p.pp - 1) * bubble)
                best = min(best, worst)
    return best


@pytest.mark.parametrize("counts", [(3, 1), (5, 0), (2, 2), (1, 1)])
def test_static_milp_equals_brute_force(counts):
    pool, lengths = _pool(), [300, 1500]
    plan = plan_replicas(pool, 4, lengths, list(counts))
    assert plan.status == "optimal"
    assert sum(pool[s].devices * r for s, r in plan.replicas.items()) == 4
    assert plan.time_ms == pytest.approx(_brute_force(pool, 4, lengths, counts), rel=1e-3)
    dispatched = sum(v for v in plan.dispatch.values())
    assert dispatched.tolist() == list(counts)


@pytest.mark.parametrize("counts", [(3, 1), (4, 2), (0, 3)])
def test_token_microbatch_milp_equals_brute_force(counts):
    pool, lengths = _pool(), [300, 1500]
    plan = plan_replicas(pool, 4, lengths, list(counts), microbatch="tokens")
    assert plan.status == "optimal"
    assert plan.time_ms == pytest.approx(_brute_force(pool, 4, lengths, counts, tokens=True), rel=1e-3)
    with pytest.raises(PlanError, match="microbatch must be one of"):
        plan_replicas(pool, 4, lengths, list(counts), microbatch="tokenz")


def test_token_dispatch_places_every_sequence_and_is_never_slower():
    pool = hydraulis_pool(8)
    rng = np.random.default_rng(1)
    bounds = [64, 256, 1024, 2566]
    steps = [np.concatenate([rng.integers(1, 60, 100), rng.integers(100, 900, 12), rng.integers(1500, 2500, 2)])
             for _ in range(2)]
    tp4 = next(i for i, p in enumerate(pool) if p.label.startswith("tp4-pp1"))
    tp2 = next(i for i, p in enumerate(pool) if p.label.startswith("tp2-pp2"))
    replicas = {tp4: 1, tp2: 1}
    for lengths in steps:
        work = dispatch(pool, replicas, lengths, bounds, microbatch="tokens")
        placed = sorted(x for batches in work.values() for mb in batches for x in mb)
        assert placed == sorted(lengths.tolist())
        for (s, _), batches in work.items():
            assert all(sum(mb) <= pool[s].capacity for mb in batches)
    per_bucket = simulate(pool, replicas, steps, bounds, repack=False)["gpu_seconds"]
    repacked = simulate(pool, replicas, steps, bounds)["gpu_seconds"]
    tokens = simulate(pool, replicas, steps, bounds, microbatch="tokens")["gpu_seconds"]
    assert repacked <= per_bucket and tokens < per_bucket  # remainders of several buckets share micro-batches


def test_dispatch_respects_capacity_and_places_every_sequence():
    pool = hydraulis_pool(8)
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.integers(10, 300, 40), rng.integers(1000, 8000, 3)])
    bounds = [128, 256, 512, 2048, 8944]
    plan = plan_replicas(pool, 8, [128, 256, 512, 2048, 8944], [10, 20, 10, 0, 3])
    work = dispatch(pool, plan.replicas, lengths, bounds)
    placed = sorted(x for batches in work.values() for mb in batches for x in mb)
    assert placed == sorted(lengths.tolist())
    for (s, _), batches in work.items():
        assert all(sum(mb) <= pool[s].capacity for mb in batches)
    with pytest.raises(PlanError, match="above the last bucket bound"):
        bucketize_lengths([9000], bounds)
    with pytest.raises(PlanError, match="longer than every scheme"):
        plan_replicas(pool, 8, [20000], [1])
    with pytest.raises(PlanError, match="no replica plan"):
        plan_replicas([pool[-1]], 12, [100], [1])  # 8-GPU scheme cannot fill 12 GPUs


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="SGL_SLOW_TESTS=1: reads 1M real lengths (~12 s)")
def test_replay_on_real_lengths_beats_or_matches_one_scheme(data_path):
    wiki = read_lengths(data_path("seqlen", "wikipedia.txt"), max_length=8000)[:20000]
    pool = hydraulis_pool(16)
    rng = np.random.default_rng(0)
    # two tasks: long Wikipedia documents and short sequences (the head of the same file, clipped)
    steps = [np.concatenate([rng.choice(wiki, 8), np.minimum(rng.choice(wiki, 56), 200)]) for _ in range(3)]
    bounds = [128, 256, 512, 1024, 2048, 4096, 8944]
    bucket, b = bucketize_lengths(np.concatenate(steps), bounds)
    plan = plan_replicas(pool, 16, b, np.ceil(np.bincount(bucket, minlength=len(b)) / 3).astype(int))
    ours = simulate(pool, plan.replicas, steps, bounds)
    base = simulate(pool, homogeneous_replicas(pool, 16, 8000), steps, bounds)
    assert ours["devices"] == base["devices"] == 16
    assert ours["gpu_seconds"] <= base["gpu_seconds"] * 1.05


def test_greedy_fallback_dispatch_places_every_sequence_where_it_fits():
    pool = _pool()
    lengths = np.array([3500, 600, 650, 100, 120, 90, 2000])
    bucket, bounds = bucketize_lengths(lengths, [128, 700, 4000])
    counts = _greedy_counts(pool, {0: 2, 1: 1}, lengths, bucket, bounds.size)
    assert sum(c for c in counts.values()).tolist() == np.bincount(bucket, minlength=3).tolist()
    assert counts[(0, 0)][2] == counts[(0, 1)][2] == 0  # the 700-token scheme never gets the long bucket
    with pytest.raises(PlanError, match="fits no replica"):
        _greedy_counts(pool, {0: 1}, lengths, bucket, bounds.size)
