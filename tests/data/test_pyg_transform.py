import warnings

import pytest
import torch
import torch_geometric.transforms as T

from sgl.data import Graph, PyGTransform, pyg_transform
from sgl.errors import ConfigError, GraphError

DIRECTED = torch.tensor([[0, 1, 2, 2, 3], [1, 2, 0, 3, 1]])


def make_graph():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [2.0, 9.0, 4.0]])
    g = Graph.from_edge_index(DIRECTED, edge_weight=torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]),
                              edge_attr=torch.arange(10.0).view(5, 2), x=x,
                              y=torch.tensor([0, 1, 1, 0]), train_mask=torch.tensor([True, True, False, False]),
                              val_mask=torch.tensor([False, False, True, False]),
                              test_mask=torch.tensor([False, False, False, True]), name="toy")
    g.ogb_name = "toy-ogb"
    g.node_year = torch.tensor([2000, 2001, 2002, 2003])
    g.split = {"folds": [0, 1]}
    return g


def by_edge(graph, values):
    return {(s, d): v for s, d, v in zip(graph.indices.tolist(), graph.destinations().tolist(), values.tolist())}


def assert_kept(result, graph, skip=()):
    """Every attribute of ``graph`` is on ``result`` and, unless in ``skip``, unchanged."""
    for key in graph.keys():
        assert key in result, key
        if key in skip or key in ("edge_index", "edge_weight", "edge_attr"):
            continue
        value = graph[key]
        assert torch.equal(result[key], value) if isinstance(value, torch.Tensor) else result[key] == value, key


def test_normalize_features_changes_x_as_pyg_and_keeps_the_rest():
    g = make_graph()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is lost, so nothing is warned about
        h = g.apply_pyg(T.NormalizeFeatures())
    expected = T.NormalizeFeatures()(g.to_pyg()).x
    assert torch.allclose(h.x, expected) and torch.allclose(h.x.sum(1), torch.ones(4))
    assert_kept(h, g, skip=("x",))
    assert torch.equal(h.edge_weight, g.edge_weight) and torch.equal(h.edge_attr, g.edge_attr)
    assert h.keys() == g.keys() and isinstance(h, Graph)


def test_add_random_walk_pe_adds_its_attribute():
    g = make_graph()
    h = pyg_transform(T.AddRandomWalkPE(walk_length=4))(g)
    assert h.random_walk_pe.shape == (4, 4) and "random_walk_pe" in h.keys()
    assert torch.allclose(h.random_walk_pe, T.AddRandomWalkPE(walk_length=4)(g.to_pyg()).random_walk_pe)
    assert_kept(h, g)
    # a node attribute added by PyG survives the graph's own transforms as node metadata
    assert h.subgraph(torch.tensor([3, 1])).random_walk_pe.shape == (2, 4)


def test_to_undirected_gives_the_right_edges_and_realigns_edge_data():
    g = make_graph()
    times = dict(zip(map(tuple, DIRECTED.t().tolist()), [10.0, 20.0, 30.0, 40.0, 50.0]))
    g.edge_time = torch.tensor([times[e] for e in zip(g.indices.tolist(), g.destinations().tolist())])
    assert not g.is_undirected()
    h = g.apply_pyg(T.ToUndirected())
    reference = T.ToUndirected()(g.to_pyg())
    # 5 directed edges, none with its reverse: 10 after adding every reverse
    assert h.num_edges == reference.num_edges == 10 and h.is_undirected()
    assert h.input_edge_order is None
    weight, time = by_edge(h, h.edge_weight), by_edge(h, h.edge_time)
    attr = by_edge(h, h.edge_attr)
    for (s, d), w, t, a in zip(DIRECTED.t().tolist(), [1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20, 30, 40, 50],
                               torch.arange(10.0).view(5, 2).tolist()):
        assert weight[(s, d)] == weight[(d, s)] == w and time[(s, d)] == time[(d, s)] == t
        assert attr[(s, d)] == attr[(d, s)] == a
    assert_kept(h, g, skip=("edge_time",))


