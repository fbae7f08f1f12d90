"""Tests for sgl.embeddings.het.bounds: Belady's MIN with bypass and HET's byte floor."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from sgl.embeddings.het import (
    HETConfig, HETEmbedding, LocalTransport, NoCacheEmbedding, ShardedServer, het_traffic_bound,
    optimal_misses,
)
from sgl.errors import EmbeddingError

from tests.embeddings.test_het import run_simulation, zipf_ids


def brute_force_misses(seq: list[int], capacity: int) -> int:
    """Fewest misses over every admission/eviction choice (exhaustive, tiny inputs only)."""
    states = {frozenset(): 0}
    for key in seq:
        nxt: dict[frozenset, int] = {}

        def keep(state: frozenset, cost: int) -> None:
            if cost < nxt.get(state, 1 << 30):
                nxt[state] = cost

        for state, cost in states.items():
            if key in state:
                keep(state, cost)
                continue
            keep(state, cost + 1)                       # bypass
            if len(state) < capacity:
                keep(state | {key}, cost + 1)
            else:
                for victim in state:
                    keep((state - {victim}) | {key}, cost + 1)
        states = nxt
    return min(states.values())


@pytest.mark.parametrize("capacity", [0, 1, 2, 3])
def test_optimal_misses_equal_an_exhaustive_search(capacity: int) -> None:
    rng = np.random.default_rng(capacity)
    for _ in range(25):
        seq = rng.integers(0, 6, size=int(rng.integers(1, 13))).tolist()
        n, misses = optimal_misses([[k] for k in seq], capacity)
        assert n == len(seq)
        assert misses == brute_force_misses(seq, capacity), seq


def test_optimal_misses_dedupe_each_batch_and_count_cold_misses() -> None:
    batches = [np.array([5, 5, 1]), torch.tensor([1, 2]), [2, 5, 5, 5]]
    assert optimal_misses(batches, capacity=10) == (6, 3)      # 3 distinct keys, all cold
    assert optimal_misses(batches, capacity=0) == (6, 6)       # every lookup is fetched
    assert optimal_misses([], capacity=4) == (0, 0)


@pytest.mark.parametrize("unit", ["step", "occurrence"])
@pytest.mark.parametrize("policy", ["lru", "lfu", "lfu_pinned"])
def test_every_het_run_stays_above_the_floor(unit: str, policy: str) -> None:
    vocab, dim, batch, n_workers, capacity = 200, 4, 8, 3, 15
    ids = zipf_ids(n_workers * batch * 30, 5, vocab, seed=4)
    labels = torch.rand(ids.shape[0], generator=torch.Generator().manual_seed(0)).round()
    per_round = batch * n_workers
    streams = [[ids[r * per_round + w * batch:r * per_round + (w + 1) * batch]
                for r in range(ids.shape[0] // per_round)] for w in range(n_workers)]
    floor = het_traffic_bound(streams, capacity, dim)
    for bound in (0, 3, 1000):
        server = ShardedServer(vocab, dim, num_shards=2, seed=3)
        cfg = HETConfig(vocab, dim, capacity, policy=policy, bound=bound, lr=0.1, update_unit=unit)
        workers = [HETEmbedding(cfg, LocalTransport(server)) for _ in range(n_workers)]
        run_simulation(workers, ids, labels, batch, torch.ones(dim))
        for w, stream in zip(workers, streams):
            w.flush()
            c = w.worker.counters
            assert c.unique == optimal_misses(stream, capacity)[0]
            assert c.fetched_new + c.fetched_bypass >= optimal_misses(stream, capacity)[1]
        moved = sum(w.transport.stats.total_bytes for w in workers)
        assert floor.min_bytes <= moved, (bound, floor.min_bytes, moved)
        if bound == 1000:   # almost no protocol traffic: what is left is close to the floor
            assert moved < 1.25 * floor.min_bytes
    # the no-cache PS moves exactly the baseline the reduction is measured against
    server = ShardedServer(vocab, dim, num_shards=2, seed=3)
    ps = [NoCacheEmbedding(HETConfig(vocab, dim, 0), LocalTransport(server)) for _ in range(n_workers)]
    run_simulation(ps, ids, labels, batch, torch.ones(dim))
    assert sum(w.transport.stats.total_bytes for w in ps) == floor.no_cache_bytes


def test_floor_is_reached_by_one_worker_that_caches_everything_and_never_pushes_early() -> None:
    vocab, dim, batch = 90, 4, 8
    ids = zipf_ids(batch * 40, 4, vocab, seed=6)
    labels = torch.zeros(ids.shape[0])
    server = ShardedServer(vocab, dim, num_shards=1, seed=0)
    cfg = HETConfig(vocab, dim, vocab, policy="lru", bound=10**6, lr=0.1, update_unit="step")
    (het,) = workers = [HETEmbedding(cfg, LocalTransport(server))]
    run_simulation(workers, ids, labels, batch, torch.ones(dim))
    het.flush()
    floor = het_traffic_bound([[ids[i:i + batch] for i in range(0, ids.shape[0], batch)]], vocab, dim)
    assert floor.misses == int(torch.unique(ids).numel())
    assert het.transport.stats.total_bytes == floor.min_bytes


def test_bad_inputs() -> None:
    for cap in (-1, 1.5, True, "3"):
        with pytest.raises(EmbeddingError, match="capacity must be an int"):
            optimal_misses([[1]], cap)
    with pytest.raises(EmbeddingError, match="integer ids"):
        optimal_misses([np.array([0.5, 1.0])], 2)
    with pytest.raises(EmbeddingError, match=">= 0"):
        optimal_misses([[3, -1]], 2)
    with pytest.raises(EmbeddingError, match="dim must be"):
        het_traffic_bound([[[1]]], 2, 0)
