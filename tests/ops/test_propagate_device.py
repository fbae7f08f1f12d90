"""propagate_hops on any device (sgl.ops.propagate_device): every path gives the same hops.

Without a GPU the device-generic code runs with ``device="cpu"``: the resident path is torch's
CSR SpMM (``kernel="aten"``), and the streamed (host-chunked) path sends row blocks "through"
the CPU exactly as it would through a GPU. The CUDA tests at the end run when one is visible.
"""
import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.errors import ConfigError, DeviceError, FeatureError
from sgl.ops import HeatKernel, LazyAdjacency, NormalizedAdjacency, PersonalizedPageRank, propagate_hops
from sgl.ops.propagate_device import StreamedAdjacency, plan_device, resident_bytes, streamed_adjacency

GRAPHS = ("weighted-directed", "undirected", "isolated")


def _graph(kind: str, n: int = 120) -> Graph:
    gen = torch.Generator().manual_seed(GRAPHS.index(kind))
    if kind == "isolated":  # the last 25 nodes have no edges at all; 10 explicit self-loops
        edge_index = torch.randint(0, n - 25, (2, 700), generator=gen)
        edge_index[:, :10] = torch.arange(10).repeat(2, 1)
        return Graph.from_edge_index(edge_index, num_nodes=n)
    edge_index = torch.randint(0, n, (2, 700), generator=gen)
    if kind == "undirected":
        return Graph.from_edge_index(edge_index, num_nodes=n).symmetrize()
    return Graph.from_edge_index(edge_index, num_nodes=n, edge_weight=torch.rand(700, generator=gen) + 0.1)


def _close(hops, ref, tol=1e-6):
    assert len(hops) == len(ref)
    for got, want in zip(hops, ref):
        assert got.shape == want.shape
        scale = max(1.0, float(want.abs().max()))
        assert float((got.double() - want.double()).abs().max()) <= tol * scale


PATHS = {
    "fused": dict(kernel="fused"),
    "aten": dict(kernel="aten"),
    "torch on device cpu": dict(device="cpu", kernel="aten"),
    "streamed, whole source": dict(device="cpu", chunk_rows=7),
    "streamed, gathered sources": dict(device="cpu", max_device_bytes=2_000),
    "streamed, one row per block": dict(device="cpu", chunk_rows=1),
    "streamed + column chunks": dict(device="cpu", chunk_rows=16, chunk_size=2),
}


@pytest.mark.parametrize("kind", GRAPHS)
@pytest.mark.parametrize("op", [NormalizedAdjacency(), NormalizedAdjacency(r=1.0, self_loops=False),
                                LazyAdjacency(alpha=0.3)], ids=["sym", "rw-noloops", "lazy"])
@pytest.mark.parametrize("path", list(PATHS))
def test_every_path_equals_the_one_shot_product(kind, op, path):
    graph = _graph(kind)
    x = torch.randn(graph.num_nodes, 5, generator=torch.Generator().manual_seed(3))
    ref = propagate_hops(graph, x, k=3, op=op, kernel="aten")
    hops = propagate_hops(graph, x, k=3, op=op, **PATHS[path])
    assert hops[0] is x and all(h.device.type == "cpu" for h in hops)
    _close(hops, ref)


@pytest.mark.parametrize("kind", GRAPHS)
@pytest.mark.parametrize("streamed", [dict(chunk_rows=9), dict(max_device_bytes=2_000)], ids=["whole", "gather"])
def test_streamed_to_disk_and_cache_equal_memory(kind, streamed, tmp_path):
    graph = _graph(kind)
    x = torch.randn(graph.num_nodes, 6)
    ref = propagate_hops(graph, x, k=2)
    disk = propagate_hops(graph, x, k=2, device="cpu", out_dir=tmp_path / "out", chunk_size=4, **streamed)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["hop_1.npy", "hop_2.npy", "manifest.json"]
    _close(disk, ref)
    cached = propagate_hops(graph, x, k=2, device="cpu", cache_dir=tmp_path / "cache", **streamed)
    _close(cached, ref)
    again = propagate_hops(graph, x, k=2, cache_dir=tmp_path / "cache")  # the same key, read back
    _close(again, ref)


@pytest.mark.parametrize("op", [PersonalizedPageRank(alpha=0.2), HeatKernel(t=1.5)], ids=["ppr", "heat"])
def test_iterative_operators_stream_too(op):
    graph = _graph("weighted-directed")
    x = torch.randn(graph.num_nodes, 4)
    ref = propagate_hops(graph, x, k=2, op=op)
    _close(propagate_hops(graph, x, k=2, op=op, device="cpu", chunk_rows=11), ref)
    _close(propagate_hops(graph, x, k=2, op=op, device="cpu", max_device_bytes=1_500), ref)


def test_reduced_precision_storage_on_the_device_paths():
    graph = _graph("undirected")
    x = torch.randn(graph.num_nodes, 8)
    ref = propagate_hops(graph, x, k=2, kernel="aten")
    for kwargs in (dict(device="cpu", kernel="aten"), dict(device="cpu", chunk_rows=10)):
        hops = propagate_hops(graph, x, k=2, dtype=torch.bfloat16, **kwargs)
        assert hops[0] is x and [h.dtype for h in hops[1:]] == [torch.bfloat16] * 2
        for got, want in zip(hops[1:], ref[1:]):
            assert torch.equal(got, want.to(torch.bfloat16))  # same float32 hop, rounded once


