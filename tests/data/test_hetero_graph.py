"""HeteroGraph: validation, HeteroData round trips, to_homogeneous, save/load, content hash."""
import pytest
import torch

from sgl.data import Graph, HeteroGraph
from sgl.errors import FeatureError, GraphError


@pytest.fixture
def small():
    torch.manual_seed(0)
    return HeteroGraph.from_edge_index(
        {"paper": 5, "author": 3, "subject": 2},
        {("author", "writes", "paper"): torch.tensor([[0, 0, 1, 2, 2], [0, 1, 1, 3, 4]]),
         ("subject", "has", "paper"): torch.tensor([[0, 0, 1, 1, 1], [0, 1, 2, 3, 4]]),
         ("paper", "cites", "paper"): torch.tensor([[1, 2, 4], [0, 0, 3]])},
        x_dict={"paper": torch.randn(5, 4), "author": torch.randn(3, 4)}, target="paper",
        y=torch.tensor([0, 1, 0, 1, 2]), train_mask=torch.tensor([0, 1]), val_mask=torch.tensor([2]),
        test_mask=torch.tensor([3, 4]), name="small")


def test_structure_and_target_view(small):
    assert small.node_types == ["paper", "author", "subject"]
    assert small.num_nodes == 5 and small.total_nodes == 10 and small.num_edges == 13
    assert small.num_classes == 3 and small.num_features == 4 and small.split_sizes() == (2, 1, 2)
    assert small.featureless_types() == ["subject"]
    indptr, indices = small.csr(("author", "writes", "paper"))
    assert indptr.tolist() == [0, 1, 3, 3, 4, 5] and indices.tolist() == [0, 0, 1, 2, 2]
    ei = small.edge_index(("subject", "has", "paper"))
    assert sorted(zip(ei[0].tolist(), ei[1].tolist())) == [(0, 0), (0, 1), (1, 2), (1, 3), (1, 4)]


def test_pyg_round_trip_keeps_everything(small):
    data = small.to_pyg()
    assert set(data.node_types) == {"paper", "author", "subject"} and len(data.edge_types) == 3
    assert "x" not in data["subject"] and data["subject"].num_nodes == 2
    back = HeteroGraph.from_pyg(data)
    assert back.target == "paper" and back.num_nodes_dict == small.num_nodes_dict
    assert set(back.edge_types) == set(small.edge_types)
    for etype in small.edge_types:
        assert torch.equal(back.csr(etype)[0], small.csr(etype)[0])
        assert torch.equal(back.csr(etype)[1], small.csr(etype)[1])
    for t in ("paper", "author"):
        assert torch.equal(back.x_dict[t], small.x_dict[t])
    assert "subject" not in back.x_dict
    for key in ("y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(back, key), getattr(small, key))
    assert back.content_hash() == small.content_hash()


def test_from_pyg_target_choice():
    from torch_geometric.data import HeteroData

    data = HeteroData()
    data["a"].num_nodes, data["b"].num_nodes = 2, 2
    data["a"].y, data["b"].y = torch.tensor([0, 1]), torch.tensor([1, 0])
    data["a", "r", "b"].edge_index = torch.tensor([[0], [1]])
    with pytest.raises(GraphError, match="several node types have labels"):
        HeteroGraph.from_pyg(data)
    assert HeteroGraph.from_pyg(data, target="b").y.tolist() == [1, 0]
    with pytest.raises(GraphError, match="not in the HeteroData"):
        HeteroGraph.from_pyg(data, target="c")


def test_to_homogeneous_type_maps(small):
    view = small.to_homogeneous()
    g = view.graph
    assert isinstance(g, Graph) and g.num_nodes == 10 and g.num_edges == 13
    assert view.offsets == {"paper": 0, "author": 5, "subject": 8}
    assert view.node_type.tolist() == [0] * 5 + [1] * 3 + [2] * 2
    assert view.local_id.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 0, 1]
    assert g.x is None  # subject has no features: no common feature matrix
    assert g.y.tolist()[:5] == [0, 1, 0, 1, 2] and g.y.tolist()[5:] == [-1] * 5
    assert int(g.train_mask.sum()) == 2 and not bool(g.train_mask[5:].any())
    # every edge maps back to its relation and per-type ids
    src, dst = g.edge_index
    for e in range(g.num_edges):
        etype = view.edge_types[int(view.edge_type[e])]
        s, d = int(src[e]) - view.offsets[etype[0]], int(dst[e]) - view.offsets[etype[2]]
        ei = small.edge_index(etype)
        assert ((ei[0] == s) & (ei[1] == d)).any()
    sym = small.to_homogeneous(relations=[("author", "writes", "paper")], symmetric=True)
    assert sym.graph.num_edges == 10 and sym.graph.is_symmetric()


