"""The fused numba kernels of the parallel sampling path against a plain-Python reference.

The reference re-implements the counter-based stream, Floyd's draws and the first-occurrence
relabelling in Python; the sampler must match it bit for bit on every thread count, with the
chunked multi-thread runner forced on (``PARALLEL_MIN_EDGES = 0``) and off.
"""
import multiprocessing

import numpy as np
import pytest
import torch

import sgl.samplers.neighbor as neighbor
from sgl.data import Graph
from sgl.errors import GraphError
from sgl.samplers import NeighborSampler, NodeLoader, open_store, write_store
from sgl.samplers import _parallel_sampling as ps
from sgl.samplers.neighbor import sample_neighbors_parallel

MASK = 2**64 - 1
GOLDEN, M1, M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
HOP_STEP = 0x632BE59BD9B4E019


def _mix(z):
    z = ((z ^ (z >> 30)) * M1) & MASK
    z = ((z ^ (z >> 27)) * M2) & MASK
    return z ^ (z >> 31)


def _uniform(key, node, draw):
    z = (_mix((key + node * GOLDEN) & MASK) + draw * GOLDEN) & MASK
    return (_mix(z) >> 11) * (1.0 / 9007199254740992.0)


def _row_offsets(deg, fanout, replace, key, v):
    if deg == 0:
        return []
    if replace:
        return [int(_uniform(key, v, i) * deg) for i in range(fanout)]
    if deg <= fanout:
        return list(range(deg))
    chosen = []
    for i in range(fanout):
        j = deg - fanout + i
        t = int(_uniform(key, v, i) * (j + 1))
        chosen.append(j if t in chosen else t)
    return chosen


def reference_sample(graph, fanouts, seeds, seed, replace=False, prune=None):
    """What ``NeighborSampler(threads=k).sample(seeds, seed=seed, prune=prune)`` must return."""
    indptr, indices = graph.indptr.tolist(), graph.indices.tolist()
    key = int(np.random.default_rng(seed).integers(0, 2**63))
    nodes = [int(s) for s in seeds]
    local = {v: i for i, v in enumerate(nodes)}
    blocks, frontier_size, last = [], len(nodes), None
    pruned, pruned_at = [], 0
    for hop, fanout in enumerate(fanouts):
        hop_key = (key + hop * HOP_STEP) % 2**64
        rows = [r for r in range(frontier_size) if not (hop >= 2 and pruned_at <= r < pruned_at + len(pruned))]
        src, dst = [], []
        for r in rows:
            v = nodes[r]
            start = indptr[v]
            for off in _row_offsets(indptr[v + 1] - start, fanout, replace, hop_key, v):
                src.append(indices[start + off])
                dst.append(r)
        fresh = []
        for s in src:
            if s not in local:
                local[s] = -1
                fresh.append(s)
        if hop == 0 and prune is not None and len(fanouts) > 1 and fresh:
            mask = np.asarray(prune(np.array(fresh)), dtype=bool)
            pruned = [v for v, m in zip(fresh, mask) if m]
            fresh = [v for v, m in zip(fresh, mask) if not m] + pruned
            pruned_at = len(nodes) + len(fresh) - len(pruned)
        for v in fresh:
            local[v] = len(nodes)
            nodes.append(v)
        blocks.append((np.array([[local[s] for s in src], dst], dtype=np.int64).reshape(2, -1), len(nodes), frontier_size))
        if hop == 0:
            last = list(nodes)
        frontier_size = len(nodes) - (len(pruned) if hop == 0 else 0)
    return nodes, blocks[::-1], pruned, last


@pytest.fixture(scope="module")
def hub_graph():
    gen = torch.Generator().manual_seed(0)
    n = 2000
    dst = (torch.rand(30000, generator=gen) ** 3 * n).long()  # hubs far above the fan-outs, empty rows
    src = torch.randint(0, n, (30000,), generator=gen)
    return Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)


