r"""Real heterogeneous node-classification sets: ACM (HeCo's files) and IMDB (MAGNN's zip).

Both load as a :class:`~sgl.data.HeteroGraph` with one direction stored per relation (the
heterogeneous operators of :mod:`sgl.ops` read relations in both directions).

* **ACM** (HeCo layout, ``<root>/acm/`` or ``root`` itself): 4,019 papers (target, 1,902
  bag-of-words features), 7,167 authors (features: the sums of their papers' rows), 60
  subjects (no features); relations ``author -writes-> paper`` and ``subject -has-> paper``;
  3 classes; splits of 20, 40 or 60 labelled papers per class (``labels_per_class``) with
  1,000 validation and 1,000 test papers.
* **IMDB** (MAGNN's ``IMDB_processed.zip``, ``<root>/imdb/`` or ``root``): 4,278 movies
  (target), 2,081 directors, 5,257 actors, all with 3,066 keyword features; relations
  ``director -directs-> movie`` and ``actor -acts_in-> movie``; 3 genres; split 400/400/3,478.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from sgl.data import HeteroGraph
from sgl.datasets.download import corrupt_file_error, default_root
from sgl.errors import ConfigError, DatasetError

__all__ = ["load_acm", "load_imdb", "read_acm", "read_imdb"]

PathLike = Union[str, os.PathLike]


def _folder(root: Optional[PathLike], name: str, marker: str) -> Path:
    base = Path(root).expanduser() if root is not None else default_root()
    for candidate in (base / name, base / "hetero" / name, base):
        if (candidate / marker).exists():
            return candidate
    raise DatasetError(f"no {name} files under {base} (looked for {marker} in {base / name}, "
                       f"{base / 'hetero' / name} and {base}); point root at the folder holding them")


def _sparse(path: Path) -> Any:
    import scipy.sparse as sp

    try:
        return sp.load_npz(path if isinstance(path, (str, Path)) else path).tocsr()
    except Exception as exc:  # BadZipFile, KeyError, ValueError
        raise corrupt_file_error(path, exc) from exc


def _dense(matrix: Any) -> torch.Tensor:
    return torch.from_numpy(np.asarray(matrix.todense(), dtype=np.float32))


def _pairs(path: Path) -> torch.Tensor:
    try:
        pairs = np.loadtxt(path, dtype=np.int64, ndmin=2)
    except Exception as exc:
        raise corrupt_file_error(path, exc) from exc
    if pairs.shape[1] != 2:
        raise corrupt_file_error(path, f"expected two ids per line, got {pairs.shape[1]} columns")
    return torch.from_numpy(pairs.T.copy())


def read_acm(folder: PathLike, labels_per_class: int = 20) -> HeteroGraph:
    """Read ACM from a HeCo-layout folder (``pa.txt``, ``ps.txt``, ``p_feat.npz``, ...)."""
    if labels_per_class not in (20, 40, 60):
        raise ConfigError(f"ACM has splits with 20, 40 or 60 labelled papers per class, got {labels_per_class!r}")
    folder = Path(folder)
    for file in ("pa.txt", "ps.txt", "p_feat.npz", "a_feat.npz", "labels.npy"):
        if not (folder / file).exists():
            raise DatasetError(f"ACM file {folder / file} is missing (HeCo's data/acm/ layout)")
    pa, ps = _pairs(folder / "pa.txt"), _pairs(folder / "ps.txt")
    labels = np.load(folder / "labels.npy").astype(np.int64)
    n_paper = int(labels.shape[0])
    counts = {"paper": n_paper, "author": int(pa[1].max()) + 1, "subject": int(ps[1].max()) + 1}
    x_paper, x_author = _dense(_sparse(folder / "p_feat.npz")), _dense(_sparse(folder / "a_feat.npz"))
    split = {}
    for part, key in (("train", "train_mask"), ("val", "val_mask"), ("test", "test_mask")):
        path = folder / f"{part}_{labels_per_class}.npy"
        if not path.exists():
            raise DatasetError(f"ACM split file {path} is missing")
        split[key] = torch.from_numpy(np.load(path).astype(np.int64))
    graph = HeteroGraph.from_edge_index(
        counts, {("author", "writes", "paper"): pa.flip(0), ("subject", "has", "paper"): ps.flip(0)},
        x_dict={"paper": x_paper, "author": x_author}, target="paper", y=torch.from_numpy(labels),
        name="acm", **split)
    return graph


def load_acm(root: Optional[PathLike] = None, labels_per_class: int = 20) -> HeteroGraph:
    """ACM (HeCo's files) from ``root`` (``<root>/acm``, ``<root>/hetero/acm`` or ``root``).

    Example (with the shared data folder):
        >>> g = load_acm("/work/shared/datasets")                       # doctest: +SKIP
        >>> g.num_nodes_dict, g.split_sizes()                           # doctest: +SKIP
        ({'paper': 4019, 'author': 7167, 'subject': 60}, (60, 1000, 1000))
    """
    return read_acm(_folder(root, "acm", "pa.txt"), labels_per_class)


def read_imdb(path: PathLike) -> HeteroGraph:
    """Read IMDB from MAGNN's ``IMDB_processed.zip`` (read in place, never extracted) with the
    MAGNN/PyG reader of ``file:`` (:func:`sgl.datasets.hetero_files.read_magnn`), naming its types."""
    from sgl.datasets.hetero_files import read_magnn

    path = Path(path)
    return read_magnn(path, type_names=("movie", "director", "actor"),
                      relation_names={(1, 0): "directs", (2, 0): "acts_in"}, name="imdb",
                      require=("features_0.npz", "features_1.npz", "features_2.npz", "labels.npy",
                               "train_val_test_idx.npz"))


def load_imdb(root: Optional[PathLike] = None) -> HeteroGraph:
    """IMDB (MAGNN's preprocessing) from ``IMDB_processed.zip`` under ``root``
    (``<root>/imdb``, ``<root>/hetero/imdb`` or ``root``)."""
    return read_imdb(_folder(root, "imdb", "IMDB_processed.zip") / "IMDB_processed.zip")
