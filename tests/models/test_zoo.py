"""Every scalable model in the registry: shapes, precompute references, training, errors."""
import pytest
import torch

import sgl
from sgl.errors import ConfigError, FeatureError
from sgl.models import (
    APPNP, GBP, MODELS, NAFS, S2GC, SIGN, APPNPConfig, GBPConfig, PaSCaV3, PaSCaV3Config, S2GCConfig,
    SIGNConfig, build_model, default_train_config, model_config,
)
from sgl.ops import normalized_adjacency, propagate_hops, row_normalize
from sgl.tasks import TrainConfig, Trainer

SGAP_NAMES = sorted(name for name, (cls, _, _) in MODELS.items() if not getattr(cls, "full_batch", False))


@pytest.fixture(scope="module")
def synthetic():
    torch.set_num_threads(1)  # tiny models: thread hand-offs cost more than they save on 2 busy cores
    return sgl.datasets.load("synthetic", num_nodes=600, num_classes=3, avg_degree=8, num_features=16,
                             homophily=0.9, feature_signal=0.3, seed=0)


def dense_hops(graph, x, k):
    a = normalized_adjacency(graph).to_dense()
    out = [x]
    for _ in range(k):
        out.append(a @ out[-1])
    return out


@pytest.mark.parametrize("name", SGAP_NAMES)
def test_shapes_and_no_training_in_constructor(name, small_graph):
    model = build_model(name, small_graph.num_features, 3)
    before = [p.detach().clone() for p in model.parameters()]
    features = model.precompute(small_graph)
    assert len(features) == small_graph.num_nodes
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    model.eval()
    logits = model(features[torch.arange(4)])
    assert logits.shape == (4, 3)
    full = model.postprocess(small_graph, model(features[torch.arange(6)]))
    assert full.shape == (6, 3)


# the graph-free MLP student reads no edges, and this graph's signal is mostly in its edges
@pytest.mark.parametrize("name", [n for n in SGAP_NAMES if n != "mlp"])
def test_short_training_beats_majority_class(name, synthetic):
    model = build_model(name, synthetic.num_features, synthetic.num_classes,
                        model_config(name, normalize_features=False))
    features = model.precompute(synthetic)
    train_cfg = TrainConfig(**{**default_train_config(name), "epochs": 40, "patience": None, "progress": False})
    result = Trainer(train_cfg).fit(model, features, synthetic, seed=0)
    test_y = synthetic.y[synthetic.test_mask]
    majority = float((test_y == test_y.mode().values).float().mean())
    assert result["test_acc"] > majority + 0.2, (name, result["test_acc"], majority)


def test_sign_concatenates_hops(small_graph):
    x = small_graph.x
    feats = SIGN(5, 3, SIGNConfig(k=2, normalize_features=False)).precompute(small_graph).data
    assert torch.allclose(feats, torch.cat(dense_hops(small_graph, x, 2), dim=1), atol=1e-5)


def test_s2gc_filter(small_graph):
    x = small_graph.x
    k, a = 4, 0.05
    hops = dense_hops(small_graph, x, k)
    expected = a * x + (1 - a) / k * sum(hops[1:])
    got = S2GC(5, 3, S2GCConfig(k=k, s2gc_alpha=a, normalize_features=False)).precompute(small_graph).data
    assert torch.allclose(got, expected, atol=1e-5)


def test_gbp_and_appnp_weights(small_graph):
    x = small_graph.x
    hops = dense_hops(small_graph, x, 5)
    beta = 0.2
    gbp = GBP(5, 3, GBPConfig(k=5, gbp_beta=beta, normalize_features=False)).precompute(small_graph).data
    assert torch.allclose(gbp, sum(beta * (1 - beta) ** i * h for i, h in enumerate(hops)), atol=1e-5)
    # APPNP: K steps of Z <- (1 - alpha) A Z + alpha X, computed directly
    alpha, a_hat = 0.1, normalized_adjacency(small_graph).to_dense()
    z = x
    for _ in range(5):
        z = (1 - alpha) * a_hat @ z + alpha * x
    appnp = APPNP(5, 3, APPNPConfig(k=5, alpha=alpha, normalize_features=False)).precompute(small_graph).data
    assert torch.allclose(appnp, z, atol=1e-5)


def test_nafs_weights_hops_per_node(small_graph):
    model = NAFS(5, 3)
    feats = model.precompute(small_graph).data
    hops = propagate_hops(small_graph, row_normalize(small_graph.x), model.k)
    # a convex combination of the hops: within their elementwise range
    stacked = torch.stack(hops)
    assert bool((feats >= stacked.min(0).values - 1e-5).all() and (feats <= stacked.max(0).values + 1e-5).all())


def test_pasca_v3_post_propagation(small_graph):
    model = PaSCaV3(5, 3, PaSCaV3Config(post_steps=2))
    logits = torch.randn(6, 3)
    out = model.postprocess(small_graph, logits)
    assert out.shape == (6, 3) and not torch.allclose(out, logits)
    probs = torch.softmax(logits, 1)
    smoothed = propagate_hops(small_graph, probs, 2, model.post_op)[-1]
    assert torch.allclose(out.exp(), smoothed, atol=1e-5)


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown option"):
        model_config("sign", hops=3)
    with pytest.raises(ConfigError, match="unknown model"):
        build_model("sgn", 4, 2)
    with pytest.raises(ConfigError, match="must be positive"):
        model_config("sign", k=0)
    with pytest.raises(ConfigError, match="hop_start"):
        model_config("pasca-v2", k=2, hop_start=3)
    with pytest.raises(ConfigError, match="unknown message operator|unknown"):
        build_model("sgc", 4, 2, model_config("sgc", message="median"))
    with pytest.raises(ConfigError, match="base model"):
        build_model("sign", 4, 2, model_config("sign", base_model="transformer"))


def test_dataset_without_labels_or_splits(small_graph):
    model = SIGN(5, 3)
    features = model.precompute(small_graph)
    with pytest.raises(FeatureError, match="train_mask"):
        Trainer(TrainConfig(epochs=1, progress=False)).fit(model, features, small_graph)
    small_graph.train_mask = torch.tensor([True, True, False, False, False, False])
    small_graph.val_mask = torch.tensor([False, False, True, False, False, False])
    small_graph.test_mask = torch.tensor([False, False, False, True, True, True])
    small_graph.y = None
    with pytest.raises(FeatureError, match="labels"):
        Trainer(TrainConfig(epochs=1, progress=False)).fit(model, features, small_graph)


def test_labels_out_of_range(small_graph):
    small_graph.train_mask = torch.tensor([True, True, True, True, False, False])
    small_graph.val_mask = torch.tensor([False, False, False, False, True, False])
    small_graph.test_mask = torch.tensor([False, False, False, False, False, True])
    model = SIGN(5, 2)  # labels go up to 2: needs 3 classes
    with pytest.raises(FeatureError, match="num_classes=3"):
        Trainer(TrainConfig(epochs=1, progress=False)).fit(model, model.precompute(small_graph), small_graph)
