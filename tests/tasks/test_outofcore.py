"""Out-of-core training from a store (sgl.tasks.outofcore): same math across cache policies, pruning, budget, bytes."""
import json

import numpy as np
import pytest
import torch

import sgl
from sgl.errors import ConfigError
from sgl.samplers import open_store, write_store
from sgl.tasks import OutOfCoreConfig, OutOfCoreTrainer, TrainConfig


@pytest.fixture(scope="module")
def community_store(tmp_path_factory):
    """A 1,500-node graph with 15 communities (shuffled ids), features = class mean + noise."""
    rng = np.random.default_rng(0)
    n, size = 1500, 100
    src = np.repeat(np.arange(n), 4)
    dst = np.where(rng.random(src.size) < 0.85, (src // size) * size + rng.integers(0, size, src.size),
                   rng.integers(0, n, src.size))
    perm = rng.permutation(n)
    y = torch.from_numpy((np.arange(n) // size) % 5)[torch.from_numpy(np.argsort(perm))]
    x = torch.randn(n, 64) + 2 * torch.nn.functional.one_hot(y, 64).float()
    split = torch.from_numpy(rng.permutation(n))
    masks = {name: torch.zeros(n, dtype=torch.bool) for name in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][split[:600]] = True
    masks["val_mask"][split[600:800]] = True
    masks["test_mask"][split[800:1200]] = True
    g = sgl.data.Graph.from_edge_index(torch.from_numpy(np.stack([perm[src], perm[dst]])), num_nodes=n, x=x,
                                       y=y, **masks).symmetrize()
    return write_store(g, tmp_path_factory.mktemp("store") / "community")


def _trainer(path, method, budget="400KB", **kw):
    # features: 1,500 x 64 float32 = 384 KB; a batch gathers up to ~200 KB
    cfg = OutOfCoreConfig.from_flat(method=method, fanouts=kw.pop("fanouts", [4, 4]), batch_size=30,
                                    memory_budget=budget, hidden=16, staleness=kw.pop("staleness", 4), **kw)
    return OutOfCoreTrainer(open_store(path), cfg)


def test_caching_policy_does_not_change_training(community_store):
    # LRU and Ginex-like use the same random batches and samples: identical losses, different I/O
    lru, ginex = _trainer(community_store, "lru"), _trainer(community_store, "ginex")
    a, b = lru.train_epoch(), ginex.train_epoch()
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)
    assert a["bytes_read"] != b["bytes_read"]
    # the cache served some rows (overlapping neighbourhoods within a superbatch), every lookup is a
    # hit or a miss, and the reported hit rate is the cache's own
    cache = ginex.cache
    assert cache.hits > 0 and cache.misses > 0
    assert b["feature_hit_rate"] == pytest.approx(cache.hits / (cache.hits + cache.misses))
    assert b["peak_budget_bytes"] <= ginex.budget.total


def test_ginex_superbatches_fit_their_plan_room(community_store):
    whole = _trainer(community_store, "ginex")
    cut = _trainer(community_store, "ginex")
    cut.policy.plan_room = 3 * int(cut.policy.mean_batch_rows) * 4  # about three batches per superbatch
    a, b = whole.train_epoch(), cut.train_epoch()
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)  # same batches and samples, replayed in order
    assert whole.cache.hits + whole.cache.misses == cut.cache.hits + cut.cache.misses
    assert b["peak_budget_bytes"] <= cut.budget.total
    assert sum(t.nbytes for t in cut.cache._next) <= cut.policy.plan_room
    assert a["bytes_read"] <= b["bytes_read"]  # a longer lookahead never hurts Belady here


def test_outre_prunes_cached_nodes_and_reads_less(community_store):
    # staleness 20 (~1 epoch of 24 batches): pruning pays for the room the embeddings take
    outre = _trainer(community_store, "outre", group_size=2, staleness=20)
    plain = _trainer(community_store, "outre", group_size=2, embedding_cache=False)  # same batches, no pruning
    stats_o = [outre.train_epoch() for _ in range(2)][-1]
    stats_p = [plain.train_epoch() for _ in range(2)][-1]
    assert outre.emb_cache is not None and outre.emb_cache.pulls > 0 and plain.emb_cache is None
    assert stats_o["embedding_pulls"] > 0 and stats_o["embedding_refreshes"] > 0  # the bound bites
    assert stats_o["bytes_read"] < stats_p["bytes_read"]
    assert outre.cache.hits + outre.cache.misses < plain.cache.hits + plain.cache.misses
    # a pruned node is never expanded: no edge of the outer block ends at it
    seeds = outre.batches(5)[0]
    outre.iteration = 10**6  # everything stale: nothing pruned
    full = outre.policy.sample(seeds, 5, 0, outre.iteration)
    assert full.pruned.numel() == 0
    hop1 = full.last_input_nodes[seeds.size:].numpy()
    outre.emb_cache.push(hop1, torch.zeros(hop1.size, outre.model.last_input_width), outre.iteration)
    pruned = outre.policy.sample(seeds, 5, 0, outre.iteration)
    assert pruned.pruned.numel() > 0
    outer = pruned.blocks[0]
    dst_nodes = pruned.n_id[outer.edge_index[1]]
    assert not bool(torch.isin(dst_nodes, pruned.pruned).any())
    assert outer.num_dst + pruned.pruned.numel() == pruned.blocks[1].num_src
    assert pruned.n_id.numel() < full.n_id.numel()



def test_three_layer_outre_drops_pruned_subtrees_and_reads_no_unused_rows(community_store):
    kw = dict(group_size=2, staleness=20, fanouts=[3, 3, 3], budget="550KB")
    outre = _trainer(community_store, "outre", **kw)
    plain = _trainer(community_store, "outre", embedding_cache=False, **kw)  # same batches, no pruning
    stats_o = [outre.train_epoch() for _ in range(2)][-1]
    for _ in range(2):
        plain.train_epoch()
    # (bytes depend on how the split search shares the room on this toy graph; rows gathered do not)
    assert stats_o["embedding_pulls"] > 0 and stats_o["embedding_refreshes"] > 0
    assert outre.cache.hits + outre.cache.misses < 0.9 * (plain.cache.hits + plain.cache.misses)
    assert stats_o["peak_budget_bytes"] <= outre.budget.total
    seeds = outre.batches(5)[0]
    outre.iteration = 10**6  # everything stale: nothing pruned
    full = outre.policy.sample(seeds, 5, 0, outre.iteration)
    hop1 = full.last_input_nodes[seeds.size:].numpy()
    outre.emb_cache.push(hop1, torch.zeros(hop1.size, outre.model.last_input_width), outre.iteration)
    batch = outre.policy.sample(seeds, 5, 0, outre.iteration)
    pruned = batch.pruned.numpy()
    assert pruned.size > 0 and batch.n_id.numel() < full.n_id.numel()
    for block in batch.blocks:  # no block expands a pruned node
        assert not np.isin(batch.n_id[block.edge_index[1]].numpy(), pruned).any()
    # features are read for exactly the nodes some computation uses: a pruned node only where a
    # sampled edge of an inner block reads it (its own features then stand in for its subtree)
    needed = set(batch.n_id[outre.needed_positions(batch)].tolist())
    read = set(batch.n_id[torch.cat([b.edge_index[0] for b in batch.blocks[:2]])].tolist())
    assert {int(v) for v in pruned if int(v) in needed} == {int(v) for v in pruned if int(v) in read}
    assert not all(int(v) in needed for v in pruned)
    assert needed >= set(seeds.tolist()) and len(needed) < batch.n_id.numel()
    out = outre.model(torch.zeros(batch.n_id.numel(), outre.store.num_features), batch.blocks,
                      outre.emb_cache.pull(pruned))
    assert out.shape == (seeds.size, outre.store.num_classes)


def _true_edges(store):
    ptr, idx = store.indptr, np.asarray(store.raw_indices())
    dst = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    return set(zip(idx.tolist(), dst.tolist()))


def test_group_csr_samples_true_neighbours_counts_its_bytes_and_matches_on_demand(community_store):
    kw = dict(group_size=2, staleness=3, neighbor_cache_fraction=0.1)  # caches 173 of 1,500 rows
    grouped, on_demand = (_trainer(community_store, "outre", group_csr=g, **kw) for g in (True, False))
    assert grouped.policy.group is not None and on_demand.policy.group is None
    # the group's rows are served from memory: every sampled edge is a true edge
    edges = _true_edges(grouped.store)
    parts, batches = grouped.policy.partition_groups(0)[0]
    grouped.policy.load_group(parts)
    loaded = grouped.policy.group.rows.nodes
    in_group = np.isin(grouped.policy.partitioning.parts, parts)
    assert set(loaded.tolist()) == set(np.flatnonzero(in_group).tolist()) - \
        set(grouped.policy.neighbor_cache.nodes.tolist())
    before = grouped.store.counter.stats("adjacency")["bytes"]
    batch = grouped.policy.sample(batches[0], 0, 0, grouped.iteration)
    for block in batch.blocks:
        src, dst = batch.n_id[block.edge_index[0]], batch.n_id[block.edge_index[1]]
        assert set(zip(src.tolist(), dst.tolist())) <= edges
    grouped.policy.load_group(None)
    assert grouped.policy.group.rows is None and (grouped.policy.group.slot == -1).all()
    assert grouped.store.counter.stats("adjacency")["bytes"] >= before
    # same samples, same training: only where the neighbour lists come from differs
    a = [grouped.train_epoch() for _ in range(2)]
    b = [on_demand.train_epoch() for _ in range(2)]
    assert [e["loss"] for e in a] == pytest.approx([e["loss"] for e in b], rel=1e-6)
    # the same rows are gathered (the group CSR's room comes out of the feature cache, so hits differ)
    assert grouped.cache.hits + grouped.cache.misses == on_demand.cache.hits + on_demand.cache.misses
    assert grouped.budget.parts["group_csr"].nbytes <= grouped.budget.total
    deg = grouped.store.degree()
    in_cache = np.zeros(deg.size, dtype=bool)
    in_cache[grouped.policy.neighbor_cache.nodes] = True
    parts_of = grouped.policy.partitioning.parts
    expected = sum(int(deg[np.isin(parts_of, p) & ~in_cache].sum()) for p, _ in grouped.policy.partition_groups(1))
    assert a[-1]["by_kind"]["group_csr"]["bytes"] == expected * grouped.store.index_bytes
    assert a[-1]["by_kind"].get("adjacency", {"bytes": 0})["bytes"] < b[-1]["by_kind"]["adjacency"]["bytes"]
    assert a[-1]["peak_budget_bytes"] <= grouped.budget.total
    # deterministic under a seed
    again = _trainer(community_store, "outre", group_csr=True, **kw)
    c = [again.train_epoch() for _ in range(2)]
    assert [e["loss"] for e in c] == [e["loss"] for e in a]
    assert [e["by_kind"] for e in c] == [e["by_kind"] for e in a]


def test_group_csr_needs_room_in_the_budget(community_store):
    with pytest.raises(ConfigError, match="group's CSR"):
        _trainer(community_store, "outre", budget="230KB", group_csr=True, group_size=10, num_parts=10)


def test_embedding_top_limits_the_cached_set(community_store):
    full = _trainer(community_store, "outre", group_size=2, profile_epochs=2, staleness=20)
    top = _trainer(community_store, "outre", group_size=2, profile_epochs=2, staleness=20, embedding_top=0.25)
    assert full.prep["profiled_batches"] == len(full.batches(0)) + len(full.batches(1))
    n_full, n_top = full.emb_cache.values.size(0), top.emb_cache.values.size(0)
    candidates = top.prep["embedding_candidates"]  # nodes the simulated staleness rule ever prunes
    assert candidates == full.prep["embedding_candidates"] and n_full <= candidates
    assert 0 < n_top <= int(np.ceil(0.25 * candidates))
    # the kept nodes are the most beneficial ones, and the freed room goes to the feature cache
    assert top.cache.capacity >= full.cache.capacity


def test_more_partition_passes_keep_more_edges_inside_partitions(community_store):
    few = _trainer(community_store, "outre", group_size=2, partition_passes=1)
    many = _trainer(community_store, "outre", group_size=2, partition_passes=20)
    inside = {t: t.prep["partition_inside_fraction"] for t in (few, many)}
    cross = many.policy.partitioning.cross_degree.sum() / many.store.num_edges
    assert abs(inside[many] - (1.0 - cross)) < 1e-12
    assert inside[many] > inside[few]


@pytest.mark.parametrize("method", ["ginex", "outre"])
def test_reset_caches_restarts_them_like_the_official_codes(community_store, method):
    kw = dict(group_size=2) if method == "outre" else {}
    warm, cold = _trainer(community_store, method, **kw), _trainer(community_store, method, reset_caches=True, **kw)
    first = [t.train_epoch() for t in (warm, cold)]
    assert first[0]["bytes_read"] <= first[1]["bytes_read"]  # Ginex's fill reads what it would miss anyway
    second = [t.train_epoch() for t in (warm, cold)]
    assert second[1]["bytes_read"] > second[0]["bytes_read"]  # warm caches carry rows into epoch 2
    if method == "outre":
        assert second[1]["embedding_pulls"] < second[0]["embedding_pulls"]


@pytest.mark.parametrize("method,kw", [("lru", {}), ("ginex", {}), ("outre", dict(group_size=2)),
                                       ("outre", dict(group_size=2, group_csr=True, fanouts=[3, 3, 3], embedding_fraction=0.3)),
                                       ("outre", dict(group_size=2, feature_cache="belady"))])
def test_io_only_epochs_read_exactly_what_training_reads(community_store, method, kw):
    # what is read depends on seeds, samples and caches, never on the weights: an io_only replay
    # matches a training run byte for byte, epoch after epoch (pruning included)
    trained, replayed = _trainer(community_store, method, **dict(kw)), _trainer(community_store, method, **dict(kw))
    for _ in range(3):
        a, b = trained.train_epoch(), replayed.train_epoch(io_only=True)
        assert (a["bytes_read"], a["requests"], a["by_kind"]) == (b["bytes_read"], b["requests"], b["by_kind"])
        assert a["embedding_pulls"] == b["embedding_pulls"] and a["embedding_pushes"] == b["embedding_pushes"]
        assert np.isfinite(a["loss"]) and np.isnan(b["loss"])
    if method == "outre":
        assert b["embedding_pulls"] > 0  # the pruning path was exercised
    with pytest.raises(ConfigError, match="io_only"):
        replayed.evaluate("test")


@pytest.mark.parametrize("fanouts", [[4, 4], [3, 3, 3]])
def test_outre_on_belady_trains_like_static_outre_and_plans_pruning_ahead(community_store, fanouts):
    # pre-sampling a superbatch must draw the batches in-order sampling draws: the pruning of batch i
    # depends on the embeddings batches < i push, which have not trained yet when batch i is sampled
    kw = dict(group_size=2, fanouts=fanouts, embedding_fraction=0.3)
    static, belady = _trainer(community_store, "outre", **kw), _trainer(community_store, "outre", feature_cache="belady", **kw)
    cut = _trainer(community_store, "outre", feature_cache="belady", **kw)
    cut.policy.plan_room = 3 * int(cut.policy.mean_batch_rows) * 4  # about three batches per superbatch
    np.testing.assert_array_equal(static.emb_cache.slot_of, belady.emb_cache.slot_of)  # same split search
    for epoch in range(3):
        a, b, c = static.train_epoch(), belady.train_epoch(), cut.train_epoch()
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["loss"] == pytest.approx(c["loss"], rel=1e-6)
        for key in ("embedding_pulls", "embedding_pushes", "embedding_refreshes"):
            assert a[key] == b[key] == c[key]
        assert a["by_kind"]["adjacency"] == b["by_kind"]["adjacency"]  # same samples, same neighbour reads
        assert b["peak_budget_bytes"] <= belady.budget.total and c["peak_budget_bytes"] <= cut.budget.total
        assert b["bytes_read"] <= c["bytes_read"]  # a longer lookahead never hurts Belady here
    assert a["embedding_pulls"] > 0
    assert static.evaluate("test") == belady.evaluate("test")


def test_outre_learns(community_store):
    outre = _trainer(community_store, "outre", group_size=2, lr=0.02)
    for _ in range(5):
        outre.train_epoch()
    assert outre.evaluate("test") > 0.6  # 5 balanced classes: chance is 0.2


def test_budget_too_small_for_one_batch(community_store):
    with pytest.raises(ConfigError, match="too small for one batch"):
        _trainer(community_store, "outre", budget="20KB")
    with pytest.raises(ConfigError):
        _trainer(community_store, "lru", budget="0MB")


def test_budget_is_checked_at_run_time(community_store):
    trainer = _trainer(community_store, "lru")
    trainer.budget.total = trainer.budget.used()  # leaves no room for a batch
    with pytest.raises(ConfigError, match="budget exceeded"):
        trainer.train_epoch()


@pytest.mark.parametrize("bad", [{"method": "belady"}, {"fanouts": [5, 0]}, {"batch_size": 0},
                                 {"neighbor_cache_fraction": 1.0}, {"memory_budget": "lots"},
                                 {"embedding_top": 0.0}, {"profile_epochs": 0}, {"partition_passes": 0},
                                 {"partition_patience": 0}, {"reset_caches": "yes"}, {"group_csr": 1},
                                 {"feature_cache": "lru"}, {"method": "ginex", "feature_cache": "belady"},
                                 {"feature_cache": "belady", "group_csr": True}])
def test_bad_config(bad):
    with pytest.raises(ConfigError):
        OutOfCoreConfig.from_flat(**bad)


def test_cora_on_disk_trains(data_path, tmp_path):
    g = sgl.datasets.load("cora", root=data_path("planetoid"))
    store = open_store(write_store(g, tmp_path / "cora"))
    trainer = OutOfCoreTrainer(store, OutOfCoreConfig.from_flat(method="outre", fanouts=[10, 10], batch_size=16,
                                                                memory_budget="4MB", staleness=5, group_size=2))
    for _ in range(8):
        stats = trainer.train_epoch()
    assert stats["peak_budget_bytes"] <= 4_000_000
    assert trainer.evaluate("test", fanouts=[200, 200]) > 0.6


def test_config_contains_a_train_config_and_reads_the_flat_keyword_set():
    cfg = OutOfCoreConfig.from_flat(method="ginex", fanouts=[5, 5], batch_size=30, lr=0.02, hidden=16, staleness=7)
    assert isinstance(cfg.train, TrainConfig) and (cfg.train.lr, cfg.train.batch_size) == (0.02, 30)
    assert cfg.train.weight_decay == OutOfCoreConfig.default_train().weight_decay  # unset: out-of-core defaults
    assert (cfg.sampling.method, cfg.sampling.staleness, cfg.hidden) == ("ginex", 7, 16)
    record = json.loads(json.dumps(cfg.to_dict()))
    assert OutOfCoreConfig.from_dict(record) == cfg
    assert {"method", "lr", "batch_size", "hidden", "seed"} <= set(OutOfCoreConfig.flat_keys())
    with pytest.raises(ConfigError, match="unknown out-of-core option"):
        OutOfCoreConfig.from_flat(stalenes=7)
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        OutOfCoreConfig.from_flat(batch_size=0)
    assert OutOfCoreConfig.from_flat(device="cuda").train.device == "cuda"  # any device; checked by the trainer


def test_the_trainer_runs_on_the_configured_device_and_refuses_one_that_does_not_exist(community_store):
    from sgl.errors import DeviceError

    missing = "cuda:7" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(DeviceError, match="cuda:7|names GPU"):
        _trainer(community_store, "outre", device=missing)
    default, cpu = _trainer(community_store, "outre"), _trainer(community_store, "outre", device="cpu")
    assert cpu.device == torch.device("cpu") and next(cpu.model.parameters()).device == cpu.device
    assert default.train_epoch()["loss"] == cpu.train_epoch()["loss"]


def test_fit_stops_after_patience_epochs_without_a_better_validation_accuracy(tmp_path):
    store = open_store(write_store(sgl.datasets.load("karate"), tmp_path / "k"))
    cfg = OutOfCoreConfig.from_flat(method="lru", fanouts=[3, 3], batch_size=4, memory_budget="1MB", hidden=8,
                                    epochs=30, patience=2, lr=1e-6)
    record = OutOfCoreTrainer(store, cfg).fit()
    assert len(record["epochs"]) - 1 - record["best_epoch"] == 2 and len(record["epochs"]) < 30
