import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.models.gsl import (
    RWGSL,
    KNNGraph,
    KNNGraphConfig,
    NoStructureLearning,
    RWGSLConfig,
    candidate_pairs,
    distinct_layer_samples,
    jaccard_pairs,
    label_propagation,
    pair_scores,
    random_walks,
    structure_learner,
)
from sgl.tasks.structure_learning import learn_structure, rwgsl_pseudo_labels


def undirected(edges, n, **data):
    e = torch.tensor(edges).t()
    return Graph.from_edge_index(torch.cat([e, e.flip(0)], dim=1), num_nodes=n, **data)


def two_cliques():
    """Two 4-cliques joined by one bridge edge 3-4; features and labels follow the cliques."""
    edges = [(i, j) for i in range(4) for j in range(i + 1, 4)] + \
            [(i, j) for i in range(4, 8) for j in range(i + 1, 8)] + [(3, 4)]
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    x = torch.nn.functional.one_hot(y, 2).float() + 0.1
    train = torch.zeros(8, dtype=torch.bool)
    train[[0, 7]] = True
    return undirected(edges, 8, x=x, y=y, train_mask=train, val_mask=train.clone(), test_mask=~train)


def test_pair_scores_match_hand_computation():
    # c=0.81 -> 0.81^0.5 = 0.9; J=0.25 -> 0.25^0.5 = 0.5; l=0.5 -> 0.5^2 = 0.25 ; mean = 1.65/3
    s = pair_scores(torch.tensor([0.81, -0.81]), torch.tensor([0.25, 0.0]), torch.tensor([0.5, 1.0]),
                    (0.5, 0.5, 2.0))
    assert s.tolist() == pytest.approx([(0.9 + 0.5 + 0.25) / 3, (-0.9 + 0.0 + 1.0) / 3])


def test_jaccard_matches_set_definition():
    g = two_cliques()
    nbrs = {v: set(g.indices[g.indptr[v]:g.indptr[v + 1]].tolist()) for v in range(8)}
    u = torch.tensor([0, 3, 3, 4, 0, 5])
    v = torch.tensor([1, 4, 0, 7, 7, 6])
    expected = [len(nbrs[a] & nbrs[b]) / len(nbrs[a] | nbrs[b]) for a, b in zip(u.tolist(), v.tolist())]
    assert jaccard_pairs(g, u, v).tolist() == pytest.approx(expected)
    # small block size: the chunked expansion gives the same answer
    assert jaccard_pairs(g, u, v, block=2).tolist() == pytest.approx(expected)


def test_label_propagation_hand_value():
    g = undirected([(0, 1)], 3)  # node 2 isolated: keeps alpha * Y0 + (1 - alpha) * Y (self-loop only)
    y0 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    out = label_propagation(g, y0, 1, 0.2)
    # A_hat for the edge: [[.5, .5], [.5, .5]]; isolated node: 1
    assert torch.allclose(out, torch.tensor([[0.6, 0.4], [0.4, 0.6], [1.0, 0.0]]), atol=1e-6)


def test_random_walks_follow_edges_and_stop_at_dead_ends():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)  # 0->1->2 in SGL's in-CSR
    walks = random_walks(g, torch.tensor([2, 1, 0]), walk_length=3)
    # row v lists in-neighbours: 2 <- 1 <- 0 ; node 0 has none
    assert walks.tolist() == [[1, 0, -1], [0, -1, -1], [-1, -1, -1]]


def test_candidates_include_neighbours_and_exclude_self():
    g = two_cliques()
    u, v = candidate_pairs(g, torch.arange(8), (3, 3), 4, 2, torch.Generator().manual_seed(0))
    assert bool((u != v).all())
    keys = set(zip(u.tolist(), v.tolist()))
    assert len(keys) == u.numel()  # de-duplicated
    src, dst = g.edge_index
    assert set(zip(dst.tolist(), src.tolist())) <= keys  # every current neighbour is re-examined


def test_rwgsl_deletes_bridge_and_keeps_cliques():
    g = two_cliques()
    learner = RWGSL(RWGSLConfig(rounds=1, low=0.8, high=10.0, exponents=(1.0, 1.0, 1.0), lp_layers=0), seed=0)
    pseudo = torch.nn.functional.one_hot(g.y, 2).float()
    out = learner.learn(g, pseudo_labels=pseudo)
    edges = set(zip(*out.edge_index.tolist()))
    assert (3, 4) not in edges and (4, 3) not in edges
    assert out.num_edges == g.num_edges - 2
    assert learner.history[0]["deleted"] == 1 and learner.history[0]["added"] == 0
    assert out.is_symmetric() and torch.equal(out.x, g.x) and torch.equal(out.y, g.y)


