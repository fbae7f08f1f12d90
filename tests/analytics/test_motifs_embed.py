"""Motif-based embeddings: weighted walks, skip-gram, spectral, features, the config, link prediction."""
import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

import sgl
from sgl.analytics.motifs import (MotifEmbeddingConfig, SkipGram, motif_embedding, motif_features,
                                  spectral_embedding, train_skipgram, weighted_random_walks)
from sgl.data import Graph
from sgl.errors import ConfigError, GraphError
from sgl.tasks.link_prediction import link_metrics, link_scores, split_edges


def _planted_partition(blocks=4, size=30, p_in=0.35, p_out=0.01, seed=0) -> Graph:
    rng = np.random.default_rng(seed)
    n = blocks * size
    label = np.repeat(np.arange(blocks), size)
    prob = np.where(label[:, None] == label[None, :], p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    src, dst = np.nonzero(upper)
    edge_index = torch.from_numpy(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]))
    return Graph.from_edge_index(edge_index, num_nodes=n, y=torch.from_numpy(label))


def _two_cliques(size=6, bridge=0.2):
    block = np.ones((size, size)) - np.eye(size)
    weights = sp.block_diag([block, block], format="lil")
    weights[size - 1, size] = weights[size, size - 1] = bridge
    return weights.tocsr()


def test_walks_follow_the_weights_and_stop_at_sinks():
    star = sp.csr_matrix(np.array([[0, 1.0, 2.0, 7.0], [1.0, 0, 0, 0], [1.0, 0, 0, 0], [1.0, 0, 0, 0]]))
    walks = weighted_random_walks(star, np.zeros(20000, dtype=np.int64), 1, seed=3)
    assert (walks[:, 0] == 0).all()
    frequency = np.bincount(walks[:, 1], minlength=4)[1:] / 20000
    np.testing.assert_allclose(frequency, [0.1, 0.2, 0.7], atol=0.015)
    chain = sp.csr_matrix(np.array([[0, 1.0, 0], [0, 0, 1.0], [0, 0, 0]]))  # 2 is a sink
    assert weighted_random_walks(chain, np.array([0, 2]), 4).tolist() == [[0, 1, 2, -1, -1], [2, -1, -1, -1, -1]]
    again = weighted_random_walks(star, np.arange(4), 10, seed=3)
    assert (again == weighted_random_walks(star, np.arange(4), 10, seed=3)).all()
    with pytest.raises(GraphError, match="non-negative"):
        weighted_random_walks(sp.csr_matrix(np.array([[0, -1.0], [1.0, 0]])), np.array([0]), 2)
    with pytest.raises(GraphError, match=r"start vertices must be in \[0, 4\)"):
        weighted_random_walks(star, np.array([4]), 2)
    with pytest.raises(ConfigError, match="walk_length"):
        weighted_random_walks(star, np.array([0]), 0)


def test_skipgram_separates_two_cliques_and_is_seeded():
    walks = weighted_random_walks(_two_cliques(), np.repeat(np.arange(12), 20), 10, seed=0)
    emb = train_skipgram(walks, 12, dim=8, window=3, epochs=5, batch_size=32, lr=0.05, seed=1)
    cos = F.normalize(emb, dim=1) @ F.normalize(emb, dim=1).T
    same, across = cos[:6, :6][~torch.eye(6, dtype=bool)].mean(), cos[:6, 6:].mean()
    assert same > across + 0.5, (same, across)
    assert torch.equal(emb, train_skipgram(walks, 12, dim=8, window=3, epochs=5, batch_size=32, lr=0.05, seed=1))
    assert repr(SkipGram(12, 8)) == "SkipGram(12, 8)"
    with pytest.raises(GraphError, match="num_nodes=5"):
        train_skipgram(walks, 5)
    with pytest.raises(GraphError, match="walks must be"):
        train_skipgram(np.arange(5), 12)


