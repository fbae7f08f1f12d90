import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.datasets import GraphDataset
from sgl.errors import DatasetError


def make(n):
    return Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=n, x=torch.ones(n, 2))


def test_indexing():
    ds = GraphDataset([make(2), make(3), make(4)], [0, 2, 1], name="toy")
    assert len(ds) == 3 and ds.num_classes == 3 and ds.num_features == 2 and ds.num_nodes == 9
    assert ds[1].num_nodes == 3
    assert ds[torch.tensor(2)].num_nodes == 4 and ds[np.int64(0)].num_nodes == 2
    sub = ds[1:]
    assert isinstance(sub, GraphDataset) and sub.labels.tolist() == [2, 1]
    assert ds[[2, 0]].labels.tolist() == [1, 0]
    assert ds[torch.tensor([True, False, True])].labels.tolist() == [0, 1]
    assert [g.num_nodes for g in ds] == [2, 3, 4]
    assert "toy" in repr(ds)


def test_float_targets():
    ds = GraphDataset([make(2), make(2)], torch.tensor([[0.5, 1.0], [1.5, 2.0]]))
    assert ds.num_classes == 2


def test_validation():
    with pytest.raises(DatasetError, match="one label"):
        GraphDataset([make(2)], [0, 1])
    with pytest.raises(DatasetError, match="sgl.data.Graph"):
        GraphDataset(["not a graph"], [0])
    with pytest.raises(DatasetError, match="feature widths"):
        GraphDataset([make(2), Graph.from_edge_index(torch.tensor([[0], [1]]), x=torch.ones(2, 5))], [0, 1])
    with pytest.raises(DatasetError, match="boolean mask"):
        GraphDataset([make(2)], [0])[torch.tensor([True, False])]
