"""The parallel (numba) neighbour-sampling path: thread-count-independent seeded output, uniformity, errors."""
import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.errors import ConfigError
from sgl.samplers import NeighborSampler
from sgl.samplers.neighbor import sample_neighbors_parallel


@pytest.fixture(scope="module")
def hub_graph():
    gen = torch.Generator().manual_seed(0)
    n = 3000
    # power-law-ish in-degrees: a few hubs far above the fan-outs, many small and empty rows
    dst = (torch.rand(40000, generator=gen) ** 3 * n).long()
    src = torch.randint(0, n, (40000,), generator=gen)
    return Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)


def _batch_arrays(batch):
    return [batch.n_id] + [b.edge_index for b in batch.blocks]


@pytest.mark.parametrize("replace", [False, True])
def test_one_and_two_threads_give_the_same_batches(hub_graph, replace):
    one = NeighborSampler(hub_graph, [10, 5], replace=replace, threads=1)
    two = NeighborSampler(hub_graph, [10, 5], replace=replace, threads=2)
    seeds = torch.randperm(hub_graph.num_nodes, generator=torch.Generator().manual_seed(1))[:256]
    for seed in range(3):
        a, b = one.sample(seeds, seed=seed), two.sample(seeds, seed=seed)
        for x, y in zip(_batch_arrays(a), _batch_arrays(b)):
            assert torch.equal(x, y)
    assert not torch.equal(one.sample(seeds, seed=0).n_id, one.sample(seeds, seed=1).n_id)


def test_parallel_rows_are_valid_subsets(hub_graph):
    indptr = hub_graph.indptr.numpy()
    nodes = np.arange(hub_graph.num_nodes, dtype=np.int64)
    row, pos = sample_neighbors_parallel(indptr, nodes, 7, key=123, threads=2)
    deg = indptr[1:] - indptr[:-1]
    assert np.array_equal(np.bincount(row, minlength=nodes.size), np.minimum(deg, 7))
    assert bool(((pos >= indptr[nodes[row]]) & (pos < indptr[nodes[row] + 1])).all())
    pairs = row * (indptr[-1] + 1) + pos
    assert np.unique(pairs).size == pairs.size  # no edge drawn twice in a row
    small = np.flatnonzero((deg > 0) & (deg <= 7))
    kept = pos[np.isin(row, small)]
    assert np.array_equal(np.sort(kept), np.concatenate([np.arange(indptr[v], indptr[v + 1]) for v in small]))


def test_parallel_draws_are_uniform():
    # one row of degree 20, fan-out 5: every edge is kept with probability 1/4
    graph = Graph.from_edge_index(torch.stack([torch.arange(1, 21), torch.zeros(20, dtype=torch.long)]))
    counts = np.zeros(20)
    indptr = graph.indptr.numpy()
    for key in range(4000):
        _, pos = sample_neighbors_parallel(indptr, np.array([0]), 5, key=key, threads=1)
        counts[pos - indptr[0]] += 1
    assert counts.sum() == 20000
    assert np.abs(counts - 1000).max() < 150  # binomial sd ~27: 5.5 sd


def test_parallel_path_keeps_the_batch_layout(hub_graph):
    sampler = NeighborSampler(hub_graph, [4, 3], threads=2)
    batch = sampler.sample(torch.tensor([5, 17, 2999]), seed=0)
    assert batch.output_nodes.tolist() == [5, 17, 2999]
    assert batch.n_id[:3].tolist() == [5, 17, 2999]  # destinations first
    assert int(batch.blocks[-1].edge_index[1].max()) < 3
    assert "threads=2" in repr(sampler)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_thread_counts_raise(hub_graph, bad):
    with pytest.raises(ConfigError, match="threads"):
        NeighborSampler(hub_graph, [2], threads=bad)
