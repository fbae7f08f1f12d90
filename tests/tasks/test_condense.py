import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.errors import ConfigError
from sgl.models import SGC
from sgl.tasks import RunConfig, TrainConfig, run
from sgl.tasks.condense import CondenseConfig, class_budget, condense
from sgl.tasks.condense_eval import run_condensed
from sgl.tasks.condense_gcond import PairAdjacency, class_gradients, dense_propagate, matching_distance


@pytest.fixture(scope="module")
def graph():
    torch.set_num_threads(1)
    g = sgl.datasets.load("synthetic", num_nodes=300, num_classes=3, avg_degree=6, num_features=12,
                          homophily=0.9, feature_signal=0.5, seed=0)
    g.x = g.x.abs()  # bag-of-words-like non-negative features, as the row normalisation expects
    return g


def test_class_budget_follows_gcond_and_rejects_too_few_nodes():
    labels = torch.tensor([0] * 10 + [1] * 5 + [2] * 2)
    budget = class_budget(labels, 6, 3)
    assert budget.tolist() == [4, 1, 1] and int(budget.sum()) == 6
    with pytest.raises(ConfigError, match="at least one node"):
        class_budget(labels, 2, 3)


@pytest.mark.parametrize("method", ["kmeans", "doscond", "gcond"])
def test_condense_is_deterministic_and_of_the_asked_size(graph, method):
    config = CondenseConfig(method=method, epochs=2, outer=2, inner=1, hidden=8)
    a = condense(graph, 9, seed=1, config=config)
    b = condense(graph, 9, seed=1, config=config)
    assert isinstance(a, Graph) and a.num_nodes == 9 and bool(a.train_mask.all())
    assert torch.equal(a.x, b.x) and torch.equal(a.indices, b.indices) and torch.equal(a.y, b.y)
    assert torch.bincount(a.y, minlength=3).tolist() == class_budget(graph.y[graph.train_mask], 9, 3).tolist()
    assert a.condensed_from["method"] == method
    if method != "kmeans":
        assert a.is_symmetric() and not a.has_self_loops()


def test_gcond_parts():
    adj = PairAdjacency(5, 8, density=0.1).eval()(torch.randn(6, 5))
    assert torch.allclose(adj, adj.T) and bool((adj.diagonal() == 0).all()) and bool(((adj >= 0) & (adj < 1)).all())
    g = torch.randn(4, 3)
    assert float(matching_distance(g, g)) == pytest.approx(0.0, abs=1e-5)
    x = torch.randn(6, 2)
    assert torch.allclose(dense_propagate(torch.zeros(6, 6), x, 2), x)  # isolated nodes: only self-loops


def test_pair_batchnorm_from_node_statistics_equals_the_batchnorm_of_all_pairs():
    torch.manual_seed(0)
    pge = PairAdjacency(5, 8)
    nn_init = torch.nn.init
    nn_init.uniform_(pge.norm1.weight, 0.5, 2.0), nn_init.uniform_(pge.norm1.bias, -1.0, 1.0)
    x = torch.randn(6, 5)
    left, right = pge.left(x), pge.right(x)
    explicit = pge.norm1((left.unsqueeze(1) + right.unsqueeze(0)).reshape(36, 8))  # every pair materialised
    assert torch.allclose(pge.norm1.pairs(left, right), explicit, atol=1e-5)


def test_class_gradients_match_autograd_per_class():
    torch.manual_seed(0)
    h, weight, bias = torch.rand(9, 4), torch.randn(3, 4), torch.randn(3)
    y = torch.tensor([0, 0, 1, 1, 1, 2, 2, 2, 2])
    onehot = torch.nn.functional.one_hot(y, 3).float()
    got = class_gradients(h, weight, bias, onehot, onehot / onehot.sum(dim=0))
    for c in range(3):
        w = weight.clone().requires_grad_(True)
        torch.nn.functional.cross_entropy(h[y == c] @ w.T + bias, y[y == c]).backward()
        assert torch.allclose(got[c], w.grad, atol=1e-6)
    assert matching_distance(got, got).abs().max() < 1e-3 and matching_distance(got, -got).min() > 5.9


def test_condensed_graph_trains_a_model_and_is_tested_on_the_source(graph, tmp_path):
    small = condense(graph, 9, method="kmeans", source={"dataset": "synthetic"})
    record = run_condensed(lambda: SGC(graph.num_features, 3), small, graph, [0],
                           TrainConfig(epochs=30, progress=False))
    majority = float((graph.y[graph.test_mask] == graph.y.mode().values).float().mean())
    assert record["test_acc"]["mean"] > majority + 0.2
    karate = sgl.datasets.load("karate")
    path = tmp_path / "karate4.pt"
    condense(karate, 4, method="kmeans", source={"dataset": "karate"}).save(path)
    out = run(RunConfig.from_dict({"model": "gcn", "dataset": f"file:{path}", "seeds": 1, "train": {"epochs": 5}}),
              progress=False)
    assert out["condensed_from"]["dataset"] == "karate" and "test_acc" in out
