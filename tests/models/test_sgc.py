import pytest
import torch

import sgl
from sgl.errors import ConfigError
from sgl.models import SGC, SGCConfig, build_model, model_config
from sgl.ops import normalized_adjacency, row_normalize
from sgl.tasks import TrainConfig, run_node_classification


def test_precompute_is_normalized_a_to_the_k(small_graph):
    model = SGC(small_graph.num_features, 3, SGCConfig(k=3, normalize_features=False))
    a = normalized_adjacency(small_graph).to_dense()
    expected = a @ a @ a @ small_graph.x
    assert torch.allclose(model.precompute(small_graph).data, expected, atol=1e-5)
    # the SGC paper's preprocessing: row-normalised features
    normalized = SGC(small_graph.num_features, 3, SGCConfig(k=1)).precompute(small_graph).data
    assert torch.allclose(normalized, a @ row_normalize(small_graph.x), atol=1e-6)


def test_precompute_has_no_parameters_and_constructor_does_not_train(small_graph):
    model = SGC(small_graph.num_features, 3)
    before = [p.clone() for p in model.parameters()]
    features = model.precompute(small_graph).data
    assert not features.requires_grad
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert model(features).shape == (6, 3)
    assert torch.equal(model.postprocess(small_graph, features), features)


def test_registry_and_config_errors():
    assert isinstance(build_model("SGC", 4, 2), SGC)
    assert model_config("sgc", k=4).k == 4
    with pytest.raises(ConfigError, match="unknown model"):
        build_model("gcnn", 4, 2)
    with pytest.raises(ConfigError, match="unknown option"):
        model_config("sgc", hops=3)
    with pytest.raises(ConfigError, match="non-negative"):
        SGCConfig(k=-1)
    with pytest.raises(ConfigError, match="k \\(propagation hops\\) must be positive"):
        SGCConfig(k=0)
    with pytest.raises(ConfigError, match="num_classes"):
        SGC(4, 1)


def test_sgc_learns_a_homophilous_synthetic_graph():
    graph = sgl.datasets.load("synthetic", num_nodes=2000, num_classes=4, avg_degree=8, num_features=16,
                              homophily=0.9, feature_signal=0.3, seed=0)
    def run(k):
        cfg = SGCConfig(k=k, normalize_features=False)  # Gaussian features: no row normalisation
        return run_node_classification(lambda: SGC(graph.num_features, graph.num_classes, cfg), graph,
                                       seeds=[0, 1], train_config=TrainConfig(epochs=60, progress=False))

    with_graph = run(2)
    # propagation over a homophilous graph must beat the same linear model on raw features
    test = graph.test_mask
    raw = torch.nn.Linear(graph.num_features, graph.num_classes)
    opt = torch.optim.Adam(raw.parameters(), lr=0.2)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(raw(graph.x[graph.train_mask]), graph.y[graph.train_mask]).backward()
        opt.step()
    raw_acc = float((raw(graph.x[test]).argmax(1) == graph.y[test]).float().mean())
    assert with_graph["test_acc"]["mean"] > raw_acc + 0.05


def test_sgc_cora_public_split(data_path):
    """The paper setting on real Cora: well above chance, close to the published 81.0."""
    graph = sgl.datasets.load("cora", root=data_path("planetoid"))
    record = run_node_classification(
        lambda: SGC(graph.num_features, graph.num_classes, SGCConfig(k=3)), graph, seeds=[0, 1, 2],
        train_config=TrainConfig(weight_decay=1e-4, progress=False))
    assert record["test_acc"]["mean"] >= 0.80
    assert record["val_acc"]["mean"] >= 0.78