def test_plan_and_block_sizes():
    graph = _graph("weighted-directed")
    x = torch.randn(graph.num_nodes, 8)
    op = NormalizedAdjacency()
    cpu = torch.device("cpu")
    need = resident_bytes(graph, x, 3, op, cpu, 8, on_disk=False)
    assert need > 3 * x.numel() * 4  # at least the three hops
    assert plan_device(graph, x, 3, op, cpu, 8, False, None, None) == "resident"  # no bound on the host
    assert plan_device(graph, x, 3, op, cpu, 8, False, None, need) == "resident"
    assert plan_device(graph, x, 3, op, cpu, 8, False, None, need - 1) == "streamed"
    assert plan_device(graph, x, 3, op, cpu, 8, False, 50, None) == "streamed"
    whole = streamed_adjacency(graph, op, torch.float32, cpu, 8, 50, None)
    assert whole.whole_source and whole.bounds == [0, 50, 100, 120] and whole.shape == (120, 120)
    gather = streamed_adjacency(graph, op, torch.float32, cpu, 8, None, 2_000)
    assert not gather.whole_source and 1 <= gather.chunk_rows < 120 and gather.bounds[-1] == 120
    assert "whole_source=False" in repr(gather)
    y = gather @ x
    assert torch.allclose(y, op.apply(op.adjacency(graph), x), atol=1e-6)
    with pytest.raises(FeatureError, match="expected a \\[120, c\\]"):
        gather @ x[:-1]
    with pytest.raises(ConfigError, match="square host"):
        StreamedAdjacency(torch.eye(3), cpu, width=1, itemsize=4)


def test_graph_structure_follows_the_compute_device():
    graph = _graph("undirected")
    x = torch.randn(graph.num_nodes, 3)
    graph.x = x
    assert all(h.device.type == "cpu" for h in propagate_hops(graph, k=2, device=torch.device("cpu")))


def test_bad_devices_and_options_raise_sgl_errors():
    graph = _graph("undirected")
    x = torch.randn(graph.num_nodes, 3)
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="cuda:7.*CUDA"):
            propagate_hops(graph, x, k=1, device="cuda:7")
        with pytest.raises(DeviceError, match="CUDA"):
            propagate_hops(graph, x, k=1, device=7)
    with pytest.raises(DeviceError, match="(?i)invalid device 'tpu'"):
        propagate_hops(graph, x, k=1, device="tpu")
    with pytest.raises(DeviceError, match="'mps' is not usable"):
        propagate_hops(graph, x, k=1, device="mps")
    with pytest.raises(DeviceError, match="meta"):
        propagate_hops(graph, x, k=1, device="meta")
    with pytest.raises(ConfigError, match="fused kernel is host-only.*streamed"):
        propagate_hops(graph, x, k=1, kernel="fused", chunk_rows=4)
    for name, value in (("chunk_rows", 0), ("chunk_rows", 2.5), ("max_device_bytes", -1), ("max_device_bytes", True)):
        with pytest.raises(ConfigError, match=name):
            propagate_hops(graph, x, k=1, **{name: value})


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("kind", GRAPHS)
def test_cuda_resident_and_streamed_equal_the_host(kind, tmp_path):  # pragma: no cover - needs a GPU
    graph = _graph(kind)
    x = torch.randn(graph.num_nodes, 6)
    op = LazyAdjacency(alpha=0.2)
    ref = propagate_hops(graph, x, k=3, op=op, kernel="aten")
    on_gpu = propagate_hops(graph, x.cuda(), k=3, op=op)  # follows x
    assert all(h.is_cuda for h in on_gpu)
    _close([h.cpu() for h in on_gpu], ref, 1e-5)
    moved = propagate_hops(graph.cuda(), x, k=3, op=op, device="cuda")
    assert all(h.is_cuda for h in moved)
    for kwargs in (dict(chunk_rows=17), dict(max_device_bytes=4_000), dict(chunk_rows=5, chunk_size=2)):
        streamed = propagate_hops(graph, x, k=3, op=op, device="cuda", **kwargs)
        assert streamed[0] is x and all(h.device.type == "cpu" for h in streamed)
        assert all(h.is_pinned() for h in streamed[1:]) or "chunk_size" in kwargs
        _close(streamed, ref, 1e-5)
    disk = propagate_hops(graph, x, k=3, op=op, device="cuda", out_dir=tmp_path / "d", chunk_rows=13)
    _close(disk, ref, 1e-5)
    resident_disk = propagate_hops(graph, x.cuda(), k=3, op=op, out_dir=tmp_path / "r")
    assert np.allclose(resident_disk[3].numpy(), ref[3].numpy(), atol=1e-5)
    with pytest.raises(ConfigError, match="host-only"):
        propagate_hops(graph, x.cuda(), k=1, kernel="fused")
