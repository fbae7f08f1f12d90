"""Tests for sgl.embeddings.het (in-process simulator; multi-process runs are in test_het_dist.py)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sgl.embeddings.het import (
    EmbeddingCache, HETConfig, HETEmbedding, LocalTransport, ShardedServer, init_rows,
)
from sgl.errors import ConfigError, EmbeddingError


def zipf_ids(n_rows: int, n_fields: int, vocab: int, seed: int, a: float = 1.2) -> torch.Tensor:
    """Zipf-like ids (rank r drawn with probability ~ r^-a), shuffled so hot ids are spread."""
    g = torch.Generator().manual_seed(seed)
    probs = torch.arange(1, vocab + 1, dtype=torch.float64) ** -a
    ranks = torch.multinomial(probs, n_rows * n_fields, replacement=True, generator=g)
    perm = torch.randperm(vocab, generator=g)
    return perm[ranks].reshape(n_rows, n_fields)


def make_workers(n_workers, vocab, dim, capacity, bound, policy="lfu_pinned", unit="step",
                 shards=2, lr=0.1, push_bound=None):
    server = ShardedServer(vocab, dim, num_shards=shards, seed=3)
    cfg = HETConfig(vocab, dim, capacity, policy=policy, bound=bound, push_bound=push_bound,
                    lr=lr, update_unit=unit)
    return server, [HETEmbedding(cfg, LocalTransport(server)) for _ in range(n_workers)]


def het_loss(emb_out: torch.Tensor, labels: torch.Tensor, proj: torch.Tensor) -> torch.Tensor:
    logits = emb_out.sum(1) @ proj
    return F.binary_cross_entropy_with_logits(logits, labels)


@pytest.mark.parametrize("policy", ["lru", "lfu", "lfu_pinned"])
def test_bound0_one_worker_equals_full_table_sgd_exactly(policy: str) -> None:
    vocab, dim, lr = 200, 6, 0.5
    ids = zipf_ids(40 * 16, 5, vocab, seed=1)
    labels = torch.randint(0, 2, (ids.shape[0],), generator=torch.Generator().manual_seed(2)).float()
    server, (het,) = make_workers(1, vocab, dim, capacity=30, bound=0, policy=policy, lr=lr)
    proj_het = torch.randn(dim, requires_grad=True)
    proj_ref = proj_het.detach().clone().requires_grad_(True)
    table = init_rows(torch.arange(vocab), dim, seed=3).requires_grad_(True)
    opt_het = torch.optim.SGD([proj_het], lr=lr)
    opt_ref = torch.optim.SGD([proj_ref], lr=lr)
    for b in range(40):
        x, y = ids[b * 16:(b + 1) * 16], labels[b * 16:(b + 1) * 16]
        out_het = het(x)
        out_ref = F.embedding(x, table)
        assert torch.equal(out_het, out_ref), f"batch {b}: lookups differ"
        het_loss(out_het, y, proj_het).backward()
        het_loss(out_ref, y, proj_ref).backward()
        het.step()
        opt_het.step(); opt_het.zero_grad()
        opt_ref.step(); opt_ref.zero_grad()
        with torch.no_grad():
            table += table.grad * (-lr)  # plain SGD on the full table
        table.grad = None
    het.flush()
    assert het.worker.cache.evictions > 0  # the small cache really evicted lines
    assert torch.equal(server.weights(), table.detach())
    assert torch.equal(proj_het, proj_ref)


def run_simulation(workers, ids, labels, batch, proj):
    """Lock-step rounds: every worker looks up, then every worker updates (like DistTransport)."""
    n = len(workers)
    per_round = batch * n
    occurrences = torch.zeros(workers[0].config.num_embeddings, dtype=torch.int64)
    steps = torch.zeros_like(occurrences)
    for r in range(ids.shape[0] // per_round):
        outs = []
        for w, het in enumerate(workers):
            lo = r * per_round + w * batch
            x = ids[lo:lo + batch]
            occurrences += torch.bincount(x.flatten(), minlength=occurrences.numel())
            steps[torch.unique(x)] += 1
            outs.append((het(x), labels[lo:lo + batch]))
        for het, (out, y) in zip(workers, outs):
            het_loss(out, y, proj).backward()
            het.step()
    return occurrences, steps


@pytest.mark.parametrize("unit", ["step", "occurrence"])
@pytest.mark.parametrize("policy", ["lru", "lfu", "lfu_pinned"])
def test_no_update_lost_on_eviction(unit: str, policy: str) -> None:
    vocab, dim = 300, 4
    ids = zipf_ids(3 * 8 * 30, 6, vocab, seed=5)
    labels = torch.rand(ids.shape[0]).round()
    server, workers = make_workers(3, vocab, dim, capacity=20, bound=3, policy=policy, unit=unit)
    init = server.weights()
    occ, steps = run_simulation(workers, ids, labels, 8, torch.ones(dim))
    assert sum(w.worker.cache.evictions for w in workers) > 50
    before = server.versions().sum()
    for het in workers:
        het.flush()
    expected = occ if unit == "occurrence" else steps
    assert server.versions().sum() > before  # the flush carried real updates
    assert torch.equal(server.versions(), expected)
    # every pushed delta landed: rows never touched are unchanged, touched rows moved
    moved = (server.weights() != init).any(1)
    assert torch.equal(moved, expected > 0)


@pytest.mark.parametrize("bound", [0, 1, 4])
def test_staleness_never_exceeds_bound(bound: int) -> None:
    vocab, dim = 120, 4
    ids = zipf_ids(4 * 8 * 25, 5, vocab, seed=7)
    labels = torch.rand(ids.shape[0]).round()
    server, workers = make_workers(4, vocab, dim, capacity=40, bound=bound)
    worst = -1
    per_round = 8 * 4
    for r in range(ids.shape[0] // per_round):
        outs = []
        for w, het in enumerate(workers):
            x = ids[r * per_round + w * 8: r * per_round + (w + 1) * 8]
            out = het(x)
            keys = torch.unique(x)
            lag = server.versions()[keys] - het.worker.read_versions
            assert int(lag.max()) <= bound, (r, w, int(lag.max()))
            worst = max(worst, int(lag.max()))
            outs.append((out, labels[:8]))
        for het, (out, y) in zip(workers, outs):
            het_loss(out, y, torch.ones(dim)).backward()
            het.step()
            cache = het.worker.cache
            assert int(cache.updates.max()) <= bound  # writes: at most `bound` unpushed updates
    assert max(w.transport.stats.max_read_staleness for w in workers) == worst
    if bound > 0:
        assert worst == bound  # the bound is actually used, not just respected


def test_byte_accounting_exact() -> None:
    dim = 8
    server, (het,) = make_workers(1, 50, dim, capacity=10, bound=0, shards=3)
    out = het(torch.tensor([[1, 2], [2, 3]]))  # 3 unique keys, all new
    stats = het.transport.stats
    assert stats.bytes_sent == 3 * 16 and stats.bytes_received == 3 * (16 + 4 * dim)
    out.sum().backward()
    het.step()  # bound 0: the 3 rows push (key 8 + delta 32 + count 8)
    assert stats.bytes_sent == 3 * 16 + 3 * (8 + 4 * dim + 8)
    het(torch.tensor([[1, 2]])).sum().backward()  # versions current: nothing comes back
    assert stats.bytes_received == 3 * (16 + 4 * dim) and stats.rows_fetched == 3
    # no-cache baseline pull: keys only, values only
    reply = het.transport.pull(torch.tensor([4, 5]), None, 0)
    assert reply.versions is None and reply.positions.tolist() == [0, 1]
    assert stats.bytes_received == 3 * (16 + 4 * dim) + 2 * 4 * dim


def test_cache_policies_choose_the_right_victims() -> None:
    ones = lambda n: torch.ones(n, dtype=torch.long)  # noqa: E731
    # LRU: key used most recently survives
    lru = EmbeddingCache(100, 2, 2, policy="lru")
    lru.tick(); lru.admit(torch.tensor([1, 2]), ones(2))
    lru.tick(); lru.touch(lru.locate(torch.tensor([1])))
    lru.tick(); lru.admit(torch.tensor([3]), ones(1))
    assert sorted(lru.cached_keys().tolist()) == [1, 3]
    # LFU: key used twice survives a more recent key used once
    lfu = EmbeddingCache(100, 2, 2, policy="lfu")
    lfu.tick(); lfu.admit(torch.tensor([1]), ones(1))
    lfu.tick(); lfu.touch(lfu.locate(torch.tensor([1])))
    lfu.tick(); lfu.admit(torch.tensor([2]), ones(1))
    lfu.tick(); lfu.admit(torch.tensor([3]), ones(1))
    assert sorted(lfu.cached_keys().tolist()) == [1, 3]
    # pinned LFU: a line used pin_threshold times is never evicted; with only pinned lines
    # left, new keys bypass the cache
    pin = EmbeddingCache(100, 2, 1, policy="lfu_pinned", pin_threshold=3)
    pin.tick(); pin.admit(torch.tensor([7]), ones(1))
    for _ in range(2):
        pin.tick(); pin.touch(pin.locate(torch.tensor([7])))
    pin.tick()
    slots, _ = pin.admit(torch.tensor([8]), ones(1))
    assert slots.tolist() == [-1] and pin.cached_keys().tolist() == [7]
    # lines of the current batch are never evicted; busy cache -> bypass, most-used key wins
    busy = EmbeddingCache(100, 2, 1, policy="lru")
    busy.tick()
    slots, _ = busy.admit(torch.tensor([4, 5]), torch.tensor([1, 3]))
    assert slots.tolist() == [-1, 0]


def test_dirty_eviction_is_pushed_with_next_update() -> None:
    server, (het,) = make_workers(1, 20, 2, capacity=1, bound=5, policy="lru")
    het(torch.tensor([[1]])).sum().backward(); het.step()
    assert server.versions()[1] == 0  # within the write bound: not pushed yet
    het(torch.tensor([[2]])).sum().backward(); het.step()  # evicts 1, pushes it
    assert server.versions()[1] == 1 and server.versions()[2] == 0


def test_capacity_zero_bypasses_and_still_trains() -> None:
    server, (het,) = make_workers(1, 20, 2, capacity=0, bound=5)
    init = server.weights()
    for _ in range(3):
        het(torch.tensor([[1, 1, 2]])).sum().backward(); het.step()
    assert server.versions()[[1, 2]].tolist() == [3, 3]
    assert not torch.equal(server.weights()[1], init[1])


def test_bad_inputs() -> None:
    server, (het,) = make_workers(1, 20, 2, capacity=4, bound=1)
    with pytest.raises(EmbeddingError, match=r"ids must be in \[0, 20\), got values in \[-1, 3\]"):
        het(torch.tensor([[-1, 3]]))
    with pytest.raises(EmbeddingError, match=r"got values in \[2, 20\]"):
        het(torch.tensor([[2, 20]]))
    with pytest.raises(EmbeddingError, match="int64/int32"):
        het(torch.tensor([[1.0]]))
    with pytest.raises(EmbeddingError, match="no training batch"):
        het.step()
    het(torch.tensor([[1]]))
    with pytest.raises(EmbeddingError, match="never applied"):
        het(torch.tensor([[1]]))
    het.step()  # no backward: zero gradient is fine
    het.eval()
    with torch.no_grad():
        het(torch.tensor([[1]])); het(torch.tensor([[2]]))  # eval lookups need no step
    for kwargs, match in [
        (dict(cache_capacity=-1), "cache_capacity"), (dict(bound=-2), "bound"),
        (dict(policy="fifo"), "policy"), (dict(update_unit="row"), "update_unit"),
        (dict(lr=0.0), "lr"), (dict(num_embeddings=0), "num_embeddings"),
    ]:
        base = dict(num_embeddings=20, embedding_dim=2, cache_capacity=4)
        base.update(kwargs)
        with pytest.raises(ConfigError, match=match):
            HETConfig(**base)
    with pytest.raises(ConfigError, match="transport serves a 20x2 table"):
        HETEmbedding(HETConfig(30, 2, 4), LocalTransport(server))
    with pytest.raises(EmbeddingError, match="num_shards"):
        ShardedServer(10, 2, num_shards=0)


def test_no_cache_baseline_trains_like_bound0_and_moves_more_bytes() -> None:
    from sgl.embeddings.het import NoCacheEmbedding

    vocab, dim = 150, 4
    ids = zipf_ids(3 * 8 * 20, 5, vocab, seed=9)
    labels = torch.rand(ids.shape[0]).round()
    runs = {}
    for kind in ("het", "ps"):
        server = ShardedServer(vocab, dim, num_shards=2, seed=3)
        cfg = HETConfig(vocab, dim, 40, bound=0, lr=0.1)
        cls = HETEmbedding if kind == "het" else NoCacheEmbedding
        workers = [cls(cfg, LocalTransport(server)) for _ in range(3)]
        run_simulation(workers, ids, labels, 8, torch.ones(dim))
        for w in workers:
            w.flush()
        runs[kind] = (server.weights(), sum(w.transport.stats.total_bytes for w in workers))
    assert torch.equal(runs["het"][0], runs["ps"][0])  # same synchronous SGD
    steps = sum(int(torch.unique(ids[i:i + 8]).numel()) for i in range(0, ids.shape[0], 8))
    assert runs["ps"][1] == steps * 2 * (8 + 4 * dim)  # every unique key pulled and pushed


def test_het_and_gmp_layers_drive_a_ctr_model() -> None:
    from sgl.embeddings.hetgmp import GMPConfig, simulated_cluster
    from sgl.models.ctr import build_ctr_model

    vocab, dim = 60, 8
    ids = zipf_ids(32, 3, vocab, seed=2)
    dense, y = torch.randn(32, 2), torch.rand(32).round()
    _, (het,) = make_workers(1, vocab, dim, capacity=10, bound=2)
    _, (gmp, _) = simulated_cluster(GMPConfig(vocab, dim, bound=0, lr=0.1), torch.arange(vocab) % 2, [[], []])
    for emb in (het, gmp):
        model = build_ctr_model("deepfm", emb, num_fields=3, embed_dim=dim, num_dense=2)
        before = emb.transport.stats.rows_pushed
        F.binary_cross_entropy_with_logits(model(dense, ids), y).backward()
        emb.step()
        emb.flush()
        assert emb.transport.stats.rows_pushed > before


@pytest.mark.parametrize("policy", ["lru", "lfu_pinned"])
def test_counters_account_for_every_row_and_byte(policy: str) -> None:
    from sgl.embeddings.het import CacheCounters

    vocab, dim = 300, 4
    ids = zipf_ids(3 * 8 * 25, 6, vocab, seed=11)
    labels = torch.rand(ids.shape[0]).round()
    server, workers = make_workers(3, vocab, dim, capacity=12, bound=2, policy=policy, unit="occurrence")
    run_simulation(workers, ids, labels, 8, torch.ones(dim))
    for w in workers:
        w.flush()
    total = CacheCounters()
    for w in workers:
        c, st = w.worker.counters, w.transport.stats
        assert c.rows_fetched == st.rows_fetched and c.rows_pushed == st.rows_pushed
        assert c.unique == st.keys_requested and c.hits == w.worker.hits
        assert st.total_bytes == 16 * c.unique + (16 + 4 * dim) * (c.rows_fetched + c.rows_pushed)
        total = total + c
    assert total.occurrences == ids.numel()
    # a tiny cache: misses, evictions and (pinned) bypasses all happen; every update reaches the server
    assert total.fetched_new > 0 and total.pushed_evicted > 0 and total.fetched_stale > 0
    if policy == "lfu_pinned":
        assert total.fetched_bypass > 0 and total.pushed_bypass == total.fetched_bypass
    assert int(server.versions().sum()) == ids.numel()


def test_steady_state_reduction_matches_a_long_shared_run() -> None:
    """4 workers, a cache holding every row, uniform ids: after the cold start the measured reduction
    vs the no-cache PS approaches the analytic steady state (from below: cold misses, final flush)."""
    from sgl.embeddings.het import NoCacheEmbedding, steady_state_reduction

    vocab, dim, bound, rounds, batch = 64, 8, 3, 400, 4
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (rounds * 4 * batch, 2), generator=g)
    bytes_ = {}
    for kind in ("het", "ps"):
        server = ShardedServer(vocab, dim, num_shards=4, seed=0)
        cfg = HETConfig(vocab, dim, vocab, policy="lru", bound=bound, lr=0.1)
        cls = HETEmbedding if kind == "het" else NoCacheEmbedding
        workers = [cls(cfg, LocalTransport(server)) for _ in range(4)]
        run_simulation(workers, ids, torch.zeros(ids.shape[0]), batch, torch.ones(dim))
        bytes_[kind] = sum(w.transport.stats.total_bytes for w in workers)
    measured = 1 - bytes_["het"] / bytes_["ps"]
    keys = 2 * batch
    rate = 1 - (1 - 1 / vocab) ** keys                       # P(a key is in one worker's batch)
    expected = steady_state_reduction(bound, 4, dim, rate=rate, occurrences=keys / vocab / rate)
    assert expected - 0.04 < measured < expected + 0.01, (measured, expected)
    # the hot limit (every batch) and the rare limit bracket it
    assert steady_state_reduction(bound, 4, dim, rate=1.0) < expected < steady_state_reduction(bound, 4, dim)
    with pytest.raises(EmbeddingError, match="bound >= 0"):
        steady_state_reduction(-1, 4, dim)


def test_worker_state_follows_the_module_device_and_the_numbers_do_not_change() -> None:
    """Issue 37: the cache lives on the worker's device (``device=`` or ``module.to``), the server on the
    host; on the CPU a worker placed explicitly trains exactly like one left alone."""
    ids = zipf_ids(96, 3, 40, seed=5)
    labels = torch.randint(0, 2, (96,), generator=torch.Generator().manual_seed(1)).float()
    proj = torch.randn(4, generator=torch.Generator().manual_seed(2))
    servers, weights = [], []
    for place in (None, "explicit", "moved"):
        server = ShardedServer(40, 4, num_shards=2, seed=3)
        cfg = HETConfig(40, 4, cache_capacity=6, bound=2, lr=0.1, policy="lru")
        emb = HETEmbedding(cfg, LocalTransport(server), device=torch.device("cpu") if place == "explicit" else None)
        if place == "moved":
            emb = emb.double().to("cpu")          # a dtype change never touches the protocol's float32 lines
            assert emb.worker.cache.value.dtype == torch.float32
        for b in range(0, 96, 8):
            het_loss(emb(ids[b:b + 8]), labels[b:b + 8], proj).backward()
            emb.step()
        emb.flush()
        cache = emb.worker.cache
        assert {getattr(cache, name).device.type for name in cache._TENSORS} == {"cpu"}
        servers.append(server)
        weights.append(server.weights())
    assert torch.equal(weights[0], weights[1]) and torch.equal(weights[0], weights[2])
    meta = HETEmbedding(HETConfig(40, 4, cache_capacity=6), LocalTransport(servers[0])).to("meta")
    assert meta.worker.cache.value.is_meta and meta.worker.read_versions.is_meta
    assert servers[0].shards[0].weight.device.type == "cpu"   # the server stays in host memory
