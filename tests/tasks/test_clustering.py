import pytest
import torch

import sgl
from sgl.cli import main
from sgl.data import Graph
from sgl.errors import ConfigError, FeatureError
from sgl.models.ssl_baselines import build_ssl_model
from sgl.tasks.clustering import cluster_metrics, clustering_accuracy, kmeans, run_clustering


def test_hungarian_accuracy_hand_value():
    # clusters 0->class 2, 1->class 0, 2->class 1 except one mistake
    pred = [0, 0, 1, 1, 2, 2, 2]
    target = [2, 2, 0, 0, 1, 1, 0]
    assert clustering_accuracy(pred, target) == pytest.approx(6 / 7)
    # more clusters than classes: unmatched clusters count as wrong
    assert clustering_accuracy([0, 1, 2, 3], [0, 0, 1, 1]) == pytest.approx(0.5)


def test_metrics_perfect_and_permuted():
    m = cluster_metrics(torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1]))
    assert m == {"nmi": pytest.approx(1.0), "ari": pytest.approx(1.0), "acc": 1.0}


def test_kmeans_separates_blobs():
    gen = torch.Generator().manual_seed(0)
    centers = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    y = torch.arange(3).repeat_interleave(20)
    emb = centers[y] + 0.05 * torch.randn(60, 3, generator=gen)
    assert cluster_metrics(kmeans(emb, 3, seed=0), y)["acc"] == 1.0


def test_bad_inputs():
    with pytest.raises(FeatureError):
        clustering_accuracy([0, 1], [0])
    with pytest.raises(FeatureError):
        clustering_accuracy([0.5, 1.0], [0, 1])
    with pytest.raises(ConfigError):
        kmeans(torch.ones(3, 2), 5)
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 2))
    with pytest.raises(FeatureError, match="labels"):
        run_clustering(lambda: build_ssl_model("gae", 2, epochs=1), g)


def test_end_to_end_on_small_graph():
    g = sgl.datasets.csbm(num_nodes=240, num_classes=3, avg_degree=8, num_features=16, homophily=0.95,
                          feature_signal=2.0, seed=0)
    record = run_clustering(lambda: build_ssl_model("gcmae", 16, hidden=32, proj_dim=32, epochs=40, lr=5e-3),
                            g, seeds=[0], n_init=3)
    assert record["nmi"]["mean"] > 0.3  # chance is ~0
    assert set(record["runs"][0]) >= {"nmi", "ari", "acc", "fit_time_s"}


def test_cli_cluster(capsys):
    assert main(["train", "--task", "cluster", "--model", "dgi", "--dataset", "karate", "--seeds", "1",
                 "--epochs", "2", "--hidden", "8", "--no-progress"]) == 0
    assert "clustering nmi:" in capsys.readouterr().out
    assert main(["train", "--task", "cluster", "--model", "dgi", "--dataset", "karate",
                 "--model-option", "nope=1", "--no-progress"]) == 2
    assert "unknown option" in capsys.readouterr().err
