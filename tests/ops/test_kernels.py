"""The fused numba CSR kernel (sgl.ops.kernels) against ATen's CSR SpMM, and its wiring into propagate_hops."""
import pytest
import torch

from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops import HeatKernel, LazyAdjacency, NormalizedAdjacency, propagate_hops
from sgl.ops.reorder import bandwidth, rcm_order, reorder_graph
from sgl.ops.kernels import csr_spmm, fused_adjacency


def _random_graph(seed: int, weighted: bool, n: int = 600, m: int = 5000) -> Graph:
    gen = torch.Generator().manual_seed(seed)
    # nodes >= n - 40 get no edges at all (empty rows and columns); 30 explicit self-loops
    edge_index = torch.randint(0, n - 40, (2, m), generator=gen)
    edge_index[:, :30] = torch.arange(30).repeat(2, 1)
    weight = torch.rand(m, generator=gen) + 0.1 if weighted else None
    return Graph.from_edge_index(edge_index, num_nodes=n, edge_weight=weight)


def _bound(op, graph, x):
    """1e-6 of |M| |x|, the scale of a float32 rounding difference (relative, cancellation-safe)."""
    adj = op.adjacency(graph, torch.float64)
    absadj = torch.sparse_csr_tensor(adj.crow_indices(), adj.col_indices(), adj.values().abs(), adj.shape)
    return 1e-6 * torch.sparse.mm(absadj, x.double().abs()) + 1e-30


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("op", [NormalizedAdjacency(), NormalizedAdjacency(r=0.0, self_loops=False),
                                NormalizedAdjacency(r=1.0), LazyAdjacency(alpha=0.3)])
def test_kernel_matches_aten_float32(weighted, op):
    graph = _random_graph(1, weighted)
    x = torch.randn(graph.num_nodes, 37, generator=torch.Generator().manual_seed(2))
    ours = csr_spmm(fused_adjacency(graph, op), x)
    ref = op.apply(op.adjacency(graph), x)
    assert ours.dtype == torch.float32
    assert bool(((ours.double() - ref.double()).abs() <= _bound(op, graph, x)).all())
    assert torch.equal(ours[-40:], ref[-40:])  # empty rows: only the self-loop term (or zero)
    if isinstance(op, NormalizedAdjacency):
        assert torch.equal(ours, ref)  # same values, same edge order, same fused multiply-adds


def test_kernel_on_torch_csr_and_float64_and_threads():
    graph = _random_graph(3, True)
    adj = NormalizedAdjacency().adjacency(graph)
    x = torch.randn(graph.num_nodes, 16, generator=torch.Generator().manual_seed(4))
    assert torch.equal(csr_spmm(adj, x), torch.sparse.mm(adj, x, reduce="sum"))
    one = csr_spmm(adj, x, threads=1, prefetch=0)
    assert torch.equal(one, csr_spmm(adj, x, threads=2, prefetch=16))
    adj64 = NormalizedAdjacency().adjacency(graph, torch.float64)
    assert torch.allclose(csr_spmm(adj64, x.double()), torch.sparse.mm(adj64, x.double()), rtol=1e-12, atol=1e-15)


def test_column_range_writes_only_those_columns():
    graph = _random_graph(5, False)
    fused = fused_adjacency(graph, NormalizedAdjacency())
    x = torch.randn(graph.num_nodes, 20)
    out = torch.full_like(x, 7.0)
    csr_spmm(fused, x, out, columns=(4, 9))
    full = csr_spmm(fused, x)
    assert torch.equal(out[:, 4:9], full[:, 4:9])
    assert bool((out[:, :4] == 7).all()) and bool((out[:, 9:] == 7).all())


@pytest.mark.parametrize("store", [torch.bfloat16, torch.float16])
def test_half_storage_rounds_a_float32_accumulation(store):
    graph = _random_graph(6, True)
    op = NormalizedAdjacency()
    x = torch.randn(graph.num_nodes, 24, generator=torch.Generator().manual_seed(7))
    hops = propagate_hops(graph, x, k=3, op=op, dtype=store)
    assert hops[0] is x and all(h.dtype == store for h in hops[1:])
    adj = op.adjacency(graph)
    prev = x.to(store)
    for hop in hops[1:]:
        prev = op.apply(adj, prev.float()).to(store)  # float32 sum of the stored values, rounded once
        assert torch.equal(hop, prev)
    exact = propagate_hops(graph, x, k=3, op=op)
    rel = (hops[3].float() - exact[3]).norm() / exact[3].norm()
    assert 1e-5 < float(rel) < 2e-2  # it does round, and only at half precision's scale


def test_propagate_hops_kernel_equals_aten_in_column_blocks():
    graph = _random_graph(8, True)
    x = torch.randn(graph.num_nodes, 19, generator=torch.Generator().manual_seed(9))
    ref = propagate_hops(graph, x, k=3, kernel="aten")
    for chunk in (None, 5):
        ours = propagate_hops(graph, x, k=3, kernel="fused", chunk_size=chunk)
        assert ours[0] is x
        for a, b in zip(ours[1:], ref[1:]):
            assert torch.equal(a, b)


def test_fused_kernel_on_disk_matches(tmp_path):
    graph = _random_graph(10, False)
    x = torch.randn(graph.num_nodes, 6)
    disk = propagate_hops(graph, x, k=2, kernel="fused", out_dir=tmp_path, chunk_size=4)
    mem = propagate_hops(graph, x, k=2, kernel="aten")
    assert torch.equal(disk[2].contiguous(), mem[2])


