import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.errors import CacheError, ConfigError, FeatureError, GraphError
from sgl.ops import HeatKernel, NormalizedAdjacency, PersonalizedPageRank, normalized_adjacency, propagate_hops
from sgl.ops.propagate import propagation_cache_key


@pytest.fixture
def graph():
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 50, (2, 300), generator=gen)
    return Graph.from_edge_index(ei, num_nodes=50).symmetrize().remove_self_loops()


def dense_hops(graph, x, k, r=0.5):
    m = normalized_adjacency(graph, r=r, dtype=torch.float64).to_dense()
    out, h = [x.double()], x.double()
    for _ in range(k):
        h = m @ h
        out.append(h)
    return out


@pytest.mark.parametrize("r", [0.0, 0.5, 1.0])
def test_hops_match_dense_powers(graph, r):
    x = torch.randn(50, 7)
    hops = propagate_hops(graph, x, k=3, op=NormalizedAdjacency(r=r))
    assert len(hops) == 4 and hops[0] is x
    for got, ref in zip(hops, dense_hops(graph, x, 3, r)):
        assert torch.allclose(got.double(), ref, atol=1e-5)


@pytest.mark.parametrize("op", [NormalizedAdjacency(), PersonalizedPageRank(alpha=0.2), HeatKernel(t=2.0)])
@pytest.mark.parametrize("chunk", [1, 3, 7, 100])
def test_chunked_equals_unchunked(graph, op, chunk):
    x = torch.randn(50, 7)
    full = propagate_hops(graph, x, k=3, op=op)
    chunked = propagate_hops(graph, x, k=3, op=op, chunk_size=chunk)
    for a, b in zip(full, chunked):
        assert torch.allclose(a, b, atol=1e-6)


def test_disk_hops_equal_memory_hops(graph, tmp_path):
    x = torch.randn(50, 9)
    mem = propagate_hops(graph, x, k=2)
    disk = propagate_hops(graph, x, k=2, out_dir=tmp_path, chunk_size=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hop_1.npy", "hop_2.npy", "manifest.json"]
    for a, b in zip(mem, disk):
        assert torch.allclose(a, b, atol=1e-6)
    disk[1][0, 0] = 123.0  # copy-on-write: the file must not change
    assert np.load(tmp_path / "hop_1.npy")[0, 0] != 123.0
    # the automatic chunk size (tiny budget -> one column at a time) gives the same result
    auto = propagate_hops(graph, x, k=2, out_dir=tmp_path / "auto", max_chunk_bytes=1)
    assert torch.allclose(auto[2], mem[2], atol=1e-6)


def test_cache_hit_skips_recompute(graph, tmp_path, monkeypatch):
    x = torch.randn(50, 4)
    first = propagate_hops(graph, x, k=2, cache_dir=tmp_path)
    key = propagation_cache_key(graph, x, 2, NormalizedAdjacency())
    assert (tmp_path / key / "manifest.json").exists()

    def fail(*args, **kwargs):
        raise AssertionError("recomputed despite a cache hit")

    monkeypatch.setattr(NormalizedAdjacency, "apply", fail)
    second = propagate_hops(graph, x, k=2, cache_dir=tmp_path)
    assert torch.equal(first[2], second[2])
    # a different operator, k or feature matrix is a different key
    keys = {key, propagation_cache_key(graph, x, 3, NormalizedAdjacency()),
            propagation_cache_key(graph, x, 2, NormalizedAdjacency(r=1.0)),
            propagation_cache_key(graph, x + 1, 2, NormalizedAdjacency())}
    assert len(keys) == 4


def test_interrupted_cache_write_leaves_no_entry(graph, tmp_path, monkeypatch):
    x = torch.randn(50, 4)

    def crash(self, adj, block):
        raise KeyboardInterrupt

    monkeypatch.setattr(NormalizedAdjacency, "apply", crash)
    with pytest.raises(KeyboardInterrupt):
        propagate_hops(graph, x, k=2, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_corrupt_cache_entry_is_reported(graph, tmp_path):
    x = torch.randn(50, 4)
    propagate_hops(graph, x, k=1, cache_dir=tmp_path)
    entry = next(tmp_path.iterdir())
    (entry / "hop_1.npy").write_bytes(b"garbage")
    with pytest.raises(CacheError, match="delete"):
        propagate_hops(graph, x, k=1, cache_dir=tmp_path)


def test_defaults_and_k0(graph):
    graph.x = torch.randn(50, 3)
    assert propagate_hops(graph, k=0)[0] is graph.x
    assert len(propagate_hops(graph, k=2, op="ppr")) == 3


def test_bad_arguments(graph):
    with pytest.raises(GraphError, match="no features"):
        propagate_hops(graph, k=2)
    with pytest.raises(FeatureError, match="rows"):
        propagate_hops(graph, torch.randn(49, 3), k=2)
    bad = torch.randn(50, 3)
    bad[4, 1] = float("nan")
    with pytest.raises(FeatureError, match="NaN"):
        propagate_hops(graph, bad, k=2)
    with pytest.raises(ConfigError, match="non-negative integer"):
        propagate_hops(graph, torch.randn(50, 3), k=-1)
    with pytest.raises(ConfigError, match="non-negative integer"):
        propagate_hops(graph, torch.randn(50, 3), k=2.5)
    with pytest.raises(ConfigError, match="chunk_size"):
        propagate_hops(graph, torch.randn(50, 3), k=2, chunk_size=0)
    with pytest.raises(ConfigError, match="unknown graph operator"):
        propagate_hops(graph, torch.randn(50, 3), k=2, op="nope")


def test_matches_pyg_sign(graph):
    from torch_geometric.transforms import SIGN

    x = torch.randn(50, 5)
    data = graph.to_pyg()
    data.x = x
    data = SIGN(2)(data)
    # PyG's SIGN normalises D^-1/2 A D^-1/2 without self-loops
    ours = propagate_hops(graph, x, k=2, op=NormalizedAdjacency(self_loops=False))
    assert torch.allclose(ours[1], data.x1, atol=1e-5) and torch.allclose(ours[2], data.x2, atol=1e-5)
