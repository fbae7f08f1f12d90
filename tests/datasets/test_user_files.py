"""A user's own graph: `load("file:PATH")` and `sgl train --dataset file:PATH` (issue 26 item 13)."""
import gzip
import re
import warnings

import numpy as np
import pytest
import torch

import sgl
from sgl.cli.main import main
from sgl.data import Graph
from sgl.datasets import load, load_file
from sgl.errors import ConfigError, DatasetError


def write(path, text):
    path.write_text(text)
    return path


@pytest.fixture
def files(tmp_path):
    write(tmp_path / "edges.csv", "src,dst,weight\n0,1,1.0\n1,2,0.5\n2,3,2.0\n3,0,1.0\n")
    write(tmp_path / "feats.csv", "id,a,b\n3,1,1\n0,0,1\n1,1,0\n2,0,0\n")
    write(tmp_path / "labels.txt", "node label\n0 0\n1 0\n2 1\n3 1\n")
    return tmp_path


def test_edge_list_with_header_weights_features_and_labels(files):
    g = load("file:edges.csv", root=files, features="feats.csv", labels="labels.txt")
    assert (g.num_nodes, g.num_edges, g.name) == (4, 8, "edges") and g.is_symmetric()
    assert g.x.tolist() == [[0, 1], [1, 0], [0, 0], [1, 1]]  # rows placed by the id column
    assert g.y.tolist() == [0, 0, 1, 1]
    pairs = dict(zip(zip(g.indices.tolist(), g.destinations().tolist()), g.edge_weight.tolist()))
    assert pairs[(1, 2)] == pairs[(2, 1)] == 0.5 and pairs[(2, 3)] == 2.0
    assert sum(g.split_sizes()) == 4  # a seeded random split, since the files carry none


def test_tsv_whitespace_comments_gz_and_directed(tmp_path):
    write(tmp_path / "a.tsv", "# made by hand\n0\t1\n\n1\t2\n")
    write(tmp_path / "b.txt", "% KONECT-style header\n% 2 3\n0 1\n   1   2  \n")
    with gzip.open(tmp_path / "c.txt.gz", "wt") as handle:
        handle.write("0 1\n1 2\n")
    for name in ("a.tsv", "b.txt", "c.txt.gz"):
        g = load_file(tmp_path / name)
        assert (g.num_nodes, g.num_edges, g.edge_weight, g.x) == (3, 4, None, None), name
    g = load_file(tmp_path / "a.tsv", undirected=False, num_nodes=5)
    assert (g.num_nodes, g.num_edges) == (5, 2) and not g.is_symmetric()
    assert load_file(tmp_path / "a.tsv", features="onehot").x.tolist() == np.eye(3).tolist()


@pytest.mark.parametrize("text, line, message", [
    ("0,1\n1,2\n2,x\n", 3, "column 2 is 'x'; node ids must be non-negative integers"),
    ("0,1\n1,-2\n", 2, "column 2 is '-2'"),
    ("0,1\n1,2,3\n", 2, "3 fields where the edge list has 2"),
    ("0,1,0.5\n1,2\n", 2, "2 fields where the edge list has 3"),
    ("0\t1\t1\n1\t2\tnan\n", 2, "column 3 is 'nan' .NaN or infinite."),
    ("src,dst\n0,1\n1.5,2\n", 3, "column 1 is '1.5'"),
])
def test_malformed_rows_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(DatasetError, match=message) as err:
        load(f"file:{path}")
    assert f"bad.csv line {line}:" in str(err.value)


def test_nan_in_a_feature_file_names_file_and_row(files):
    write(files / "nan.csv", "1,2\n3,4\nnan,1\n4,4\n")
    with pytest.raises(DatasetError, match=r"nan.csv line 3: column 1 is 'nan'"):
        load_file("edges.csv", root=files, features="nan.csv")
    np.save(files / "x.npy", np.array([[1.0, 2], [np.nan, 1], [0, 0], [1, 1]]))
    with pytest.raises(DatasetError, match=r"x.npy: features row 1 \(node 1\) holds NaN"):
        load_file("edges.csv", root=files, features="x.npy")


def test_node_data_mismatches(files):
    write(files / "short.csv", "1,2\n3,4\n")
    with pytest.raises(DatasetError, match="node id 3 has no row in the feature file"):
        load_file("edges.csv", root=files, features="short.csv")
    write(files / "gap.csv", "node,a\n0,1\n1,1\n3,1\n")
    with pytest.raises(DatasetError, match="node 2 has no feature row"):
        load_file("edges.csv", root=files, features="gap.csv")
    write(files / "dup.txt", "0 1\n0 2\n")
    with pytest.raises(DatasetError, match="node 0 has more than one label row"):
        load_file("edges.csv", root=files, labels="dup.txt")
    with pytest.raises(DatasetError, match="node id 3 is out of range for num_nodes=3"):
        load_file("edges.csv", root=files, num_nodes=3)
    with pytest.raises(DatasetError, match="no label file at"):
        load_file("edges.csv", root=files, labels="missing.txt")


def test_labels_row_per_node_npy_and_unlabeled(files):
    write(files / "rows.txt", "1\n-1\n0\n1\n")
    g = load_file("edges.csv", root=files, labels="rows.txt", train_ratio=1.0, val_ratio=0.0)
    assert g.y.tolist() == [1, -1, 0, 1] and g.split_sizes() == (3, 0, 0)  # unlabeled node in no split
    np.save(files / "y.npy", np.array([0, 1, 0, 1]))
    assert load_file("edges.csv", root=files, labels="y.npy").y.tolist() == [0, 1, 0, 1]


