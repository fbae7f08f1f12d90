import numpy as np
import pytest
import scipy.linalg
import torch

from sgl.data import Graph
from sgl.errors import ConfigError
from sgl.ops import (
    HeatKernel,
    NormalizedAdjacency,
    PersonalizedPageRank,
    get_operator,
    normalized_adjacency,
)


def random_graph(n=12, p=0.3, seed=0, directed=False, weighted=False):
    rng = np.random.default_rng(seed)
    a = (rng.random((n, n)) < p).astype(np.float64)
    np.fill_diagonal(a, 0)
    if not directed:
        a = np.triu(a, 1)
        a = a + a.T
    a[n - 1, :] = 0
    a[:, n - 1] = 0  # one isolated node: zero degree must not produce NaN
    if weighted:
        w = rng.random((n, n)) + 0.5
        a = a * (w + w.T if not directed else w)
    src, dst = np.nonzero(a)
    weight = torch.tensor(a[src, dst], dtype=torch.float64) if weighted else None
    g = Graph.from_edge_index(torch.tensor(np.stack([src, dst])), num_nodes=n, edge_weight=weight)
    return g, a


def dense_norm(a, r, self_loops=True):
    """Reference: D^(r-1) Ã D^(-r) on the matrix M[dst, src] = a.T (rows = destinations)."""
    m = a.T + (np.eye(len(a)) if self_loops else 0)
    d = m.sum(1)
    with np.errstate(divide="ignore"):
        left = np.where(d > 0, d ** (r - 1.0), 0.0)
        right = np.where(d > 0, d ** (-r), 0.0)
    return left[:, None] * m * right[None, :]


@pytest.mark.parametrize("r", [0.0, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("directed", [False, True])
def test_normalized_adjacency_matches_dense(r, self_loops, directed):
    g, a = random_graph(directed=directed, weighted=directed)
    got = normalized_adjacency(g, r=r, self_loops=self_loops, dtype=torch.float64).to_dense().numpy()
    assert np.allclose(got, dense_norm(a, r, self_loops))
    assert np.isfinite(got).all()


def test_named_normalizations():
    g, a = random_graph()
    rw = normalized_adjacency(g, r=1.0).to_dense().numpy()
    mean = normalized_adjacency(g, r=0.0).to_dense().numpy()
    sym = normalized_adjacency(g, r=0.5).to_dense().numpy()
    nonisolated = slice(0, len(a) - 1)
    assert np.allclose(rw.sum(0)[nonisolated], 1.0, atol=1e-6)  # column-stochastic
    assert np.allclose(mean.sum(1)[nonisolated], 1.0, atol=1e-6)  # row-stochastic
    assert np.allclose(sym, sym.T, atol=1e-6)


def test_matches_pyg_gcn_norm():
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    g, _ = random_graph(n=20, seed=3)
    ei, w = gcn_norm(g.edge_index, num_nodes=g.num_nodes, add_self_loops=True)
    ref = torch.zeros(g.num_nodes, g.num_nodes)
    ref[ei[1], ei[0]] = w
    assert torch.allclose(normalized_adjacency(g).to_dense(), ref, atol=1e-6)


def test_ppr_matches_closed_form():
    g, a = random_graph(seed=1)
    x = torch.randn(len(a), 4, dtype=torch.float64)
    for alpha, r in [(0.15, 0.5), (0.3, 1.0), (0.1, 0.0)]:
        op = PersonalizedPageRank(alpha=alpha, r=r, tol=1e-10, max_iters=1000)
        m = dense_norm(a, r)
        ref = alpha * np.linalg.solve(np.eye(len(a)) - (1 - alpha) * m, x.numpy())
        got = op.apply(op.adjacency(g, torch.float64), x).numpy()
        assert np.allclose(got, ref, atol=1e-7)


def test_heat_kernel_matches_expm():
    g, a = random_graph(seed=2)
    x = torch.randn(len(a), 3, dtype=torch.float64)
    for t, r in [(1.0, 0.5), (5.0, 0.5), (3.0, 1.0)]:
        op = HeatKernel(t=t, r=r, tol=1e-12)
        m = dense_norm(a, r)
        ref = scipy.linalg.expm(-t * (np.eye(len(a)) - m)) @ x.numpy()
        got = op.apply(op.adjacency(g, torch.float64), x).numpy()
        assert np.allclose(got, ref, atol=1e-9)
    from scipy.stats import poisson

    k = HeatKernel(t=5.0, tol=1e-6).num_terms()
    assert poisson.sf(k, 5.0) <= 1e-6 < poisson.sf(k - 1, 5.0)


def test_get_operator_names_and_round_trip():
    assert get_operator("rw") == NormalizedAdjacency(r=1.0)
    assert get_operator("mean") == NormalizedAdjacency(r=0.0)
    op = get_operator("heat", t=2.0)
    assert get_operator(**op.config()) == op
    assert get_operator(op) is op
    assert "alpha=0.2" in get_operator("ppr", alpha=0.2).cache_key()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: get_operator("laplace2"), "unknown graph operator"),
        (lambda: get_operator("adj", r=1.5), r"r must be in \[0, 1\]"),
        (lambda: get_operator("ppr", alpha=0.0), "alpha must be in"),
        (lambda: get_operator("heat", t=-1.0), "t > 0"),
        (lambda: get_operator("adj", beta=2), "bad arguments"),
        (lambda: get_operator(NormalizedAdjacency(), r=0.1), "either an operator"),
    ],
)
def test_operator_config_errors(call, match):
    with pytest.raises(ConfigError, match=match):
        call()
