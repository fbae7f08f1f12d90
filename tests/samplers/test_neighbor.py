"""NeighborSampler and NodeLoader: true neighbours, fan-outs, duplicates, determinism, shapes."""
import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.errors import ConfigError, GraphError
from sgl.samplers import CSRAdjacency, NeighborSampler, NodeLoader, check_fanouts, sample_neighbors


def _random_graph(n=300, m=4000, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (m,), generator=g)
    # a few hubs so that some rows have degree far above the fan-out
    dst = torch.where(torch.rand(m, generator=g) < 0.3, torch.randint(0, 5, (m,), generator=g),
                      torch.randint(0, n, (m,), generator=g))
    return Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n).deduplicate()


def _edge_set(graph):
    return set(zip(graph.indices.tolist(), graph.destinations().tolist()))


@pytest.mark.parametrize("replace", [False, True])
def test_every_sampled_edge_is_a_true_edge_and_fanouts_hold(replace):
    graph = _random_graph()
    edges = _edge_set(graph)
    sampler = NeighborSampler(graph, [7, 3], replace=replace)
    seeds = torch.tensor([0, 1, 2, 50, 120, 299])
    batch = sampler.sample(seeds, seed=3)
    n_id = batch.n_id
    assert batch.output_nodes.tolist() == seeds.tolist()
    deg = graph.degree()
    for block, fanout in zip(batch.blocks, [3, 7]):  # blocks: input side first
        src_local, dst_local = block.edge_index
        assert int(src_local.max()) < block.num_src and int(dst_local.max()) < block.num_dst
        src, dst = n_id[src_local], n_id[dst_local]
        assert all((u, v) in edges for u, v in zip(src.tolist(), dst.tolist()))
        counts = torch.bincount(dst_local, minlength=block.num_dst)
        if replace:
            assert bool(((counts == fanout) | (deg[n_id[:block.num_dst]] == 0)).all())
        else:
            expected = torch.clamp(deg[n_id[:block.num_dst]], max=fanout)
            assert torch.equal(counts, expected)
            pairs = src_local * block.num_src + dst_local
            assert torch.unique(pairs).numel() == pairs.numel()  # no duplicate neighbour per row


def test_blocks_chain_and_destinations_are_prefixes():
    graph = _random_graph()
    batch = NeighborSampler(graph, [5, 4, 3]).sample(torch.arange(10), seed=0)
    assert len(batch.blocks) == 3
    assert batch.blocks[0].num_src == batch.n_id.numel()
    for outer, inner in zip(batch.blocks[:-1], batch.blocks[1:]):
        assert outer.num_dst == inner.num_src
    assert batch.blocks[-1].num_dst == 10
    assert torch.equal(batch.n_id[:10], torch.arange(10))
    assert torch.unique(batch.n_id).numel() == batch.n_id.numel()



def test_pruned_node_subtree_is_dropped_at_every_depth():
    # path 0-1-2-3-4, three layers, seed 0: pruning node 1 must drop 2 (its neighbour) *and* 3
    path = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]])
    graph = Graph.from_edge_index(path, num_nodes=5)
    sampler = NeighborSampler(graph, [5, 5, 5])
    full = sampler.sample(torch.tensor([0]), seed=0)
    assert sorted(full.n_id.tolist()) == [0, 1, 2, 3]
    batch = sampler.sample(torch.tensor([0]), seed=0, prune=lambda nodes: nodes == 1)
    assert batch.pruned.tolist() == [1]
    assert sorted(batch.n_id.tolist()) == [0, 1]
    for block in batch.blocks:  # node 1 is no block's expanded destination
        assert 1 not in batch.n_id[block.edge_index[1]].tolist()


@pytest.mark.parametrize("fanouts", [[4, 3], [4, 3, 3], [3, 3, 2, 2]])
def test_pruning_drops_whole_subtrees_on_a_random_graph(fanouts):
    graph = _random_graph(n=400, m=3000, seed=1)
    edges = _edge_set(graph)
    sampler = NeighborSampler(graph, fanouts)
    seeds = torch.arange(20, 40)
    full = sampler.sample(seeds, seed=5)
    hop1 = full.last_input_nodes[seeds.numel():].numpy()
    marked = set(hop1[::2].tolist())  # every other first-hop node has a fresh cached embedding
    batch = sampler.sample(seeds, seed=5, prune=lambda nodes: np.isin(nodes, list(marked)))
    pruned = set(batch.pruned.tolist())
    assert pruned and pruned <= marked
    n = batch.n_id.numel()
    # pruned nodes are the last sources of the output block, after the inner block's destinations
    assert batch.n_id[batch.blocks[-1].num_src - len(pruned):batch.blocks[-1].num_src].tolist() == \
        batch.pruned.tolist()
    assert batch.blocks[-2].num_dst + len(pruned) == batch.blocks[-1].num_src
    reached = set(seeds.tolist())
    for block in reversed(batch.blocks):  # output side first: every node is reached through an unpruned one
        src, dst = batch.n_id[block.edge_index[0]], batch.n_id[block.edge_index[1]]
        assert all((u, v) in edges for u, v in zip(src.tolist(), dst.tolist()))
        assert not pruned & set(dst.tolist())  # a pruned node is expanded at no hop
        assert set(dst.tolist()) <= reached
        reached |= set(src.tolist())
    assert reached == set(batch.n_id.tolist()) and len(reached) == n
    assert n < full.n_id.numel()


