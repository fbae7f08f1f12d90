"""Supervised link prediction: PyG-style split, no leakage, decoders, training, encoders, errors."""
import math

import pytest
import torch

import sgl
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.models import (
    GAMLP, GCN, SGC, GAMLPConfig, GCNConfig, HadamardMLPDecoder, InnerProductDecoder, SGCConfig, build_link_decoder,
)
from sgl.tasks import RunConfig, TrainConfig, run, split_edges
from sgl.tasks.link_supervised import check_link_options, fit_link_predictor, run_supervised_link_prediction

FAST = TrainConfig(lr=0.01, weight_decay=0.0, epochs=10, progress=False)


def keys(pairs, n):
    lo, hi = torch.minimum(pairs[0], pairs[1]), torch.maximum(pairs[0], pairs[1])
    return set((lo * n + hi).tolist())


def planted(homophily, seed=0):
    """Six planted communities; homophily 1/6 makes the edges independent of them (the control)."""
    return sgl.datasets.csbm(num_nodes=300, num_classes=6, avg_degree=10, num_features=16, homophily=homophily,
                             feature_signal=2.0, seed=seed)


# ---------------------------------------------------------------------------- split
@pytest.mark.parametrize("neg_ratio", [1.0, 2.0, 0.5])
@pytest.mark.parametrize("val, test", [(0.05, 0.1), (0.1, 0.2)])
def test_split_sizes_equal_pyg_random_link_split(neg_ratio, val, test):
    transforms = pytest.importorskip("torch_geometric.transforms")
    graph = sgl.datasets.csbm(num_nodes=200, num_classes=2, avg_degree=8, num_features=8, seed=0)
    train, valid, tested = transforms.RandomLinkSplit(num_val=val, num_test=test, is_undirected=True,
                                                      add_negative_train_samples=False,
                                                      neg_sampling_ratio=neg_ratio)(graph.to_pyg())
    split = split_edges(graph, val, test, seed=0, neg_ratio=neg_ratio, rounding="floor")
    ours = (split.train_graph.num_edges, split.train_pos.size(1), split.val_pos.size(1), split.val_neg.size(1),
            split.test_pos.size(1), split.test_neg.size(1))
    theirs = (train.edge_index.size(1), train.edge_label_index.size(1), int(valid.edge_label.sum()),
              int((valid.edge_label == 0).sum()), int(tested.edge_label.sum()), int((tested.edge_label == 0).sum()))
    assert ours == theirs


def test_split_is_disjoint_and_the_training_graph_lacks_held_out_edges():
    graph = planted(0.9)
    n = graph.num_nodes
    split = split_edges(graph, 0.1, 0.2, seed=3, neg_ratio=2.0, rounding="floor")
    train, val, test = keys(split.train_pos, n), keys(split.val_pos, n), keys(split.test_pos, n)
    assert not (train & val) and not (train & test) and not (val & test)
    assert train | val | test == keys(graph.edge_index, n)
    src, dst = split.train_graph.edge_index
    directed = set((src * n + dst).tolist())
    for u, v in torch.cat([split.val_pos, split.test_pos], dim=1).t().tolist():
        assert u * n + v not in directed and v * n + u not in directed  # both directions left
    assert keys(split.train_graph.edge_index, n) == train
    negatives = keys(torch.cat([split.val_neg, split.test_neg], dim=1), n)
    assert not (negatives & keys(graph.edge_index, n))  # non-edges of the full graph
    assert split.val_neg.size(1) == 2 * split.val_pos.size(1)
    again = split_edges(graph, 0.1, 0.2, seed=3, neg_ratio=2.0, rounding="floor")
    assert torch.equal(again.test_neg, split.test_neg) and torch.equal(again.val_pos, split.val_pos)


class SpySGC(SGC):
    """Records the edges of every graph it precomputes on."""

    seen = []

    def precompute(self, graph, *args, **kwargs):
        SpySGC.seen.append(graph.edge_index.clone())
        return super().precompute(graph, *args, **kwargs)


def test_the_encoder_only_sees_training_edges():
    graph = planted(0.9)
    n = graph.num_nodes
    split = split_edges(graph, 0.1, 0.2, seed=0, rounding="floor")
    SpySGC.seen = []
    fit_link_predictor(SpySGC(16, 8, SGCConfig(normalize_features=False)), InnerProductDecoder(8), split,
                       TrainConfig(lr=0.01, epochs=2, progress=False), hits_k=[5])
    (edges,) = SpySGC.seen
    assert keys(edges, n) == keys(split.train_pos, n)


