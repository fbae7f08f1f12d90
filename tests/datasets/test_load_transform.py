import pytest
import torch
import torch_geometric.transforms as T

import sgl
from sgl.data import Graph, pyg_transform
from sgl.datasets import GraphDataset, registry
from sgl.errors import ConfigError, DatasetError


@pytest.fixture
def private_registry(monkeypatch):
    """Datasets registered by a test vanish after it."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def test_transform_is_applied_to_the_loaded_graph():
    plain = sgl.datasets.load("karate")
    looped = sgl.datasets.load("karate", transform=lambda g: g.add_self_loops())
    assert looped.num_edges == plain.num_edges + plain.num_nodes and looped.has_self_loops()
    assert torch.equal(looped.y, plain.y) and torch.equal(looped.train_mask, plain.train_mask)


def test_dataset_options_still_reach_the_loader():
    g = sgl.datasets.load("synthetic", num_nodes=60, num_features=4, seed=3,
                          transform=pyg_transform(T.NormalizeFeatures()))
    raw = sgl.datasets.load("synthetic", num_nodes=60, num_features=4, seed=3)
    assert g.num_nodes == 60 and torch.allclose(g.x, T.NormalizeFeatures()(raw.to_pyg()).x)
    assert torch.equal(g.train_mask, raw.train_mask) and torch.equal(g.y, raw.y)
    with pytest.raises(ConfigError):  # an unknown option is still caught with a transform
        sgl.datasets.load("karate", transform=lambda g: g, no_such_option=1)


def test_pyg_transform_through_load_adds_its_attribute():
    g = sgl.datasets.load("karate", transform=pyg_transform(T.AddRandomWalkPE(walk_length=3)))
    assert g.random_walk_pe.shape == (34, 3) and g.num_classes == 2


def test_graph_dataset_transform_applies_to_each_graph(private_registry):
    pair = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 1))
    path = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), x=torch.ones(3, 1))
    registry.register("test-tiny-graphs", lambda root=None: GraphDataset([pair, path], torch.tensor([0, 1]),
                                                                         name="tiny"),
                      "two graphs", task="graph")
    ds = sgl.datasets.load("test-tiny-graphs", transform=lambda g: g.add_self_loops())
    assert isinstance(ds, GraphDataset) and ds.name == "tiny" and ds.labels.tolist() == [0, 1]
    assert [g.num_edges for g in ds] == [4, 5] and pair.num_edges == 2  # the loader's graphs are untouched


def test_bad_transforms_raise_config_error():
    with pytest.raises(ConfigError, match="transform must be a callable.*got str"):
        sgl.datasets.load("karate", transform="NormalizeFeatures")
    with pytest.raises(ConfigError, match="returned None"):
        sgl.datasets.load("karate", transform=lambda g: None)
    with pytest.raises(DatasetError):  # the name is still checked
        sgl.datasets.load("no-such-dataset", transform=lambda g: g)
