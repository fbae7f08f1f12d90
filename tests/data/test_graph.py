import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sgl.data import Graph
from sgl.errors import FeatureError, GraphError, SGLError


def edge_set(graph):
    return sorted(zip(graph.indices.tolist(), graph.destinations().tolist()))


def test_csr_groups_edges_by_destination():
    g = Graph.from_edge_index(torch.tensor([[0, 2, 1, 0], [1, 1, 2, 2]]), num_nodes=3)
    assert g.indptr.tolist() == [0, 0, 2, 4]
    # in-neighbours of node 1 are 0 and 2, in input order
    assert g.indices[g.indptr[1]:g.indptr[2]].tolist() == [0, 2]
    assert g.indptr.dtype == torch.int64 and g.indices.dtype == torch.int64
    assert g.edge_index.tolist() == [[0, 2, 1, 0], [1, 1, 2, 2]]
    assert g.degree("in").tolist() == [0, 2, 2]
    assert g.degree("out").tolist() == [2, 1, 1]


def test_int32_ids_are_widened():
    g = Graph.from_edge_index(np.array([[0, 1], [1, 0]], dtype=np.int32))
    assert g.indices.dtype == torch.int64


def test_weights_follow_their_edges():
    ei = torch.tensor([[0, 1, 2], [2, 0, 1]])
    g = Graph.from_edge_index(ei, edge_weight=torch.tensor([0.5, 2.0, 3.0]))
    a = g.to_scipy().toarray()
    assert a[0, 2] == 0.5 and a[1, 0] == 2.0 and a[2, 1] == 3.0
    assert g.degree("in", weighted=True).tolist() == [2.0, 3.0, 0.5]


def test_scipy_round_trip(small_graph):
    a = small_graph.to_scipy()
    back = Graph.from_scipy(a, x=small_graph.x)
    assert edge_set(back) == edge_set(small_graph)
    assert back.edge_weight is None
    w = sp.random(7, 7, density=0.3, random_state=0, format="csr")
    gw = Graph.from_scipy(w)
    assert np.allclose(gw.to_scipy().toarray(), w.toarray(), atol=1e-6)


def test_pyg_round_trip(small_graph):
    from torch_geometric.data import Data

    data = small_graph.to_pyg()
    assert isinstance(data, Data)
    assert data.num_nodes == 6 and data.edge_index.shape == (2, 10)
    back = Graph.from_pyg(data)
    assert edge_set(back) == edge_set(small_graph)
    assert torch.equal(back.x, small_graph.x) and torch.equal(back.y, small_graph.y)
    weighted = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.tensor([2.0, 3.0]), num_nodes=2)
    # edges are regrouped by destination: 1->0 (3.0) comes first
    assert Graph.from_pyg(weighted).to_pyg().edge_weight.tolist() == [3.0, 2.0]


def test_pyg_round_trip_matches_pyg_utils(small_graph):
    from torch_geometric.utils import to_scipy_sparse_matrix

    data = small_graph.to_pyg()
    ref = to_scipy_sparse_matrix(data.edge_index, num_nodes=6).toarray()
    assert np.array_equal(ref, small_graph.to_scipy().toarray())


def test_networkx_round_trip(small_graph):
    import networkx as nx

    nxg = small_graph.to_networkx()
    assert nxg.number_of_edges() == small_graph.num_edges
    back = Graph.from_networkx(nxg)
    assert edge_set(back) == edge_set(small_graph)
    assert torch.allclose(back.x, small_graph.x) and torch.equal(back.y, small_graph.y)
    karate = Graph.from_networkx(nx.karate_club_graph(), weight=None)
    assert karate.num_nodes == 34 and karate.num_edges == 156 and karate.is_symmetric()


def test_dgl_round_trip(small_graph):
    from sgl.data.dgl_interop import dgl_available

    if not dgl_available():
        pytest.skip("dgl is not importable")
    d = small_graph.to_dgl()
    assert d.num_nodes() == 6 and d.num_edges() == 10
    back = Graph.from_dgl(d)
    assert edge_set(back) == edge_set(small_graph)
    assert torch.equal(back.x, small_graph.x) and torch.equal(back.y, small_graph.y)