def test_add_self_loops_and_compose():
    g = make_graph()
    with pytest.raises(GraphError, match=r"left edge_attr with 5 row\(s\) for 9 edges.*Graph.add_self_loops"):
        g.apply_pyg(T.AddSelfLoops())  # PyG extends edge_weight only, so edge_attr no longer lines up
    g.edge_attr = None
    h = g.apply_pyg(T.AddSelfLoops(attr="edge_weight", fill_value=0.5))
    assert h.num_edges == g.num_edges + 4 and h.has_self_loops()
    loops = h.indices == h.destinations()
    assert h.edge_weight[loops].tolist() == [0.5] * 4
    assert_kept(h, g)
    both = g.apply_pyg(T.Compose([T.ToUndirected(), T.NormalizeFeatures()]))
    assert both.num_edges == 10 and torch.allclose(both.x.sum(1), torch.ones(4))
    assert_kept(both, g, skip=("x",))


def test_edge_attr_stays_features_and_weight_stays_weight():
    # from_pyg reads a 1-D float edge_attr as the weight; the adapter keeps kinds as they were
    g = Graph.from_edge_index(DIRECTED, edge_attr=torch.arange(5.0))
    h = g.apply_pyg(T.NormalizeFeatures())
    assert h.edge_weight is None and torch.equal(h.edge_attr, g.edge_attr)
    w = Graph.from_edge_index(DIRECTED, edge_weight=torch.arange(1.0, 6.0)).apply_pyg(T.NormalizeFeatures())
    assert w.edge_attr is None and w.edge_weight is not None


def test_metadata_to_pyg_cannot_carry_comes_back():
    g = make_graph()
    g.batch = torch.zeros(4, dtype=torch.long)  # a name Data takes
    g.config = object()  # not a plain value: from_pyg would drop it
    g.edge_note = torch.arange(5)  # per edge, in CSR order
    with pytest.warns(UserWarning, match=r"to_pyg does not carry the attribute\(s\) \['batch'\]"):
        data = g.to_pyg()
    assert torch.equal(data.edge_note, g.edge_note)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = g.apply_pyg(T.NormalizeFeatures())
    assert h.batch is g.batch and h.config is g.config and torch.equal(h.edge_note, g.edge_note)


def test_what_cannot_follow_is_named_in_a_warning():
    g = make_graph()
    g.edge_attr = None
    g.edge_time = torch.arange(5.0)
    # AddSelfLoops extends edge_weight only: edge_time no longer has one row per edge
    with pytest.warns(UserWarning, match=r"could not carry the attribute\(s\) \['edge_time'\]"):
        h = g.apply_pyg(T.AddSelfLoops())
    assert not hasattr(h, "edge_time") and h.ogb_name == "toy-ogb"

    def drop_nodes(data):
        return data.subgraph(torch.tensor([0, 1, 2]))

    g.batch = torch.zeros(4)
    with pytest.warns(UserWarning, match=r"\['batch'\]"):  # per node, and the nodes changed
        small = g.apply_pyg(drop_nodes)
    assert small.num_nodes == 3 and small.node_year.tolist() == [2000, 2001, 2002] and small.ogb_name == "toy-ogb"


def test_attributes_the_transform_deletes_stay_deleted():
    def forget_year(data):
        del data.node_year
        return data

    assert not hasattr(make_graph().apply_pyg(forget_year), "node_year")


def test_bad_transforms():
    g = make_graph()
    with pytest.raises(ConfigError, match="must be callable"):
        pyg_transform("NormalizeFeatures")
    with pytest.raises(ConfigError, match=r"pass an instance, e.g. NormalizeFeatures\(\)"):
        g.apply_pyg(T.NormalizeFeatures)
    with pytest.raises(ConfigError, match="returned None"):
        g.apply_pyg(lambda data: None)
    with pytest.raises(GraphError, match="returned a tuple"):
        g.apply_pyg(lambda data: (data, data))
    with pytest.raises(GraphError, match="applies to a sgl.data.Graph"):
        pyg_transform(T.NormalizeFeatures())(g.to_pyg())
    assert repr(PyGTransform(T.NormalizeFeatures())) == "pyg_transform(NormalizeFeatures())"


def test_pe_on_a_graph_with_as_many_edges_as_nodes_stays_per_node():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]))
    h = g.apply_pyg(T.AddLaplacianEigenvectorPE(k=1, attr_name="laplacian_pe"))
    assert h.laplacian_pe.shape == (3, 1) and h.subgraph(torch.tensor([0, 2])).laplacian_pe.shape == (2, 1)