# ---------------------------------------------------------------------------- decoders
def test_decoders():
    h_u, h_v = torch.randn(4, 6), torch.randn(4, 6)
    dot = build_link_decoder("dot", 6)
    assert torch.allclose(dot(h_u, h_v), (h_u * h_v).sum(1))
    mlp = build_link_decoder("mlp", 6, hidden=5, num_layers=3, dropout=0.2)
    assert isinstance(mlp, HadamardMLPDecoder) and len(mlp.layers) == 3
    mlp.eval()
    layer = torch.nn.Linear(6, 1)
    one = HadamardMLPDecoder(6, num_layers=1)
    one.layers[0].load_state_dict(layer.state_dict())
    assert torch.allclose(one(h_u, h_v), layer(h_u * h_v).squeeze(1))  # one layer = a weighted inner product
    assert torch.allclose(mlp(h_u, h_v), mlp(h_v, h_u))
    before = [p.clone() for p in mlp.parameters()]
    mlp.reset_parameters()
    assert any(not torch.equal(a, b) for a, b in zip(before, mlp.parameters()))
    assert repr(dot) == "InnerProductDecoder(in_features=6)"
    with pytest.raises(ConfigError, match="unknown link decoder 'cosine'; choose one of dot, mlp"):
        build_link_decoder("cosine", 6)
    with pytest.raises(ConfigError, match="dot decoder has no options"):
        build_link_decoder("dot", 6, hidden=3)
    with pytest.raises(FeatureError, match=r"\[num_pairs, 6\]"):
        dot(torch.randn(4, 5), torch.randn(4, 5))


# ---------------------------------------------------------------------------- training
def test_planted_communities_are_learned_and_random_edges_are_not():
    results = {}
    for homophily in (0.98, 1 / 6):
        split = split_edges(planted(homophily), 0.1, 0.2, seed=0, rounding="floor")
        encoder = GCN(16, 16, GCNConfig(hidden=32, dropout=0.0, normalize_features=False))
        results[homophily] = fit_link_predictor(encoder, InnerProductDecoder(16), split, FAST, seed=0, hits_k=[10])
    assert results[0.98]["test_auc"] > 0.8 and results[0.98]["test_ap"] > 0.8
    assert results[1 / 6]["test_auc"] < 0.65  # the control: nothing to learn, so the test can fail
    assert 0.0 <= results[0.98]["test_hits@10"] <= 1.0 and 0.0 < results[0.98]["test_mrr"] <= 1.0


def test_gamlp_encoder_with_mini_batches_and_mlp_decoder_runs():
    split = split_edges(planted(0.98), 0.1, 0.2, seed=0, rounding="floor")
    encoder = GAMLP(16, 16, GAMLPConfig(k=2, hidden=16, dropout=0.1, normalize_features=False))
    config = TrainConfig(lr=0.01, epochs=4, batch_size=256, progress=False)
    result = fit_link_predictor(encoder, HadamardMLPDecoder(16), split, config, seed=1, hits_k=[10])
    assert result["epochs_run"] == 4 and 0 <= result["best_epoch"] < 4
    assert all(math.isfinite(result[f"{part}_{m}"]) for part in ("val", "test") for m in ("auc", "ap", "mrr"))


def test_runs_are_seeded_and_record_every_metric():
    graph = planted(0.98)

    def factory():
        return SGC(16, 8, SGCConfig(normalize_features=False))

    first, second = (run_supervised_link_prediction(factory, graph, [0, 1], TrainConfig(lr=0.02, epochs=5,
                                                                                         progress=False),
                                                    hits_k=[5, 20], neg_ratio=2.0) for _ in range(2))
    assert first["metrics"] == ["auc", "ap", "hits@5", "hits@20", "mrr"]
    assert first["metric"] == "auc" and first["split"] == "random 85%/5%/10%"
    for key in ("val_auc", "test_ap", "test_hits@20", "test_mrr"):
        assert first[key] == second[key]
    assert first["runs"][0]["test_auc"] != first["runs"][1]["test_auc"]  # seeds differ in split and init


