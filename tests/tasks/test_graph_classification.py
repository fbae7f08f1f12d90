import pytest
import torch

from sgl.cli import main
from sgl.data import Graph
from sgl.datasets import GraphDataset, load_tu
from sgl.errors import ConfigError, DatasetError, FeatureError
from sgl.models.ssl_baselines import build_ssl_model
from sgl.tasks.graph_classification import (
    batch_graphs,
    evaluate_graph_embeddings,
    pool,
    run_graph_classification,
)


def ring(n, feature):
    src = torch.arange(n)
    dst = (src + 1) % n
    ei = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], dim=1)
    return Graph.from_edge_index(ei, num_nodes=n, x=torch.full((n, 2), 0.0).index_fill_(1, torch.tensor([feature]), 1.0))


def toy_dataset(count=20):
    graphs, labels = [], []
    for i in range(count):
        label = i % 2
        graphs.append(ring(4 + i % 3, label))
        labels.append(label)
    return GraphDataset(graphs, torch.tensor(labels))


def test_batch_and_pool():
    ds = toy_dataset(4)
    union, graph_id = batch_graphs(ds)
    assert union.num_nodes == sum(g.num_nodes for g in ds)
    assert union.num_edges == sum(g.num_edges for g in ds)
    src, dst = union.edge_index
    assert bool((graph_id[src] == graph_id[dst]).all())  # no edge leaves its graph
    emb = torch.tensor([[1.0], [2.0], [6.0], [-1.0]])
    gid = torch.tensor([0, 0, 0, 1])
    assert pool(emb, gid, 2, "sum").tolist() == [[9.0], [-1.0]]
    assert pool(emb, gid, 2, "max").tolist() == [[6.0], [-1.0]]
    assert pool(emb, gid, 2, "mean").tolist() == [[3.0], [-1.0]]
    with pytest.raises(ConfigError):
        pool(emb, gid, 2, "median")


def test_featureless_graphs_rejected():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
    with pytest.raises(FeatureError, match="no node features"):
        batch_graphs(GraphDataset([g, g], torch.tensor([0, 1])))


def test_fold_evaluation_on_separable_embeddings():
    labels = torch.arange(2).repeat(15)
    feats = torch.nn.functional.one_hot(labels, 2).float() + 0.01 * torch.randn(30, 2)
    out = evaluate_graph_embeddings(feats, labels, folds=5, seed=0)
    assert out["acc"] == 1.0 and len(out["folds"]) == 5
    assert evaluate_graph_embeddings(feats, labels, folds=5, classifier="logreg")["acc"] == 1.0
    with pytest.raises(ConfigError, match="graphs per class"):
        evaluate_graph_embeddings(feats[:6], labels[:6], folds=5)


def test_end_to_end_toy_collection():
    record = run_graph_classification(lambda: build_ssl_model("graphmae", 2, hidden=8, epochs=5), toy_dataset(),
                                      seeds=[0], folds=5)
    # class is written in the node features, so even a barely trained encoder separates it
    assert record["acc"]["mean"] >= 0.9
    assert 0 <= record["fold_std"] <= 0.5


def write_tu(folder, indicator, edges, labels, node_labels=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "T_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (folder / "T_A.txt").write_text("".join(f"{a}, {b}\n" for a, b in edges))
    (folder / "T_graph_labels.txt").write_text("".join(f"{c}\n" for c in labels))
    if node_labels is not None:
        (folder / "T_node_labels.txt").write_text("".join(f"{c}\n" for c in node_labels))


def test_tu_indicator_and_adjacency_disagree(tmp_path):
    # the adjacency names node 5 but the indicator only lists 4 nodes
    write_tu(tmp_path / "a", [1, 1, 2, 2], [(1, 2), (2, 1), (3, 5)], [0, 1])
    with pytest.raises(DatasetError, match="node ids must be in 1..4"):
        load_tu("T", root=tmp_path / "a", download=False)
    # an edge joins graph 1 and graph 2
    write_tu(tmp_path / "b", [1, 1, 2, 2], [(1, 2), (2, 3)], [0, 1])
    with pytest.raises(DatasetError, match="two different graphs"):
        load_tu("T", root=tmp_path / "b", download=False)
    # the indicator lists 3 graphs but there are 2 graph labels
    write_tu(tmp_path / "c", [1, 2, 3], [(1, 1)], [0, 1])
    with pytest.raises(DatasetError, match="2 lines but there are 3 graphs"):
        load_tu("T", root=tmp_path / "c", download=False)


def test_mutag_end_to_end(data_path):
    ds = load_tu("MUTAG", root=data_path("tu"), download=False)
    record = run_graph_classification(lambda: build_ssl_model("gcmae", ds.num_features, hidden=16, proj_dim=16,
                                                              epochs=5), ds, seeds=[0], folds=3,
                                      classifier="logreg")
    assert 0.5 <= record["acc"]["mean"] <= 1.0  # MUTAG's majority class is 66.5%


def test_cli_graph_rejects_single_graph(capsys):
    assert main(["train", "--task", "graph", "--dataset", "karate", "--no-progress"]) == 2
    assert "single graph" in capsys.readouterr().err
