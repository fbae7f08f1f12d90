"""Heterogeneous sets from a user's folders through `file:`: HGB's and MAGNN/PyG's layouts, a saved
HeteroGraph, the real IMDB zip, and `sgl train --dataset file:DIR` with rgcn / sehgnn."""
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sgl.cli.main import main
from sgl.data import HeteroGraph
from sgl.datasets import load, load_file
from sgl.errors import ConfigError, DatasetError

N_PAPER, N_AUTHOR, N_TERM = 20, 8, 4


def _hgb_links():
    """paper-author (type 0), its exact reverse (type 1), paper-term (type 2); HGB ids: papers 0..19,
    authors 20..27, terms 28..31."""
    pa = [(p, N_PAPER + (p % N_AUTHOR)) for p in range(N_PAPER)] + [(p, N_PAPER + (p + 3) % N_AUTHOR)
                                                                    for p in range(0, N_PAPER, 2)]
    pt = [(p, N_PAPER + N_AUTHOR + p % N_TERM) for p in range(N_PAPER)]
    return pa, pt


@pytest.fixture
def hgb(tmp_path):
    folder = tmp_path / "hgb_toy"
    folder.mkdir()
    rng = np.random.default_rng(0)
    lines = []
    for p in range(N_PAPER):
        lines.append(f"{p}\tpaper {p}\t0\t{','.join(f'{v:.3f}' for v in rng.random(4))}")
    for a in range(N_AUTHOR):
        lines.append(f"{N_PAPER + a}\tauthor {a}\t1\t{','.join(f'{v:.3f}' for v in rng.random(3))}")
    for t in range(N_TERM):
        lines.append(f"{N_PAPER + N_AUTHOR + t}\tterm {t}\t2")
    (folder / "node.dat").write_text("\n".join(lines[::-1]) + "\n")      # any order: ids decide
    pa, pt = _hgb_links()
    links = [f"{p}\t{a}\t0\t1.0" for p, a in pa] + [f"{a}\t{p}\t1\t1.0" for p, a in pa[::-1]]
    links += [f"{p}\t{t}\t2\t1.0" for p, t in pt]
    (folder / "link.dat").write_text("\n".join(links) + "\n")
    (folder / "label.dat").write_text("".join(f"{p}\tpaper {p}\t0\t{p % 3}\n" for p in range(14)))
    (folder / "label.dat.test").write_text("".join(f"{p}\tpaper {p}\t0\t{p % 3}\n" for p in range(14, N_PAPER)))
    return folder


def test_hgb_folder(hgb, tmp_path):
    g = load(f"file:{hgb}")
    assert isinstance(g, HeteroGraph) and g.target == "0"
    assert g.num_nodes_dict == {"0": N_PAPER, "1": N_AUTHOR, "2": N_TERM}
    pa, pt = _hgb_links()
    # link type 1 is the exact reverse of type 0, so it is not stored twice (operators read both ways)
    assert g.num_edges_dict == {("0", "r0", "1"): len(pa), ("0", "r2", "2"): len(pt)}
    assert g.x_dict["0"].shape == (N_PAPER, 4) and g.x_dict["1"].shape == (N_AUTHOR, 3)
    assert g.featureless_types() == ["2"]
    assert g.y.tolist() == [p % 3 for p in range(N_PAPER)] and g.num_classes == 3
    assert g.split_sizes() == (12, 2, 6)            # val: int(0.2 * 14) of label.dat; test: label.dat.test
    assert g.test_mask.nonzero().flatten().tolist() == list(range(14, N_PAPER))
    assert g.node_ids["1"].tolist() == list(range(N_PAPER, N_PAPER + N_AUTHOR))
    ei = g.edge_index(("0", "r0", "1"))
    assert (0, 0) in set(zip(ei[0].tolist(), ei[1].tolist()))   # paper 0 - author 20 (type-1 id 0)
    assert load_file(hgb, seed=1).val_mask.nonzero().tolist() != g.val_mask.nonzero().tolist()
    g.save(tmp_path / "hgb.pt")                                   # a saved HeteroGraph loads through file: too
    back = load(f"file:{tmp_path / 'hgb.pt'}")
    assert back.content_hash() == g.content_hash() and torch.equal(back.node_ids["2"], g.node_ids["2"])


def test_hgb_errors(hgb):
    with pytest.raises(ConfigError, match="remove train_ratio"):
        load_file(hgb, train_ratio=0.5)
    with pytest.raises(ConfigError, match="apply to edge lists only"):
        load_file(hgb, features="x.npy")
    (hgb / "label.dat").write_text("0\tpaper 0\t0\t0,2\n")
    with pytest.raises(DatasetError, match=r"label.dat line 1: node 0 has several labels \('0,2'\); multi-label"):
        load_file(hgb)
    (hgb / "link.dat").unlink()
    with pytest.raises(DatasetError, match="the HGB layout needs node.dat, link.dat and label.dat .* link.dat is "
                                           "missing"):
        load(f"file:{hgb}")
    (hgb / "node.dat").write_text("0\tp\n")
    (hgb / "link.dat").write_text("0\t0\t0\t1\n")
    with pytest.raises(DatasetError, match=r"node.dat line 1: 2 tab-separated fields"):
        load_file(hgb)


