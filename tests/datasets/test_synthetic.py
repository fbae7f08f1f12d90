import time

import pytest
import torch

from sgl.datasets import csbm
from sgl.errors import ConfigError


def edge_homophily(g):
    src, dst = g.edge_index
    return float((g.y[src] == g.y[dst]).float().mean())


def test_deterministic_under_seed():
    a = csbm(2000, num_classes=3, num_features=8, seed=5)
    b = csbm(2000, num_classes=3, num_features=8, seed=5)
    c = csbm(2000, num_classes=3, num_features=8, seed=6)
    assert torch.equal(a.indices, b.indices) and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert torch.equal(a.train_mask, b.train_mask)
    assert not torch.equal(a.y, c.y)


@pytest.mark.parametrize("h", [0.1, 0.5, 0.9])
def test_homophily_and_structure(h):
    g = csbm(10_000, num_classes=4, avg_degree=10, num_features=4, homophily=h, seed=0)
    assert abs(edge_homophily(g) - h) < 0.05
    assert g.is_symmetric() and not g.has_self_loops()
    assert abs(g.num_edges / g.num_nodes - 10) < 0.5
    assert g.y.bincount().tolist() == [2500] * 4
    assert g.split_sizes() == (80, 500, 1000)
    assert not (g.train_mask & g.test_mask).any()


def test_feature_signal():
    g = csbm(4000, num_classes=2, num_features=16, feature_signal=3.0, feature_noise=0.1, seed=1)
    means = torch.stack([g.x[g.y == c].mean(0) for c in range(2)])
    assert float((g.x - means[g.y]).std()) < 0.15  # features sit at their class mean


def test_small_graph_split_shrinks():
    g = csbm(100, num_classes=2, num_features=2, seed=0)
    assert g.split_sizes()[0] == 40 and sum(g.split_sizes()) == 100


def test_scale_200k_nodes_fast():
    start = time.perf_counter()
    g = csbm(200_000, num_classes=5, avg_degree=10, num_features=16, seed=0)
    assert time.perf_counter() - start < 15
    assert g.num_nodes == 200_000 and abs(g.num_edges - 2_000_000) < 20_000


@pytest.mark.parametrize("kwargs", [
    dict(num_nodes=0), dict(num_nodes=10, homophily=1.5), dict(num_nodes=10, homophily=-0.1),
    dict(num_nodes=10, num_classes=0), dict(num_nodes=3, num_classes=5), dict(num_nodes=10, avg_degree=-1),
    dict(num_nodes=10, num_features=0), dict(num_nodes=10, num_classes=1, homophily=0.5),
    dict(num_nodes=10, seed=1.5), dict(num_nodes=10.0),
])
def test_validation(kwargs):
    with pytest.raises(ConfigError):
        csbm(**kwargs)