def test_reverse_relations(small):
    rev = small.add_reverse_relations()
    assert ("paper", "rev_writes", "author") in rev.edge_types and ("paper", "rev_cites", "paper") in rev.edge_types
    ei, back = small.edge_index(("author", "writes", "paper")), rev.edge_index(("paper", "rev_writes", "author"))
    assert sorted(zip(ei[0].tolist(), ei[1].tolist())) == sorted(zip(back[1].tolist(), back[0].tolist()))
    assert rev.add_reverse_relations().num_edges == rev.num_edges   # already reversed: nothing added


def test_save_load_and_hash(small, tmp_path):
    small.ogb_name = "ogbn-mag"
    path = tmp_path / "g.pt"
    small.save(path)
    back = HeteroGraph.load(path)
    assert back.content_hash() == small.content_hash() and back.name == "small" and back.ogb_name == "ogbn-mag"
    assert back.featureless_types() == ["subject"]
    changed = small.with_features({**small.x_dict, "paper": small.x_dict["paper"] + 1})
    assert changed.content_hash() != small.content_hash()
    (tmp_path / "bad.pt").write_bytes(b"not a graph")
    with pytest.raises(GraphError, match="not a readable"):
        HeteroGraph.load(tmp_path / "bad.pt")
    with pytest.raises(GraphError, match="no heterogeneous graph file"):
        HeteroGraph.load(tmp_path / "missing.pt")
    Graph.from_edge_index(torch.tensor([[0], [1]])).save(tmp_path / "homo.pt")
    with pytest.raises(GraphError, match="not written by HeteroGraph.save"):
        HeteroGraph.load(tmp_path / "homo.pt")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"edges": {("author", "writes", "book"): [[0], [0]]}}, GraphError, "unknown destination type 'book'"),
    ({"edges": {("user", "writes", "paper"): [[0], [0]]}}, GraphError, "unknown source type 'user'"),
    ({"edges": {("author", "writes", "paper"): [[3], [0]]}}, GraphError, "'author' has 3 nodes"),
    ({"edges": {("author", "writes", "paper"): [[0], [5]]}}, GraphError, "'paper' has 5 nodes"),
    ({"edges": {("author", "writes"): [[0], [0]]}}, GraphError, "src_type, relation, dst_type"),
    ({"x_dict": {"paper": torch.ones(4, 2)}}, FeatureError, "4 rows but the graph has 5"),
    ({"x_dict": {"venue": torch.ones(4, 2)}}, GraphError, "unknown node type 'venue'"),
    ({"target": "venue"}, GraphError, "target type 'venue' is not a node type"),
    ({"y": torch.zeros(5)}, GraphError, "without target"),
    ({"target": "paper", "y": torch.zeros(4, dtype=torch.long)}, FeatureError, "labels need one entry"),
    ({"counts": {"paper": 5, "author": 0}}, GraphError, "needs >= 1 node"),
])
def test_bad_input(kwargs, error, match):
    counts = kwargs.pop("counts", {"paper": 5, "author": 3})
    edges = kwargs.pop("edges", {("author", "writes", "paper"): [[0], [0]]})
    edges = {k: torch.tensor(v) for k, v in edges.items()}
    with pytest.raises(error, match=match):
        HeteroGraph.from_edge_index(counts, edges, **kwargs)


def test_unknown_relation_and_missing_labels(small):
    with pytest.raises(GraphError, match="unknown relation"):
        small.csr(("paper", "writes", "author"))
    unlabeled = HeteroGraph.from_edge_index({"a": 2}, {("a", "r", "a"): torch.tensor([[0], [1]])}, target="a")
    with pytest.raises(FeatureError, match="has no labels"):
        unlabeled.require_labels()
    with pytest.raises(FeatureError, match="no target type"):
        HeteroGraph.from_edge_index({"a": 2}, {}).require_target()


def test_dgl_round_trip_or_clear_error(small):
    try:
        import dgl  # noqa: F401
    except Exception:   # not installed, or installed without its torchdata dependency
        with pytest.raises(GraphError, match="optional `dgl` package"):
            small.to_dgl()
        return
    back = HeteroGraph.from_dgl(small.to_dgl())
    assert back.content_hash() == small.content_hash()
