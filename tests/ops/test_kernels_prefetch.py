"""The kernel's edge-stream prefetch (every line of the row, across row boundaries) and its
one-pass edge values: neither may change a single bit of the result."""
import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.ops import LazyAdjacency, NormalizedAdjacency
from sgl.ops.kernels import DEFAULT_PREFETCH, _prefetch_lines, csr_spmm, default_prefetch, fused_adjacency


def _graph(seed: int, weighted: bool, n: int = 500, m: int = 4000) -> Graph:
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n - 30, (2, m), generator=gen)  # the last 30 rows are empty
    edge_index[:, :20] = torch.arange(20).repeat(2, 1)  # explicit self-loops
    weight = torch.rand(m, generator=gen) + 0.1 if weighted else None
    return Graph.from_edge_index(edge_index, num_nodes=n, edge_weight=weight)


def _reference_values(graph: Graph, op) -> torch.Tensor:
    """The torch expression fused_adjacency's one-pass values replace (d_j^-r d_i^(r-1) w (1-a))."""
    counts = graph.indptr[1:] - graph.indptr[:-1]
    w = graph.edge_weight
    deg = counts.float() if w is None else torch.segment_reduce(w.float(), "sum", lengths=counts, unsafe=True)
    deg = deg + 1 if op.self_loops else deg
    nz = deg > 0
    left, right = torch.zeros_like(deg), torch.zeros_like(deg)
    left[nz], right[nz] = deg[nz].pow(float(op.r) - 1.0), deg[nz].pow(-float(op.r))
    values = right[graph.indices] * torch.repeat_interleave(left, counts)
    if w is not None:
        values = values * w.float()
    if isinstance(op, LazyAdjacency):
        values = values.mul_(1.0 - float(op.alpha))
    return values


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("op", [NormalizedAdjacency(), NormalizedAdjacency(r=0.2), LazyAdjacency(alpha=0.3)])
def test_edge_values_bit_identical_to_the_torch_expression(weighted, op):
    graph = _graph(7, weighted)
    fused = fused_adjacency(graph, op)
    assert torch.equal(torch.from_numpy(fused.values), _reference_values(graph, op))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 37, 3])
def test_prefetch_distance_and_lines_never_change_the_result(dtype, d):
    graph = _graph(11, True)
    fused = fused_adjacency(graph, NormalizedAdjacency())
    x = torch.randn(graph.num_nodes, d, generator=torch.Generator().manual_seed(1)).to(dtype)
    ref = csr_spmm(fused, x, prefetch=0, threads=1)
    for prefetch in (1, 5, 8, 32, 10_000):  # 10_000: past every block's last edge
        assert torch.equal(csr_spmm(fused, x, prefetch=prefetch, threads=2), ref)
    cols = (1, d) if d > 1 else (0, 1)
    out = torch.zeros_like(x)
    csr_spmm(fused, x, out, columns=cols, prefetch=3)
    assert torch.equal(out[:, cols[0]:cols[1]], ref[:, cols[0]:cols[1]])
    if dtype == torch.float32:
        adj = NormalizedAdjacency().adjacency(graph)
        assert torch.equal(ref, torch.sparse.mm(adj, x, reduce="sum"))


def test_prefetch_covers_every_line_of_the_row_segment():
    x = torch.zeros(10, 128)
    assert _prefetch_lines(x, 0, 128) == (8, 16)  # 512 B, line-aligned rows: 8 lines
    assert _prefetch_lines(x.bfloat16(), 0, 128) == (4, 32)
    lines, step = _prefetch_lines(torch.zeros(10, 37), 0, 37)  # 148-B rows start mid-line
    assert lines * step * 4 >= 37 * 4 + 64 - 4 and step == 16
    assert default_prefetch(512) == DEFAULT_PREFETCH and default_prefetch(256) > default_prefetch(512)
    np.testing.assert_array_equal(csr_spmm(fused_adjacency(_graph(1, False), NormalizedAdjacency()),
                                           torch.zeros(500, 0)).numpy(), np.zeros((500, 0), np.float32))
