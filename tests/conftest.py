import os
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def small_graph():
    """A 6-node undirected graph with one isolated node, features and labels."""
    from sgl.data import Graph

    edges = torch.tensor([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4]])
    edge_index = torch.cat([edges.T, edges.flip(1).T], dim=1)
    x = torch.randn(6, 5)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    return Graph.from_edge_index(edge_index, num_nodes=6, x=x, y=y)


@pytest.fixture
def test_data() -> Path:
    """Folder of real dataset files (``SGL_TEST_DATA``); skips when absent."""
    root = os.environ.get("SGL_TEST_DATA")
    if not root or not Path(root).is_dir():
        pytest.skip("SGL_TEST_DATA is not set to the shared datasets folder")
    return Path(root)