def test_symmetrize_deduplicate_and_self_loops():
    g = Graph.from_edge_index(torch.tensor([[0, 0, 1, 2, 2], [1, 1, 2, 2, 0]]), num_nodes=3)
    assert g.has_self_loops()
    dedup = g.deduplicate()
    assert dedup.num_edges == 4
    sym = g.symmetrize()
    assert sym.is_symmetric()
    assert edge_set(sym) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1), (2, 2)]
    no_loops = sym.remove_self_loops()
    assert not no_loops.has_self_loops() and no_loops.num_edges == 6
    loops = no_loops.add_self_loops()
    assert loops.num_edges == 9 and loops.has_self_loops()
    # symmetrizing an already symmetric unweighted graph leaves weights at 1
    assert sym.symmetrize().edge_weight is None and sym.symmetrize().num_edges == sym.num_edges


def test_deduplicate_reduces_weights():
    g = Graph.from_edge_index(torch.tensor([[0, 0, 1], [1, 1, 0]]), edge_weight=torch.tensor([1.0, 3.0, 5.0]))
    assert g.deduplicate("sum").to_scipy().toarray()[0, 1] == 4.0
    assert g.deduplicate("mean").to_scipy().toarray()[0, 1] == 2.0
    assert g.deduplicate("max").to_scipy().toarray()[0, 1] == 3.0
    assert g.deduplicate("min").to_scipy().toarray()[0, 1] == 1.0
    with pytest.raises(GraphError, match="reduce"):
        g.deduplicate("median")


def test_induced_subgraph(small_graph):
    sub = small_graph.subgraph(torch.tensor([2, 3, 4]))
    assert sub.num_nodes == 3
    assert edge_set(sub) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert torch.equal(sub.x, small_graph.x[[2, 3, 4]])
    assert sub.node_ids.tolist() == [2, 3, 4]
    mask = torch.zeros(6, dtype=torch.bool)
    mask[[0, 1]] = True
    assert small_graph.subgraph(mask).num_edges == 2
    kept = small_graph.subgraph(torch.tensor([0, 1]), relabel=False)
    assert kept.num_nodes == 6 and edge_set(kept) == [(0, 1), (1, 0)]
    with pytest.raises(GraphError, match="duplicate"):
        small_graph.subgraph(torch.tensor([1, 1]))
    with pytest.raises(GraphError, match="num_nodes"):
        small_graph.subgraph(torch.tensor([9]))


def test_edge_subgraph(small_graph):
    mask = small_graph.indices < small_graph.destinations()
    half = small_graph.edge_subgraph(mask)
    assert half.num_edges == 5 and half.num_nodes == 6


def test_save_load_round_trip(tmp_path, small_graph):
    small_graph.train_mask = torch.tensor([True, False, True, False, False, False])
    path = tmp_path / "g.pt"
    small_graph.save(path)
    back = Graph.load(path)
    assert edge_set(back) == edge_set(small_graph)
    assert torch.equal(back.x, small_graph.x) and torch.equal(back.train_mask, small_graph.train_mask)
    assert not list(tmp_path.glob(".*tmp"))  # no temporary left behind
    assert back.content_hash() == small_graph.content_hash()


