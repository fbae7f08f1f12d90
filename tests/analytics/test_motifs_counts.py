"""Exact motif counts against brute force (every 3-subset classified by networkx) and networkx totals."""
import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sgl.analytics.motifs import (CLOSED_MOTIFS, DIRECTED_MOTIFS, MAN_CODES, MOTIF_EDGES, OPEN_MOTIFS, MotifCounts,
                                  classify, count_motifs)
from sgl.analytics.motifs.products import masked_product_sums
from sgl.data import Graph
from sgl.errors import ConfigError, DatasetError, GraphError

BENSON = {code: name for name, code in MAN_CODES.items()}


def _random_digraph(rng, n, p):
    dense = (rng.random((n, n)) < p).astype(np.int64)
    # duplicates and self-loops must be ignored: add some through the COO form
    rows, cols = np.nonzero(dense)
    rows = np.concatenate([rows, rows[: len(rows) // 3], np.arange(n)])
    cols = np.concatenate([cols, cols[: len(cols) // 3], np.arange(n)])
    matrix = sp.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n)).tocsr()
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from((i, j) for i, j in zip(*np.nonzero(dense)) if i != j)
    return matrix, graph


def _brute_force(graph: nx.DiGraph):
    n = graph.number_of_nodes()
    directed = np.zeros((n, 13), dtype=np.int64)
    undirected = np.zeros((n, 3), dtype=np.int64)
    simple = graph.to_undirected()
    for triple in itertools.combinations(range(n), 3):
        kind = BENSON.get(nx.triad_type(graph.subgraph(triple)))
        edges = simple.subgraph(triple).number_of_edges()
        for v in triple:
            if kind:
                directed[v, int(kind[1:]) - 1] += 1
            if edges >= 2:
                undirected[v, edges - 1] += 1  # 2 edges: wedge, 3: triangle
    undirected[:, 0] = [simple.degree(v) for v in range(n)]
    return directed, undirected


def test_catalog_matches_networkx_triad_codes():
    assert len({classify(edges) for edges in MOTIF_EDGES.values()}) == 13
    for name, edges in MOTIF_EDGES.items():
        graph = nx.DiGraph(list(edges))
        assert nx.triad_type(graph) == MAN_CODES[name], name
    assert classify([(0, 1)]) is None  # one edge: not a connected 3-node motif


@pytest.mark.parametrize("engine", ["numba", "scipy"])
def test_counts_equal_brute_force_on_random_graphs(engine):
    rng = np.random.default_rng(0)
    for trial in range(25):
        n, p = int(rng.integers(1, 12)), float(rng.uniform(0.05, 0.8))
        matrix, graph = _random_digraph(rng, n, p)
        directed_ref, undirected_ref = _brute_force(graph)
        directed = count_motifs(matrix, directed=True, engine=engine)
        assert directed.names == DIRECTED_MOTIFS
        np.testing.assert_array_equal(directed.per_vertex[:, 2:], directed_ref, err_msg=f"trial {trial}")
        census = nx.triadic_census(graph)
        assert {m: directed.totals[m] for m in CLOSED_MOTIFS + OPEN_MOTIFS} == \
            {m: census[MAN_CODES[m]] for m in CLOSED_MOTIFS + OPEN_MOTIFS}
        mutual = sum(1 for u, v in graph.edges if graph.has_edge(v, u)) // 2
        assert directed.totals["mutual_edge"] == mutual
        assert directed.totals["asym_edge"] == graph.number_of_edges() - 2 * mutual
        undirected = count_motifs(matrix, engine=engine)
        np.testing.assert_array_equal(undirected.per_vertex, undirected_ref, err_msg=f"trial {trial}")
        assert directed.consistent() and undirected.consistent()


def test_graph_input_and_networkx_triangles_on_karate():
    karate = nx.karate_club_graph()
    edges = torch.tensor(list(karate.edges())).T
    graph = Graph.from_edge_index(torch.cat([edges, edges.flip(0)], 1))
    counts = count_motifs(graph)
    assert counts["triangle"].tolist() == [nx.triangles(karate)[v] for v in range(34)]
    assert counts.totals == {"edge": 78, "wedge": 393, "triangle": 45}
    # every edge is mutual in the directed view, so triangles are M4 and open wedges M13
    directed = count_motifs(graph, directed=True)
    assert directed["M4"].tolist() == counts["triangle"].tolist()
    assert directed["M13"].tolist() == counts["wedge"].tolist()


def test_facebook_triangles_equal_networkx(data_path):
    import sgl.datasets

    path = data_path("snap_facebook_combined", "facebook_combined.txt")
    graph = sgl.datasets.load("facebook", root=path.parent)
    counts = count_motifs(graph)
    reference = nx.triangles(nx.from_scipy_sparse_array(graph.to_scipy()))
    assert counts["triangle"].tolist() == [reference[v] for v in range(graph.num_nodes)]
    assert counts.totals["triangle"] == 1_612_010 and counts.totals["edge"] == 88_234
    assert counts.consistent()


def test_masked_product_engines_agree():
    rng = np.random.default_rng(5)
    for _ in range(10):
        left = sp.random(30, 20, density=0.2, random_state=rng, format="csr")
        right = sp.random(20, 25, density=0.2, random_state=rng, format="csr")
        masks = [sp.random(30, 25, density=0.3, random_state=rng, format="csr") for _ in range(2)]
        for m in (left, right, *masks):
            m.data[:] = 1
        masks[1] = (masks[1] - masks[1].multiply(masks[0])).tocsr()  # disjoint
        masks[1].eliminate_zeros()
        fast, reference = masked_product_sums(left, right, masks), masked_product_sums(left, right, masks, "scipy")
        for a, b in zip(fast, reference):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)
    with pytest.raises(GraphError, match="disjoint"):
        masked_product_sums(left, right, [masks[0], masks[0]])


def test_counts_files_round_trip(tmp_path):
    counts = count_motifs(sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]])), directed=True)
    counts.save(tmp_path / "c.npz")
    back = MotifCounts.load(tmp_path / "c.npz")
    np.testing.assert_array_equal(back.per_vertex, counts.per_vertex)
    assert back.totals == counts.totals and back.directed and back.names == counts.names
    counts.save(tmp_path / "c.csv")
    lines = (tmp_path / "c.csv").read_text().splitlines()
    assert lines[0] == "vertex," + ",".join(DIRECTED_MOTIFS) and len(lines) == 4
    assert lines[1].split(",")[0] == "0" and int(lines[1].split(",")[1 + DIRECTED_MOTIFS.index("M5")]) == 1
    with pytest.raises(ConfigError, match=".npz or .csv"):
        counts.save(tmp_path / "c.json")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="bad.npz"):
        MotifCounts.load(tmp_path / "bad.npz")
    with pytest.raises(KeyError, match="triangle"):
        counts["triangle"]


def test_bad_input_is_named():
    with pytest.raises(GraphError, match="square"):
        count_motifs(sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(GraphError, match="Graph or a square scipy"):
        count_motifs(np.ones((3, 3)))
    with pytest.raises(GraphError, match="NaN"):
        count_motifs(sp.csr_matrix(np.array([[0, np.nan], [1, 0]])))
    with pytest.raises(GraphError, match="empty"):
        count_motifs(sp.csr_matrix((0, 0)))
    with pytest.raises(ConfigError, match="directed must be True or False"):
        count_motifs(sp.eye(3, format="csr"), directed="yes")
    with pytest.raises(ConfigError, match="engine must be one of"):
        count_motifs(sp.eye(3, format="csr"), engine="gpu")
    # explicit zeros are not edges; a lone vertex has no motifs
    counts = count_motifs(sp.csr_matrix((np.array([0.0]), (np.array([0]), np.array([1]))), shape=(2, 2)))
    assert counts.totals == {"edge": 0, "wedge": 0, "triangle": 0}
