import math

import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError
from sgl.models.ssl import (
    GCMAE,
    GCMAEConfig,
    adjacency_loss,
    grace_config,
    graphmae_config,
    info_nce,
    sce_loss,
    variance_loss,
)
from sgl.models.ssl import SSL_MODELS, build_ssl_model, ssl_model_config
from sgl.tasks.ssl_pretraining import pretrain


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
    history = pretrain(model, g, seed=0)
    assert len(history) == 40
    first = sum(h["loss"] for h in history[:5]) / 5
    last = sum(h["loss"] for h in history[-5:]) / 5
    assert last < first
    emb = model.embed(g)
    assert emb.shape == (120, 16) and bool(torch.isfinite(emb).all())
    # seeded: same seed, same embedding
    again = GCMAE(16, GCMAEConfig(hidden=16, proj_dim=16, epochs=40, lr=5e-3))
    pretrain(again, g, seed=0)
    assert torch.allclose(again.embed(g), emb, atol=1e-5)


def test_gat_encoder_and_sampled_contrast():
    g = small_graph()
    model = GCMAE(16, GCMAEConfig(encoder="gat", hidden=8, heads=2, proj_dim=8, epochs=2, cl_max_nodes=32,
                                  adj_max_pos=50))
    pretrain(model, g)
    assert model.embed(g).shape == (120, 8)


@pytest.mark.parametrize("name", sorted(SSL_MODELS))
def test_every_ssl_model_fits_and_embeds(name):
    g = small_graph()
    model = build_ssl_model(name, 16, hidden=8, epochs=2)
    history = pretrain(model, g, seed=1)
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
        pretrain(GCMAE(4, GCMAEConfig(epochs=1)), featureless)
    with pytest.raises(FeatureError, match="no x"):
        pretrain(build_ssl_model("dgi", 4, epochs=1), featureless)
    wrong = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3))
    with pytest.raises(FeatureError, match="expects features"):
        pretrain(GCMAE(4, GCMAEConfig(epochs=1)), wrong)


# ---------------------------------------------------------------- GCMAE's official Cora configuration
from sgl.models.ssl import GCMAE_PRESETS, GNNEncoder, dense_adjacency_loss, drop_nodes, gcmae_config  # noqa: E402
from sgl.models.ssl.encoder import _gat_propagate, _project  # noqa: E402


def _naive_dense_adjacency(z, edges, tau):
    n = z.size(0)
    h = torch.nn.functional.normalize(z, dim=1)
    logits = h @ h.t() / tau
    adj = torch.eye(n, dtype=torch.bool)
    for u, v in edges:
        adj[u, v] = True
    sp = torch.nn.functional.softplus
    return 0.5 * (sp(-logits[adj]).mean() + sp(logits[~adj]).mean())


def test_dense_adjacency_loss_hand_value():
    z = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    tau = 0.5
    sp = lambda v: math.log1p(math.exp(v))  # noqa: E731
    # edge 0->1 (given twice: counted once) plus self-loops; cosines: (0,1)=0, (0,2)=1, (1,2)=0
    # positives (0,0),(1,1),(2,2) logit 2, (0,1) logit 0; negatives (1,0) 0, (0,2) 2, (2,0) 2, (1,2) 0, (2,1) 0
    pos = (3 * sp(-2.0) + sp(0.0)) / 4
    neg = (3 * sp(0.0) + 2 * sp(2.0)) / 5
    edges = torch.tensor([[0, 0], [1, 1]])
    assert float(dense_adjacency_loss(z, edges, tau)) == pytest.approx(0.5 * (pos + neg), rel=1e-5)


def test_dense_adjacency_loss_matches_naive_value_and_gradient():
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(9, 4, generator=gen, dtype=torch.double)
    edges = torch.randint(0, 9, (2, 20), generator=gen)
    edge_list = edges.t().tolist()
    z1, z2 = z.clone().requires_grad_(True), z.clone().requires_grad_(True)
    ours = dense_adjacency_loss(z1, edges, 0.3)
    naive = _naive_dense_adjacency(z2, edge_list, 0.3)
    assert float(ours.detach()) == pytest.approx(float(naive.detach()), rel=1e-9)
    ours.backward()
    naive.backward()
    assert torch.allclose(z1.grad, z2.grad, atol=1e-10)


