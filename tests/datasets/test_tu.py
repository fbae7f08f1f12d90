import shutil

import pytest
import torch

from sgl.datasets import GraphDataset, load, load_tu, read_tu
from sgl.errors import ConfigError, DatasetError


@pytest.fixture
def tu(data_path):
    return data_path("tu")


def test_mutag(tu):
    ds = load_tu("MUTAG", root=tu)
    assert isinstance(ds, GraphDataset)
    assert (len(ds), ds.num_classes, ds.num_features) == (188, 2, 7)
    assert ds.labels.bincount().tolist() == [63, 125]  # -1/1 remapped to 0/1
    assert (ds.num_nodes, ds.num_edges) == (3371, 7442)
    assert all(g.is_symmetric() and not g.has_self_loops() for g in ds)
    assert ds[0].edge_attr.shape == (ds[0].num_edges, 4)  # one-hot bond types


def test_proteins(tu):
    ds = load("proteins", root=tu)
    assert (len(ds), ds.num_classes, ds.num_features) == (1113, 2, 3)
    assert ds.num_nodes == 43471
    with_attr = load_tu("PROTEINS", root=tu, use_node_attr=True)
    assert with_attr.num_features == 4


def test_mutag_matches_torch_geometric(tu):
    from torch_geometric.io import read_tu_data

    data, slices, _ = read_tu_data(str(tu / "MUTAG"), "MUTAG")
    ds = read_tu(tu / "MUTAG", "MUTAG")
    assert torch.equal(ds.labels, data.y)
    assert torch.equal(torch.cat([g.x for g in ds]), data.x)
    for i in (0, 57, 187):
        lo, hi = slices["edge_index"][i], slices["edge_index"][i + 1]
        ref = set(map(tuple, data.edge_index[:, lo:hi].T.tolist()))
        assert set(map(tuple, ds[i].edge_index.T.tolist())) == ref


def copy_mutag(tu, dest):
    shutil.copytree(tu / "MUTAG", dest / "MUTAG")
    return dest / "MUTAG"


def test_non_integer_line(tu, tmp_path):
    folder = copy_mutag(tu, tmp_path)
    lines = (folder / "MUTAG_A.txt").read_text().splitlines()
    lines[100] = "17, seven"
    (folder / "MUTAG_A.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"MUTAG_A\.txt is truncated or corrupt.*delete it"):
        load_tu("MUTAG", root=tmp_path)


def test_truncated_labels(tu, tmp_path):
    folder = copy_mutag(tu, tmp_path)
    lines = (folder / "MUTAG_graph_labels.txt").read_text().splitlines()
    (folder / "MUTAG_graph_labels.txt").write_text("\n".join(lines[:150]) + "\n")
    with pytest.raises(DatasetError, match="has 150 lines but there are 188 graphs"):
        load_tu("MUTAG", root=tmp_path)


def test_truncated_node_labels(tu, tmp_path):
    folder = copy_mutag(tu, tmp_path)
    data = (folder / "MUTAG_node_labels.txt").read_bytes()
    (folder / "MUTAG_node_labels.txt").write_bytes(data[:1000])
    with pytest.raises(DatasetError, match="MUTAG_node_labels.txt"):
        load_tu("MUTAG", root=tmp_path)


def test_edge_across_graphs(tu, tmp_path):
    folder = copy_mutag(tu, tmp_path)
    with open(folder / "MUTAG_A.txt", "a") as f:
        f.write("1, 3371\n")
    with pytest.raises(DatasetError, match="two different graphs"):
        load_tu("MUTAG", root=tmp_path)


def test_tiny_tu_with_gaps_and_duplicates(tmp_path):
    folder = tmp_path / "TINY" / "raw"
    folder.mkdir(parents=True)
    (folder / "TINY_A.txt").write_text("1, 2\n2, 1\n2, 2\n1, 2\n3, 4\n4, 5\n")
    (folder / "TINY_graph_indicator.txt").write_text("1\n1\n2\n2\n2\n")
    (folder / "TINY_graph_labels.txt").write_text("5\n3\n")
    (folder / "TINY_node_attributes.txt").write_text("0.5, 1\n1, 1\n2, 0\n0, 0\n1, 2\n")
    ds = load("tu:TINY", root=tmp_path, use_node_attr=True)
    assert ds.labels.tolist() == [1, 0]
    assert ds[0].num_edges == 2  # self-loop dropped, duplicate merged
    assert ds[1].edge_index.tolist() == [[0, 1], [1, 2]]  # local ids, directions as given
    assert ds[1].x.tolist() == [[2, 0], [0, 0], [1, 2]]


def test_missing_required_file(tmp_path):
    (tmp_path / "X_A.txt").write_text("1, 2\n")
    (tmp_path / "X_graph_indicator.txt").write_text("1\n1\n")
    with pytest.raises(DatasetError, match="missing X_graph_labels.txt"):
        load_tu("X", root=tmp_path)


def test_bad_name():
    with pytest.raises(ConfigError):
        load_tu("../etc")
