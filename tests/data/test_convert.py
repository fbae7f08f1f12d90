"""Conversions lose nothing silently: edge features, half-weighted graphs, DGL fields, edge order."""
import networkx as nx
import pytest
import torch
from torch_geometric.data import Data

from sgl.data import Graph
from sgl.errors import GraphError

# a directed graph whose input order is not CSR order (CSR groups by destination)
EDGE_INDEX = torch.tensor([[0, 2, 1, 3, 0, 2], [1, 0, 0, 2, 3, 1]])


def edge_features(n=6, d=3):
    return torch.arange(n * d, dtype=torch.float32).view(n, d)


def attr_by_edge(graph):
    """{(src, dst): edge feature row} for a graph without parallel edges."""
    rows = graph.edge_attr.tolist()
    return {(s, d): tuple(rows[i]) for i, (s, d) in enumerate(zip(graph.indices.tolist(),
                                                                  graph.destinations().tolist()))}


def input_attr_by_edge(edge_index=EDGE_INDEX, attr=None):
    attr = edge_features() if attr is None else attr
    return {(s, d): tuple(a) for s, d, a in zip(edge_index[0].tolist(), edge_index[1].tolist(), attr.tolist())}


def test_from_pyg_keeps_multidimensional_edge_attr():
    data = Data(edge_index=EDGE_INDEX, edge_attr=edge_features(), x=torch.randn(4, 2), num_nodes=4)
    g = Graph.from_pyg(data)
    assert g.edge_attr.shape == (6, 3)
    assert attr_by_edge(g) == input_attr_by_edge()  # every row followed its edge into CSR order
    back = g.to_pyg()
    assert back.edge_attr.shape == (6, 3)
    assert input_attr_by_edge(back.edge_index, back.edge_attr) == input_attr_by_edge()


def test_edge_attr_through_subgraph_transforms_and_save(tmp_path):
    g = Graph.from_edge_index(EDGE_INDEX, edge_attr=edge_features())
    expected = input_attr_by_edge()
    sub = g.subgraph(torch.tensor([2, 0, 1]))  # relabelled: 2 -> 0, 0 -> 1, 1 -> 2
    relabel = {2: 0, 0: 1, 1: 2}
    assert attr_by_edge(sub) == {(relabel[s], relabel[d]): a for (s, d), a in expected.items()
                                 if s in relabel and d in relabel}
    kept = g.subgraph(torch.tensor([0, 1, 2]), relabel=False)
    assert attr_by_edge(kept) == {k: a for k, a in expected.items() if 3 not in k}
    no_loops = g.add_self_loops(attr_fill=-1.0).remove_self_loops()
    assert attr_by_edge(no_loops) == expected
    loops = g.add_self_loops(attr_fill=torch.tensor([7.0, 8.0, 9.0]))
    assert attr_by_edge(loops)[(3, 3)] == (7.0, 8.0, 9.0) and loops.edge_attr.shape == (10, 3)
    half = g.edge_subgraph(g.indices < g.destinations())
    assert attr_by_edge(half) == {k: a for k, a in expected.items() if k[0] < k[1]}
    path = tmp_path / "g.pt"
    g.save(path)
    assert attr_by_edge(Graph.load(path)) == expected
    with pytest.raises(GraphError, match="attr_fill has shape"):
        g.add_self_loops(attr_fill=torch.zeros(2))


def test_deduplicate_and_symmetrize_reduce_edge_attr():
    g = Graph.from_edge_index(torch.tensor([[0, 0, 1], [1, 1, 0]]),
                              edge_attr=torch.tensor([[1.0, 10.0], [3.0, 2.0], [5.0, 5.0]]))
    assert attr_by_edge(g.deduplicate("sum")) == {(0, 1): (4.0, 12.0), (1, 0): (5.0, 5.0)}
    assert attr_by_edge(g.deduplicate("mean")) == {(0, 1): (2.0, 6.0), (1, 0): (5.0, 5.0)}
    assert attr_by_edge(g.deduplicate("max")) == {(0, 1): (3.0, 10.0), (1, 0): (5.0, 5.0)}
    one_way = Graph.from_edge_index(torch.tensor([[0], [1]]), edge_attr=torch.tensor([[2.0, 4.0]]))
    assert attr_by_edge(one_way.symmetrize()) == {(0, 1): (2.0, 4.0), (1, 0): (2.0, 4.0)}
    ints = Graph.from_edge_index(torch.tensor([[0, 0], [1, 1]]), edge_attr=torch.tensor([[1], [2]]))
    assert ints.deduplicate("max").edge_attr.tolist() == [[2]]


def test_bad_edge_attr():
    with pytest.raises(GraphError, match="one row of edge features per edge"):
        Graph.from_edge_index(EDGE_INDEX, edge_attr=torch.zeros(5, 2))
    with pytest.raises(GraphError, match="NaN/inf"):
        Graph.from_edge_index(EDGE_INDEX, edge_attr=torch.full((6, 2), float("nan")))
    g = Graph.from_edge_index(EDGE_INDEX)
    with pytest.raises(GraphError, match="one row of edge features per edge"):
        g.with_edges(EDGE_INDEX[:, :2], edge_attr=torch.zeros(3, 2))


