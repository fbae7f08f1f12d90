import collections
import os
import pickle
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sgl.datasets import load_planetoid, read_planetoid
from sgl.errors import ConfigError, DatasetError

PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def edge_set(edge_index):
    return set(map(tuple, edge_index.T.tolist()))


@pytest.fixture
def cora_dir(data_path):
    return data_path("planetoid")


def copy_cora(cora_dir, dest):
    dest.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        shutil.copy(cora_dir / f"ind.cora.{part}", dest / f"ind.cora.{part}")
    return dest


def test_cora_counts_and_public_split(cora_dir):
    g = load_planetoid("Cora", root=cora_dir)
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (2708, 10556, 1433, 7)
    assert g.split_sizes() == (140, 500, 1000)
    assert g.train_mask.nonzero().flatten().tolist() == list(range(140))
    assert g.val_mask.nonzero().flatten().tolist() == list(range(140, 640))
    test_index = np.loadtxt(cora_dir / "ind.cora.test.index", dtype=np.int64)
    assert g.test_mask.nonzero().flatten().tolist() == sorted(test_index.tolist())
    assert g.is_symmetric() and not g.has_self_loops()
    assert set(torch.unique(g.x).tolist()) == {0.0, 1.0}
    assert g.name == "cora"


def test_cora_matches_torch_geometric(cora_dir):
    from torch_geometric.io import read_planetoid_data

    ref = read_planetoid_data(str(cora_dir), "cora")
    g = read_planetoid(cora_dir, "cora")
    assert edge_set(g.edge_index) == edge_set(ref.edge_index)
    assert torch.equal(g.x, ref.x)
    assert torch.equal(g.y, ref.y)
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(g, mask), getattr(ref, mask))


def test_normalize_features(cora_dir):
    g = load_planetoid("cora", root=cora_dir, normalize_features=True)
    sums = g.x.sum(1)
    assert torch.allclose(sums[sums > 0], torch.ones_like(sums[sums > 0]))


def write_fake_planetoid(folder, name, test_index, num_allx=510, num_y=6, features=6, classes=3, seed=0):
    """A tiny dataset in the Planetoid format; test.index may have gaps (isolated test nodes)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    test_index = np.asarray(test_index)
    num_nodes = int(test_index.max()) + 1

    def onehot(rows):
        out = np.zeros((rows, classes), dtype=np.int32)
        out[np.arange(rows), rng.integers(0, classes, rows)] = 1
        return out

    allx = sp.csr_matrix(rng.integers(0, 2, (num_allx, features)).astype(np.float32))
    tx = sp.csr_matrix(rng.integers(0, 2, (len(test_index), features)).astype(np.float32) + 0)
    ally, ty = onehot(num_allx), onehot(len(test_index))
    objects = {"x": allx[:num_y], "y": ally[:num_y], "allx": allx, "ally": ally, "tx": tx, "ty": ty}
    graph = collections.defaultdict(list)
    pairs = rng.integers(0, num_nodes, (3 * num_nodes, 2))
    for a, b in pairs.tolist():
        graph[a].append(b)
        graph[b].append(a)
    graph[3].append(3)  # a self-loop
    graph[0] += [1, 1]  # a duplicate edge...
    graph[1] += [0, 0]  # ...in both directions: the real files are symmetric
    objects["graph"] = graph
    for part, obj in objects.items():
        with open(folder / f"ind.{name}.{part}", "wb") as f:
            pickle.dump(obj, f, protocol=2)
    np.savetxt(folder / f"ind.{name}.test.index", test_index, fmt="%d")
    return folder


def test_citeseer_like_gaps_match_torch_geometric(tmp_path):
    from torch_geometric.io import read_planetoid_data

    # Test ids 510..517 with 512 and 515 missing: two isolated test nodes, as in CiteSeer.
    test_index = [513, 510, 517, 511, 516, 514]
    folder = write_fake_planetoid(tmp_path / "raw", "citeseer", test_index)
    ref = read_planetoid_data(str(folder), "citeseer")
    g = load_planetoid("citeseer", root=folder)
    assert g.num_nodes == ref.num_nodes == 518
    assert torch.equal(g.x, ref.x)
    assert torch.equal(g.y, ref.y)
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(g, mask), getattr(ref, mask))
    assert edge_set(g.edge_index) == edge_set(ref.edge_index)
    # The padded nodes: zero features, label 0, outside the test mask.
    for node in (512, 515):
        assert g.x[node].abs().sum() == 0 and g.y[node] == 0 and not g.test_mask[node]
    assert g.test_mask.nonzero().flatten().tolist() == sorted(test_index)
    assert not g.has_self_loops() and g.is_symmetric()


def test_consecutive_test_index_has_no_padding(tmp_path):
    write_fake_planetoid(tmp_path / "pubmed" / "raw", "pubmed", [512, 510, 511])
    g = load_planetoid("pubmed", root=tmp_path)
    assert g.num_nodes == 513 and g.split_sizes() == (6, 500, 3)


def test_root_layouts(cora_dir, tmp_path):
    copy_cora(cora_dir, tmp_path / "a" / "cora" / "raw")
    assert load_planetoid("cora", root=tmp_path / "a").num_nodes == 2708
    copy_cora(cora_dir, tmp_path / "b" / "cora")
    assert load_planetoid("cora", root=tmp_path / "b").num_nodes == 2708


def test_default_root_uses_sgl_data(cora_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SGL_DATA", str(tmp_path))
    copy_cora(cora_dir, tmp_path / "cora" / "raw")
    assert load_planetoid("cora").num_edges == 10556


def test_unknown_name():
    with pytest.raises(ConfigError, match="cora, citeseer, pubmed"):
        load_planetoid("nell")


def test_truncated_pickle(cora_dir, tmp_path):
    folder = copy_cora(cora_dir, tmp_path / "raw")
    data = (folder / "ind.cora.allx").read_bytes()
    (folder / "ind.cora.allx").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match=r"ind\.cora\.allx is truncated or corrupt.*delete it"):
        load_planetoid("cora", root=folder)


def test_bad_test_index(cora_dir, tmp_path):
    folder = copy_cora(cora_dir, tmp_path / "raw")
    with open(folder / "ind.cora.test.index", "a") as f:
        f.write("not-a-number\n")
    with pytest.raises(DatasetError, match=r"ind\.cora\.test\.index is truncated or corrupt"):
        load_planetoid("cora", root=folder)


def test_mismatched_label_rows(cora_dir, tmp_path):
    folder = copy_cora(cora_dir, tmp_path / "raw")
    shutil.copy(folder / "ind.cora.y", folder / "ind.cora.ty")  # 140 label rows for 1000 test rows
    with pytest.raises(DatasetError, match="ind.cora.ty has 140 rows"):
        load_planetoid("cora", root=folder)


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused(cora_dir, tmp_path):
    folder = copy_cora(cora_dir, tmp_path / "raw")
    marker = tmp_path / "pwned"
    with open(folder / "ind.cora.graph", "wb") as f:
        pickle.dump(_Exploit(marker), f, protocol=2)
    with pytest.raises(DatasetError, match="is not allowed"):
        load_planetoid("cora", root=folder)
    assert not marker.exists()
