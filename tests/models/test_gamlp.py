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


@pytest.mark.parametrize("attention", ["jk", "recursive"])
def test_official_output_net(small_graph, attention):
    from sgl.models import FeedForwardNetII
    from sgl.ops import JKAttention

    torch.manual_seed(0)
    cfg = GAMLPConfig(k=3, hidden=8, attention=attention, num_layers=3, jk_layers=2, dropout=0.3,
                      output_net="official")
    model = GAMLP(5, 3, cfg)
    assert isinstance(model.output, FeedForwardNetII) and len(model.output.layers) == 3
    assert model.output.layers[-1].norm.num_features == 3  # BatchNorm on the logits
    if attention == "jk":
        att = model.attention
        assert isinstance(att, JKAttention) and isinstance(att.reference_net, FeedForwardNetII)
        assert (att.reference_net.in_features, att.reference_net.out_features) == (5 * 4, 8)
        assert att.attention.in_features == 5 + 8 and att.dropout == 0.3  # Linear(d + hidden, 1), model dropout
    feats = model.precompute(small_graph)
    out = model(feats[torch.arange(6)])
    out.sum().backward()
    assert out.shape == (6, 3)
    model.eval()
    assert model(feats[torch.arange(6)]).shape == (6, 3)


def test_default_output_net_is_unchanged(small_graph):
    from sgl.models import MLP

    model = GAMLP(5, 3, GAMLPConfig(k=3, hidden=8, attention="jk"))
    assert type(model.output) is MLP and model.attention.reference_net is None
    assert model.attention.dropout == 0.0 and model.attention.attention.in_features == 10


def test_output_net_errors():
    from sgl.ops import JKAttention, get_message_op

    with pytest.raises(ConfigError, match=r"\['mlp', 'official'\].*'ffn'"):
        GAMLPConfig(output_net="ffn")
    with pytest.raises(ConfigError, match="reference_dim"):
        JKAttention(4, 3, reference_net=torch.nn.Linear(12, 6))
    custom = JKAttention(4, 3, reference_net=torch.nn.Linear(12, 6), reference_dim=6)
    with pytest.raises(ConfigError, match="together"):  # a module cannot be rebuilt from config()
        get_message_op(**custom.config())


def test_output_net_through_sgl_train(tmp_path, capsys):
    import json

    from sgl.cli.main import main

    out = tmp_path / "run.json"
    assert main(["train", "--model", "gamlp", "--dataset", "karate", "--model-option", "output_net=official",
                 "--model-option", "k=2", "--model-option", "hidden=8", "--epochs", "3", "--seeds", "1",
                 "--no-progress", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["config"]["model_config"]["output_net"] == "official"
    assert main(["train", "--model", "gamlp", "--dataset", "karate", "--model-option", "output_net=ffn",
                 "--epochs", "1"]) == 2
    assert "output_net must be one of" in capsys.readouterr().err