def test_from_pyg_warns_about_what_it_cannot_carry():
    data = Data(edge_index=EDGE_INDEX, x=torch.randn(4, 2), edge_label=torch.ones(6), node_year=torch.arange(4),
                title="toy", num_nodes=4)
    with pytest.warns(UserWarning, match=r"\['edge_label'\]"):
        g = Graph.from_pyg(data)
    assert g.node_year.tolist() == [0, 1, 2, 3] and g.title == "toy"  # node- and graph-level ones are carried
    with pytest.warns(UserWarning, match="degree"):  # a Data key that names a Graph method
        Graph.from_pyg(Data(edge_index=EDGE_INDEX, degree=torch.ones(4), num_nodes=4))


def test_one_column_float_edge_attr_is_the_weight():
    g = Graph.from_pyg(Data(edge_index=EDGE_INDEX, edge_attr=torch.arange(6.0).view(6, 1), num_nodes=4))
    assert g.edge_weight is not None and g.edge_attr is None
    labels = Graph.from_pyg(Data(edge_index=EDGE_INDEX, edge_attr=torch.arange(6).view(6, 1), num_nodes=4))
    assert labels.edge_weight is None and labels.edge_attr.dtype == torch.int64  # int bond types stay features


def test_to_pyg_keep_order_restores_the_input_order():
    weight = torch.arange(1.0, 7.0)
    data = Data(edge_index=EDGE_INDEX, edge_weight=weight, edge_attr=edge_features(), num_nodes=4)
    g = Graph.from_pyg(data, keep_order=True)
    csr = g.to_pyg()
    assert not torch.equal(csr.edge_index, EDGE_INDEX)  # the default is CSR (destination-grouped) order
    back = g.to_pyg(keep_order=True)
    assert torch.equal(back.edge_index, EDGE_INDEX)
    assert torch.equal(back.edge_weight, weight) and torch.equal(back.edge_attr, edge_features())
    built = Graph.from_edge_index(EDGE_INDEX, keep_order=True)
    assert torch.equal(built.to_pyg(keep_order=True).edge_index, EDGE_INDEX)
    with pytest.raises(GraphError, match="keep_order=True"):
        Graph.from_pyg(data).to_pyg(keep_order=True)
    with pytest.raises(GraphError, match="transformed"):
        g.add_self_loops().to_pyg(keep_order=True)


def test_keep_order_survives_save_load(tmp_path):
    g = Graph.from_edge_index(EDGE_INDEX, keep_order=True)
    g.save(tmp_path / "g.pt")
    assert torch.equal(Graph.load(tmp_path / "g.pt").to_pyg(keep_order=True).edge_index, EDGE_INDEX)


def test_networkx_with_weights_on_some_edges_raises():
    nxg = nx.DiGraph()
    nxg.add_edge("a", "b", weight=2.0)
    nxg.add_edge("b", "c")
    nxg.add_edge("c", "a", weight=1.0)
    with pytest.raises(GraphError, match=r"'weight' is set on 2 of 3 edges \(missing on 'b' -> 'c'"):
        Graph.from_networkx(nxg)
    assert Graph.from_networkx(nxg, weight=None).edge_weight is None  # an explicit opt-out
    nxg["b"]["c"]["weight"] = 4.0
    assert sorted(Graph.from_networkx(nxg).edge_weight.tolist()) == [1.0, 2.0, 4.0]


def test_networkx_partial_node_attributes_and_ignored_ones():
    nxg = nx.path_graph(3)
    nxg.nodes[0]["y"] = 1
    with pytest.raises(GraphError, match="node attribute 'y' is set on 1 of 3 nodes"):
        Graph.from_networkx(nxg)
    with pytest.warns(UserWarning, match="club"):
        Graph.from_networkx(nx.karate_club_graph())
    keep = Graph.from_networkx(nx.DiGraph([("a", "b"), ("b", "a")]), keep_order=True)  # a = 0, b = 1
    assert keep.to_pyg().edge_index.tolist() == [[1, 0], [0, 1]]  # CSR: grouped by destination
    assert keep.to_pyg(keep_order=True).edge_index.tolist() == [[0, 1], [1, 0]]  # networkx's edge order


def test_dgl_edge_weight_key_and_edge_features():
    from sgl.data.dgl_interop import dgl_available, import_dgl

    if not dgl_available():
        pytest.skip("dgl is not importable")
    dgl = import_dgl()
    d = dgl.graph((EDGE_INDEX[0], EDGE_INDEX[1]), num_nodes=4)
    d.edata["w"] = torch.arange(1.0, 7.0)
    d.edata["feat"] = edge_features()
    d.ndata["year"] = torch.arange(4)
    g = Graph.from_dgl(d, edge_weight_key="w")
    weight_by_edge = {(s, t): w for s, t, w in zip(g.indices.tolist(), g.destinations().tolist(),
                                                     g.edge_weight.tolist())}
    assert weight_by_edge == {(s, t): float(i + 1) for i, (s, t) in enumerate(EDGE_INDEX.T.tolist())}
    assert attr_by_edge(g) == input_attr_by_edge() and g.year.tolist() == [0, 1, 2, 3]
    with pytest.warns(UserWarning, match=r"edata\['w'\]"):  # not read under the default key: say so
        assert Graph.from_dgl(d).edge_weight is None
    with pytest.raises(GraphError, match=r"edge_weight_key='weights' is not an edge field.*\['feat', 'w'\]"):
        Graph.from_dgl(d, edge_weight_key="weights")
    back = g.to_dgl()
    assert torch.equal(back.edata["feat"], g.edge_attr) and torch.equal(back.edata["weight"], g.edge_weight)
