"""Feature caches (LRU, static, Belady), the historical embedding cache and the memory budget."""
import numpy as np
import pytest
import torch

from sgl.errors import ConfigError
from sgl.samplers.caches import (BeladyFeatureCache, HistoricalEmbeddingCache, LRUFeatureCache, MemoryBudget,
                                 NoFeatureCache, StaticFeatureCache, parse_bytes)


class Rows:
    """A counted fake feature store: row v = [v, 2v]."""

    num_nodes, num_features, row_bytes = 50, 2, 8

    def __init__(self):
        self.reads = 0

    def read(self, ids):
        self.reads += len(ids)
        ids = np.asarray(ids)
        return torch.as_tensor(np.stack([ids, 2 * ids], 1), dtype=torch.float32)


def _trace(seed=0, batches=40, size=12):
    rng = np.random.default_rng(seed)
    # skewed popularity so caching matters
    return [np.unique(rng.zipf(1.6, size) % 50) for _ in range(batches)]


def _belady_reference(trace, capacity):
    """Plain-Python Belady at batch granularity: misses enter, furthest next use leaves."""
    cache, hits = set(), 0
    for t, ids in enumerate(trace):
        ids = set(ids.tolist())
        hits += len(ids & cache)
        def next_use(v):
            for u in range(t + 1, len(trace)):
                if v in set(trace[u].tolist()):
                    return u
            return 10**9
        candidates = cache | ids
        keep = sorted(candidates, key=lambda v: (next_use(v), v))
        cache = {v for v in keep[:capacity] if next_use(v) < 10**9}
    return hits


@pytest.mark.parametrize("kind", ["none", "lru", "static", "belady"])
def test_every_cache_returns_the_right_rows(kind):
    trace = _trace()
    reader = Rows()
    cache = {"none": lambda: NoFeatureCache(reader), "lru": lambda: LRUFeatureCache(reader, 10),
             "static": lambda: StaticFeatureCache(reader, np.arange(0, 50, 3)),
             "belady": lambda: BeladyFeatureCache(reader, 10, trace)}[kind]()
    for ids in trace:
        out = cache.fetch(ids)
        assert torch.equal(out, torch.as_tensor(np.stack([ids, 2 * ids], 1), dtype=torch.float32))
    assert cache.hits + cache.misses == sum(t.size for t in trace)
    assert reader.reads == cache.misses
    if kind != "none":
        assert cache.hits > 0


def test_belady_matches_the_reference_and_beats_lru():
    trace = _trace(seed=3)
    for capacity in (3, 8, 20):
        belady = BeladyFeatureCache(Rows(), capacity, trace)
        for ids in trace:
            belady.fetch(ids)
        assert belady.hits == _belady_reference(trace, capacity)
        lru = LRUFeatureCache(Rows(), capacity)
        for ids in trace:
            lru.fetch(ids)
        assert belady.hits >= lru.hits


def _two_superbatches(trace, refill=False, capacity=8):
    """Replay trace[:20] as one superbatch and trace[20:] as the next; returns the store, the cache,
    (reads, hits) before the second superbatch and its fetched rows."""
    rows = Rows()
    cache = BeladyFeatureCache(rows, capacity, trace[:20])
    for ids in trace[:20]:
        cache.fetch(ids)
    before = (rows.reads, cache.hits)
    cache.set_trace(trace[20:], refill=refill)
    return rows, cache, before, [cache.fetch(ids) for ids in trace[20:]]


def test_belady_new_superbatch_keeps_contents_and_rejects_a_different_trace():
    trace = _trace(seed=4)
    _, cache, (_, hits), _ = _two_superbatches(trace)
    assert cache.hits > hits
    with pytest.raises(ConfigError):
        cache.fetch(trace[0])  # past the end of the planned superbatch


def test_lru_evicts_least_recently_used():
    cache = LRUFeatureCache(Rows(), 2)
    cache.fetch(np.array([1, 2]))
    cache.fetch(np.array([1]))
    cache.fetch(np.array([3]))  # evicts 2, not 1
    cache.fetch(np.array([1]))
    assert cache.hits == 2
    cache.fetch(np.array([2]))
    assert cache.misses == 4


def test_embedding_cache_staleness():
    cache = HistoricalEmbeddingCache(np.array([1, 4]), num_nodes=10, width=3, staleness=2)
    nodes = np.array([1, 4, 5])
    assert cache.fresh(nodes, 0).tolist() == [False, False, False]  # never pushed
    cache.push(nodes, torch.ones(3, 3), iteration=0)
    assert cache.pushes == 2  # node 5 is not selected
    assert cache.fresh(nodes, 1).tolist() == [True, True, False]
    assert cache.fresh(nodes, 2).tolist() == [False, False, False]  # 2 - 0 >= staleness
    assert torch.equal(cache.pull(np.array([4])), torch.ones(1, 3))
    with pytest.raises(ConfigError):
        HistoricalEmbeddingCache(np.array([1]), 10, 3, staleness=0)


