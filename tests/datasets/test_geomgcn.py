import shutil

import numpy as np
import pytest
import torch

from sgl.datasets import load_geomgcn, read_geomgcn
from sgl.errors import ConfigError, DatasetError


@pytest.fixture
def geomgcn(data_path):
    return data_path("geomgcn")


@pytest.mark.parametrize("name,nodes,edges", [("texas", 183, 325), ("wisconsin", 251, 515)])
def test_counts_and_splits(geomgcn, name, nodes, edges):
    for split in (0, 7):
        g = load_geomgcn(name, root=geomgcn, split=split)
        assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (nodes, edges, 1703, 5)
        with np.load(geomgcn / name / f"{name}_split_0.6_0.2_{split}.npz") as f:
            for key in ("train_mask", "val_mask", "test_mask"):
                assert torch.equal(getattr(g, key), torch.from_numpy(f[key].astype(bool)))
        assert g.split == split and g.name == name


def test_matches_torch_geometric_webkb(geomgcn, tmp_path):
    from torch_geometric.datasets import WebKB

    shutil.copytree(geomgcn / "texas", tmp_path / "texas" / "raw")
    ref = WebKB(str(tmp_path), "texas")[0]
    g = read_geomgcn(tmp_path / "texas" / "raw", "texas", split=2)
    assert torch.equal(g.x, ref.x) and torch.equal(g.y, ref.y)
    assert set(map(tuple, g.edge_index.T.tolist())) == set(map(tuple, ref.edge_index.T.tolist()))
    assert torch.equal(g.train_mask, ref.train_mask[:, 2])


def test_to_undirected(geomgcn):
    g = load_geomgcn("texas", root=geomgcn / "texas", to_undirected=True)
    assert g.is_symmetric() and g.num_edges == 574


def test_bad_split_index():
    with pytest.raises(ConfigError, match="0..9"):
        load_geomgcn("texas", split=10)
    with pytest.raises(ConfigError, match="unknown Geom-GCN dataset"):
        load_geomgcn("pubmed")


def copy_texas(geomgcn, dest):
    shutil.copytree(geomgcn / "texas", dest)
    return dest


def test_corrupt_feature_file(geomgcn, tmp_path):
    folder = copy_texas(geomgcn, tmp_path / "texas")
    path = folder / "out1_node_feature_label.txt"
    lines = path.read_text().splitlines()
    lines[5] = lines[5].replace("0,", "x,", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"out1_node_feature_label\.txt is truncated or corrupt"):
        load_geomgcn("texas", root=folder)


def test_truncated_feature_file(geomgcn, tmp_path):
    folder = copy_texas(geomgcn, tmp_path / "texas")
    path = folder / "out1_node_feature_label.txt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="out1_node_feature_label.txt"):
        load_geomgcn("texas", root=folder)


def test_corrupt_edge_file(geomgcn, tmp_path):
    folder = copy_texas(geomgcn, tmp_path / "texas")
    with open(folder / "out1_graph_edges.txt", "a") as f:
        f.write("12\tabc\n")
    with pytest.raises(DatasetError, match=r"out1_graph_edges\.txt is truncated or corrupt"):
        load_geomgcn("texas", root=folder)


def test_edge_out_of_range(geomgcn, tmp_path):
    folder = copy_texas(geomgcn, tmp_path / "texas")
    with open(folder / "out1_graph_edges.txt", "a") as f:
        f.write("12\t500\n")
    with pytest.raises(DatasetError, match="0..182"):
        load_geomgcn("texas", root=folder)


def test_corrupt_split_file(geomgcn, tmp_path):
    folder = copy_texas(geomgcn, tmp_path / "texas")
    path = folder / "texas_split_0.6_0.2_4.npz"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DatasetError, match=r"texas_split_0\.6_0\.2_4\.npz is truncated or corrupt"):
        load_geomgcn("texas", root=folder, split=4)


def test_actor_sparse_feature_format(tmp_path):
    folder = tmp_path / "film"
    folder.mkdir()
    (folder / "out1_node_feature_label.txt").write_text(
        "node_id\tfeature\tlabel\n1\t0,3\t2\n0\t1\t0\n2\t2,3\t1\n")
    (folder / "out1_graph_edges.txt").write_text("node_id\tnode_id\n0\t1\n1\t2\n0\t1\n")
    masks = np.array([1, 0, 0], dtype=np.uint8)
    np.savez(folder / "film_split_0.6_0.2_0.npz", train_mask=masks, val_mask=masks[::-1], test_mask=masks * 0)
    g = load_geomgcn("actor", root=tmp_path)
    assert g.x.tolist() == [[0, 1, 0, 0], [1, 0, 0, 1], [0, 0, 1, 1]]
    assert g.y.tolist() == [0, 2, 1]
    assert g.num_edges == 2  # the duplicate edge is merged