def test_random_split_is_seeded_and_stratified(tmp_path):
    n = 60
    write(tmp_path / "ring.txt", "".join(f"{i} {(i + 1) % n}\n" for i in range(n)))
    write(tmp_path / "y.txt", "".join(f"{i % 3}\n" for i in range(n)))
    a = load_file(tmp_path / "ring.txt", labels=tmp_path / "y.txt", seed=1)
    b = load_file(tmp_path / "ring.txt", labels=tmp_path / "y.txt", seed=1)
    c = load_file(tmp_path / "ring.txt", labels=tmp_path / "y.txt", seed=2)
    assert torch.equal(a.train_mask, b.train_mask) and not torch.equal(a.train_mask, c.train_mask)
    assert a.split_sizes() == (36, 12, 12)
    assert torch.bincount(a.y[a.train_mask]).tolist() == [12, 12, 12]


def test_pyg_layout_npz_with_split_columns(tmp_path):
    masks = np.zeros((5, 3), dtype=bool)
    masks[[0, 1], 0] = masks[[2, 3], 1] = masks[[4], 2] = True
    np.savez(tmp_path / "data.npz", edge_index=np.array([[0, 1, 2, 3], [1, 2, 3, 4]]), x=np.ones((5, 2)),
             y=np.array([0, 1, 0, 1, 0]), edge_weight=np.array([1.0, 2.0, 3.0, 4.0]), train_mask=masks,
             pos=np.zeros((5, 2)))
    with pytest.warns(UserWarning, match="the arrays pos have no place"):
        g = load(f"file:{tmp_path / 'data.npz'}", split=1)
    assert g.train_mask.nonzero().flatten().tolist() == [2, 3] and g.num_edges == 4
    assert sorted(g.edge_weight.tolist()) == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ConfigError, match="split must be in 0..2"), pytest.warns(UserWarning):
        load_file(tmp_path / "data.npz", split=5)


def test_heterophily_and_gnn_benchmark_npz(tmp_path, data_path):
    masks = np.eye(10, 4, dtype=bool)
    np.savez(tmp_path / "mine.npz", node_features=np.ones((4, 2), dtype=np.float32), node_labels=np.array([0, 1, 0, 1]),
             edges=np.array([[0, 1], [2, 3]]), train_masks=masks, val_masks=masks, test_masks=masks)
    g = load_file(tmp_path / "mine.npz", split=3)
    assert g.train_mask.nonzero().flatten().tolist() == [3] and g.num_edges == 4
    cora = load(f"file:{data_path('gnn_benchmark_npz', 'cora.npz')}")
    assert (cora.num_nodes, cora.num_edges, cora.split_sizes()) == (2708, 10556, (140, 210, 2358))
    resplit = load_file(data_path("gnn_benchmark_npz", "cora.npz"), train_ratio=0.5, val_ratio=0.25)
    assert abs(resplit.split_sizes()[0] - 1354) <= 7


def test_saved_graph_round_trip(tmp_path, small_graph):
    small_graph.save(tmp_path / "g.sgl")
    g = load(f"file:{tmp_path / 'g.sgl'}")
    assert isinstance(g, Graph) and torch.equal(g.indices, small_graph.indices) and sum(g.split_sizes()) == 6


def test_options_that_do_not_apply_are_errors(tmp_path, small_graph, files):
    small_graph.save(tmp_path / "g.pt")
    with pytest.raises(ConfigError, match="apply to edge lists only"):
        load_file(tmp_path / "g.pt", features="feats.csv")
    with pytest.raises(ConfigError, match="remove it"):
        load_file("edges.csv", root=files, split=2)
    with pytest.raises(ConfigError, match="does not accept these options"):
        load("file:edges.csv", root=files, normalise=True)
    with pytest.raises(DatasetError, match="is a folder"):
        load_file(files)


def test_a_bare_path_is_pointed_at_file_prefix(files):
    with pytest.raises(DatasetError, match=re.escape(f"pass 'file:{files / 'edges.csv'}'")):
        load(str(files / "edges.csv"))


def test_sgl_train_on_my_own_graph(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    n = 90
    y = np.arange(n) % 3
    src = np.repeat(np.arange(n), 4)
    dst = np.array([rng.choice(np.flatnonzero(y == y[s])) for s in src])
    write(tmp_path / "edges.tsv", "".join(f"{s}\t{d}\n" for s, d in zip(src, dst)))
    np.save(tmp_path / "x.npy", (np.eye(3)[y] + rng.normal(0, 1.0, (n, 3))).astype(np.float32))
    write(tmp_path / "y.txt", "".join(f"{v}\n" for v in y))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--dataset", "file:edges.tsv", "--dataset-option", "features=x.npy",
                 "--dataset-option", "labels=y.txt", "--seeds", "1", "--epochs", "20", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "90 nodes" in out and "split 54/18/18" in out and "test accuracy:" in out
    assert main(["train", "--dataset", "edges.tsv", "--no-progress"]) == 2
    assert "pass 'file:edges.tsv'" in capsys.readouterr().err


def test_unknown_npz_layout(tmp_path):
    np.savez(tmp_path / "odd.npz", something=np.ones(3))
    with pytest.raises(DatasetError, match="unknown .npz layout .keys: something."):
        sgl.datasets.load_file(tmp_path / "odd.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError, match="format must be one of"):
            load_file(tmp_path / "odd.npz", format="parquet")