def test_embedding_cache_planned_stamps_answer_for_the_future_without_touching_the_present():
    cache = HistoricalEmbeddingCache(np.array([1, 4]), num_nodes=10, width=3, staleness=2)
    nodes = np.array([1, 4, 5])
    plan = cache.stamp.copy()
    cache.plan_push(np.array([4, 5]), iteration=3, stamps=plan)  # a batch sampled ahead will push 4 at it 3
    assert cache.fresh(nodes, 4, plan).tolist() == [False, True, False]
    assert cache.fresh(nodes, 4).tolist() == [False, False, False]  # nothing pushed yet
    cache.push(np.array([4, 5]), torch.ones(2, 3), iteration=3)
    np.testing.assert_array_equal(cache.stamp, plan)  # the real push lands where the plan said


def test_parse_bytes_and_budget():
    assert parse_bytes("256MB") == 256_000_000 and parse_bytes("2 GiB") == 2 * 2**30 and parse_bytes(10) == 10
    for bad in ("lots", "-5MB", "0", "12XB", True):
        with pytest.raises(ConfigError):
            parse_bytes(bad)
    budget = MemoryBudget("1KB")
    budget.register("cache", LRUFeatureCache(Rows(), 0))
    budget.check(working_bytes=500)
    with pytest.raises(ConfigError, match="budget"):
        budget.check(working_bytes=2000)


def _ginex_refill_reference(trace, capacity):
    """Ginex per superbatch: a fresh cache filled with the first `capacity` distinct ids (all read),
    then Belady over the superbatch; returns (storage reads, hits)."""
    order = []
    for ids in trace:
        order += [v for v in ids.tolist() if v not in order]
    cache = set(order[:capacity])
    reads, hits = len(cache), 0
    for t, ids in enumerate(trace):
        ids = set(ids.tolist())
        hits += len(ids & cache)
        reads += len(ids - cache)

        def next_use(v):
            for u in range(t + 1, len(trace)):
                if v in set(trace[u].tolist()):
                    return u
            return 10**9
        keep = sorted(cache | ids, key=lambda v: (next_use(v), v))
        cache = {v for v in keep[:capacity] if next_use(v) < 10**9}
    return reads, hits


def test_belady_refill_rebuilds_the_cache_from_storage_like_ginex():
    trace = _trace(seed=5)
    rows, cache, (reads_before, hits_before), fetched = _two_superbatches(trace, refill=True)
    for ids, got in zip(trace[20:], fetched):
        assert torch.equal(got, torch.as_tensor(np.stack([ids, 2 * ids], 1), dtype=torch.float32))
    reads, hits = _ginex_refill_reference(trace[20:], 8)
    assert rows.reads - reads_before == reads  # the fill is counted as storage reads
    assert cache.hits - hits_before == hits
    # keeping the contents instead never reads more for the same superbatch
    warm_rows, _, (warm_before, _), _ = _two_superbatches(trace)
    assert warm_rows.reads - warm_before <= rows.reads - reads_before


def test_static_lru_and_embedding_caches_clear():
    lru_rows = Rows()
    lru = LRUFeatureCache(lru_rows, 2)
    lru.fetch(np.array([1, 2]))
    lru.clear()
    lru.fetch(np.array([1, 2]))  # read again, cached again
    lru.fetch(np.array([1, 2]))
    assert lru_rows.reads == 4 and lru.hits == 2
    rows = Rows()
    static = StaticFeatureCache(rows, np.array([1, 2, 3]))
    static.fetch(np.array([1, 2, 9]))
    static.fetch(np.array([1, 2]))
    assert static.hits == 2 and rows.reads == 3
    static.clear()
    static.fetch(np.array([1, 2]))  # members are read again once, then cached again
    static.fetch(np.array([1, 2]))
    assert rows.reads == 5 and static.hits == 4
    emb = HistoricalEmbeddingCache(np.array([1, 4]), num_nodes=10, width=3, staleness=5)
    emb.push(np.array([1, 4]), torch.ones(2, 3), iteration=0)
    assert emb.fresh(np.array([1, 4]), 1).tolist() == [True, True]
    emb.clear()
    assert emb.fresh(np.array([1, 4]), 1).tolist() == [False, False]
