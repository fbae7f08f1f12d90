"""SNAP edge lists: ego-Facebook from the real file, plain and gzipped copies, bad files, no download."""
import gzip

import pytest

import sgl.datasets
from sgl.datasets.snap import load_facebook, read_snap_edges
from sgl.errors import DatasetError, DownloadError


def test_real_facebook_file(data_path):
    folder = data_path("snap_facebook_combined")
    graph = sgl.datasets.load("facebook", root=folder.parent)  # finds root/snap_facebook_combined/
    assert (graph.num_nodes, graph.num_edges, graph.name) == (4039, 2 * 88234, "facebook")
    assert graph.is_symmetric() and not graph.has_self_loops() and graph.x is None
    assert sgl.datasets.dataset_task("facebook") == "link"
    edges = read_snap_edges(folder / "facebook_combined.txt")  # the copy's two junk '#' lines are skipped
    assert edges.shape == (88234, 2) and edges[0].tolist() == [0, 1]


def test_plain_and_gzipped_copies_and_duplicates(tmp_path):
    text = "# Directed graph: toy\n# Nodes: 4\n0 1\n1\t2\n2 0\n2 0\n1 0\n3 3\n"
    (tmp_path / "facebook_combined.txt").write_text(text)
    plain = load_facebook(root=tmp_path)
    zipped_root = tmp_path / "z" / "facebook" / "raw"
    zipped_root.mkdir(parents=True)
    with gzip.open(zipped_root / "facebook_combined.txt.gz", "wt") as handle:
        handle.write(text)
    zipped = load_facebook(root=tmp_path / "z")
    for graph in (plain, zipped):
        assert graph.num_nodes == 4 and graph.num_edges == 6  # 3 undirected edges, loop 3-3 dropped
        assert sorted(map(tuple, graph.edge_index.T.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]


def test_bad_files_name_the_line(tmp_path):
    path = tmp_path / "facebook_combined.txt"
    path.write_text("0 1\n1 x\n")
    with pytest.raises(DatasetError, match=r"facebook_combined.txt, line 2: expected two non-negative"):
        read_snap_edges(path)
    path.write_text("# only comments\n")
    with pytest.raises(DatasetError, match="no edges"):
        read_snap_edges(path)
    path.write_text("0 -1\n")
    with pytest.raises(DatasetError, match="line 1"):
        read_snap_edges(path)
    (tmp_path / "bad.txt.gz").write_bytes(b"\x1f\x8bnot really gzip")
    with pytest.raises(DatasetError, match="truncated or corrupt"):
        read_snap_edges(tmp_path / "bad.txt.gz")
    with pytest.raises(DatasetError, match="does not exist"):
        read_snap_edges(tmp_path / "missing.txt")


def test_missing_file_without_network(tmp_path):
    with pytest.raises(DatasetError, match="pass download=True"):
        load_facebook(root=tmp_path, download=False)
    with pytest.raises(DownloadError, match=r"snap.stanford.edu/data/facebook_combined.txt.gz.*Put facebook_combined"):
        load_facebook(root=tmp_path)
    assert not list(tmp_path.rglob("*.gz"))  # a failed download leaves nothing behind
