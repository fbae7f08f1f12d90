"""The heterophily benchmark's single-.npz layout (issue 26 item 14), written here as small files."""
import numpy as np
import pytest
import torch

import sgl
from sgl.datasets import load_geomgcn, load_heterophily, read_heterophily
from sgl.errors import ConfigError, DatasetError, DownloadError

N, SPLITS = 12, 10


def write_npz(path, n=N, splits=SPLITS, directed_edges=None, **replace):
    """A graph in the layout of yandex-research/heterophilous-graphs: each undirected edge once."""
    rng = np.random.default_rng(0)
    edges = np.array([[i, (i + 1) % n] for i in range(n)] + [[0, 6]]) if directed_edges is None else directed_edges
    train = np.zeros((splits, n), dtype=bool)
    val, test = train.copy(), train.copy()
    for s in range(splits):  # split s: a different rotation of the nodes, 50/25/25
        order = np.roll(np.arange(n), s)
        train[s, order[: n // 2]], val[s, order[n // 2: 3 * n // 4]], test[s, order[3 * n // 4:]] = True, True, True
    arrays = dict(node_features=rng.normal(size=(n, 3)).astype(np.float32), node_labels=np.arange(n) % 3,
                  edges=edges, train_masks=train, val_masks=val, test_masks=test)
    arrays.update(replace)
    np.savez(path, **arrays)
    return arrays


def test_read_all_ten_splits_and_symmetrize(tmp_path):
    arrays = write_npz(tmp_path / "roman_empire.npz")
    for split in range(SPLITS):
        g = read_heterophily(tmp_path / "roman_empire.npz", split=split)
        assert torch.equal(g.train_mask, torch.from_numpy(arrays["train_masks"][split]))
        assert torch.equal(g.test_mask, torch.from_numpy(arrays["test_masks"][split]))
        assert g.split == split and g.num_splits == SPLITS
    assert g.num_edges == 2 * len(arrays["edges"]) and g.is_symmetric()
    assert torch.allclose(g.x, torch.from_numpy(arrays["node_features"]))
    assert g.y.tolist() == arrays["node_labels"].tolist() and g.num_classes == 3


def test_directed_files_keep_their_direction(tmp_path):
    arrays = write_npz(tmp_path / "chameleon_filtered_directed.npz")
    g = read_heterophily(tmp_path / "chameleon_filtered_directed.npz")
    assert g.num_edges == len(arrays["edges"]) and not g.is_symmetric()
    assert read_heterophily(tmp_path / "chameleon_filtered_directed.npz", to_undirected=True).is_symmetric()


@pytest.mark.parametrize("name, file", [
    ("roman-empire", "roman_empire.npz"), ("Amazon_Ratings", "amazon_ratings.npz"), ("minesweeper", "minesweeper.npz"),
    ("tolokers", "tolokers.npz"), ("questions", "questions.npz"), ("chameleon-filtered", "chameleon_filtered.npz"),
    ("squirrel-filtered", "squirrel_filtered.npz")])
def test_registered_names_read_their_file(tmp_path, name, file):
    (tmp_path / "sub" / "raw").mkdir(parents=True)
    write_npz(tmp_path / file)
    g = sgl.datasets.load(name, root=tmp_path, split=3)
    assert g.num_nodes == N and g.split == 3 and g.name == name.lower().replace("_", "-")


def test_missing_file_names_the_url_and_folder(tmp_path):
    with pytest.raises(DownloadError, match="yandex-research/heterophilous-graphs.*tolokers.npz"):
        load_heterophily("tolokers", root=tmp_path)
    with pytest.raises(DatasetError, match="missing tolokers.npz"):
        load_heterophily("tolokers", root=tmp_path, download=False)
    with pytest.raises(ConfigError, match="unknown heterophily dataset"):
        load_heterophily("cora", root=tmp_path)


@pytest.mark.parametrize("replace, message", [
    ({"node_labels": np.zeros(N - 1, dtype=np.int64)}, "node_labels has shape"),
    ({"edges": np.array([[0, N]])}, "edges row 0 is"),
    ({"train_masks": np.zeros((SPLITS, N - 2), dtype=bool)}, "train_masks has shape"),
    ({"val_masks": np.zeros((3, N), dtype=bool)}, "different numbers of splits"),
    ({"node_features": np.where(np.arange(N)[:, None] == 7, np.nan, 1.0).repeat(2, 1)}, "row 7 .node 7. holds NaN"),
])
def test_malformed_archives_name_the_problem(tmp_path, replace, message):
    write_npz(tmp_path / "bad.npz", **replace)
    with pytest.raises(DatasetError, match=message) as err:
        read_heterophily(tmp_path / "bad.npz")
    assert "bad.npz" in str(err.value)


def test_missing_key_and_bad_split(tmp_path):
    np.savez(tmp_path / "partial.npz", node_features=np.ones((2, 2)), edges=np.zeros((0, 2), dtype=np.int64))
    with pytest.raises(DatasetError, match="lacks the keys node_labels, train_masks"):
        read_heterophily(tmp_path / "partial.npz")
    write_npz(tmp_path / "ok.npz")
    with pytest.raises(ConfigError, match=r"0\.\.9 \(ok.npz holds 10 splits\)"):
        read_heterophily(tmp_path / "ok.npz", split=10)


def test_chameleon_reads_the_npz_layout_instead_of_downloading(tmp_path):
    """Before: `chameleon` knew only the Geom-GCN raw files and tried to download them."""
    arrays = write_npz(tmp_path / "chameleon.npz")
    g = sgl.datasets.load("chameleon", root=tmp_path, split=2)
    assert g.name == "chameleon" and g.is_symmetric() and g.num_edges == 2 * len(arrays["edges"])
    assert torch.equal(g.val_mask, torch.from_numpy(arrays["val_masks"][2]))
    # directed edges need the directed archive
    with pytest.raises(DownloadError, match="chameleon_directed.npz"):
        load_geomgcn("chameleon", root=tmp_path, to_undirected=False)
    (tmp_path / "chameleon").mkdir()
    write_npz(tmp_path / "chameleon" / "chameleon_directed.npz")
    assert not load_geomgcn("chameleon", root=tmp_path, to_undirected=False).is_symmetric()


def test_raw_geomgcn_files_still_win(tmp_path, data_path):
    raw = data_path("geomgcn", "texas")
    for f in raw.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    write_npz(tmp_path / "texas.npz")  # a decoy: the raw files come first
    g = load_geomgcn("texas", root=tmp_path, split=1)
    assert g.num_nodes == 183 and not g.is_symmetric() and g.num_splits == 10


def test_no_layout_at_all_suggests_both(tmp_path):
    with pytest.raises(DatasetError, match="Alternatively, put squirrel.npz or squirrel_directed.npz"):
        load_geomgcn("squirrel", root=tmp_path, download=False)
