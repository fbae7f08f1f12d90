"""Metadata (the OGB name above all: it picks OGB's Evaluator) survives every Graph transform."""
import pytest
import torch

from sgl.data import Graph

TRANSFORMS = {
    "add_self_loops": lambda g: g.add_self_loops(),
    "remove_self_loops": lambda g: g.remove_self_loops(),
    "symmetrize": lambda g: g.symmetrize(),
    "deduplicate": lambda g: g.deduplicate(),
    "subgraph": lambda g: g.subgraph(torch.tensor([3, 1, 0])),
    "subgraph_no_relabel": lambda g: g.subgraph(torch.tensor([0, 1]), relabel=False),
    "edge_subgraph": lambda g: g.edge_subgraph(g.indices != 0),
    "with_edges": lambda g: g.with_edges(torch.tensor([[0, 1], [1, 0]])),
    "chain": lambda g: g.symmetrize().add_self_loops().subgraph(torch.tensor([0, 2, 3])).deduplicate(),
}


@pytest.fixture
def ogb_graph():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 3], [1, 2, 0, 1, 3]]), x=torch.randn(4, 2),
                              y=torch.tensor([0, 1, 0, 1]), train_mask=torch.tensor([0, 1]), name="ogbn-arxiv")
    g.ogb_name = "ogbn-arxiv"  # as sgl.datasets.ogb sets it
    g.node_year = torch.tensor([2010, 2011, 2012, 2013])
    return g


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_ogb_name_survives(ogb_graph, transform):
    out = TRANSFORMS[transform](ogb_graph)
    assert out.ogb_name == "ogbn-arxiv" and out.name == "ogbn-arxiv"
    assert out.node_year.shape == (out.num_nodes,)


def test_subgraph_slices_per_node_metadata(ogb_graph):
    sub = ogb_graph.subgraph(torch.tensor([3, 1]))
    assert sub.node_year.tolist() == [2013, 2011] and sub.node_ids.tolist() == [3, 1]
    assert sub.subgraph(torch.tensor([1])).node_year.tolist() == [2011]


def test_metadata_survives_save_load_and_pyg(ogb_graph, tmp_path):
    ogb_graph.save(tmp_path / "g.pt")
    back = Graph.load(tmp_path / "g.pt")
    assert back.ogb_name == "ogbn-arxiv" and back.node_year.tolist() == [2010, 2011, 2012, 2013]
    again = Graph.from_pyg(ogb_graph.to_pyg())
    assert again.ogb_name == "ogbn-arxiv" and again.name == "ogbn-arxiv"
    assert torch.equal(again.node_year, ogb_graph.node_year)


def test_unsaveable_metadata_is_named(ogb_graph, tmp_path):
    ogb_graph.tokenizer = object()
    with pytest.warns(UserWarning, match="tokenizer"):
        ogb_graph.save(tmp_path / "g.pt")
    assert Graph.load(tmp_path / "g.pt").ogb_name == "ogbn-arxiv"


def test_per_edge_metadata_is_dropped_loudly(ogb_graph):
    ogb_graph.edge_label = torch.ones(ogb_graph.num_edges)
    with pytest.warns(UserWarning, match=r"add_self_loops dropped the per-edge attribute\(s\) \['edge_label'\]"):
        out = ogb_graph.add_self_loops()
    assert not hasattr(out, "edge_label")


def test_ogb_evaluator_is_found_after_transforms(ogb_graph):
    pytest.importorskip("ogb")
    from sgl.tasks.node_classification import _ogb_evaluator

    evaluate = _ogb_evaluator(ogb_graph.symmetrize().add_self_loops())
    assert evaluate is not None
    assert evaluate(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0])) == pytest.approx(2 / 3)
