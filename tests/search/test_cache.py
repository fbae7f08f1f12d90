import pytest
import torch

import sgl
from sgl.errors import ConfigError
from sgl.ops import get_operator, propagate_hops, row_normalize
from sgl.search import HopCache


@pytest.fixture
def graph():
    return sgl.datasets.load("synthetic", num_nodes=300, num_features=16, seed=0)


def test_hops_are_shared_sliced_and_extended(graph):
    cache = HopCache(graph)
    sym = {"graph_op": "adj", "r": 0.5}
    hops3, t3 = cache.get(sym, 3)
    assert cache.propagations == 1 and cache.hits == 0
    hops2, t2 = cache.get(sym, 2)
    assert cache.propagations == 1 and cache.hits == 1 and t2 <= t3
    assert all(a is b for a, b in zip(hops2, hops3))
    hops6, t6 = cache.get(sym, 6)  # extension: only hops 4..6 are computed
    assert cache.propagations == 2 and t6 >= t3
    direct = propagate_hops(graph, row_normalize(graph.x), 6, get_operator("adj", r=0.5))
    for a, b in zip(hops6, direct):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    cache.get({"graph_op": "ppr", "alpha": 0.1}, 2)
    cache.get({"graph_op": "adj", "r": 0.0}, 2)  # another r is another operator
    assert cache.propagations == 4


def test_extended_ppr_hops_equal_direct(graph):
    cache = HopCache(graph)
    ppr = {"graph_op": "ppr", "alpha": 0.2}
    cache.get(ppr, 1)
    hops, _ = cache.get(ppr, 4)
    direct = propagate_hops(graph, row_normalize(graph.x), 4, get_operator("ppr", alpha=0.2))
    torch.testing.assert_close(hops[-1], direct[-1], rtol=1e-5, atol=1e-6)


def test_eviction_under_budget(graph):
    one_entry = 3 * graph.num_nodes * 16 * 4
    cache = HopCache(graph, max_bytes=one_entry + 1)
    cache.get({"graph_op": "adj", "r": 0.5}, 3)
    cache.get({"graph_op": "adj", "r": 1.0}, 3)  # evicts the first
    cache.get({"graph_op": "adj", "r": 0.5}, 3)
    assert cache.propagations == 3
    assert len(cache._entries) == 1


def test_bad_input(graph):
    with pytest.raises(ConfigError, match="graph_op"):
        HopCache(graph).get({"op": "adj"}, 2)
    with pytest.raises(ConfigError, match="non-negative"):
        HopCache(graph).get({"graph_op": "adj"}, -1)
    graph.x = None
    with pytest.raises(ConfigError, match="features"):
        HopCache(graph)
