"""Streaming FENNEL: locality, balance caps, two levels, cross-partition degree."""
import numpy as np
import torch

from sgl.data import Graph
from sgl.samplers.partition import cross_partition_degree, fennel_partition, fennel_two_level


def _communities(n=2000, size=100, intra=0.9, deg=8, seed=0):
    rng = np.random.default_rng(seed)
    src = np.repeat(np.arange(n), deg // 2)
    same = rng.random(src.size) < intra
    dst = np.where(same, (src // size) * size + rng.integers(0, size, src.size), rng.integers(0, n, src.size))
    perm = rng.permutation(n)  # hide the structure from the id order
    g = Graph.from_edge_index(torch.from_numpy(np.stack([perm[src], perm[dst]])), num_nodes=n).symmetrize()
    return g, perm


def _cut(g, parts):
    return float((parts[g.indices.numpy()] != parts[g.destinations().numpy()]).mean())


def test_fennel_cuts_far_fewer_edges_than_random_and_respects_caps():
    g, _ = _communities()
    k = 20
    train = np.zeros(g.num_nodes, dtype=bool)
    train[::10] = True
    parts = fennel_partition(g.indptr.numpy(), g.indices.numpy(), k, train)
    random_parts = np.random.default_rng(0).integers(0, k, g.num_nodes)
    assert _cut(g, parts) < 0.6 * _cut(g, random_parts)
    sizes = np.bincount(parts, minlength=k)
    assert sizes.max() <= np.ceil(1.1 * g.num_nodes / k)
    train_sizes = np.bincount(parts[train], minlength=k)
    assert train_sizes.max() <= np.ceil(1.1 * train.sum() / k)


def test_two_level_and_cross_partition_degree():
    g, _ = _communities(n=1200)
    parts = fennel_two_level(g.indptr.numpy(), g.indices.numpy(), 3, 4)
    assert parts.min() >= 0 and parts.max() < 12 and np.unique(parts).size == 12
    cross = cross_partition_degree(g.indptr.numpy(), g.indices.numpy(), parts)
    dst, src = g.destinations().numpy(), g.indices.numpy()
    for v in range(0, g.num_nodes, 97):
        nbrs = src[dst == v]
        assert cross[v] == int((parts[nbrs] != parts[v]).sum())
