import pytest
import torch

import sgl
from sgl.cli import main
from sgl.data import Graph
from sgl.errors import ConfigError, GraphError
from sgl.models.ssl_baselines import build_ssl_model
from sgl.tasks.link_prediction import (
    link_metrics,
    link_scores,
    run_link_prediction,
    sample_negatives,
    split_edges,
)


def undirected_keys(edge_index, n):
    lo = torch.minimum(edge_index[0], edge_index[1])
    hi = torch.maximum(edge_index[0], edge_index[1])
    return set((lo * n + hi).tolist())


def test_split_is_disjoint_and_complete():
    g = sgl.datasets.csbm(num_nodes=200, num_classes=2, avg_degree=8, num_features=8, seed=0)
    n = g.num_nodes
    split = split_edges(g, val_ratio=0.1, test_ratio=0.2, seed=1)
    all_edges = undirected_keys(g.edge_index, n)
    train = undirected_keys(split.train_graph.edge_index, n)
    val, test = undirected_keys(split.val_pos, n), undirected_keys(split.test_pos, n)
    assert train | val | test == all_edges
    assert not (train & val) and not (train & test) and not (val & test)
    assert len(test) == round(0.2 * len(all_edges)) and len(val) == round(0.1 * len(all_edges))
    assert split.train_graph.is_symmetric()
    negs = undirected_keys(torch.cat([split.val_neg, split.test_neg], dim=1), n)
    assert len(negs) == split.val_neg.size(1) + split.test_neg.size(1)  # no duplicates
    assert not (negs & all_edges)
    assert bool((split.test_neg[0] != split.test_neg[1]).all())


def test_negative_sampling_errors_on_dense_graph():
    forbidden = torch.tensor([0 * 3 + 1, 0 * 3 + 2, 1 * 3 + 2])  # triangle: no non-edges
    with pytest.raises(GraphError, match="non-edges"):
        sample_negatives(3, 1, forbidden, torch.Generator().manual_seed(0))


def test_metrics_hand_value():
    out = link_metrics(torch.tensor([0.9, 0.4, 0.8]), torch.tensor([0.5, 0.1]))
    assert out["auc"] == pytest.approx(5 / 6)  # 5 of 6 positive/negative pairs ordered correctly
    # ranking + - + + - ... : 0.9(+) 0.8(+) 0.5(-) 0.4(+) 0.1(-): AP = (1 + 1 + 3/4) / 3
    assert out["ap"] == pytest.approx((1 + 1 + 0.75) / 3)
    emb = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    assert link_scores(emb, torch.tensor([[0, 0], [1, 2]])).tolist() == pytest.approx([1.0, 0.0])


def test_bad_splits():
    g = sgl.datasets.load("karate")
    with pytest.raises(ConfigError):
        split_edges(g, val_ratio=0.5, test_ratio=0.5)
    with pytest.raises(ConfigError):
        split_edges(g, test_ratio=0.0)
    tiny = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 2))
    with pytest.raises(GraphError, match="too few"):
        split_edges(tiny, 0.1, 0.1)


def test_end_to_end_gae_beats_chance():
    g = sgl.datasets.csbm(num_nodes=300, num_classes=3, avg_degree=8, num_features=16, homophily=0.95,
                          feature_signal=2.0, seed=0)
    record = run_link_prediction(lambda: build_ssl_model("gcmae", 16, hidden=32, proj_dim=32, epochs=60, lr=5e-3),
                                 g, seeds=[0], val_ratio=0.05, test_ratio=0.15)
    assert record["test_auc"]["mean"] > 0.7
    assert 0 <= record["test_ap"]["mean"] <= 1


def test_cli_link(capsys):
    code = main(["train", "--task", "link", "--model", "gae", "--dataset", "karate", "--seeds", "1",
                 "--epochs", "3", "--hidden", "8", "--no-progress"])
    assert code == 0
    assert "link test auc:" in capsys.readouterr().out
    code = main(["train", "--task", "link", "--model", "gae", "--dataset", "karate", "--seeds", "1",
                 "--link-test-ratio", "0", "--no-progress"])
    assert code == 2
    assert "test_ratio" in capsys.readouterr().err
