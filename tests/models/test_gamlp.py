import pytest
import torch

import sgl
from sgl.errors import ConfigError, FeatureError
from sgl.models import GAMLP, GAMLPConfig
from sgl.models.gamlp import propagate_labels, train_label_matrix
from sgl.ops import normalized_adjacency
from sgl.tasks import TrainConfig, Trainer


@pytest.fixture(scope="module")
def synthetic():
    torch.set_num_threads(1)
    return sgl.datasets.load("synthetic", num_nodes=600, num_classes=3, avg_degree=8, num_features=16,
                             homophily=0.9, feature_signal=0.3, seed=0)


@pytest.mark.parametrize("attention", ["jk", "recursive"])
@pytest.mark.parametrize("extras", [{}, {"pre_process": True, "residual": True, "batch_norm": True},
                                    {"label_hops": 3}])
def test_forward_shapes(small_graph, attention, extras):
    small_graph.train_mask = torch.tensor([True, True, True, False, False, True])
    cfg = GAMLPConfig(k=3, hidden=8, attention=attention, **extras)
    model = GAMLP(5, 3, cfg)
    feats = model.precompute(small_graph)
    assert len(feats.data) == 4 + (1 if extras.get("label_hops") else 0)
    model.eval()
    assert model(feats[torch.arange(6)]).shape == (6, 3)


def test_label_input_uses_training_labels_only(small_graph):
    small_graph.train_mask = torch.tensor([True, False, True, False, False, False])
    model = GAMLP(5, 3, GAMLPConfig(k=2, hidden=8, label_hops=2))
    before = model.precompute(small_graph).data[-1]
    small_graph.y = torch.tensor([0, 2, 1, 0, 0, 1])  # change only non-training labels
    after = model.precompute(small_graph).data[-1]
    assert torch.equal(before, after)
    seed = train_label_matrix(small_graph)
    assert seed.sum() == 2 and seed[0, 0] == 1 and seed[2, 1] == 1
    # mean aggregation D^-1 A (no self-loops), twice
    a = normalized_adjacency(small_graph, r=0.0, self_loops=False).to_dense()
    assert torch.allclose(before, a @ (a @ seed), atol=1e-6)
    assert torch.allclose(propagate_labels(small_graph, seed, 2), before)


def test_label_input_needs_a_train_mask(small_graph):
    with pytest.raises(FeatureError, match="train_mask"):
        GAMLP(5, 3, GAMLPConfig(k=2, hidden=8, label_hops=2)).precompute(small_graph)


@pytest.mark.parametrize("attention", ["jk", "recursive"])
def test_gamlp_trains(synthetic, attention):
    model = GAMLP(synthetic.num_features, synthetic.num_classes,
                  GAMLPConfig(k=3, hidden=32, attention=attention, label_hops=2, normalize_features=False))
    result = Trainer(TrainConfig(lr=0.01, weight_decay=5e-4, epochs=60, progress=False)).fit(
        model, model.precompute(synthetic), synthetic)
    test_y = synthetic.y[synthetic.test_mask]
    majority = float((test_y == test_y.mode().values).float().mean())
    assert result["test_acc"] > majority + 0.2


def test_attention_is_per_node(synthetic):
    model = GAMLP(synthetic.num_features, synthetic.num_classes, GAMLPConfig(k=3, hidden=16,
                                                                            normalize_features=False))
    feats = model.precompute(synthetic)
    model.eval()
    idx = torch.arange(10)
    perm = torch.randperm(10)
    out = model(feats[idx])
    assert torch.allclose(model(feats[idx[perm]]), out[perm], atol=1e-5)


def test_config_errors():
    with pytest.raises(ConfigError, match="attention"):
        GAMLPConfig(attention="gat")
    with pytest.raises(ConfigError, match=">= 1"):
        GAMLPConfig(k=0)
    with pytest.raises(ConfigError, match="label_hops"):
        GAMLPConfig(label_hops=-1)
    with pytest.raises(ConfigError, match="do not apply"):
        GAMLPConfig(message="concat")