def test_rwgsl_adds_same_class_edges_on_a_path():
    # path 0-1-2-3 (class 0) - 4-5-6-7 (class 1): walks propose 2-hop pairs, same-label ones score high
    g = undirected([(i, i + 1) for i in range(7)], 8, x=torch.ones(8, 2),
                   y=torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]))
    pseudo = torch.nn.functional.one_hot(g.y, 2).float()
    # joint scheme: with equal features the official walk rule (feature cosine 1) would add every walk node
    learner = RWGSL(RWGSLConfig(rounds=2, walk_length=3, num_samples=(4, 4), low=0.0, high=1.05, lp_layers=0,
                                scheme="joint"), seed=0)
    out = learner.learn(g, pseudo_labels=pseudo)
    s, d = out.edge_index
    added = out.num_edges - g.num_edges
    assert added > 0 and sum(h["added"] for h in learner.history) > 0
    new = [(a, b) for a, b in zip(s.tolist(), d.tolist()) if abs(a - b) > 1]
    assert new and all(g.y[a] == g.y[b] for a, b in new)


def test_rwgsl_default_pseudo_labels_and_cora_like_run():
    g = sgl.datasets.csbm(num_nodes=300, num_classes=3, avg_degree=6, homophily=0.7, seed=0)
    learner = RWGSL(RWGSLConfig(rounds=2, pseudo_epochs=30, high=1.2, low=0.5), seed=0)
    probs = rwgsl_pseudo_labels(g, learner.config, learner.seed)
    assert probs.shape == (300, 3)
    train = g.train_mask
    assert torch.equal(probs[train].argmax(1), g.y[train])  # clamped to the true labels
    out = learn_structure(learner, g)
    assert out.num_nodes == 300 and out.is_symmetric() and not out.has_self_loops()
    assert len(learner.history) == 2


def test_distinct_layer_samples_follow_the_authors_sampler():
    g = sgl.datasets.csbm(num_nodes=200, num_classes=3, avg_degree=6, homophily=0.7, seed=1)
    nodes = torch.arange(200)
    nbrs = {v: set(g.indices[g.indptr[v]:g.indptr[v + 1]].tolist()) for v in range(200)}
    u1, v1 = distinct_layer_samples(g, nodes, (3,), torch.Generator().manual_seed(0))
    assert bool((u1 != v1).all()) and len(set(zip(u1.tolist(), v1.tolist()))) == u1.numel()
    counts = torch.bincount(u1, minlength=200)
    for v in range(200):  # layer 1: min(deg, 3) distinct neighbours, without replacement
        assert int(counts[v]) == min(len(nbrs[v]), 3)
    assert all(b in nbrs[a] for a, b in zip(u1.tolist(), v1.tolist()))
    u, v = distinct_layer_samples(g, nodes, (3, 4), torch.Generator().manual_seed(0))
    two_hop = {a: nbrs[a] | set().union(*(nbrs[b] for b in nbrs[a])) for a in range(200)}
    assert all(b in two_hop[a] for a, b in zip(u.tolist(), v.tolist()))
    assert int(torch.bincount(u, minlength=200).max()) <= 3 + 4
    assert bool((u[1:] * 200 + v[1:] > u[:-1] * 200 + v[:-1]).all())  # sorted, distinct


def test_official_scheme_adds_walk_nodes_by_feature_cosine():
    # path 0-1-2: nodes 0 and 2 share features and neighbours but have different pseudo-labels; 0's walk
    # reaches 2 with score 2/3 < high * mean = 2.5 * 1/3, yet its feature cosine 1 passes the bar
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    g = undirected([(0, 1), (1, 2)], 3, x=x)
    pseudo = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    kw = dict(rounds=1, walk_length=2, num_samples=(1,), low=0.0, high=2.5, lp_layers=0, exponents=(1.0, 1.0, 1.0))
    official = RWGSL(RWGSLConfig(scheme="official", **kw), seed=0).learn(g, pseudo_labels=pseudo)
    joint = RWGSL(RWGSLConfig(scheme="joint", **kw), seed=0).learn(g, pseudo_labels=pseudo)
    assert set(zip(*official.edge_index.tolist())) == {(0, 1), (1, 0), (1, 2), (2, 1), (0, 2), (2, 0)}
    assert torch.equal(joint.edge_index, g.edge_index)


def test_official_scheme_on_a_community_graph():
    g = sgl.datasets.csbm(num_nodes=300, num_classes=3, avg_degree=6, homophily=0.7, seed=0)
    pseudo = torch.nn.functional.one_hot(g.y, 3).float()
    cfg = RWGSLConfig(rounds=2, walk_length=6, high=1.1, low=0.5, scheme="official", lp_layers=1)
    learner = RWGSL(cfg, seed=0)
    out = learner.learn(g, pseudo_labels=pseudo)
    assert out.is_symmetric() and not out.has_self_loops() and len(learner.history) == 2
    assert learner.history[0]["added"] > 0 and learner.history[0]["deleted"] > 0
    s, d = out.edge_index
    before = float((g.y[g.edge_index[0]] == g.y[g.edge_index[1]]).float().mean())
    assert float((g.y[s] == g.y[d]).float().mean()) > before  # true labels as pseudo-labels: edits help
    again = RWGSL(cfg, seed=0).learn(g, pseudo_labels=pseudo)
    assert torch.equal(out.edge_index, again.edge_index)