def test_gat_propagate_and_sparse_projection_match_gatconv():
    from torch_geometric.nn import GATConv

    gen = torch.Generator().manual_seed(1)
    conv = GATConv(6, 3, heads=2, concat=True, negative_slope=0.3)
    conv.eval()
    x = torch.rand(7, 6, generator=gen) * (torch.rand(7, 6, generator=gen) > 0.6)
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 2, 2], [1, 0, 3, 2, 5, 4, 0, 2, 6]])  # includes a self-loop
    expected = conv(x, edges)
    assert torch.allclose(_gat_propagate(conv, _project(conv, x), edges), expected, atol=1e-6)
    # sparse input plus a mask token on rows 1 and 4 == dense input with the token added there
    token = torch.rand(1, 6, generator=gen)
    rows = torch.tensor([1, 4])
    dense = x.clone()
    dense[rows] += token
    sparse = _project(conv, x.to_sparse(), token, rows)
    assert torch.allclose(sparse, _project(conv, dense), atol=1e-6)
    # projecting only the non-zero rows gives the same result
    x[[0, 3]] = 0.0
    assert torch.allclose(_project(conv, x, rows=torch.tensor([1, 2, 4, 5, 6])), _project(conv, x), atol=1e-6)


def test_drop_nodes_keeps_the_induced_subgraph():
    torch.manual_seed(3)
    n = 30
    x = torch.arange(n, dtype=torch.float).view(n, 1).repeat(1, 2)
    edges = torch.randint(0, n, (2, 120))
    torch.manual_seed(4)
    x_sub, e_sub, kept = drop_nodes(x, edges, 0.5)
    assert 0 < kept.numel() < n and torch.equal(x_sub, x[kept])
    kept_set = set(kept.tolist())
    expected = {(u, v) for u, v in edges.t().tolist() if u in kept_set and v in kept_set}
    assert {(int(kept[a]), int(kept[b])) for a, b in e_sub.t().tolist()} == expected
    assert e_sub.size(1) == sum(1 for u, v in edges.t().tolist() if u in kept_set and v in kept_set)
    torch.manual_seed(4)
    xs_sub, _, kept2 = drop_nodes(x.to_sparse(), edges, 0.5)
    assert torch.equal(kept2, kept) and torch.equal(xs_sub.to_dense(), x[kept])
    # everything dropped is impossible: one node survives
    _, e_one, kept_one = drop_nodes(x, edges, 0.999999)
    assert kept_one.numel() >= 1 and (e_one.numel() == 0 or int(e_one.max()) < kept_one.numel())


def test_sparse_masking_semantics():
    g = small_graph()
    model = GCMAE(16, GCMAEConfig(encoder="gat", hidden=8, heads=2, mask_rate=0.5, replace_rate=0.2,
                                  sparse_input=True))
    x = torch.nn.functional.relu(g.x)  # some zeros
    torch.manual_seed(0)
    out, masked, token_rows = model._mask_sparse(x.to_sparse().coalesce())
    dense = out.to_dense()
    assert masked.numel() == 60 and token_rows.numel() == 60 - int(0.2 * 60)
    unmasked = torch.ones(120, dtype=torch.bool)
    unmasked[masked] = False
    assert torch.equal(dense[unmasked], x[unmasked])
    assert bool((dense[token_rows] == 0).all())
    noise = sorted(set(masked.tolist()) - set(token_rows.tolist()))
    for row in noise:  # each replaced row is a copy of some node's features
        assert bool((x == dense[row]).all(1).any())


def test_std_head_prelu_norm_is_variance_of_normalised_rows():
    model = GCMAE(16, GCMAEConfig(hidden=8, proj_dim=8, std_head="prelu_norm", cl_weight=0, adj_weight=0,
                                  mae_weight=0, mask_rate=0.0, std_weight=1.0))
    model.eval()  # no dropout: the two encoder passes agree
    g = small_graph()
    with torch.no_grad():
        terms = model.losses(g.x, g.edge_index)
        h = model.encoder(g.x, g.edge_index)
        z = torch.nn.functional.normalize(model.std_act(model.std_head(h)), dim=1)
        expected = torch.relu(1 - torch.sqrt(z.var(0) + 1e-4)).mean()
    assert float(terms["std"]) == pytest.approx(float(expected), rel=1e-6)
    # rows of unit norm in 8 dims: every per-dimension std is < 1, so the hinge is active
    assert 0 < float(terms["std"]) < 1


