import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import is_undirected as pyg_is_undirected

from sgl.data import Graph

EDGES = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])


def make_graph():
    g = Graph.from_edge_index(EDGES, edge_weight=torch.tensor([1.0, 2.0, 3.0, 4.0]), x=torch.arange(6.0).view(3, 2),
                              y=torch.tensor([0, 1, 1]), train_mask=torch.tensor([True, False, False]), name="toy")
    g.ogb_name = "toy-ogb"
    g.node_year = torch.tensor([2000, 2001, 2002])
    g.split = {"folds": [torch.tensor([0]), torch.tensor([1, 2])]}
    return g


def test_keys_list_the_set_attributes_in_pyg_names():
    g = make_graph()
    assert g.keys() == ["edge_index", "edge_weight", "x", "y", "train_mask", "name", "ogb_name", "node_year",
                        "split"]
    g.nothing = None
    assert "nothing" not in g.keys() and "nothing" not in g
    bare = Graph.from_edge_index(EDGES)
    assert bare.keys() == ["edge_index"]
    # the keys of to_pyg's Data, num_nodes aside
    assert set(g.to_pyg().keys()) - {"num_nodes"} == set(g.keys())


def test_getitem_and_contains():
    g = make_graph()
    assert torch.equal(g["edge_index"], g.edge_index) and torch.equal(g["x"], g.x)
    assert g["name"] == "toy" and g["ogb_name"] == "toy-ogb" and g["node_year"] is g.node_year
    assert g["indptr"] is g.indptr and g["indices"] is g.indices
    for key in ("edge_index", "x", "train_mask", "node_year", "indptr"):
        assert key in g
    for key in ("val_mask", "edge_attr", "num_nodes", "nope", 3):
        assert key not in g
    assert [key for key, _ in g] == g.keys()  # iteration gives (key, value) pairs, as over a PyG Data
    as_dict = dict(g)  # keys() + [] make the mapping protocol work
    assert as_dict["name"] == "toy" and torch.equal(as_dict["edge_index"], g.edge_index)


def test_unknown_key_raises_a_helpful_key_error():
    g = make_graph()
    with pytest.raises(KeyError, match=r"no attribute 'val_mask' set; its keys are \['edge_index'"):
        g["val_mask"]  # a field that is not set
    with pytest.raises(KeyError, match="'feat'.*graph.feat = value"):
        g["feat"]
    with pytest.raises(KeyError, match="attribute names"):
        g[0]


def test_clone_copies_every_tensor_and_metadata():
    g = make_graph()
    weight = g.edge_weight.clone()
    c = g.clone()
    assert c is not g and c.keys() == g.keys() and repr(c) == repr(g)
    for key in g.keys():
        if isinstance(g[key], torch.Tensor):
            assert torch.equal(c[key], g[key]) and c[key].data_ptr() != g[key].data_ptr(), key
    c.x += 100
    c.edge_weight[0] = -1.0
    c.node_year[0] = 0
    c.split["folds"][0][0] = 9
    c.split["folds"].append(torch.tensor([5]))
    c.ogb_name = "changed"
    assert g.x.max() == 5.0 and torch.equal(g.edge_weight, weight) and g.node_year[0] == 2000
    assert g.split["folds"][0].tolist() == [0] and len(g.split["folds"]) == 2 and g.ogb_name == "toy-ogb"


def test_feature_counts_under_pyg_names():
    g = make_graph()
    assert g.num_node_features == g.num_features == 2
    assert g.num_edge_features == 0
    assert Graph.from_edge_index(EDGES, edge_attr=torch.ones(4, 5)).num_edge_features == 5
    assert Graph.from_edge_index(EDGES, edge_attr=torch.ones(4)).num_edge_features == 1
    assert Graph.from_edge_index(EDGES).num_node_features == 0
    data = Graph.from_edge_index(EDGES, edge_attr=torch.ones(4, 5), x=torch.ones(3, 2)).to_pyg()
    assert (data.num_node_features, data.num_edge_features) == (2, 5)


SYMMETRIC = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
UNDIRECTED_CASES = [
    (SYMMETRIC, None, None),
    (torch.tensor([[0, 1], [1, 2]]), None, None),  # a directed path
    (SYMMETRIC, torch.tensor([2.0, 2.0, 3.0, 3.0]), None),  # weighted, symmetric
    (SYMMETRIC, torch.tensor([2.0, 5.0, 3.0, 3.0]), None),  # 0->1 and 1->0 weigh differently
    (torch.tensor([[0, 0, 1], [1, 1, 0]]), None, None),  # two 0->1 but one 1->0
    (torch.tensor([[0, 0, 1, 1], [1, 1, 0, 0]]), None, None),  # parallel edges both ways
    (torch.tensor([[0, 1, 1], [0, 2, 1]]), None, None),  # self-loops, one directed edge
    (SYMMETRIC, None, torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0], [0.0, 2.0]])),  # edge features
    (SYMMETRIC, None, torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0], [0.0, 2.0]])),
]


@pytest.mark.parametrize("edge_index, weight, attr", UNDIRECTED_CASES)
def test_is_undirected_matches_pyg(edge_index, weight, attr):
    g = Graph.from_edge_index(edge_index, num_nodes=3, edge_weight=weight, edge_attr=attr)
    data = g.to_pyg()
    values = [t for t in (data.edge_weight, data.edge_attr) if t is not None]
    expected = pyg_is_undirected(data.edge_index, values, num_nodes=3)
    assert g.is_undirected() == expected
    assert g.is_undirected() == pyg_is_undirected(edge_index, [t for t in (weight, attr) if t is not None],
                                                  num_nodes=3)  # the input order does not matter
    # PyG's Data.is_undirected reads edge_attr only: a weight kept there is compared
    pyg_data = Data(edge_index=edge_index, edge_attr=weight if weight is not None else attr, num_nodes=3)
    assert g.is_undirected() == pyg_data.is_undirected()


def test_is_undirected_versus_is_symmetric():
    assert [Graph.from_edge_index(ei, num_nodes=3, edge_weight=w, edge_attr=a).is_undirected()
            for ei, w, a in UNDIRECTED_CASES] == [True, False, True, False, False, True, False, True, False]
    # parallel edges pair one by one for is_undirected, but add up in is_symmetric's matrix
    g = Graph.from_edge_index(torch.tensor([[0, 0, 1], [1, 1, 0]]), edge_weight=torch.tensor([1.0, 1.0, 2.0]))
    assert g.is_symmetric() and not g.is_undirected()
    assert make_graph().symmetrize().is_undirected()
