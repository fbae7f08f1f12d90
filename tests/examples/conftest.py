"""Tiny fake OGB datasets in OGB's on-disk layouts, for smoke-testing the examples/ogb scripts.

The writer follows tests/datasets/test_ogb.py (gzip csv, no header; papers100M as npz
archives) but makes a graph GAMLP can actually learn: a few hundred nodes in a handful of
classes, features centred on a per-class mean, and mostly intra-class edges.
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path
from typing import Iterable, List, Sequence, Tuple

import numpy as np
import pytest
import torch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ogb"

#: name -> (dataset folder, split scheme, binary layout)
LAYOUTS = {
    "ogbn-arxiv": ("ogbn_arxiv", "time", False),
    "ogbn-products": ("ogbn_products", "sales_ranking", False),
    "ogbn-papers100M": ("ogbn_papers100M", "time", True),
}


def write_gz(path: Path, rows: Iterable) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            values = row if isinstance(row, (list, tuple, np.ndarray)) else [row]
            f.write(",".join(str(v) for v in values) + "\n")


def write_fake_ogb(root: Path, name: str, num_nodes: int = 240, num_classes: int = 4, num_features: int = 8,
                   seed: int = 0, unlabelled: int = 0) -> Path:
    """Write ``root/<ogb folder>`` for ``name``; returns the dataset folder.

    ``unlabelled`` extra nodes (papers100M-style: label NaN, in no split) are appended.
    Splits: 50% train, 20% valid, 30% test of the labelled nodes.
    """
    folder_name, split, binary = LAYOUTS[name]
    folder = root / folder_name
    rng = np.random.RandomState(seed)
    n = num_nodes + unlabelled
    labels = np.arange(n) % num_classes
    rng.shuffle(labels)
    centres = rng.normal(0.0, 1.0, size=(num_classes, num_features))
    feat = (centres[labels] + rng.normal(0.0, 1.5, size=(n, num_features))).astype(np.float32)
    edges = []
    for u in range(n):  # ~4 out-edges per node, 80% to the same class: homophilous like OGB graphs
        for _ in range(4):
            same = rng.rand() < 0.8
            pool = np.flatnonzero((labels == labels[u]) if same else (labels != labels[u]))
            v = int(rng.choice(pool))
            if v != u:
                edges.append((u, v))
    edges = sorted(set(edges))
    order = rng.permutation(num_nodes)  # only the first num_nodes nodes are labelled / in the split
    train, valid, test = np.split(order, [num_nodes // 2, num_nodes // 2 + num_nodes // 5])
    if binary:
        (folder / "raw").mkdir(parents=True, exist_ok=True)
        node_label = labels.astype(np.float64)[:, None]
        node_label[num_nodes:] = np.nan
        np.savez(folder / "raw" / "data.npz", edge_index=np.array(edges).T, num_nodes_list=np.array([n]),
                 num_edges_list=np.array([len(edges)]), node_feat=feat, node_year=np.full((n, 1), 2020))
        np.savez(folder / "raw" / "node-label.npz", node_label=node_label)
    else:
        write_gz(folder / "raw" / "edge.csv.gz", edges)
        write_gz(folder / "raw" / "num-node-list.csv.gz", [n])
        write_gz(folder / "raw" / "num-edge-list.csv.gz", [len(edges)])
        write_gz(folder / "raw" / "node-feat.csv.gz", [list(map(float, row)) for row in feat])
        write_gz(folder / "raw" / "node-label.csv.gz", list(labels))
    for part, ids in (("train", train), ("valid", valid), ("test", test)):
        write_gz(folder / "split" / split / f"{part}.csv.gz", sorted(int(i) for i in ids))
    (folder / "RELEASE_v1.txt").write_text("fake dataset for tests\n")
    return folder


@pytest.fixture
def ogb_root(tmp_path):
    """``ogb_root(name, **kwargs)`` writes a fake dataset under tmp_path/ogb; returns that root."""

    def make(name: str, **kwargs) -> Path:
        root = tmp_path / "ogb"
        write_fake_ogb(root, name, **kwargs)
        return root

    return make


@pytest.fixture
def examples_path(monkeypatch):
    """Put examples/ogb on sys.path (the scripts import their shared gamlp_runner module)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield EXAMPLES
    for module in ("gamlp_runner", "gamlp_products", "gamlp_arxiv", "gamlp_papers100m"):
        sys.modules.pop(module, None)


@pytest.fixture(autouse=True)
def _one_thread():
    """Two cores are shared with other jobs; one thread also keeps the results bit-identical."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def run_main(capsys):
    """``run_main(main, argv)`` runs a script's ``main``; returns (record, printed lines)."""

    def run(main, argv: Sequence[str]) -> Tuple[dict, List[str]]:
        capsys.readouterr()  # drop anything printed before
        record = main(list(argv))
        return record, capsys.readouterr().out.splitlines()

    return run