def _magnn_arrays(seed=0):
    rng = np.random.default_rng(seed)
    n_movie, n_director, n_actor = 12, 4, 6
    n = n_movie + n_director + n_actor
    rows, cols = [], []
    for m in range(n_movie):
        rows += [m, m, m]
        cols += [n_movie + m % n_director, n_movie + n_director + m % n_actor,
                 n_movie + n_director + (m + 1) % n_actor]
    adj = sp.coo_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.int32).tocsr()
    types = np.array([0] * n_movie + [1] * n_director + [2] * n_actor, dtype=np.int32)
    return {"adj": adj, "types": types, "x0": sp.csr_matrix(rng.random((n_movie, 5)) > 0.5, dtype=np.float32),
            "x1": rng.random((n_director, 3)).astype(np.float32), "labels": np.arange(n_movie, dtype=np.int32) % 3,
            "split": dict(train_idx=np.arange(6), val_idx=np.arange(6, 9), test_idx=np.arange(9, 12))}


@pytest.fixture
def magnn(tmp_path):
    folder = tmp_path / "magnn_toy"
    folder.mkdir()
    arrays = _magnn_arrays()
    sp.save_npz(folder / "adjM.npz", arrays["adj"])
    np.save(folder / "node_types.npy", arrays["types"])
    sp.save_npz(folder / "features_0.npz", arrays["x0"])
    np.save(folder / "features_1.npy", arrays["x1"])                  # actors (type 2): no features
    np.save(folder / "labels.npy", arrays["labels"])
    np.savez(folder / "train_val_test_idx.npz", **arrays["split"])
    return folder


def test_magnn_folder_and_zip(magnn, tmp_path):
    g = load(f"file:{magnn}")
    assert g.num_nodes_dict == {"0": 12, "1": 4, "2": 6} and g.target == "0"
    assert g.num_edges_dict == {("1", "to", "0"): 12, ("2", "to", "0"): 24}
    assert g.featureless_types() == ["2"] and g.x_dict["1"].shape == (4, 3)
    assert torch.equal(g.x_dict["0"], torch.from_numpy(_magnn_arrays()["x0"].toarray()))
    assert g.split_sizes() == (6, 3, 3) and g.y.tolist() == [m % 3 for m in range(12)]
    assert sorted(zip(*g.edge_index(("1", "to", "0")).tolist()))[:2] == [(0, 0), (0, 4)]  # director 0: movies 0, 4
    with zipfile.ZipFile(tmp_path / "toy_processed.zip", "w") as archive:
        for file in magnn.iterdir():
            archive.write(file, f"toy_processed/{file.name}")             # members in a sub-folder
    zipped = load_file(tmp_path / "toy_processed.zip")
    assert zipped.content_hash() == g.content_hash()
    resplit = load_file(magnn, train_ratio=0.5, val_ratio=0.25)
    assert resplit.split_sizes() == (6, 3, 3) and not torch.equal(resplit.train_mask, g.train_mask)
    (magnn / "train_val_test_idx.npz").unlink()
    assert sum(load_file(magnn).split_sizes()) == 12                     # no split file: a random split


def test_magnn_errors(magnn):
    np.save(magnn / "labels.npy", np.ones((12, 2), dtype=np.int32))
    with pytest.raises(DatasetError, match="multi-label sets are not supported"):
        load_file(magnn)
    np.save(magnn / "node_types.npy", np.zeros(5, dtype=np.int32))
    with pytest.raises(DatasetError, match="expected one integer type per row of adjM"):
        load_file(magnn)
    (magnn / "adjM.npz").unlink()
    with pytest.raises(DatasetError, match="neither in HGB's layout .* nor MAGNN/PyG's"):
        load_file(magnn)


@pytest.mark.parametrize("layout, model", [("hgb", "rgcn"), ("magnn", "rgcn"), ("magnn", "sehgnn")])
def test_sgl_train_on_hetero_folders(layout, model, request, capsys):
    folder = request.getfixturevalue(layout)
    assert main(["train", "--model", model, "--dataset", f"file:{folder}", "--model-option", "hidden=8",
                 "--epochs", "2", "--seeds", "1", "--no-progress"]) == 0
    assert "test accuracy" in capsys.readouterr().out


def test_real_imdb_zip_through_the_magnn_reader(data_path):
    g = load(f"file:{data_path('hetero', 'imdb', 'IMDB_processed.zip')}")
    assert g.num_nodes_dict == {"0": 4278, "1": 2081, "2": 5257}
    assert g.num_edges_dict == {("1", "to", "0"): 4278, ("2", "to", "0"): 12828}
    assert g.split_sizes() == (400, 400, 3478) and g.num_classes == 3
    assert torch.bincount(g.y).tolist() == [1135, 1584, 1559]