def test_device_follows_the_train_config():
    split = split_edges(planted(0.98), 0.1, 0.2, seed=0, rounding="floor")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        config = TrainConfig(lr=0.01, epochs=2, device=device, progress=False)
        encoder, decoder = GCN(16, 8), HadamardMLPDecoder(8)
        result = fit_link_predictor(encoder, decoder, split, config, hits_k=[5])
        assert next(encoder.parameters()).device.type == device and math.isfinite(result["test_auc"])


# ---------------------------------------------------------------------------- errors
def test_option_errors():
    with pytest.raises(ConfigError, match="neg_ratio must be a number > 0.0, got -1"):
        check_link_options({"neg_ratio": -1})
    with pytest.raises(ConfigError, match=r"val_ratio must be a number in \[0.0, 1.0\), got 1.5"):
        check_link_options({"val_ratio": 1.5})
    with pytest.raises(ConfigError, match="val_ratio must be > 0"):
        check_link_options({"val_ratio": 0.0})
    with pytest.raises(ConfigError, match=r"val_ratio \+ test_ratio must be < 1"):
        check_link_options({"val_ratio": 0.5, "test_ratio": 0.6})
    with pytest.raises(ConfigError, match="unknown link decoder 'bilinear'"):
        check_link_options({"decoder": "bilinear"})
    with pytest.raises(ConfigError, match="decoder_layers sets the depth of the mlp decoder"):
        check_link_options({"decoder_layers": 3})
    with pytest.raises(ConfigError, match="every K in hits_k must be an integer >= 1"):
        check_link_options({"hits_k": [10, 0]})
    with pytest.raises(ConfigError, match="unknown link option"):
        check_link_options({"lr": 0.1})
    with pytest.raises(ConfigError, match="neg_ratio"):
        split_edges(planted(0.9), neg_ratio=0)
    with pytest.raises(ConfigError, match="rounding"):
        split_edges(planted(0.9), rounding="up")


def test_encoder_errors():
    split = split_edges(planted(0.9), 0.1, 0.2, seed=0)
    with pytest.raises(ConfigError, match="label_hops > 0"):
        fit_link_predictor(GAMLP(16, 8, GAMLPConfig(k=2, label_hops=2)), InnerProductDecoder(8), split, FAST)
    with pytest.raises(ConfigError, match="post_steps > 0"):
        fit_link_predictor(SGC(16, 8, SGCConfig(post_steps=2)), InnerProductDecoder(8), split, FAST)
    with pytest.raises(ConfigError, match="not a zoo model"):
        fit_link_predictor(torch.nn.Linear(16, 8), InnerProductDecoder(8), split, FAST)
    bare = split_edges(planted(0.9), 0.1, 0.2, seed=0)
    bare.train_pos = None
    with pytest.raises(GraphError, match="no train_pos"):
        fit_link_predictor(SGC(16, 8), InnerProductDecoder(8), bare, FAST)


def test_run_config_routes_zoo_models_to_supervised_link_prediction():
    config = RunConfig.from_dict({"task": "link", "model": "sgc", "dataset": "karate", "seeds": 1,
                                  "train": {"epochs": 3}, "task_options": {"hits_k": [5], "decoder": "mlp"}})
    assert config.supervised_link and not config.self_supervised
    assert config.train.lr == 0.01 and config.train.patience == 50  # the link task's defaults
    assert config.task_options["embed_dim"] == 64 and config.task_options["val_ratio"] is None
    assert RunConfig.from_dict(config.to_dict()) == config
    record = run(config, progress=False)
    assert record["metrics"] == ["auc", "ap", "hits@5", "mrr"] and "test_hits@5" in record
    assert len(record["dataset_hash"]) == 32 and record["config"]["model_config"]["k"] == 2
    ssl = RunConfig.from_dict({"task": "link", "model": "gae"})
    assert ssl.self_supervised and not ssl.supervised_link and ssl.task_options == {"val_ratio": 0.05,
                                                                                  "test_ratio": 0.1}
    with pytest.raises(ConfigError, match="unknown model 'gcnn' for --task link; supervised encoders: "):
        RunConfig.from_dict({"task": "link", "model": "gcnn"})
    with pytest.raises(ConfigError, match="rlu does not apply to --task link"):
        RunConfig.from_dict({"task": "link", "model": "gamlp", "rlu": {"stages": [10]}})