def test_load_corrupt_and_missing(tmp_path, small_graph):
    path = tmp_path / "g.pt"
    small_graph.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(GraphError, match="truncated or corrupt"):
        Graph.load(path)
    with pytest.raises(GraphError, match="no graph file"):
        Graph.load(tmp_path / "missing.pt")
    torch.save({"something": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(GraphError, match="not written by Graph.save"):
        Graph.load(tmp_path / "other.pt")


def test_save_failure_keeps_previous_file(tmp_path, small_graph, monkeypatch):
    path = tmp_path / "g.pt"
    small_graph.save(path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        small_graph.save(path)
    assert path.read_bytes() == before
    assert not list(tmp_path.glob(".*tmp"))


def test_content_hash_changes_with_structure(small_graph):
    other = small_graph.add_self_loops()
    assert other.content_hash() != small_graph.content_hash()


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "edge_index, num_nodes, match",
    [
        (torch.tensor([[0, 3], [1, 0]]), 3, "node id 3 but num_nodes=3"),
        (torch.tensor([[0, -1], [1, 0]]), 3, "negative node id -1"),
        (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), 3, "dtype torch.float32"),
        (torch.tensor([[0, 1, 2]]), 3, r"shape \[2, num_edges\]"),
        (torch.empty(2, 0, dtype=torch.long), None, "no edges; pass num_nodes"),
        (torch.empty(2, 0, dtype=torch.long), 0, "num_nodes must be positive"),
    ],
)
def test_bad_edge_index(edge_index, num_nodes, match):
    with pytest.raises(GraphError, match=match):
        Graph.from_edge_index(edge_index, num_nodes=num_nodes)


def test_graph_without_edges_is_valid():
    g = Graph.from_edge_index(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    assert g.num_edges == 0 and g.degree().tolist() == [0, 0, 0, 0]


def test_bad_features_and_labels():
    ei = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(FeatureError, match="3 rows but the graph has 2 nodes"):
        Graph.from_edge_index(ei, num_nodes=2, x=torch.randn(3, 4))
    x = torch.randn(2, 4)
    x[1, 2] = float("nan")
    with pytest.raises(FeatureError, match="NaN/inf"):
        Graph.from_edge_index(ei, x=x)
    x[1, 2] = float("inf")
    with pytest.raises(FeatureError, match="NaN/inf"):
        Graph.from_edge_index(ei, x=x)
    with pytest.raises(FeatureError, match="one entry per node"):
        Graph.from_edge_index(ei, y=torch.tensor([0, 1, 2]))
    with pytest.raises(FeatureError, match="bool mask"):
        Graph.from_edge_index(ei, train_mask=torch.tensor([0.5, 1.0]))
    with pytest.raises(FeatureError, match="shape"):
        Graph.from_edge_index(ei, train_mask=torch.tensor([True, False, True]))
    with pytest.raises(FeatureError, match="features must be floating"):
        Graph.from_edge_index(ei, x=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(FeatureError, match="torch.Tensor or numpy"):
        Graph.from_edge_index(ei, x="features")
    g = Graph.from_edge_index(ei, train_mask=torch.tensor([1]))
    assert g.train_mask.tolist() == [False, True]


def test_bad_csr_and_weights():
    with pytest.raises(GraphError, match="non-decreasing"):
        Graph(torch.tensor([0, 2, 1, 2]), torch.tensor([0, 1]))
    with pytest.raises(GraphError, match=r"indptr\[-1\]"):
        Graph(torch.tensor([0, 1, 3]), torch.tensor([0, 1]))
    with pytest.raises(GraphError, match="empty"):
        Graph(torch.tensor([0]), torch.tensor([], dtype=torch.long))
    with pytest.raises(GraphError, match="one weight per edge"):
        Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.ones(3))
    with pytest.raises(GraphError, match="finite"):
        Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.tensor([1.0, float("nan")]))


def test_errors_share_one_base():
    for exc in (GraphError, FeatureError):
        assert issubclass(exc, SGLError) and issubclass(exc, ValueError)


def test_from_constructors_reject_wrong_types():
    with pytest.raises(GraphError, match="scipy.sparse"):
        Graph.from_scipy(np.eye(3))
    with pytest.raises(GraphError, match="square"):
        Graph.from_scipy(sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(GraphError, match="torch_geometric.data.Data"):
        Graph.from_pyg({"edge_index": None})
    with pytest.raises(GraphError, match="networkx"):
        Graph.from_networkx([(0, 1)])
