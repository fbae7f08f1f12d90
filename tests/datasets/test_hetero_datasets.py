"""Heterogeneous loaders: ACM and IMDB (real files), ogbn-mag (OGB layout), synthetic-mag."""
import gzip

import numpy as np
import pytest
import torch

import sgl
from sgl.data import HeteroGraph
from sgl.datasets import list_datasets, load, read_ogbn_mag, synthetic_mag, write_ogb_hetero_layout
from sgl.errors import ConfigError, DatasetError


def test_registry_lists_hetero_sets():
    listed = {name: task for name, _, task in list_datasets()}
    for name in ("acm", "imdb", "ogbn-mag", "synthetic-mag"):
        assert listed[name] == "node"


def test_acm_real_files(data_path):
    g = load("acm", root=data_path("hetero"))
    assert g.num_nodes_dict == {"paper": 4019, "author": 7167, "subject": 60}
    assert g.num_edges_dict == {("author", "writes", "paper"): 13407, ("subject", "has", "paper"): 4019}
    assert g.split_sizes() == (60, 1000, 1000) and g.num_classes == 3
    assert torch.bincount(g.y).tolist() == [1993, 965, 1061]
    assert g.featureless_types() == ["subject"] and g.x_dict["paper"].shape == (4019, 1902)
    # paper rows are normalised bag-of-words; author rows sum their papers' rows (HeCo's a_feat)
    assert torch.allclose(g.x_dict["paper"].sum(1), torch.ones(4019), atol=1e-4)
    ei = g.edge_index(("author", "writes", "paper"))
    summed = torch.zeros(7167, 1902).index_add_(0, ei[0], g.x_dict["paper"][ei[1]])
    assert torch.allclose(summed, g.x_dict["author"], atol=1e-4)
    assert not bool((g.train_mask & g.test_mask).any()) and not bool((g.val_mask & g.test_mask).any())
    per_class = torch.bincount(g.y[g.train_mask])
    assert per_class.tolist() == [20, 20, 20]
    with pytest.raises(ConfigError, match="20, 40 or 60"):
        load("acm", root=data_path("hetero"), labels_per_class=30)


def test_imdb_real_zip(data_path):
    g = load("imdb", root=data_path("hetero"))
    assert g.num_nodes_dict == {"movie": 4278, "director": 2081, "actor": 5257}
    assert g.num_edges_dict == {("director", "directs", "movie"): 4278, ("actor", "acts_in", "movie"): 12828}
    assert g.split_sizes() == (400, 400, 3478) and torch.bincount(g.y).tolist() == [1135, 1584, 1559]
    # one director per movie; director features are the means of their movies' rows (MAGNN)
    ei = g.edge_index(("director", "directs", "movie"))
    assert torch.bincount(ei[1], minlength=4278).eq(1).all()
    counts = torch.bincount(ei[0], minlength=2081).clamp_min(1).unsqueeze(1).float()
    mean = torch.zeros(2081, 3066).index_add_(0, ei[0], g.x_dict["movie"][ei[1]]) / counts
    assert torch.allclose(mean, g.x_dict["director"], atol=1e-4)


def test_missing_files_say_where(tmp_path):
    with pytest.raises(DatasetError, match="no acm files"):
        load("acm", root=tmp_path)
    with pytest.raises(DatasetError, match="no imdb files"):
        load("imdb", root=tmp_path)
    with pytest.raises(DatasetError, match="no ogbn-mag files"):
        load("ogbn-mag", root=tmp_path)
    (tmp_path / "imdb").mkdir()
    (tmp_path / "imdb" / "IMDB_processed.zip").write_bytes(b"garbage")
    with pytest.raises(DatasetError, match="corrupt"):
        load("imdb", root=tmp_path)


def test_ogbn_mag_layout_round_trip(tmp_path):
    g = synthetic_mag(scale=0.0003, seed=3)
    folder = write_ogb_hetero_layout(g, tmp_path / "ogbn_mag")
    assert (folder / "raw" / "relations" / "paper___cites___paper" / "edge.csv.gz").exists()
    with gzip.open(folder / "raw" / "num-node-dict.csv.gz", "rt") as f:
        assert f.readline().strip().split(",") == ["paper", "author", "institution", "field_of_study"]
    back = load("ogbn-mag", root=tmp_path)
    assert isinstance(back, HeteroGraph) and back.ogb_name == "ogbn-mag" and back.target == "paper"
    assert back.content_hash() == g.content_hash()
    assert back.featureless_types() == ["author", "institution", "field_of_study"]


def test_ogbn_mag_missing_and_corrupt(tmp_path):
    folder = write_ogb_hetero_layout(synthetic_mag(scale=0.0003, seed=3), tmp_path / "mag")
    label = folder / "raw" / "node-label" / "paper" / "node-label.csv.gz"
    label.unlink()
    with pytest.raises(DatasetError, match="node-label.csv.gz is missing"):
        read_ogbn_mag(folder)
    label.write_bytes(b"\x1f\x8b truncated")
    with pytest.raises(DatasetError, match="corrupt"):
        read_ogbn_mag(folder)


def test_synthetic_mag_is_seeded_and_planted():
    a, b = synthetic_mag(scale=0.0005, seed=1), synthetic_mag(scale=0.0005, seed=1)
    assert a.content_hash() == b.content_hash() != synthetic_mag(scale=0.0005, seed=2).content_hash()
    ei = a.edge_index(("paper", "cites", "paper"))
    same = float((a.y[ei[0]] == a.y[ei[1]]).float().mean())
    assert same > 0.6   # homophily 0.7 plus chance agreement
    assert sgl.datasets.load("synthetic-mag", scale=0.0005, seed=1).content_hash() == a.content_hash()
    assert np.isclose(a.num_edges_dict[("paper", "cites", "paper")] / a.num_nodes_dict["paper"], 7.36, atol=0.05)
    assert np.isclose(a.num_edges_dict[("author", "writes", "paper")] / a.num_nodes_dict["paper"], 9.70, atol=0.05)
