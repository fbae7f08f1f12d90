import math

import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError
from sgl.models.gcmae import (
    GCMAE,
    GCMAEConfig,
    adjacency_loss,
    grace_config,
    graphmae_config,
    info_nce,
    sce_loss,
    variance_loss,
)
from sgl.models.ssl_baselines import SSL_MODELS, build_ssl_model, ssl_model_config


def test_sce_loss_hand_value():
    x_hat = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    x = torch.tensor([[2.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    # cosines 1, 1/sqrt(2), 0 -> (1 - c)^3 = 0, (1 - 0.70711)^3, 1
    expected = (0.0 + (1 - 1 / math.sqrt(2)) ** 3 + 1.0) / 3
    assert float(sce_loss(x_hat, x, alpha=3.0)) == pytest.approx(expected, rel=1e-5)


def test_info_nce_hand_value():
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    z2 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    tau = 0.5
    e = math.exp
    # view 1 -> 2: node 0: pos e^{1/t}; denom: inter e^{2}+e^{2}, intra (excluding self) e^{0}
    l10 = -math.log(e(2) / (e(2) + e(2) + e(0)))
    # node 1: pos cos(z1_1, z2_1) = 0; inter e^0 + e^0; intra e^0 (z1_1 vs z1_0)
    l11 = -math.log(e(0) / (e(0) + e(0) + e(0)))
    # view 2 -> 1: node 0: pos e^2; inter e^2 + e^0; intra (z2_0 vs z2_1) e^2
    l20 = -math.log(e(2) / (e(2) + e(0) + e(2)))
    # node 1: pos e^0; inter e^2 + e^0; intra e^2
    l21 = -math.log(e(0) / (e(2) + e(0) + e(2)))
    expected = 0.5 * ((l10 + l11) / 2 + (l20 + l21) / 2)
    assert float(info_nce(z1, z2, tau)) == pytest.approx(expected, rel=1e-5)


def test_adjacency_loss_hand_value():
    z = torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    pos = torch.tensor([[0, 0], [1, 2]])  # cos 1 and 0
    neg = torch.tensor([[0], [3]])  # cos -1
    t = 0.5
    softplus = lambda v: math.log1p(math.exp(v))  # noqa: E731
    # BCE with logits: target 1 -> softplus(-l), target 0 -> softplus(l)
    expected = (softplus(-1 / t) + softplus(-0.0) + softplus(-1 / t)) / 3
    assert float(adjacency_loss(z, pos, neg, t)) == pytest.approx(expected, rel=1e-5)


def test_variance_loss_hand_value():
    z = torch.tensor([[0.0, 1.0, 5.0], [0.0, 2.0, -5.0], [0.0, 3.0, 0.0]])
    # unbiased variances: 0, 1, 25 -> std sqrt(v + 1e-4); hinge 1 - std where positive
    expected = ((1 - math.sqrt(1e-4)) + max(0.0, 1 - math.sqrt(1 + 1e-4)) + 0.0) / 3
    assert float(variance_loss(z)) == pytest.approx(expected, rel=1e-5)


def small_graph():
    return sgl.datasets.csbm(num_nodes=120, num_classes=3, avg_degree=6, num_features=16, homophily=0.9,
                             feature_signal=1.0, train_per_class=10, num_val=30, num_test=50, seed=0)


def test_loss_terms_switch_with_weights():
    g = small_graph()
    x, ei = g.x, g.edge_index
    with torch.no_grad():
        terms = GCMAE(16, GCMAEConfig(hidden=8, proj_dim=8)).losses(x, ei)
        assert all(float(terms[k]) > 0 for k in ("mae", "cl", "adj", "std"))
        terms = GCMAE(16, graphmae_config(hidden=8)).losses(x, ei)
        assert float(terms["mae"]) > 0 and float(terms["cl"]) == float(terms["adj"]) == float(terms["std"]) == 0
        terms = GCMAE(16, grace_config(hidden=8)).losses(x, ei)
        assert float(terms["cl"]) > 0 and float(terms["mae"]) == 0


def test_fit_lowers_the_loss_and_embeds():
    g = small_graph()
    model = GCMAE(16, GCMAEConfig(hidden=16, proj_dim=16, epochs=40, lr=5e-3))
    history = model.fit(g, seed=0)
    assert len(history) == 40
    first = sum(h["loss"] for h in history[:5]) / 5
    last = sum(h["loss"] for h in history[-5:]) / 5
    assert last < first
    emb = model.embed(g)
    assert emb.shape == (120, 16) and bool(torch.isfinite(emb).all())
    # seeded: same seed, same embedding
    again = GCMAE(16, GCMAEConfig(hidden=16, proj_dim=16, epochs=40, lr=5e-3))
    again.fit(g, seed=0)
    assert torch.allclose(again.embed(g), emb, atol=1e-5)


def test_gat_encoder_and_sampled_contrast():
    g = small_graph()
    model = GCMAE(16, GCMAEConfig(encoder="gat", hidden=8, heads=2, proj_dim=8, epochs=2, cl_max_nodes=32,
                                  adj_max_pos=50))
    model.fit(g)
    assert model.embed(g).shape == (120, 8)


@pytest.mark.parametrize("name", sorted(SSL_MODELS))
def test_every_ssl_model_fits_and_embeds(name):
    g = small_graph()
    model = build_ssl_model(name, 16, hidden=8, epochs=2)
    history = model.fit(g, seed=1)
    assert len(history) == 2 and all(math.isfinite(h["loss"]) for h in history)
    assert model.embed(g).shape == (120, 8)


def test_bad_configs_and_inputs():
    with pytest.raises(ConfigError, match="encoder"):
        GCMAEConfig(encoder="gin")
    with pytest.raises(ConfigError, match="mask_rate"):
        GCMAEConfig(mask_rate=1.0)
    with pytest.raises(ConfigError, match="at least one positive loss weight"):
        GCMAEConfig(mae_weight=0, cl_weight=0, adj_weight=0, std_weight=0)
    with pytest.raises(ConfigError, match="shared_projector"):
        GCMAEConfig(shared_projector="yes")
    assert grace_config().shared_projector and not GCMAEConfig().shared_projector
    with pytest.raises(ConfigError, match="divisible"):
        GCMAEConfig(encoder="gat", hidden=10, heads=4)
    with pytest.raises(ConfigError, match="unknown option"):
        ssl_model_config("gcmae", nope=1)
    with pytest.raises(ConfigError, match="unknown self-supervised model"):
        build_ssl_model("byol", 4)
    featureless = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(FeatureError, match="no x"):
        GCMAE(4, GCMAEConfig(epochs=1)).fit(featureless)
    with pytest.raises(FeatureError, match="no x"):
        build_ssl_model("dgi", 4, epochs=1).fit(featureless)
    wrong = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3))
    with pytest.raises(FeatureError, match="expects features"):
        GCMAE(4, GCMAEConfig(epochs=1)).fit(wrong)