def test_deterministic_under_a_seed_and_varies_across_seeds():
    graph = _random_graph()
    sampler = NeighborSampler(graph, [4, 4])
    a, b = sampler.sample(torch.arange(20), seed=7), sampler.sample(torch.arange(20), seed=7)
    c = sampler.sample(torch.arange(20), seed=8)
    assert torch.equal(a.n_id, b.n_id)
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(a.blocks, b.blocks))
    assert not torch.equal(a.n_id, c.n_id)


def test_subset_is_uniform():
    # one node with 6 neighbours, fan-out 2: every pair should appear ~1/15 of the time
    graph = Graph.from_edge_index(torch.tensor([[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]]), num_nodes=7)
    indptr = graph.indptr.numpy()
    rng = np.random.default_rng(0)
    counts = np.zeros(7)
    trials = 6000
    for _ in range(trials):
        _, pos = sample_neighbors(indptr, np.array([0]), 2, rng)
        counts[graph.indices.numpy()[pos]] += 1
    freq = counts[1:] / trials
    assert np.allclose(freq, 2 / 6, atol=0.03)


def test_sampled_blocks_feed_sage_and_gcn_convs():
    from torch_geometric.nn import GCNConv, SAGEConv

    graph = _random_graph()
    batch = NeighborSampler(graph, [5, 5]).sample(torch.arange(8), seed=0)
    x = torch.randn(batch.n_id.numel(), 4)
    sage1, sage2 = SAGEConv(4, 6), SAGEConv(6, 3)
    h = sage1((x, x[:batch.blocks[0].num_dst]), batch.blocks[0].edge_index, size=batch.blocks[0].size)
    out = sage2((h, h[:batch.blocks[1].num_dst]), batch.blocks[1].edge_index, size=batch.blocks[1].size)
    assert out.shape == (8, 3)
    gcn = GCNConv(4, 6)
    assert gcn(x, batch.blocks[0].edge_index)[:batch.blocks[0].num_dst].shape == (batch.blocks[0].num_dst, 6)


def test_full_fanout_matches_full_neighbourhood_aggregate():
    # with fan-outs >= max degree the sampled SAGE mean equals the full-graph mean
    from torch_geometric.nn import SAGEConv

    graph = _random_graph()
    x = torch.randn(graph.num_nodes, 4)
    conv = SAGEConv(4, 3)
    full = conv(x, graph.edge_index)
    batch = NeighborSampler(graph, [10_000]).sample(torch.arange(30), seed=0)
    block = batch.blocks[0]
    xs = x[batch.n_id]
    out = conv((xs, xs[:block.num_dst]), block.edge_index, size=block.size)
    assert torch.allclose(out, full[:30], atol=1e-5)


@pytest.mark.parametrize("bad", [[0], [15, -1], [], "15,x", [1.5], None])
def test_bad_fanouts_raise_config_error(bad):
    with pytest.raises(ConfigError):
        check_fanouts(bad)
    with pytest.raises(ConfigError):
        NeighborSampler(_random_graph(), bad)


def test_bad_seeds_raise_graph_error():
    sampler = NeighborSampler(_random_graph(), [3])
    for seeds in (torch.tensor([300]), torch.tensor([-1]), torch.tensor([1, 1]), torch.tensor([], dtype=torch.long),
                  torch.tensor([0.5])):
        with pytest.raises(GraphError):
            sampler.sample(seeds, seed=0)


def test_loader_batches_cover_every_seed_once_and_are_worker_independent():
    graph = _random_graph()
    graph.x = torch.randn(graph.num_nodes, 3)
    train = torch.arange(0, 300, 3)
    make = lambda workers: NodeLoader(NeighborSampler(graph, [4, 2]), train, batch_size=16, shuffle=True,  # noqa: E731
                                      x=graph.x, num_workers=workers, seed=5)
    loader = make(0)
    batches = list(loader)
    assert len(batches) == len(loader) == 7
    seen = torch.cat([b.output_nodes for b in batches])
    assert sorted(seen.tolist()) == train.tolist()
    assert not torch.equal(seen, train)  # shuffled
    assert all(torch.equal(b.x, graph.x[b.n_id]) for b in batches)
    second = list(loader)  # the next epoch reshuffles
    assert not torch.equal(torch.cat([b.output_nodes for b in second]), seen)
    with_workers = list(make(2))
    assert all(torch.equal(a.n_id, b.n_id) for a, b in zip(batches, with_workers))


def test_loader_rejects_bad_arguments():
    sampler = NeighborSampler(_random_graph(), [3])
    with pytest.raises(ConfigError):
        NodeLoader(sampler, torch.arange(5), batch_size=0)
    with pytest.raises(GraphError):
        NodeLoader(sampler, torch.zeros(300, dtype=torch.bool))


def test_csr_adjacency_rejects_float_indices():
    with pytest.raises(GraphError):
        CSRAdjacency(np.array([0, 1]), np.array([0.5]))
