"""Out-of-core training from a store: same math across caches, pruning, budget, bytes."""
import numpy as np
import pytest
import torch

import sgl
from sgl.errors import ConfigError
from sgl.samplers import open_store, write_store
from sgl.samplers.outofcore import OutOfCoreConfig, OutOfCoreTrainer


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
    cfg = OutOfCoreConfig(method=method, fanouts=[4, 4], batch_size=30, memory_budget=budget, hidden=16,
                          staleness=kw.pop("staleness", 4), **kw)
    return OutOfCoreTrainer(open_store(path), cfg)


def test_caching_policy_does_not_change_training(community_store):
    # LRU and Ginex-like use the same random batches and samples: identical losses, different I/O
    lru, ginex = _trainer(community_store, "lru"), _trainer(community_store, "ginex")
    a, b = lru.train_epoch(), ginex.train_epoch()
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)
    assert a["bytes_read"] != b["bytes_read"]
    assert ginex.cache.hits >= 0 and b["peak_budget_bytes"] <= ginex.budget.total


def test_outre_prunes_cached_nodes_and_reads_less(community_store):
    outre = _trainer(community_store, "outre", group_size=2)
    ginex = _trainer(community_store, "ginex")
    stats_o = [outre.train_epoch() for _ in range(2)][-1]
    stats_g = [ginex.train_epoch() for _ in range(2)][-1]
    assert outre.emb_cache is not None and outre.emb_cache.pulls > 0
    assert stats_o["bytes_read"] < stats_g["bytes_read"]
    # a pruned node is never expanded: no edge of the outer block ends at it
    seeds = outre.batches(5)[0]
    outre.iteration = 10**6  # everything stale: nothing pruned
    full = outre._sample(seeds, 5, 0)
    assert full.pruned.numel() == 0
    hop1 = full.last_input_nodes[seeds.size:].numpy()
    outre.emb_cache.push(hop1, torch.zeros(hop1.size, outre.model.last_input_width), outre.iteration)
    pruned = outre._sample(seeds, 5, 0)
    assert pruned.pruned.numel() > 0
    outer = pruned.blocks[0]
    dst_nodes = pruned.n_id[outer.edge_index[1]]
    assert not bool(torch.isin(dst_nodes, pruned.pruned).any())
    assert outer.num_dst + pruned.pruned.numel() == pruned.blocks[1].num_src
    assert pruned.n_id.numel() < full.n_id.numel()


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
                                 {"neighbor_cache_fraction": 1.0}, {"memory_budget": "lots"}])
def test_bad_config(bad):
    with pytest.raises(ConfigError):
        OutOfCoreConfig(**bad)


def test_cora_on_disk_trains(data_path, tmp_path):
    g = sgl.datasets.load("cora", root=data_path("planetoid"))
    store = open_store(write_store(g, tmp_path / "cora"))
    trainer = OutOfCoreTrainer(store, OutOfCoreConfig(method="outre", fanouts=[10, 10], batch_size=16,
                                                      memory_budget="4MB", staleness=5, group_size=2))
    for _ in range(8):
        stats = trainer.train_epoch()
    assert stats["peak_budget_bytes"] <= 4_000_000
    assert trainer.evaluate("test", fanouts=[200, 200]) > 0.6
