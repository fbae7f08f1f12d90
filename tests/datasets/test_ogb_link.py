"""OGB link sets read offline from OGB's layout (a tiny synthetic folder), and the link task on them."""
import gzip

import numpy as np
import pytest
import torch

import sgl
from sgl.datasets import load_ogb_link, read_ogb_link
from sgl.datasets import ogb_link as ogb_link_module
from sgl.errors import ConfigError, DatasetError
from sgl.tasks import RunConfig, run


def write_gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join((",".join(map(str, r)) if isinstance(r, (list, tuple)) else str(r)) + "\n" for r in rows))


def ring_with_chords(n):
    """Training edges: a ring plus chords to the node 3 ahead (an easy structure to learn)."""
    return [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 3) % n) for i in range(0, n, 2)]


def write_collab(root, n=40, numpy_arrays=True):
    """ogbl-collab's layout: raw CSVs (+ edge_weight/edge_year) and split/time/*.pt with numpy arrays."""
    folder = root / "ogbl_collab"
    train = ring_with_chords(n)
    write_gz(folder / "raw" / "edge.csv.gz", train)
    write_gz(folder / "raw" / "num-node-list.csv.gz", [n])
    write_gz(folder / "raw" / "num-edge-list.csv.gz", [len(train)])
    rng = np.random.default_rng(0)
    write_gz(folder / "raw" / "node-feat.csv.gz", [list(np.round(rng.normal(size=4), 3)) for _ in range(n)])
    write_gz(folder / "raw" / "edge_weight.csv.gz", [1] * len(train))
    write_gz(folder / "raw" / "edge_year.csv.gz", [2010] * len(train))
    arr = np.asarray if numpy_arrays else torch.tensor
    valid = [(i, (i + 2) % n) for i in range(0, n, 4)]
    test = [(i, (i + 2) % n) for i in range(2, n, 4)]
    negatives = [(i, (i + n // 2) % n) for i in range(n // 2)]
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    torch.save({"edge": arr(train), "weight": arr([1] * len(train)), "year": arr([2010] * len(train))},
               split / "train.pt")
    for part, pos in (("valid", valid), ("test", test)):
        torch.save({"edge": arr(pos), "edge_neg": arr(negatives), "weight": arr([1] * len(pos)),
                    "year": arr([2018] * len(pos))}, split / f"{part}.pt")
    return folder


def write_citation2(root, n=30, negatives=5):
    folder = root / "ogbl_citation2"
    train = ring_with_chords(n)
    write_gz(folder / "raw" / "edge.csv.gz", train)
    write_gz(folder / "raw" / "num-node-list.csv.gz", [n])
    write_gz(folder / "raw" / "num-edge-list.csv.gz", [len(train)])
    write_gz(folder / "raw" / "node-feat.csv.gz", [[i % 3, 1] for i in range(n)])
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    source, target = zip(*train)
    torch.save({"source_node": torch.tensor(source), "target_node": torch.tensor(target)}, split / "train.pt")
    held = torch.arange(0, n, 3)
    for part in ("valid", "test"):
        neg = torch.stack([(held + 10 + j) % n for j in range(negatives)], dim=1)
        torch.save({"source_node": held, "target_node": (held + 2) % n, "target_node_neg": neg}, split / f"{part}.pt")
    return folder


@pytest.mark.parametrize("numpy_arrays", [True, False])
def test_collab_layout_loads_with_its_split(tmp_path, numpy_arrays):
    write_collab(tmp_path, numpy_arrays=numpy_arrays)
    graph = sgl.datasets.load("ogbl-collab", root=tmp_path)
    split = graph.link_split
    assert graph.num_nodes == 40 and graph.x.shape == (40, 4) and graph.is_symmetric()
    assert graph.ogb_name == "ogbl-collab" and split.train_graph is graph
    assert split.metric == "hits@50" and split.neg_per_pos == 0
    assert split.val_pos.shape == (2, 10) and split.test_pos.shape == (2, 10) and split.test_neg.shape == (2, 20)
    assert split.train_pos.shape == (2, 60) and bool((split.train_pos[0] < split.train_pos[1]).all())
    assert graph.num_edges == 120  # training edges in both directions, nothing held out
    assert sgl.datasets.dataset_task("ogbl-collab") == "link"


def test_citation2_has_per_positive_negatives(tmp_path):
    folder = write_citation2(tmp_path)
    graph = read_ogb_link(folder, "ogbl-citation2")
    split = graph.link_split
    assert split.metric == "mrr" and split.neg_per_pos == 5
    assert split.val_pos.shape == (2, 10) and split.val_neg.shape == (2, 50)
    assert split.val_neg[0, :5].tolist() == [0] * 5  # the negatives of positive 0 share its source


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(DatasetError, match=r"raw/edge.csv.gz.*split/time/train.pt"):
        load_ogb_link("ogbl-collab", root=tmp_path, download=False)
    folder = write_collab(tmp_path)
    torch.save({"edge": np.asarray([[0, 99]])}, folder / "split" / "time" / "valid.pt")
    with pytest.raises(DatasetError, match=r"valid.pt.*'edge' has node ids outside 0..39"):
        read_ogb_link(folder, "ogbl-collab")
    torch.save({"edge": np.asarray([[0, 1]])}, folder / "split" / "time" / "valid.pt")
    with pytest.raises(DatasetError, match=r"lacks the entry 'edge_neg'"):
        read_ogb_link(folder, "ogbl-collab")
    (folder / "split" / "time" / "test.pt").write_bytes(b"not a torch file")
    with pytest.raises(DatasetError, match="test.pt"):
        read_ogb_link(folder, "ogbl-collab")
    with pytest.raises(ConfigError, match="unknown OGB link dataset 'ogbl-foo'"):
        read_ogb_link(folder, "ogbl-foo")


def test_metadata_matches_ogb_master_csv():
    pd = pytest.importorskip("pandas")
    ogb = pytest.importorskip("ogb")
    import os

    master = pd.read_csv(os.path.join(os.path.dirname(ogb.__file__), "linkproppred", "master.csv"),
                         index_col=0, keep_default_na=False)
    for name, info in ogb_link_module.OGB_LINK_DATASETS.items():
        meta = master[name]
        assert info.url == meta["url"] and info.split == meta["split"] and info.metric == meta["eval metric"]
        assert info.add_inverse_edge == (meta["add_inverse_edge"] == "True")
        assert info.download_name == meta["download_name"]


def test_the_link_task_uses_the_provided_split_and_metric(tmp_path):
    write_collab(tmp_path)
    base = {"task": "link", "model": "sgc", "dataset": "ogbl-collab", "root": str(tmp_path), "seeds": 2,
            "train": {"epochs": 5}, "task_options": {"hits_k": [5], "embed_dim": 8}}
    record = run(RunConfig.from_dict(base), progress=False)
    assert record["metric"] == "hits@50" and record["split"] == "ogbl-collab's own"
    assert record["metrics"] == ["auc", "ap", "hits@5", "hits@50", "mrr"]
    assert record["test_hits@50"]["mean"] == 1.0  # 20 negatives < 50: OGB counts every positive as a hit
    with pytest.raises(ConfigError, match="comes with its own edge split"):
        run(RunConfig.from_dict({**base, "task_options": {"val_ratio": 0.1}}), progress=False)
    with pytest.raises(ConfigError, match="self-supervised link prediction .* would discard"):
        run(RunConfig.from_dict({"task": "link", "model": "gae", "dataset": "ogbl-collab", "root": str(tmp_path),
                                 "seeds": 1, "model_config": {"epochs": 1}}), progress=False)


def test_the_split_is_part_of_the_dataset_hash(tmp_path):
    from sgl.tasks import dataset_hash

    write_collab(tmp_path)
    first = dataset_hash(sgl.datasets.load("ogbl-collab", root=tmp_path))
    torch.save({"edge": np.asarray([[0, 2]]), "edge_neg": np.asarray([[0, 20]])},
               tmp_path / "ogbl_collab" / "split" / "time" / "test.pt")
    assert dataset_hash(sgl.datasets.load("ogbl-collab", root=tmp_path)) != first