def _assert_matches(batch, expected):
    nodes, blocks, pruned, last = expected
    assert batch.n_id.tolist() == nodes
    assert batch.pruned.tolist() == pruned
    assert batch.last_input_nodes.tolist() == last
    assert len(batch.blocks) == len(blocks)
    for block, (edge_index, num_src, num_dst) in zip(batch.blocks, blocks):
        assert block.edge_index.dtype == torch.int64
        assert np.array_equal(block.edge_index.numpy(), edge_index)
        assert block.size == (num_src, num_dst)


@pytest.mark.parametrize("force_chunks", [False, True])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("replace", [False, True])
def test_sampler_matches_python_reference(hub_graph, monkeypatch, force_chunks, threads, replace):
    if force_chunks:
        monkeypatch.setattr(neighbor, "PARALLEL_MIN_EDGES", 0)
    sampler = NeighborSampler(hub_graph, [6, 4], replace=replace, threads=threads)
    seeds = torch.randperm(hub_graph.num_nodes, generator=torch.Generator().manual_seed(3))[:97]
    for seed in (0, 1, 0):  # later batches must not see the earlier batches' map entries
        _assert_matches(sampler.sample(seeds, seed=seed), reference_sample(hub_graph, [6, 4], seeds, seed, replace))


@pytest.mark.parametrize("threads", [1, 2])
def test_pruning_matches_reference_at_three_layers(hub_graph, monkeypatch, threads):
    monkeypatch.setattr(neighbor, "PARALLEL_MIN_EDGES", 0)
    prune = lambda nodes: nodes % 3 == 0  # noqa: E731
    sampler = NeighborSampler(hub_graph, [4, 3, 2], threads=threads)
    seeds = torch.arange(40, 1600, 37)
    batch = sampler.sample(seeds, seed=5, prune=prune)
    assert batch.pruned.numel() > 0
    _assert_matches(batch, reference_sample(hub_graph, [4, 3, 2], seeds, 5, prune=prune))


def test_a_failed_batch_and_the_stamp_wrap_leave_no_stale_entries(hub_graph):
    sampler = NeighborSampler(hub_graph, [4, 3], threads=2)

    def boom(nodes):
        raise RuntimeError("cache lookup failed")

    with pytest.raises(RuntimeError, match="cache lookup"):
        sampler.sample(torch.arange(50), seed=0, prune=boom)
    expected = reference_sample(hub_graph, [4, 3], range(50), 0)
    _assert_matches(sampler.sample(torch.arange(50), seed=0), expected)
    sampler._stamp = 2**31 - 2  # the next batch takes the last stamp, the one after wraps around
    for _ in range(3):
        _assert_matches(sampler.sample(torch.arange(50), seed=0), expected)
    assert sampler._stamp == 2


def test_duplicate_seeds_raise_on_the_parallel_path(hub_graph):
    with pytest.raises(GraphError, match="duplicates"):
        NeighborSampler(hub_graph, [3], threads=2).sample(torch.tensor([4, 9, 4]), seed=0)


def test_large_batch_uses_helpers_and_is_thread_count_independent():
    # big enough that the second hop passes the default PARALLEL_MIN_EDGES threshold
    gen = torch.Generator().manual_seed(1)
    n = 40000
    graph = Graph.from_edge_index(torch.randint(0, n, (2, 400000), generator=gen), num_nodes=n)
    seeds = torch.randperm(n, generator=gen)[:2048]
    batches = [NeighborSampler(graph, [10, 10], threads=t).sample(seeds, seed=9) for t in (1, 2, 4)]
    assert batches[0].blocks[0].num_edges >= neighbor.PARALLEL_MIN_EDGES
    for other in batches[1:]:
        assert torch.equal(other.n_id, batches[0].n_id)
        assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(other.blocks, batches[0].blocks))