def test_bad_inputs_raise_sgl_errors():
    graph = _random_graph(11, False)
    fused = fused_adjacency(graph, NormalizedAdjacency())
    x = torch.randn(graph.num_nodes, 4)
    with pytest.raises(FeatureError, match="dtype"):
        csr_spmm(fused, x.to(torch.int32))
    with pytest.raises(FeatureError, match="rows"):
        csr_spmm(fused, x[:-1])
    with pytest.raises(FeatureError, match="out must be"):
        csr_spmm(fused, x, torch.empty(graph.num_nodes, 5))
    with pytest.raises(FeatureError, match="alias"):
        csr_spmm(fused, x, x)
    with pytest.raises(FeatureError, match="contiguous"):
        csr_spmm(fused, torch.randn(4, graph.num_nodes).t())
    with pytest.raises(ConfigError, match="columns"):
        csr_spmm(fused, x, columns=(3, 9))
    with pytest.raises(ConfigError, match="prefetch"):
        csr_spmm(fused, x, prefetch=-1)
    with pytest.raises(GraphError):
        csr_spmm(torch.randn(3, 3), x)
    with pytest.raises(ConfigError, match="fused kernel"):
        fused_adjacency(graph, HeatKernel())
    with pytest.raises(ConfigError, match="fused kernel"):
        propagate_hops(graph, x, k=1, op=HeatKernel(), kernel="fused")
    with pytest.raises(ConfigError, match="kernel must be"):
        propagate_hops(graph, x, k=1, kernel="mkl")
    with pytest.raises(ConfigError, match="dtype must be"):
        propagate_hops(graph, x, k=1, dtype=torch.int8)
    with pytest.raises(ConfigError, match="memory only"):
        propagate_hops(graph, x, k=1, dtype=torch.bfloat16, out_dir="unused")


def _shuffled_grid(side: int, seed: int, features: int) -> Graph:
    """A ``side × side`` grid graph (both directions) with randomly shuffled node ids."""
    ids = torch.arange(side * side).view(side, side)
    pairs = torch.cat([torch.stack([ids[:, :-1].flatten(), ids[:, 1:].flatten()]),
                       torch.stack([ids[:-1].flatten(), ids[1:].flatten()])], dim=1)
    shuffle = torch.randperm(side * side, generator=torch.Generator().manual_seed(seed))
    return Graph.from_edge_index(shuffle[torch.cat([pairs, pairs.flip(0)], dim=1)], x=torch.randn(side * side, features))


def test_rcm_recovers_the_band_of_a_shuffled_grid_and_commutes_with_propagation():
    side = 40
    graph = _shuffled_grid(side, 0, 5)
    perm = rcm_order(graph)
    assert torch.equal(torch.sort(perm).values, torch.arange(graph.num_nodes))
    moved = reorder_graph(graph, perm)
    assert bandwidth(graph) > 10 * side and bandwidth(moved) <= 2 * side
    assert bandwidth(moved, "mean") < bandwidth(graph, "mean") / 10
    hops = propagate_hops(moved, k=2)
    ref = propagate_hops(graph, k=2)
    assert torch.allclose(hops[2], ref[2][perm], rtol=1e-5, atol=1e-6)
    assert torch.equal(rcm_order(graph, "degree")[:1], torch.argmax(graph.degree()).view(1))
    with pytest.raises(ConfigError):
        rcm_order(graph, "nested")
    with pytest.raises(ConfigError, match="parts"):
        rcm_order(graph, "metis", parts=0)
    with pytest.raises(ConfigError):
        bandwidth(graph, "median")
    with pytest.raises(GraphError):
        reorder_graph(graph, torch.zeros(graph.num_nodes, dtype=torch.long))


def test_metis_order_makes_parts_contiguous_and_shrinks_the_gap_of_a_shuffled_grid():
    graph = _shuffled_grid(40, 1, 3)
    perm = rcm_order(graph, "metis", parts=16)
    assert torch.equal(torch.sort(perm).values, torch.arange(graph.num_nodes))
    moved = reorder_graph(graph, perm)
    assert bandwidth(moved, "mean") < bandwidth(graph, "mean") / 5
    assert torch.equal(rcm_order(graph, "metis", parts=16), perm)           # seeded: deterministic
    assert torch.equal(rcm_order(graph, "metis", parts=1), torch.arange(graph.num_nodes))
    hops, ref = propagate_hops(moved, k=1), propagate_hops(graph, k=1)
    assert torch.allclose(hops[1], ref[1][perm], rtol=1e-5, atol=1e-6)


def test_reference_load_store_match_torch_half_conversions():
    import numpy as np

    from sgl.ops._spmm_numba import _load, _store
    x = torch.tensor([[1.7, -3.14159, 65504.0, 1e-3]])
    bf16 = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    f16 = x.numpy().astype(np.float16).view(np.int16)
    out_b, out_h = np.zeros_like(bf16), np.zeros_like(f16)
    for c in range(x.shape[1]):
        assert _load(bf16, 0, c) == float(x.to(torch.bfloat16)[0, c])
        assert _load(f16, 0, c) == np.float32(x.numpy().astype(np.float16)[0, c])
        _store(out_b, 0, c, float(x[0, c]))
        _store(out_h, 0, c, float(x[0, c]))
    assert np.array_equal(out_b, bf16) and np.array_equal(out_h, f16)
