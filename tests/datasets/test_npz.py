import numpy as np
import pytest
import torch

from sgl.datasets import load_npz, read_npz
from sgl.errors import ConfigError, DatasetError


@pytest.fixture
def cora_npz(data_path):
    return data_path("gnn_benchmark_npz", "cora.npz")


def edge_set(edge_index):
    return set(map(tuple, edge_index.T.tolist()))


def test_cora_npz_counts(cora_npz):
    g = load_npz("cora-npz", root=cora_npz.parent)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (2708, 10556, 1433, 7)
    assert g.is_symmetric() and not g.has_self_loops()
    # Shchur protocol: 20 train + 30 val per class, the rest test.
    assert g.split_sizes() == (140, 210, 2358)
    assert torch.bincount(g.y[g.train_mask]).tolist() == [20] * 7
    assert not (g.train_mask & g.val_mask).any() and not (g.val_mask & g.test_mask).any()


def test_matches_torch_geometric(cora_npz):
    from torch_geometric.io import read_npz as pyg_read_npz

    ref = pyg_read_npz(str(cora_npz))
    g = read_npz(cora_npz)
    assert torch.equal(g.x, ref.x) and torch.equal(g.y, ref.y)
    assert edge_set(g.edge_index) == edge_set(ref.edge_index)


def test_split_is_seeded(cora_npz):
    a = read_npz(cora_npz, seed=3)
    b = read_npz(cora_npz, seed=3)
    c = read_npz(cora_npz, seed=4)
    assert torch.equal(a.train_mask, b.train_mask) and torch.equal(a.test_mask, b.test_mask)
    assert not torch.equal(a.train_mask, c.train_mask)


def test_missing_key(cora_npz, tmp_path):
    with np.load(cora_npz) as f:
        arrays = {k: f[k] for k in f.files if k != "labels"}
    np.savez(tmp_path / "cora.npz", **arrays)
    with pytest.raises(DatasetError, match=r"cora\.npz is truncated or corrupt.*lacks the keys labels"):
        load_npz("cora-npz", root=tmp_path)


def test_truncated_npz(cora_npz, tmp_path):
    data = cora_npz.read_bytes()
    (tmp_path / "cora.npz").write_bytes(data[: len(data) // 3])
    with pytest.raises(DatasetError, match=r"cora\.npz is truncated or corrupt.*delete it"):
        load_npz("cora-npz", root=tmp_path)


def test_wrong_label_count(cora_npz, tmp_path):
    with np.load(cora_npz) as f:
        arrays = {k: f[k] for k in f.files if k not in ("node_names", "class_names")}
    arrays["labels"] = arrays["labels"][:-5]
    np.savez(tmp_path / "cora.npz", **arrays)
    with pytest.raises(DatasetError, match="labels of shape"):
        load_npz("cora-npz", root=tmp_path)


def test_tiny_npz_self_loops_and_direction(tmp_path):
    import scipy.sparse as sp

    adj = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=np.float32))
    attr = sp.csr_matrix(np.array([[0, 2], [1, 0], [0, 0]], dtype=np.float32))
    np.savez(tmp_path / "amazon_electronics_photo.npz",
             adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
             attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr, attr_shape=attr.shape,
             labels=np.array([0, 1, 1]))
    g = load_npz("Amazon_Photo", root=tmp_path, train_per_class=1, val_per_class=0)
    assert edge_set(g.edge_index) == {(0, 1), (1, 0), (1, 2), (2, 1)}
    assert g.x.tolist() == [[0, 1], [1, 0], [0, 0]]  # binarized
    assert g.name == "amazon-photo"


def test_unknown_name():
    with pytest.raises(ConfigError, match="coauthor-cs"):
        load_npz("coauthor")
