"""Criteo and Avazu: find the files under ``root``, read the text (or a store of it) or HET's arrays."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np

from sgl.datasets.ctr._common import _DEFAULT_CHUNK, PathLike
from sgl.datasets.ctr.data import CTRData
from sgl.datasets.ctr.store import load_with_store
from sgl.datasets.ctr.text import AVAZU_FORMAT, CRITEO_FORMAT, CTRFormat, read_ctr_file
from sgl.errors import DatasetError

__all__ = ["load_criteo", "load_avazu", "AUTO_STORE_BYTES"]


_CRITEO_FILES = ("train.txt", "dac_sample.txt", "criteo_sample.txt", "train.csv")
_HET_FILES = ("sampled_dense_feats.npy", "sampled_sparse_feats.npy", "sampled_labels.npy")


def _read_het_layout(folder: Path) -> CTRData:
    """The HET repository's preprocessed Criteo sample: dense (log applied), global sparse ids, labels."""
    try:
        dense = np.load(folder / _HET_FILES[0])
        sparse = np.load(folder / _HET_FILES[1])
        labels = np.load(folder / _HET_FILES[2]).reshape(-1)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"cannot read the HET Criteo arrays in {folder}: {exc}") from exc
    if sparse.ndim != 2 or dense.ndim != 2 or not (len(dense) == len(sparse) == len(labels)):
        raise DatasetError(f"HET Criteo arrays in {folder} disagree: dense {dense.shape}, sparse {sparse.shape}, "
                           f"labels {labels.shape}; expected [N, 13], [N, 26], [N, 1]")
    if (sparse < 0).any():
        raise DatasetError(f"{folder / _HET_FILES[1]} holds negative ids")
    remapped = np.empty(sparse.shape, dtype=np.int64)
    dims = []
    for f in range(sparse.shape[1]):  # global ids -> per-field 1..n_f (0 stays the unknown bucket)
        values, inverse = np.unique(sparse[:, f], return_inverse=True)
        remapped[:, f] = inverse.reshape(-1) + 1
        dims.append(len(values) + 1)
    return CTRData(np.nan_to_num(dense.astype(np.float32)), remapped, labels.astype(np.float32), dims,
                   [f"C{i + 1}" for i in range(sparse.shape[1])])


def _resolve(root: Optional[PathLike], folder_names: Sequence[str], files: Sequence[str], name: str) -> Path:
    from sgl.datasets.download import default_root

    base = default_root() if root is None else Path(root).expanduser()
    if base.is_file():
        return base
    for folder in [base] + [base / n for n in folder_names]:
        if all((folder / f).is_file() for f in _HET_FILES):
            return folder
        for f in files:
            if (folder / f).is_file():
                return folder / f
    raise DatasetError(f"no {name} data under {base}: expected one of {', '.join(files)} (or the HET "
                       f"sampled_*.npy arrays) in it or in {'/'.join(folder_names)}/; {name} cannot be "
                       f"downloaded automatically (its licence needs accepting) — download it and pass --root")


#: Text files larger than this are encoded into an on-disk store when ``store`` is left at None.
AUTO_STORE_BYTES = 2 << 30

_STORE_DOC = """
    ``store`` chooses where the encoded rows live: ``False`` reads them into memory;
    ``True`` or a folder encodes the file once into a memory-mapped store
    (:mod:`sgl.datasets.ctr.store`; ``True`` = ``processed/`` next to the file) and maps it on
    every later call; ``None`` (default) does so only for files over 2 GiB (the 45.8M-row
    Criteo file would otherwise need ~12 GB of RAM). A stored table is in a seeded random
    row order (``shuffle_seed`` 0), so its ``split(seed=0)`` cuts ranges without copying."""


def _load_text(path: Path, fmt: CTRFormat, store: Union[None, bool, str, PathLike], min_count: int,
               chunk_rows: int, max_rows: Optional[int], progress: Optional[bool]) -> CTRData:
    mapped = load_with_store(path, fmt, store, min_count, chunk_rows, max_rows, progress, AUTO_STORE_BYTES)
    return mapped if mapped is not None else read_ctr_file(path, fmt, min_count, chunk_rows, max_rows, progress)


def load_criteo(root: Optional[PathLike] = None, min_count: int = 1, max_rows: Optional[int] = None,
                chunk_rows: int = _DEFAULT_CHUNK, progress: Optional[bool] = None,
                store: Union[None, bool, str, PathLike] = None) -> CTRData:
    """Criteo display-ads data (label, 13 dense, 26 categorical).

    ``root`` is a file (``train.txt`` TSV, or a CSV with a ``label,I1,..`` header) or a folder
    holding one of ``train.txt``, ``dac_sample.txt``, ``criteo_sample.txt``, ``train.csv``, or
    the HET preprocessed arrays ``sampled_{dense,sparse}_feats.npy`` + ``sampled_labels.npy``
    (whose global ids are remapped per field). Text files are read streaming.
    """
    path = _resolve(root, ("criteo",), _CRITEO_FILES, "Criteo")
    if path.is_dir():
        return _read_het_layout(path)
    return _load_text(path, CRITEO_FORMAT, store, min_count, chunk_rows, max_rows, progress)


def load_avazu(root: Optional[PathLike] = None, min_count: int = 1, max_rows: Optional[int] = None,
               chunk_rows: int = _DEFAULT_CHUNK, progress: Optional[bool] = None,
               store: Union[None, bool, str, PathLike] = None) -> CTRData:
    """Avazu mobile-ads data: 22 categorical fields (``hour`` as hour of day), label ``click``.

    ``root`` is the CSV file or a folder holding ``train`` / ``train.csv`` / ``avazu_sample.txt``.
    """
    path = _resolve(root, ("avazu",), ("train", "train.csv", "avazu_sample.txt"), "Avazu")
    if path.is_dir():
        raise DatasetError(f"{path} holds the Criteo HET arrays, not Avazu data")
    return _load_text(path, AVAZU_FORMAT, store, min_count, chunk_rows, max_rows, progress)


load_criteo.__doc__ += _STORE_DOC
load_avazu.__doc__ += _STORE_DOC
