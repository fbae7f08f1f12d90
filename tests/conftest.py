"""Fixtures for tests/: real data via SGL_TEST_DATA, no network (seeding and threads: ../conftest.py)."""
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """Tests never touch the network, ~/.sgl or ~/.cache/sgl: only file:// URLs open, SGL_DATA and
    SGL_CACHE_DIR are temp dirs."""
    real_urlopen = urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        target = url if isinstance(url, str) else url.full_url
        if not target.startswith("file:"):
            raise urllib.error.URLError("network access is disabled in the test suite")
        return real_urlopen(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setenv("SGL_DATA", str(tmp_path / "sgl_data"))
    monkeypatch.setenv("SGL_CACHE_DIR", str(tmp_path / "sgl_cache"))


@pytest.fixture
def test_data() -> Path:
    """Folder of real dataset files (``SGL_TEST_DATA``, e.g. ../shared/datasets); skips when absent."""
    root = os.environ.get("SGL_TEST_DATA")
    if not root or not Path(root).is_dir():
        pytest.skip("SGL_TEST_DATA is not set to the shared datasets folder")
    return Path(root)


@pytest.fixture
def data_path(test_data):
    """``data_path("planetoid")`` -> the real folder/file, or a clean skip when it is missing."""

    def get(*parts: str) -> Path:
        path = test_data.joinpath(*parts)
        if not path.exists():
            pytest.skip(f"{path} is not available")
        return path

    return get


@pytest.fixture
def small_graph():
    """A 6-node undirected graph with one isolated node, features and labels."""
    from sgl.data import Graph

    edges = torch.tensor([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4]])
    edge_index = torch.cat([edges.T, edges.flip(1).T], dim=1)
    x = torch.randn(6, 5)
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    return Graph.from_edge_index(edge_index, num_nodes=6, x=x, y=y)


@pytest.fixture(scope="session")
def homophilous_graph():
    """A 300-node, 3-class synthetic graph (12 features, homophily 0.9) shared by the acceleration tests;
    read-only. The tests that use it run torch on one thread, as their timings assume."""
    import sgl

    torch.set_num_threads(1)
    return sgl.datasets.load("synthetic", num_nodes=300, num_classes=3, avg_degree=6, num_features=12,
                             homophily=0.9, feature_signal=0.5, seed=0)