def test_draw_rows_gathers_the_sampled_positions(hub_graph):
    indptr, indices = hub_graph.indptr.numpy(), hub_graph.indices.numpy()
    nodes = np.arange(hub_graph.num_nodes, dtype=np.int64)
    for replace in (False, True):
        row, pos = sample_neighbors_parallel(indptr, nodes, 5, key=77, replace=replace, threads=2)
        first = np.empty(nodes.size, dtype=np.int64)
        total = ps.hop_offsets(indptr, nodes, 5, replace, first)
        src, dst = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
        ps.run_rows(ps.draw_rows, (indptr, indices, nodes, first, 5, replace, np.uint64(77), src, dst), nodes.size, 2)
        assert np.array_equal(src, indices[pos]) and np.array_equal(dst, row)
        for v in (0, 1, 500, 1999):  # a hub, small and empty rows
            start, deg = indptr[v], indptr[v + 1] - indptr[v]
            assert (pos[row == v] - start).tolist() == _row_offsets(deg, 5, replace, 77, v)


def test_relabel_is_first_occurrence_and_ignores_older_stamps():
    mapping = np.full(10, -1, dtype=np.int64)
    mapping[[5, 2]] = (1 << 32) | 4  # entries of batch 1: stale for batch 2
    nodes = np.empty(10, dtype=np.int64)
    count = ps.relabel(np.array([7, 3], dtype=np.int64), mapping, 2, nodes, 0)
    src = np.array([5, 3, 5, 9, 7, 2, 9], dtype=np.int64)
    count = ps.relabel(src, mapping, 2, nodes, count)
    assert count == 5 and nodes[:count].tolist() == [7, 3, 5, 9, 2]
    assert src.tolist() == [2, 1, 2, 3, 0, 4, 3]
    assert mapping[9] == (2 << 32) | 3


def test_run_rows_reraises_a_kernel_error():
    calls = []

    def kernel(lo, hi):
        calls.append((lo, hi))
        if lo <= 5 < hi:
            raise ValueError("row 5 is bad")

    with pytest.raises(ValueError, match="row 5"):
        ps.run_rows(kernel, (), 40, 2)
    assert sorted(calls) == [(40 * c // 8, 40 * (c + 1) // 8) for c in range(8)]  # every chunk still ran once


def test_disk_store_gives_the_in_memory_batches(hub_graph, tmp_path, monkeypatch):
    monkeypatch.setattr(neighbor, "PARALLEL_MIN_EDGES", 0)
    graph = Graph.from_edge_index(torch.stack([hub_graph.indices, hub_graph.destinations()]),
                                  num_nodes=hub_graph.num_nodes)
    graph.x = torch.zeros(graph.num_nodes, 2)
    store = open_store(write_store(graph, tmp_path / "hub"))
    seeds = torch.arange(0, 2000, 21)
    disk = NeighborSampler(store.adjacency(), [5, 3], threads=2).sample(seeds, seed=4)
    _assert_matches(disk, reference_sample(graph, [5, 3], seeds, 4))
    assert store.counter.stats("adjacency")["bytes"] > 0


def _sample_in_child(args):
    graph, seeds = args
    return NeighborSampler(graph, [6, 4], threads=2).sample(seeds, seed=2).n_id


def test_forked_workers_sample_after_the_parent_used_helpers(hub_graph, monkeypatch):
    monkeypatch.setattr(neighbor, "PARALLEL_MIN_EDGES", 0)
    seeds = torch.arange(100, 1900, 13)
    parent = NeighborSampler(hub_graph, [6, 4], threads=2).sample(seeds, seed=2).n_id  # starts the helper pool
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = pool.apply_async(_sample_in_child, ((hub_graph, seeds),)).get(timeout=60)
    assert torch.equal(child, parent)
    train = torch.arange(0, 2000, 7)
    loader = lambda workers: NodeLoader(NeighborSampler(hub_graph, [6, 4], threads=2), train,  # noqa: E731
                                        batch_size=64, num_workers=workers, seed=1)
    assert all(torch.equal(a.n_id, b.n_id) for a, b in zip(loader(0), loader(2)))
