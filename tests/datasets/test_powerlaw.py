"""Chung–Lu power-law graphs: simple, seeded, heavy-tailed, checked arguments."""
import numpy as np
import pytest

from sgl.datasets.powerlaw import chung_lu_edges
from sgl.errors import ConfigError


def test_simple_seeded_and_heavy_tailed():
    edges = chung_lu_edges(20_000, avg_degree=10, exponent=2.3, seed=3)
    assert (edges[:, 0] < edges[:, 1]).all()                       # no self-loops, one row per edge
    keys = edges[:, 0] * 20_000 + edges[:, 1]
    assert np.unique(keys).size == keys.size
    assert (chung_lu_edges(20_000, avg_degree=10, exponent=2.3, seed=3) == edges).all()
    assert not np.array_equal(chung_lu_edges(20_000, avg_degree=10, exponent=2.3, seed=4), edges)
    degree = np.bincount(edges.ravel(), minlength=20_000)
    assert 8 < degree.mean() < 10.5                                # duplicates cost a little of the target
    assert degree.max() > 50 * np.median(degree)                   # hubs, unlike an Erdos-Renyi graph
    assert degree.max() <= 0.1 * 20_000 * 1.2                      # the hub cap holds (up to sampling noise)
    # a steeper exponent gives a lighter tail
    flat = np.bincount(chung_lu_edges(20_000, 10, exponent=3.5, seed=3).ravel()).max()
    assert flat < degree.max()


@pytest.mark.parametrize("kwargs, message", [
    ({"num_nodes": 1}, "num_nodes"),
    ({"num_nodes": 100, "exponent": 2.0}, "exponent"),
    ({"num_nodes": 100, "avg_degree": 0}, "avg_degree"),
    ({"num_nodes": 100, "max_degree_share": 0}, "max_degree_share"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        chung_lu_edges(**kwargs)
