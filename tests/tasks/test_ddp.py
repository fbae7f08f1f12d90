"""DDP training of SGAP models: 2 Gloo processes vs 1 process at equal global batch; configs and errors.

The 1-process reference is ``train_ddp(..., seed_shards=<each rank's training nodes>)`` on the whole
graph's features, which itself equals :class:`~sgl.tasks.Trainer` for one shard in one batch. Models
run without dropout: dropout masks are drawn per rank, so only a model without randomness gives
equal numbers in both layouts. One spawned world runs every 2-process check (start-up is slow).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import sgl.comm as comm
from sgl.datasets import csbm
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.models import build_model, model_config
from sgl.ops import partition_assignment
from sgl.tasks import RunConfig, TrainConfig, Trainer
from sgl.tasks.ddp import check_world_size, train_ddp
from sgl.tasks.dist_precompute import precompute_features
from sgl.tasks.dist_run import rank_start_method

RUN_TIMEOUT = 120.0
#: name -> (model options, precompute, partition, uneven, local batch size)
CASES = {
    "sgc-local": ("sgc", {}, "local", None, "pad", 6),
    "sign-metis": ("sign", {"dropout": 0.0, "input_dropout": 0.0, "hidden": 16}, "distributed", "metis", "pad", 4),
    "gamlp-range-drop": ("gamlp", {"dropout": 0.0, "att_dropout": 0.0, "label_hops": 2, "hidden": 16},
                         "distributed", "range", "drop", 6),
    "pasca-v3-fullbatch": ("pasca-v3", {"dropout": 0.0, "hidden": 16}, "local", None, "pad", None),
}


def _graph():
    # noisy features and weak homophily: validation accuracy moves between epochs
    return csbm(200, num_classes=3, avg_degree=5, num_features=8, homophily=0.55, feature_noise=3.0,
                train_per_class=10, num_val=50, num_test=60, seed=0)


def _factory(name, options, g):
    cfg = model_config(name, **options)
    return lambda: build_model(name, g.num_features, g.num_classes, cfg)


def _config(batch):
    return TrainConfig(lr=0.1, epochs=6, batch_size=batch, progress=False)


def _ddp_rank(rank: int, world: int) -> dict:
    torch.set_num_threads(1)
    g = _graph()
    out = {}
    for key, (name, options, mode, method, uneven, batch) in CASES.items():
        factory = _factory(name, options, g)
        rf = precompute_features(factory(), g, mode, partition=method or "metis")
        out[key] = train_ddp(factory(), rf.features, g, _config(batch), seed=1, nodes=rf.nodes, uneven=uneven)
        if mode == "distributed":
            out[key]["rows"] = (rf.nodes, rf.features.data)
    half = _first_half_trains()  # under a range split rank 1 owns no training node: it pads every step
    rf = precompute_features(_factory("sgc", {}, half)(), half, "distributed", partition="range")
    out["empty-shard"] = train_ddp(_factory("sgc", {}, half)(), rf.features, half, _config(6), seed=1, nodes=rf.nodes)
    one = _one_train_node()
    try:  # one training node for two processes: every rank raises before any collective
        train_ddp(_factory("sgc", {}, one)(), torch.zeros(200, 8), one, _config(None))
    except ConfigError as exc:
        out["error"] = str(exc)
    return out


def _first_half_trains():
    g = _graph()
    g.train_mask = g.train_mask & (torch.arange(g.num_nodes) < g.num_nodes // 2)
    return g


def _one_train_node():
    g = _graph()
    mask = torch.zeros(g.num_nodes, dtype=torch.bool)
    mask[int(g.train_mask.nonzero()[0])] = True
    g.train_mask = mask
    return g


@pytest.fixture(scope="module")
def two_ranks():
    # the fork server of sgl train --procs: SGL is imported once, not once per rank
    return comm.spawn(_ddp_rank, 2, timeout=RUN_TIMEOUT, comm_timeout=30.0, start_method=rank_start_method())


def _reference(key, g):
    name, options, mode, method, uneven, batch = CASES[key]
    factory = _factory(name, options, g)
    train = g.train_mask.nonzero().flatten()
    if mode == "local":
        shards = list(torch.tensor_split(train, 2))
    else:
        parts = partition_assignment(g, 2, method, seed=0)
        shards = [train[parts[train] == r] for r in range(2)]
    return train_ddp(factory(), factory().precompute(g), g, _config(batch), seed=1, uneven=uneven,
                     seed_shards=shards), shards


@pytest.mark.parametrize("key", list(CASES))
def test_two_processes_equal_one_process_at_equal_global_batch(two_ranks, key):
    g = _graph()
    ref, shards = _reference(key, g)
    assert len(set(ref["val_acc_history"])) > 1  # the selected epoch is a real choice
    for rank, by_case in enumerate(two_ranks):
        r = by_case[key]
        assert r["world_size"] == 2 and r["num_shards"] == 2
        assert r["steps_per_epoch"] == ref["steps_per_epoch"] and r["global_batch_size"] == ref["global_batch_size"]
        np.testing.assert_allclose(r["epoch_loss"], ref["epoch_loss"], rtol=0, atol=1e-5)
        assert r["val_acc_history"] == ref["val_acc_history"]
        assert r["best_epoch"] == ref["best_epoch"]
        for split in ("train", "val", "test"):
            assert r[f"{split}_acc"] == ref[f"{split}_acc"]
            assert r[f"{split}_macro_f1"] == pytest.approx(ref[f"{split}_macro_f1"], abs=1e-12)
    if CASES[key][4] == "drop":
        assert shards[0].numel() != shards[1].numel()  # drop really drops


@pytest.mark.parametrize("key", [k for k, c in CASES.items() if c[2] == "distributed"])
def test_distributed_precompute_gives_each_rank_the_rows_of_its_nodes(two_ranks, key):
    g = _graph()
    name, options = CASES[key][:2]
    full = _factory(name, options, g)().precompute(g).data
    owned = []
    for by_case in two_ranks:
        nodes, data = by_case[key]["rows"]
        owned.append(nodes)
        as_list = lambda hops: hops if isinstance(hops, list) else [hops]  # noqa: E731
        for hop_full, hop in zip(as_list(full), as_list(data)):
            torch.testing.assert_close(hop, hop_full[nodes], rtol=0, atol=1e-6)
    assert torch.equal(torch.sort(torch.cat(owned)).values, torch.arange(g.num_nodes))


def test_a_rank_without_training_nodes_pads_every_step(two_ranks):
    g = _first_half_trains()
    factory = _factory("sgc", {}, g)
    train = g.train_mask.nonzero().flatten()
    ref = train_ddp(factory(), factory().precompute(g), g, _config(6), seed=1, seed_shards=[train, train[:0]])
    for by_case in two_ranks:
        r = by_case["empty-shard"]
        np.testing.assert_allclose(r["epoch_loss"], ref["epoch_loss"], rtol=0, atol=1e-5)
        assert r["val_acc_history"] == ref["val_acc_history"] and r["best_epoch"] == ref["best_epoch"]
        assert r["test_acc"] == ref["test_acc"]


def test_more_processes_than_training_nodes_is_a_clear_error(two_ranks):
    for by_case in two_ranks:
        assert "2 processes but the graph has only 1 training node" in by_case["error"]
        assert "use at most 1 processes (--procs)" in by_case["error"]


@pytest.mark.parametrize("name, options", [("sgc", {}), ("gamlp", {"dropout": 0.0, "att_dropout": 0.0,
                                                                  "label_hops": 2, "hidden": 16}),
                                           ("pasca-v3", {"dropout": 0.0, "hidden": 16})])
def test_one_process_one_batch_equals_the_trainer(name, options):
    g = _graph()
    factory = _factory(name, options, g)
    features = factory().precompute(g)
    cfg = _config(None)
    ref = Trainer(cfg).fit(factory(), features, g, seed=3)
    got = train_ddp(factory(), features, g, cfg, seed=3)
    assert got["world_size"] == 1 and got["steps_per_epoch"] == 1
    assert got["best_epoch"] == ref["best_epoch"]
    for split in ("train", "val", "test"):
        assert got[f"{split}_acc"] == ref[f"{split}_acc"]
        assert got[f"{split}_macro_f1"] == pytest.approx(ref[f"{split}_macro_f1"], abs=1e-12)


def test_bad_input_gets_clear_errors():
    g = _graph()
    model = _factory("sgc", {}, g)()
    x = model.precompute(g)
    cfg = _config(4)
    with pytest.raises(ConfigError, match="uneven must be one of"):
        train_ddp(model, x, g, cfg, uneven="wrap")
    with pytest.raises(GraphError, match="seed_shards overlap"):
        train_ddp(model, x, g, cfg, seed_shards=[[1, 2], [2, 3]])
    with pytest.raises(ConfigError, match="shard 1 has no training node"):
        train_ddp(model, x, g, cfg, uneven="drop", seed_shards=[[1, 2], []])
    with pytest.raises(FeatureError, match="nodes lists 3 ids but the features have 200 rows"):
        train_ddp(model, x, g, cfg, nodes=[0, 1, 2])
    with pytest.raises(FeatureError, match="expected one per node"):
        train_ddp(model, x.data[:10], g, cfg)
    gcn = build_model("gcn", g.num_features, g.num_classes)
    with pytest.raises(ConfigError, match="full-batch model"):
        train_ddp(gcn, gcn.precompute(g), g, cfg)
    with pytest.raises(ConfigError, match="precompute must be one of"):
        precompute_features(model, g, "everywhere")
    with pytest.raises(ConfigError, match="remove cache_dir"):
        precompute_features(model, g, "distributed", cache_dir="c")
    with pytest.raises(ConfigError, match="not GCN"):
        precompute_features(gcn, g, "distributed")
    with pytest.raises(ConfigError, match="3 processes for a graph of 2 nodes"):
        check_world_size(type("G", (), {"num_nodes": 2, "train_mask": None})(), 3)


@pytest.mark.parametrize("data, match", [
    ({"procs": 0}, "procs .the number of processes. must be an integer >= 1, got 0"),
    ({"procs": -2}, "must be an integer >= 1, got -2"),
    ({"procs": 1.5}, "must be an integer >= 1, got 1.5"),
    ({"procs": "2"}, "must be an integer >= 1, got '2'"),
    ({"procs": 2, "model": "gat"}, "--model gat has no multi-process path"),
    ({"procs": 2, "model": "gcmae"}, "self-supervised pre-training and a linear probe. has no multi-process"),
    ({"procs": 2, "task": "cluster"}, "--task cluster has no multi-process path; .* --task node"),
    ({"procs": 2, "rlu": {"stages": [2, 2]}, "model": "gamlp"}, "rlu .RLU distillation. has no multi-process"),
    ({"procs": 2, "sampler": "cluster"}, "--sampler cluster has no multi-process path"),
    ({"procs": 2, "sampler": "neighbor", "distributed": {"precompute": "local"}}, "precompute applies to scalable"),
    ({"procs": 2, "distributed": {"partition": "metis"}}, "partition='metis' applies to precompute='distributed'"),
    ({"procs": 2, "distributed": {"precompute": "distributed", "partition": "fennel"}}, "'metis' or 'range'"),
    ({"procs": 2, "distributed": {"precompute": "distributed"}, "cache_dir": "c"}, "cache_dir .--cache-dir."),
    ({"procs": 2, "distributed": {"uneven": "wrap"}}, "uneven must be 'pad' or 'drop'"),
    ({"procs": 2, "distributed": {"timeout": 0}}, "timeout .seconds a collective may wait. must be a number > 0"),
    ({"procs": 2, "distributed": {"ranks": 3}}, "bad run config"),
    ({"procs": 2, "train": {"device": "cuda:1"}}, "puts every one of the 2 processes on one GPU"),
    ({"distributed": {"precompute": "distributed"}}, "precompute='distributed' applies to runs on several processes"),
])
def test_run_config_checks_procs(data, match):
    with pytest.raises(ConfigError, match=match):
        RunConfig.from_dict({"dataset": "karate", **data})


def test_run_config_with_procs_round_trips():
    config = RunConfig.from_dict({"dataset": "karate", "procs": 2, "distributed": {"precompute": "distributed"}})
    assert config.distributed.partition == "metis" and config.distributed.uneven == "pad"
    data = config.to_dict()
    assert data["procs"] == 2 and data["distributed"]["precompute"] == "distributed"
    assert RunConfig.from_dict(data) == config
    sampled = RunConfig.from_dict({"procs": 3, "sampler": "neighbor", "model": "gcn"})
    assert sampled.distributed.precompute is None and sampled.distributed.partition == "metis"
    one = RunConfig.from_dict({"dataset": "karate"})
    assert one.procs == 1 and one.distributed is None and "procs" not in one.to_dict()


# -- compressed gradient all-reduce (sgl train --procs N --grad-compress): its own small world
def _compress_rank(rank: int, world: int) -> dict:
    torch.set_num_threads(1)
    g = _graph()
    factory = _factory("sign", {"dropout": 0.0, "input_dropout": 0.0, "hidden": 16}, g)
    rf = precompute_features(factory(), g, "local")
    out = {}
    for name, bits in (("none", 4), ("tinyscript", 8), ("tinyscript", 2), ("powersgd", 4)):
        out[f"{name}-{bits}"] = train_ddp(factory(), rf.features, g, _config(4), seed=1, nodes=rf.nodes,
                                          grad_compress=name, grad_bits=bits)
    return out


def test_compressed_gradients_train_and_count_their_bytes():
    ranks = comm.spawn(_compress_rank, 2, timeout=RUN_TIMEOUT, comm_timeout=30.0, start_method=rank_start_method())
    for by_case in ranks:
        plain, fine, coarse, power = (by_case[k] for k in ("none-4", "tinyscript-8", "tinyscript-2", "powersgd-4"))
        assert "grad_compress" not in plain and power["grad_compress"] == "powersgd"
        # 8-bit codes follow the float32 run closely (measured mean gap 0.017); 2-bit codes do not (0.13)
        gap8 = np.abs(np.subtract(fine["epoch_loss"], plain["epoch_loss"])).mean()
        gap2 = np.abs(np.subtract(coarse["epoch_loss"], plain["epoch_loss"])).mean()
        assert gap8 < 0.03 and gap2 > 2 * gap8
        assert fine["epoch_loss"][-1] < fine["epoch_loss"][0]  # it still trains
        # bytes: one code per gradient value per step (plus the quantiser's header), 4x fewer at 2 bits
        assert fine["grad_bytes_sent"] > 3 * coarse["grad_bytes_sent"] > 0
    assert ranks[0]["tinyscript-8"]["epoch_loss"] == ranks[1]["tinyscript-8"]["epoch_loss"]


def test_grad_compress_errors_name_the_fix():
    g = _graph()
    factory = _factory("sgc", {}, g)
    with pytest.raises(ConfigError, match="several processes"):
        train_ddp(factory(), factory().precompute(g), g, _config(4), grad_compress="tinyscript")
    with pytest.raises(ConfigError, match="grad_compress must be one of"):
        train_ddp(factory(), factory().precompute(g), g, _config(4), grad_compress="topk")
    with pytest.raises(ConfigError, match="bits"):
        train_ddp(factory(), factory().precompute(g), g, _config(4), grad_compress="uniform", grad_bits=9)
