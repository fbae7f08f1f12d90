r"""ogbn-mag read from OGB's heterogeneous on-disk layout (what ``mag.zip`` unpacks to).

Under ``<root>/ogbn_mag/`` (PyG/OGB's folder), ``<root>/mag/`` (the zip's) or ``root``::

    raw/num-node-dict.csv.gz                  header: node types; one row: counts
    raw/triplet-type-list.csv.gz              lines "src_type,relation,dst_type"
    raw/relations/<src>___<rel>___<dst>/edge.csv.gz    lines "src,dst" (per-type ids)
    raw/node-feat/paper/node-feat.csv.gz      128 floats per paper (other types: none)
    raw/node-feat/paper/node_year.csv.gz      optional, one year per paper
    raw/node-label/paper/node-label.csv.gz    one venue id per paper (349 classes)
    split/time/paper/{train,valid,test}.csv.gz   paper ids (train <= 2017, valid 2018, test 2019)

(``ogb.io.read_graph_raw.read_csv_heterograph_raw`` and ``read_nodesplitidx_split_hetero``
read the same files.) The graph carries ``ogb_name = "ogbn-mag"``, so
:class:`sgl.tasks.Trainer` also reports OGB's official ``Evaluator`` accuracy.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import numpy as np
import torch

from sgl.data import HeteroGraph
from sgl.datasets.download import corrupt_file_error, default_root
from sgl.datasets.ogb import _read_csv
from sgl.errors import DatasetError

__all__ = ["load_ogbn_mag", "read_ogbn_mag"]

PathLike = Union[str, os.PathLike]
_MARKER = "raw/num-node-dict.csv.gz"


def _find(root: Optional[PathLike]) -> Path:
    base = Path(root).expanduser() if root is not None else default_root()
    for candidate in (base / "ogbn_mag", base / "mag", base):
        if (candidate / _MARKER).exists():
            return candidate
    raise DatasetError(f"no ogbn-mag files under {base} (looked for {_MARKER} in {base / 'ogbn_mag'}, "
                       f"{base / 'mag'} and {base}); unzip OGB's mag.zip there (no download on this machine)")


def _require(path: Path) -> Path:
    if not path.exists():
        raise DatasetError(f"ogbn-mag file {path} is missing (OGB heterogeneous layout, see sgl.datasets.hetero_mag)")
    return path


def read_ogbn_mag(folder: PathLike, split: str = "time") -> HeteroGraph:
    """Read the ogbn-mag folder (the one holding ``raw/`` and ``split/``)."""
    import pandas as pd

    folder = Path(folder)
    raw = folder / "raw"
    path = _require(raw / "num-node-dict.csv.gz")
    try:
        frame = pd.read_csv(path, compression="gzip")
    except Exception as exc:
        raise corrupt_file_error(path, exc) from exc
    counts = {str(t): int(frame[t].iloc[0]) for t in frame.columns}
    triplets = [tuple(str(p) for p in row) for row in _read_csv(_require(raw / "triplet-type-list.csv.gz"), dtype=str)]
    edges = {}
    for triplet in triplets:
        if len(triplet) != 3:
            raise corrupt_file_error(raw / "triplet-type-list.csv.gz", f"a line has {len(triplet)} fields, expected 3")
        values = _read_csv(_require(raw / "relations" / "___".join(triplet) / "edge.csv.gz"), dtype=np.int64)
        edges[triplet] = torch.from_numpy(values.T.copy())
    x_dict = {}
    for ntype in counts:
        feat = raw / "node-feat" / ntype / "node-feat.csv.gz"
        if feat.exists():
            x_dict[ntype] = torch.from_numpy(_read_csv(feat, dtype=np.float32))
    label_path = _require(raw / "node-label" / "paper" / "node-label.csv.gz")
    labels = torch.from_numpy(_read_csv(label_path, dtype=np.int64).reshape(-1))
    masks = {}
    for part, key in (("train", "train_mask"), ("valid", "val_mask"), ("test", "test_mask")):
        ids = _read_csv(_require(folder / "split" / split / "paper" / f"{part}.csv.gz"), dtype=np.int64)
        masks[key] = torch.from_numpy(ids.reshape(-1))
    graph = HeteroGraph.from_edge_index(counts, edges, x_dict=x_dict, target="paper", y=labels, name="ogbn-mag",
                                        **masks)
    graph.ogb_name = "ogbn-mag"
    return graph


def load_ogbn_mag(root: Optional[PathLike] = None, split: str = "time") -> HeteroGraph:
    """ogbn-mag from an ``ogb`` download under ``root`` (see the module docstring for the layout)."""
    return read_ogbn_mag(_find(root), split)
