import dataclasses
import gzip
import shutil

import numpy as np
import pytest

from sgl.datasets import load, load_ogb, read_ogb
from sgl.datasets import ogb as ogb_module
from sgl.errors import ConfigError, DatasetError, DownloadError

EDGES = [(0, 1), (1, 2), (2, 0), (3, 2), (4, 3), (0, 1)]  # directed, with one duplicate


def write_gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(str(v) for v in (row if isinstance(row, (list, tuple)) else [row])) + "\n")


def write_fake_ogb(folder, split="time", labels=(0, 1, 2, 1, 0), year=True):
    """A 5-node dataset exactly in OGB's csv layout (gzip, no header)."""
    write_gz(folder / "raw" / "edge.csv.gz", EDGES)
    write_gz(folder / "raw" / "num-node-list.csv.gz", [5])
    write_gz(folder / "raw" / "num-edge-list.csv.gz", [len(EDGES)])
    write_gz(folder / "raw" / "node-feat.csv.gz", [[i * 0.5, -i, 1.25] for i in range(5)])
    write_gz(folder / "raw" / "node-label.csv.gz", list(labels))
    if year:
        write_gz(folder / "raw" / "node_year.csv.gz", [2010 + i for i in range(5)])
    write_gz(folder / "split" / split / "train.csv.gz", [0, 1])
    write_gz(folder / "split" / split / "valid.csv.gz", [2])
    write_gz(folder / "split" / split / "test.csv.gz", [3, 4])
    (folder / "RELEASE_v1.txt").write_text("fake\n")
    return folder


def test_arxiv_layout(tmp_path):
    write_fake_ogb(tmp_path / "ogbn_arxiv")
    g = load_ogb("ogbn-arxiv", root=tmp_path)
    assert (g.num_nodes, g.num_features) == (5, 3)
    assert g.is_symmetric() and g.num_edges == 10  # 5 distinct undirected edges
    assert g.y.tolist() == [0, 1, 2, 1, 0]
    assert g.split_sizes() == (2, 1, 2) and g.test_mask.tolist() == [False, False, False, True, True]
    assert g.x[2].tolist() == [1.0, -2.0, 1.25]
    assert g.ogb_name == "ogbn-arxiv" and g.node_year.tolist() == [2010, 2011, 2012, 2013, 2014]


def test_directed_edges_kept_as_given(tmp_path):
    folder = write_fake_ogb(tmp_path / "ogbn_arxiv")
    g = load("OGBN_ARXIV", root=folder, to_undirected=False)  # the dataset folder itself works too
    assert sorted(map(tuple, g.edge_index.T.tolist())) == sorted(EDGES)


def test_products_adds_inverse_edges(tmp_path):
    write_fake_ogb(tmp_path / "ogbn_products", split="sales_ranking", year=False)
    g = load_ogb("ogbn-products", root=tmp_path, to_undirected=False)
    assert g.num_edges == 2 * len(EDGES) and g.is_symmetric()
    assert not hasattr(g, "node_year")


def test_papers100m_binary_layout(tmp_path):
    folder = tmp_path / "ogbn_papers100M"
    (folder / "raw").mkdir(parents=True)
    np.savez(folder / "raw" / "data.npz", edge_index=np.array(EDGES).T, num_nodes_list=np.array([5]),
             num_edges_list=np.array([len(EDGES)]), node_feat=np.ones((5, 2), dtype=np.float32),
             node_year=np.arange(5)[:, None])
    np.savez(folder / "raw" / "node-label.npz", node_label=np.array([[1.0], [np.nan], [3.0], [np.nan], [0.0]]))
    for part, ids in (("train", [0]), ("valid", [2]), ("test", [4])):
        write_gz(folder / "split" / "time" / f"{part}.csv.gz", ids)
    g = load_ogb("ogbn-papers100m", root=tmp_path)
    assert g.y.tolist() == [1, -1, 3, -1, 0]  # NaN = unlabeled
    assert g.num_edges == 10 and g.ogb_name == "ogbn-papers100M"


def test_missing_files_error_names_files_and_folder(tmp_path):
    with pytest.raises(DownloadError) as err:
        load_ogb("ogbn-arxiv", root=tmp_path)
    message = str(err.value)
    assert "http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip" in message
    assert "raw/edge.csv.gz" in message and "split/time/train.csv.gz" in message
    assert str(tmp_path / "ogbn_arxiv") in message
    assert not (tmp_path / "ogbn_arxiv").exists()  # nothing half-written
    with pytest.raises(DatasetError, match="raw/node-feat.csv.gz"):
        load_ogb("ogbn-arxiv", root=tmp_path, download=False)


def test_download_from_zip(tmp_path, monkeypatch):
    source = write_fake_ogb(tmp_path / "src" / "arxiv")
    archive = shutil.make_archive(str(tmp_path / "arxiv"), "zip", tmp_path / "src", "arxiv")
    info = ogb_module.OGB_NODE_DATASETS["ogbn-arxiv"]
    monkeypatch.setitem(ogb_module.OGB_NODE_DATASETS, "ogbn-arxiv", dataclasses.replace(info, url=f"file://{archive}"))
    g = load_ogb("ogbn-arxiv", root=tmp_path / "data")
    assert g.num_nodes == 5
    assert (tmp_path / "data" / "ogbn_arxiv" / "raw" / "edge.csv.gz").is_file()
    assert source.is_dir()


def test_corrupt_gzip(tmp_path):
    folder = write_fake_ogb(tmp_path / "ogbn_arxiv")
    path = folder / "raw" / "node-feat.csv.gz"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DatasetError, match=r"node-feat\.csv\.gz is truncated or corrupt.*delete it"):
        read_ogb(folder, "ogbn-arxiv")


def test_wrong_counts(tmp_path):
    folder = write_fake_ogb(tmp_path / "ogbn_arxiv")
    write_gz(folder / "raw" / "node-label.csv.gz", [0, 1, 2])
    with pytest.raises(DatasetError, match="labels have shape"):
        read_ogb(folder, "ogbn-arxiv")
    write_fake_ogb(folder)
    write_gz(folder / "raw" / "num-edge-list.csv.gz", [99])
    with pytest.raises(DatasetError, match="num-edge-list says 99"):
        read_ogb(folder, "ogbn-arxiv")
    write_fake_ogb(folder)
    write_gz(folder / "split" / "time" / "test.csv.gz", [7])
    with pytest.raises(DatasetError, match="test.csv.gz"):
        read_ogb(folder, "ogbn-arxiv")


def test_metadata_matches_ogb_master_csv():
    pd = pytest.importorskip("pandas")
    ogb = pytest.importorskip("ogb")
    import os

    master = pd.read_csv(os.path.join(os.path.dirname(ogb.__file__), "nodeproppred", "master.csv"),
                         index_col=0, keep_default_na=False)
    for name, info in ogb_module.OGB_NODE_DATASETS.items():
        meta = master[name]
        assert meta["url"] == info.url and meta["download_name"] == info.download_name
        assert meta["split"] == info.split and int(meta["num classes"]) == info.num_classes
        assert (meta["add_inverse_edge"] == "True") == info.add_inverse_edge
        assert (meta["binary"] == "True") == info.binary


def test_unknown_name():
    with pytest.raises(ConfigError, match="ogbn-arxiv"):
        load_ogb("ogbn-mag")