def test_spectral_embedding_splits_the_cliques():
    emb = spectral_embedding(_two_cliques(), 1)
    assert emb.shape == (12, 1) and emb.dtype == torch.float32
    assert (torch.sign(emb[:6, 0]) == -torch.sign(emb[6:, 0])).all()
    assert torch.equal(emb, spectral_embedding(_two_cliques(), 1))
    with pytest.raises(ConfigError, match="dim=11 needs a graph of more than"):
        spectral_embedding(_two_cliques(), 11)
    with pytest.raises(GraphError, match="symmetric"):
        spectral_embedding(sp.csr_matrix(np.array([[0, 1.0, 0], [0, 0, 1.0], [1.0, 0, 0]])), 1)


def test_spectral_sparse_solver_path():
    graph = _planted_partition(blocks=5, size=130, p_in=0.05, p_out=0.001, seed=2)  # 650 vertices: eigsh
    emb = motif_embedding(graph, MotifEmbeddingConfig(method="spectral", dim=4, mix=0.5))
    assert emb.shape == (650, 4) and torch.isfinite(emb).all()


def test_features_are_standardised_counts_and_centralities():
    karate = sgl.datasets.load("karate")
    x, names = motif_features(karate)
    assert names == ["log1p_edge", "log1p_wedge", "log1p_triangle", "clustering", "log1p_triangle_degree",
                     "log_triangle_pagerank"]
    assert torch.allclose(x.mean(0), torch.zeros(6), atol=1e-5) and torch.allclose(x.std(0, unbiased=False),
                                                                                 torch.ones(6), atol=1e-4)
    xd, named = motif_features(karate, directed=True)
    assert xd.shape == (34, 6 + 15) and named[-1] == "log1p_M13"
    assert torch.equal(motif_embedding(karate, MotifEmbeddingConfig(method="features")), x)


def test_config_rejects_options_the_method_does_not_read():
    with pytest.raises(ConfigError, match="does not use `dim`"):
        MotifEmbeddingConfig(method="features", dim=8)
    with pytest.raises(ConfigError, match="does not use `mix`"):
        MotifEmbeddingConfig(method="deepwalk", mix=0.3)
    with pytest.raises(ConfigError, match="`epochs`, `walk_length`"):
        MotifEmbeddingConfig(method="spectral", walk_length=3, epochs=2)
    with pytest.raises(ConfigError, match="method must be one of"):
        MotifEmbeddingConfig(method="node2vec")
    with pytest.raises(ConfigError, match="motif must be one of"):
        MotifEmbeddingConfig(motif="square")
    with pytest.raises(ConfigError, match="dim must be an integer >= 1"):
        MotifEmbeddingConfig(dim=0)
    with pytest.raises(ConfigError, match="unknown motif embedding option"):
        motif_embedding(sgl.datasets.load("karate"), walks=3)
    config = MotifEmbeddingConfig(method="deepwalk")
    assert config.resolved("mix") == 1.0 and config.resolved("dim") == 64 and config.to_dict() == {
        "method": "deepwalk", "seed": 0}


@pytest.mark.parametrize("method", ["walks", "deepwalk", "spectral"])
def test_link_prediction_auc_on_a_planted_partition(method):
    graph = _planted_partition()
    split = split_edges(graph, val_ratio=0.05, test_ratio=0.15, seed=0)
    options = {"dim": 16}
    if method != "spectral":
        options.update(walk_length=10, walks_per_node=8, window=3, epochs=3, lr=0.05)
    emb = motif_embedding(split.train_graph, MotifEmbeddingConfig(method=method, seed=0, **options))
    auc = link_metrics(link_scores(emb, split.test_pos), link_scores(emb, split.test_neg))["auc"]
    assert auc > 0.8, auc  # ceiling ~0.9: a quarter of the non-edges fall inside a block
    assert torch.equal(emb, motif_embedding(split.train_graph, MotifEmbeddingConfig(method=method, seed=0,
                                                                                     **options)))
