"""Mini-batch GraphSAGE under DDP on distributed sampling: 2 Gloo processes vs 1 process at equal global batch.

The 1-process reference is ``train_dist_minibatch(..., seed_shards=<each rank's training nodes>)``,
which itself is checked against a hand-written loop over :class:`~sgl.samplers.NeighborSampler`.
``dropout=0``: dropout masks are drawn per row in a layout-dependent order, so only a model
without randomness can give equal numbers in both layouts.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import sgl.comm as comm
from sgl.datasets import csbm
from sgl.errors import ConfigError, GraphError
from sgl.samplers import DistGraph, NeighborSampler, partition_nodes
from sgl.tasks import TrainConfig
from sgl.tasks.dist_minibatch import shard_batches, train_dist_minibatch
from sgl.tasks.minibatch import SamplerConfig
from sgl.tasks.stats import seed_everything

RUN_TIMEOUT = 90.0
FANOUTS = [3, 3]
CONFIG = dict(lr=0.05, epochs=6, batch_size=3, progress=False)


def _graph():
    # noisy features and weak homophily: validation accuracy moves between epochs
    return csbm(200, num_classes=3, avg_degree=5, num_features=8, homophily=0.55, feature_noise=3.0,
                train_per_class=10, num_val=50, num_test=60, seed=0)


def _model(g):
    from sgl.samplers import SampledGNN

    return SampledGNN(g.num_features, g.num_classes, hidden=8, dropout=0.0)


def _train(g, uneven, **kwargs):
    model = _model(g)
    part = DistGraph.from_graph(g, x=model.precompute(g), **{k: kwargs.pop(k) for k in ("num_parts", "rank")
                                                              if k in kwargs})
    return train_dist_minibatch(model, part, TrainConfig(**CONFIG), SamplerConfig(fanouts=FANOUTS), seed=1,
                                uneven=uneven, **kwargs)


def _shards(g):
    parts = partition_nodes(g, 2, "metis")
    train = g.train_mask.nonzero().flatten().numpy()
    return [train[parts[train] == r] for r in range(2)]


def _ddp_rank(rank: int, world: int) -> dict:
    torch.set_num_threads(1)
    g = _graph()
    return {uneven: _train(g, uneven) for uneven in ("pad", "drop")}


def test_two_process_ddp_matches_one_process_at_equal_global_batch():
    results = comm.spawn(_ddp_rank, 2, timeout=RUN_TIMEOUT, comm_timeout=20.0)
    g = _graph()
    shards = _shards(g)
    sizes = [s.size for s in shards]
    assert sizes[0] != sizes[1] and -(-sizes[0] // 3) != -(-sizes[1] // 3)  # pad and drop differ
    for uneven in ("pad", "drop"):
        ref = _train(g, uneven, seed_shards=shards)
        assert ref["steps_per_epoch"] == (max if uneven == "pad" else min)(-(-n // 3) for n in sizes)
        assert len(set(ref["val_acc_history"])) > 1  # the selected epoch is a real choice
        for rank, by_mode in enumerate(results):
            r = by_mode[uneven]
            assert r["world_size"] == 2 and r["num_shards"] == 2 and r["global_batch_size"] == 6
            assert r["steps_per_epoch"] == ref["steps_per_epoch"]
            np.testing.assert_allclose(r["epoch_loss"], ref["epoch_loss"], rtol=0, atol=1e-5)
            assert r["val_acc_history"] == ref["val_acc_history"]
            assert r["best_epoch"] == ref["best_epoch"]
            for split in ("train", "val", "test"):
                assert r[f"{split}_acc"] == ref[f"{split}_acc"]
            assert r["traffic"]["remote_feature_rows"] > 0 and r["traffic"]["bytes_fetched"] > 0
        total = results[0][uneven]["traffic_total"]
        assert total == results[1][uneven]["traffic_total"]
        assert total["bytes_fetched"] == sum(res[uneven]["traffic"]["bytes_fetched"] for res in results)
    assert results[0]["pad"]["epoch_loss"] != results[0]["drop"]["epoch_loss"]


def test_one_process_shards_equal_a_plain_neighbor_sampler_loop():
    """The reference means what it says: each step trains on the concatenated shard batches,
    sampled as NeighborSampler(threads=1) samples them, with the mean loss over the global batch."""
    g = _graph()
    shards = _shards(g)
    ref = _train(g, "pad", seed_shards=shards)
    model = _model(g)
    x = model.precompute(g)
    seed_everything(1)
    model.reset_parameters()
    optimizer = torch.optim.Adam(model.parameters(), lr=CONFIG["lr"], weight_decay=TrainConfig().weight_decay)
    sampler = NeighborSampler(g, FANOUTS, threads=1)
    steps = ref["steps_per_epoch"]
    for epoch in range(2):
        plans = [shard_batches(np.sort(s), i, 3, steps, 1, epoch) for i, s in enumerate(shards)]
        total = 0.0
        for step in range(steps):
            seeds = torch.from_numpy(np.concatenate([plan[step] for plan in plans]))
            batch = sampler.sample(seeds, rng=np.random.default_rng([1, epoch, step]))
            model.train()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[batch.n_id], batch.blocks), g.y[seeds])
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
        assert total / steps == pytest.approx(ref["epoch_loss"][epoch], abs=1e-6)


def test_bad_input_gets_clear_errors():
    g = _graph()
    model = _model(g)
    part = DistGraph.from_graph(g, x=model.precompute(g))
    cfg = TrainConfig(**CONFIG)
    with pytest.raises(ConfigError, match="sampler='neighbor', num_workers=0"):
        train_dist_minibatch(model, part, cfg, SamplerConfig(sampler="cluster", fanouts=FANOUTS))
    with pytest.raises(ConfigError, match="uneven must be one of"):
        train_dist_minibatch(model, part, cfg, SamplerConfig(fanouts=FANOUTS), uneven="wrap")
    with pytest.raises(ConfigError, match="the model has 2 layers but fanouts"):
        train_dist_minibatch(model, part, cfg, SamplerConfig(fanouts=[3, 3, 3]))
    with pytest.raises(GraphError, match="seed_shards overlap"):
        train_dist_minibatch(model, part, cfg, SamplerConfig(fanouts=FANOUTS), seed_shards=[[1, 2], [2, 3]])
    with pytest.raises(ConfigError, match="shard 1 has no training node"):
        train_dist_minibatch(model, part, cfg, SamplerConfig(fanouts=FANOUTS), uneven="drop",
                             seed_shards=[[1, 2], []])
    with pytest.raises(ConfigError, match="needs this rank's DistGraph"):
        train_dist_minibatch(model, g, cfg, SamplerConfig(fanouts=FANOUTS))