def test_hard_pseudo_labels_use_the_arg_max():
    g = sgl.datasets.csbm(num_nodes=120, num_classes=3, avg_degree=5, homophily=0.7, seed=2)
    probs = torch.softmax(torch.randn(120, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    cfg = RWGSLConfig(rounds=1, high=1.1, low=0.5, hard_pseudo_labels=True)
    a = RWGSL(cfg, seed=0).learn(g, pseudo_labels=probs)
    b = RWGSL(cfg, seed=0).learn(g, pseudo_labels=torch.nn.functional.one_hot(probs.argmax(1), 3).float())
    soft = RWGSL(RWGSLConfig(rounds=1, high=1.1, low=0.5, hard_pseudo_labels=False), seed=0).learn(g, pseudo_labels=probs)
    assert torch.equal(a.edge_index, b.edge_index) and not torch.equal(a.edge_index, soft.edge_index)


def test_rwgsl_is_seeded():
    g = two_cliques()
    a = learn_structure(RWGSL(RWGSLConfig(rounds=1, high=1.0), seed=3), g)
    b = learn_structure(RWGSL(RWGSLConfig(rounds=1, high=1.0), seed=3), g)
    assert torch.equal(a.edge_index, b.edge_index)


def test_bad_thresholds_and_options():
    with pytest.raises(ConfigError, match="low <= high"):
        RWGSLConfig(low=0.9, high=0.5)
    with pytest.raises(ConfigError, match="exponents"):
        RWGSLConfig(exponents=(1.0, 1.0))
    with pytest.raises(ConfigError, match="rounds"):
        RWGSLConfig(rounds=0)
    with pytest.raises(ConfigError, match="scheme"):
        RWGSLConfig(scheme="authors")
    with pytest.raises(ConfigError, match="hard_pseudo_labels"):
        RWGSLConfig(hard_pseudo_labels=1)
    with pytest.raises(ConfigError, match="unknown option"):
        structure_learner("rwgsl", nope=1)
    with pytest.raises(ConfigError, match="unknown structure learner"):
        structure_learner("magic")


def test_graph_without_features():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(FeatureError, match="no x"):
        learn_structure(RWGSL(), g)
    with pytest.raises(FeatureError, match="no x"):
        KNNGraph().learn(g)


def test_empty_candidate_set():
    g = Graph(torch.zeros(4, dtype=torch.long), torch.zeros(0, dtype=torch.long), x=torch.eye(3))
    with pytest.raises(GraphError, match="no candidate pairs"):
        RWGSL(RWGSLConfig(rounds=1)).learn(g, pseudo_labels=torch.eye(3))


def test_bad_pseudo_labels():
    g = two_cliques()
    with pytest.raises(FeatureError, match="pseudo_labels must have shape"):
        RWGSL().learn(g, pseudo_labels=torch.ones(3, 2))
    g.y = None
    with pytest.raises(FeatureError, match="integer node labels"):
        learn_structure(RWGSL(), g)


def test_knn_graph_and_none_baseline():
    g = two_cliques()
    knn = KNNGraph(KNNGraphConfig(k=2)).learn(g)
    assert knn.is_symmetric()
    s, d = knn.edge_index
    assert bool((g.y[s] == g.y[d]).all())  # features separate the cliques exactly
    union = structure_learner("knn", k=2, combine="union").learn(g)
    assert union.num_edges >= g.num_edges
    assert NoStructureLearning().learn(g).num_edges == g.num_edges


def test_knn_graph_inverted_file_path():
    g = sgl.datasets.csbm(num_nodes=400, num_classes=2, avg_degree=4, num_features=8, feature_signal=3.0,
                          feature_noise=0.3, seed=0)
    out = KNNGraph(KNNGraphConfig(k=5, exact_max_nodes=100, nprobe=16)).learn(g)
    assert out.is_symmetric() and not out.has_self_loops()
    s, d = out.edge_index
    assert float((g.y[s] == g.y[d]).float().mean()) > 0.95
    assert out.num_edges >= 400 * 5 * 0.9  # IVF may miss a few true neighbours, never most


def test_learn_structure_trains_the_base_model_the_learner_needs():
    g = two_cliques()
    with pytest.raises(FeatureError, match="learn_structure"):  # the model never trains its pseudo-label model
        RWGSL(RWGSLConfig(rounds=1, high=1.0), seed=3).learn(g)
    probs = rwgsl_pseudo_labels(g, RWGSLConfig(rounds=1, high=1.0), seed=3)
    a = RWGSL(RWGSLConfig(rounds=1, high=1.0), seed=3).learn(g, pseudo_labels=probs)
    b = learn_structure(RWGSL(RWGSLConfig(rounds=1, high=1.0), seed=3), g)
    assert torch.equal(a.edge_index, b.edge_index)
    assert torch.equal(learn_structure(NoStructureLearning(), g).edge_index, NoStructureLearning().learn(g).edge_index)


def test_old_module_path_still_imports():
    import sgl.models.gsl as gsl
    import sgl.models.rwgsl as old

    for name in old.__all__:
        assert getattr(old, name) is getattr(gsl, name)
