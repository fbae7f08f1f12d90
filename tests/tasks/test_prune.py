import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.errors import ConfigError
from sgl.models import GCN, SGC, GCNConfig, MLP
from sgl.tasks import TrainConfig
from sgl.tasks.prune import apply_weight_masks, check_sparsity, magnitude_masks, prune_model, weight_sparsity
from sgl.tasks.ugs import ugs


@pytest.fixture(scope="module")
def graph():
    torch.set_num_threads(1)
    return sgl.datasets.load("synthetic", num_nodes=300, num_classes=3, avg_degree=6, num_features=12,
                             homophily=0.9, feature_signal=0.5, seed=0)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, True, "0.5"])
def test_sparsity_outside_unit_interval_is_rejected(bad):
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        check_sparsity(bad)


def test_global_magnitude_masks_and_hooks():
    model = MLP(4, 8, 3, num_layers=2)
    with torch.no_grad():
        model.layers[0].weight.copy_(torch.arange(32, dtype=torch.float).view(8, 4) + 100)
        model.layers[1].weight.copy_(torch.arange(24, dtype=torch.float).view(3, 8))
    masks = magnitude_masks({n: p for n, p in model.named_parameters() if p.dim() == 2}, 0.25)
    # global threshold: the 14 smallest |w| are all in the second layer
    assert int((~masks["layers.1.weight"]).sum()) == 14 and bool(masks["layers.0.weight"].all())
    apply_weight_masks(model, masks)
    assert weight_sparsity(model) == pytest.approx(14 / 56)
    with torch.no_grad():
        model.layers[1].weight.add_(1.0)  # an optimiser step touches pruned entries ...
    model(torch.randn(2, 4))  # ... and the next forward zeroes them again
    assert int((model.layers[1].weight == 0).sum()) == 14


@pytest.mark.parametrize("method", ["magnitude", "lottery"])
def test_pruning_reaches_the_sparsity(graph, method):
    factory = lambda: GCN(graph.num_features, 3, GCNConfig(hidden=8))  # noqa: E731
    out = prune_model(factory, graph, 0.6, TrainConfig(lr=0.05, epochs=20, progress=False),
                      method=method, rounds=2 if method == "lottery" else 1)
    assert out["weight_sparsity"] == pytest.approx(0.6, abs=0.02)
    assert out["test_acc"] > 0.5
    with pytest.raises(ConfigError, match="pruning method"):
        prune_model(factory, graph, 0.5, TrainConfig(epochs=1), method="random")


def test_ugs_writes_back_a_valid_pruned_graph(graph):
    config = TrainConfig(lr=0.01, weight_decay=5e-4, epochs=10, progress=False)
    out = ugs(lambda: GCN(graph.num_features, 3, GCNConfig(hidden=8)), graph, config, rounds=2, edge_rate=0.1,
              weight_rate=0.2)
    pruned = out["graph"]
    assert isinstance(pruned, Graph) and pruned.num_nodes == graph.num_nodes
    expected = graph.num_edges - round(0.1 * graph.num_edges)
    expected -= round(0.1 * expected)
    assert pruned.num_edges == expected
    again = Graph(pruned.indptr, pruned.indices, pruned.edge_weight, x=pruned.x, y=pruned.y)  # validates
    assert again.num_edges == pruned.num_edges
    assert out["weight_sparsity"] == pytest.approx(1 - 0.8 ** 2, abs=0.01)
    with pytest.raises(ConfigError, match="edge weights"):
        ugs(lambda: SGC(graph.num_features, 3), graph, config)
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        ugs(lambda: GCN(graph.num_features, 3), graph, config, edge_rate=1.0)
