"""Motif-weighted adjacency against brute force; motif degree and motif PageRank against networkx."""
import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import sgl
from sgl.analytics.motifs import (CLOSED_MOTIFS, MAN_CODES, OPEN_MOTIFS, count_motifs, mixed_adjacency,
                                  motif_adjacency, motif_degree, motif_pagerank, weighted_pagerank)
from sgl.errors import ConfigError, GraphError

BENSON = {code: name for name, code in MAN_CODES.items()}


def _reference(dense: np.ndarray):
    """W_M[i, j] = instances of M in which i and j are adjacent, by enumerating every triple."""
    n = dense.shape[0]
    support = ((dense + dense.T) > 0).astype(int)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(*np.nonzero(dense)))
    ref = {m: np.zeros((n, n), dtype=int) for m in CLOSED_MOTIFS + OPEN_MOTIFS + ("wedge", "triangle")}
    for triple in itertools.combinations(range(n), 3):
        pairs = [(a, b) for a, b in itertools.combinations(triple, 2) if support[a, b]]
        names = [BENSON.get(nx.triad_type(graph.subgraph(triple))), {2: "wedge", 3: "triangle"}.get(len(pairs))]
        for name in filter(None, names):
            for a, b in pairs:
                ref[name][a, b] += 1
                ref[name][b, a] += 1
    return ref, support


def test_motif_adjacency_equals_brute_force():
    rng = np.random.default_rng(1)
    for trial in range(15):
        n = int(rng.integers(2, 10))
        dense = (rng.random((n, n)) < rng.uniform(0.1, 0.8)).astype(int)
        np.fill_diagonal(dense, 0)
        ref, support = _reference(dense)
        matrix = sp.csr_matrix(dense)
        for name, expected in ref.items():
            got = motif_adjacency(matrix, name)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got.toarray(), expected, err_msg=f"trial {trial} motif {name}")
        np.testing.assert_array_equal(motif_adjacency(matrix, "edge").toarray(), support)
        np.testing.assert_array_equal(motif_adjacency(matrix, "mutual_edge").toarray(), dense * dense.T)
        np.testing.assert_array_equal(motif_adjacency(matrix, "asym_edge").toarray(), support - dense * dense.T)


def test_triangle_weights_are_common_neighbours_and_degree_is_twice_the_triangles():
    karate = sgl.datasets.load("karate")
    weights = motif_adjacency(karate)
    assert (weights != weights.T).nnz == 0
    nxg = nx.karate_club_graph()
    for i, j in nxg.edges():
        assert weights[i, j] == len(list(nx.common_neighbors(nxg, i, j)))
    np.testing.assert_array_equal(motif_degree(karate), 2 * count_motifs(karate)["triangle"])
    # an open wedge puts weight 1 on each of its 2 edges, both directions
    assert int(motif_adjacency(karate, "wedge").sum()) == 4 * count_motifs(karate).totals["wedge"]


def test_mixed_adjacency_blends_the_graph_and_the_motif_graph():
    karate = sgl.datasets.load("karate")
    support, triangles = motif_adjacency(karate, "edge"), motif_adjacency(karate)
    mixed = mixed_adjacency(karate, "triangle", 0.25)
    np.testing.assert_allclose(mixed.toarray(), 0.25 * support.toarray() + 0.75 * triangles.toarray())
    assert (mixed_adjacency(karate, mix=1.0) != support).nnz == 0
    assert mixed_adjacency(karate, mix=0.0).nnz == triangles.nnz  # edges in no triangle drop out
    with pytest.raises(ConfigError, match="mix must be a number in"):
        mixed_adjacency(karate, mix=1.5)
    with pytest.raises(ConfigError, match="motif must be one of"):
        motif_adjacency(karate, "square")


def test_motif_pagerank_equals_networkx_on_the_motif_graph():
    karate = sgl.datasets.load("karate")
    for motif in ("triangle", "wedge"):
        rank = motif_pagerank(karate, motif, alpha=0.85, tol=1e-12)
        weights = motif_adjacency(karate, motif)
        reference = nx.pagerank(nx.from_scipy_sparse_array(weights), alpha=0.85, weight="weight", tol=1e-12,
                                max_iter=1000)
        np.testing.assert_allclose(rank, [reference[v] for v in range(34)], atol=1e-9)
    # a vertex in no triangle (a pendant) is dangling in W_M and still gets teleport mass
    pendant = sp.csr_matrix(np.array([[0, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]]))
    rank = motif_pagerank(pendant)
    assert rank[3] > 0 and abs(rank.sum() - 1) < 1e-12 and rank[0] == pytest.approx(rank[1])


def test_pagerank_rejects_bad_arguments():
    weights = sp.csr_matrix(np.array([[0, 1.0], [1.0, 0]]))
    with pytest.raises(ConfigError, match="alpha"):
        weighted_pagerank(weights, alpha=1.0)
    with pytest.raises(GraphError, match="non-negative"):
        weighted_pagerank(sp.csr_matrix(np.array([[0, -1.0], [1.0, 0]])))
    with pytest.raises(GraphError, match="square"):
        weighted_pagerank(sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(ConfigError, match="did not converge"):
        weighted_pagerank(sp.csr_matrix(np.array([[0, 1.0, 1.0], [0, 0, 1.0], [0, 0, 0]])), alpha=0.99,
                          tol=1e-15, max_iter=2)