def test_encoder_input_dropout_only_in_training():
    g = small_graph()
    enc = GNNEncoder(16, 8, 2, "gat", heads=2, in_drop=0.5, attn_drop=0.5)
    enc.train()
    torch.manual_seed(0)
    a = enc(g.x, g.edge_index)
    b = enc(g.x, g.edge_index)
    assert not torch.allclose(a, b)
    enc.eval()
    assert torch.equal(enc(g.x, g.edge_index), enc(g.x, g.edge_index))
    sparse = enc(g.x.to_sparse(), g.edge_index)
    assert torch.allclose(sparse, enc(g.x, g.edge_index), atol=1e-5)


def test_cora_preset_and_its_training_paths():
    cfg = gcmae_config("cora")
    assert (cfg.encoder, cfg.hidden, cfg.heads, cfg.num_layers, cfg.in_drop, cfg.attn_drop) == ("gat", 512, 4, 2, 0.1, 0.1)
    assert (cfg.mask_rate, cfg.replace_rate, cfg.sce_alpha, cfg.tau, cfg.cl_weight, cfg.adj_weight, cfg.std_weight) == \
        (0.6, 0.0, 3.0, 1.0, 0.3, 0.3, 0.5)
    assert (cfg.augmentation, cfg.drop_node, cfg.cl_views, cfg.epochs, cfg.lr, cfg.weight_decay) == \
        ("drop_node", 0.5, "single", 2000, 1e-3, 2e-4)
    assert gcmae_config("CORA", epochs=7).epochs == 7 and gcmae_config(hidden=8).hidden == 8
    assert set(GCMAE_PRESETS) == {"cora"}
    with pytest.raises(ConfigError, match="unknown GCMAE preset"):
        gcmae_config("citeseer")
    with pytest.raises(ConfigError, match="unknown GCMAE option"):
        gcmae_config("cora", nope=1)
    g = small_graph()
    small = dict(hidden=8, heads=2, proj_dim=8, proj_out=4, epochs=3)
    for extra in ({}, {"cl_views": "masked"}, {"cl_views": "augmented"}, {"adj_mode": "sampled"},
                  {"sparse_input": False, "replace_rate": 0.1}, {"replace_rate": 0.1}):
        model = GCMAE(16, gcmae_config("cora", **small, **extra))
        history = pretrain(model, g, seed=0)
        assert len(history) == 3 and all(math.isfinite(v) for v in history[-1].values())
        assert all(history[0][k] > 0 for k in ("mae", "cl", "adj", "std"))
        emb = model.embed(g)
        assert emb.shape == (120, 8) and bool(torch.isfinite(emb).all())
    # sparse and dense inputs give the same embedding for the same weights
    model.config.sparse_input = False
    dense_emb = model.embed(g)
    model.config.sparse_input = True
    assert torch.allclose(model.embed(g), dense_emb, atol=1e-5)


def test_new_config_fields_are_validated():
    with pytest.raises(ConfigError, match="cl_views"):
        GCMAEConfig(cl_views="both")
    with pytest.raises(ConfigError, match="augmentation"):
        GCMAEConfig(augmentation="drop_everything")
    with pytest.raises(ConfigError, match="adj_mode"):
        GCMAEConfig(adj_mode="full")
    with pytest.raises(ConfigError, match="std_head"):
        GCMAEConfig(std_head="mlp")
    with pytest.raises(ConfigError, match="sparse_input"):
        GCMAEConfig(sparse_input=True)  # GCN encoder
    with pytest.raises(ConfigError, match="in_drop"):
        GCMAEConfig(in_drop=1.0)
    with pytest.raises(ConfigError, match="proj_out"):
        GCMAEConfig(proj_out=-1)


def test_preset_through_the_ssl_registry():
    cfg = ssl_model_config("gcmae", preset="cora", epochs=5)
    assert cfg.encoder == "gat" and cfg.mask_rate == 0.6 and cfg.epochs == 5
    with pytest.raises(ConfigError, match="unknown GCMAE preset"):
        ssl_model_config("gcmae", preset="pubmed")
    with pytest.raises(ConfigError, match="unknown option"):
        ssl_model_config("graphmae", preset="cora")


def test_old_module_paths_still_import():
    import sgl.models.gcmae as old_gcmae
    import sgl.models.ssl as ssl
    import sgl.models.ssl_baselines as old_baselines

    for name in old_gcmae.__all__:
        assert getattr(old_gcmae, name) is getattr(ssl, name)
    for name in old_baselines.__all__:
        assert getattr(old_baselines, name) is getattr(ssl, name)
