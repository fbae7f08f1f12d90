"""GraphSAINT normalisation is unbiased; Cluster-GCN batches cover the graph."""
import numpy as np
import pytest
import torch

from sgl.data import Graph
from sgl.errors import ConfigError, GraphError
from sgl.samplers import ClusterGCNSampler, GraphSAINTSampler, SubgraphLoader


def _graph(n=80, m=320, seed=0):
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n, (2, m), generator=g)
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    return Graph.from_edge_index(edge_index, num_nodes=n).symmetrize()


def _mc_aggregate(sampler, x, samples, seed):
    """Average over sampled subgraphs of sum_u w_uv x_u, for the subgraphs that hold v."""
    rng = np.random.default_rng(seed)
    total = np.zeros_like(x)
    count = np.zeros(x.shape[0])
    for _ in range(samples):
        batch = sampler.sample(rng, num_layers=1)
        block = batch.blocks[0]
        src, dst = block.edge_index.numpy()
        nodes = batch.n_id.numpy()
        agg = np.zeros((nodes.size, x.shape[1]))
        np.add.at(agg, dst, block.edge_weight.numpy()[:, None] * x[nodes[src]])
        total[nodes] += agg
        count[nodes] += 1
    return total, count


@pytest.mark.parametrize("kind,budget", [("node", 25), ("edge", 15), ("rw", 8)])
def test_graphsaint_aggregation_is_unbiased(kind, budget):
    graph = _graph()
    x = np.random.default_rng(0).normal(size=(graph.num_nodes, 3)) + 1.0
    full = graph.to_scipy("csr").T.tocsr()  # rows = destinations
    deg = np.asarray(full.sum(1)).ravel()
    target = (full @ x) / np.maximum(deg, 1)[:, None]  # the full-batch mean aggregate
    errors = {}
    for norm_samples in (3000, 0):
        sampler = GraphSAINTSampler(graph, kind, budget=budget, walk_length=2, num_norm_samples=norm_samples, seed=0)
        total, count = _mc_aggregate(sampler, x, 3000, seed=1)
        seen = count >= 100
        estimate = total[seen] / count[seen][:, None]
        errors[norm_samples] = float(np.abs(estimate - target[seen]).mean() / np.abs(target[seen]).mean())
    assert errors[3000] < 0.05
    assert errors[3000] < 0.3 * errors[0]  # without the normalisation the aggregate is biased


def test_graphsaint_loss_normalisation_estimates_the_full_mean():
    graph = _graph()
    losses = np.random.default_rng(2).random(graph.num_nodes)
    sampler = GraphSAINTSampler(graph, "rw", budget=8, walk_length=2, num_norm_samples=3000, seed=0)
    rng = np.random.default_rng(5)
    values = []
    for _ in range(3000):
        batch = sampler.sample(rng, num_layers=1)
        values.append(float((batch.node_norm.numpy() * losses[batch.n_id.numpy()]).sum()))
    assert np.mean(values) == pytest.approx(losses.mean(), rel=0.05)


def test_graphsaint_subgraph_edges_are_the_induced_edges():
    graph = _graph()
    edges = set(zip(graph.indices.tolist(), graph.destinations().tolist()))
    sampler = GraphSAINTSampler(graph, "edge", budget=20, num_norm_samples=10)
    batch = sampler.sample(np.random.default_rng(0), num_layers=2)
    nodes = batch.n_id
    got = {(int(nodes[s]), int(nodes[d])) for s, d in batch.blocks[0].edge_index.T.tolist()}
    member = set(nodes.tolist())
    assert got == {(u, v) for u, v in edges if u in member and v in member}
    assert batch.blocks[0] is batch.blocks[1]


def test_graphsaint_bad_arguments():
    graph = _graph()
    for kwargs in ({"kind": "bogus"}, {"budget": 0}, {"walk_length": 0}, {"num_norm_samples": -1}):
        with pytest.raises(ConfigError):
            GraphSAINTSampler(graph, **kwargs)
    with pytest.raises(GraphError):
        GraphSAINTSampler(Graph(torch.tensor([0, 0]), torch.tensor([], dtype=torch.long)))


def test_cluster_gcn_covers_every_node_once_per_epoch_and_keeps_intra_edges():
    graph = _graph(n=200, m=800)
    sampler = ClusterGCNSampler(graph, num_parts=8, clusters_per_batch=3, seed=0)
    assert sorted(np.concatenate(sampler.clusters).tolist()) == list(range(200))
    parts = sampler.membership
    cut = float((parts[graph.indices.numpy()] != parts[graph.destinations().numpy()]).mean())
    assert cut < 0.75  # random assignment to 8 parts cuts 7/8 = 0.875
    loader = SubgraphLoader(sampler, num_layers=2, seed=0)
    batches = list(loader)
    assert len(batches) == len(loader) == 3
    assert sorted(torch.cat([b.n_id for b in batches]).tolist()) == list(range(200))
    edges = set(zip(graph.indices.tolist(), graph.destinations().tolist()))
    for b in batches:
        member = set(b.n_id.tolist())
        got = {(int(b.n_id[s]), int(b.n_id[d])) for s, d in b.blocks[0].edge_index.T.tolist()}
        assert got == {(u, v) for u, v in edges if u in member and v in member}
    with pytest.raises(ConfigError):
        ClusterGCNSampler(graph, num_parts=0)
    with pytest.raises(ConfigError):
        ClusterGCNSampler(graph, num_parts=1000)
