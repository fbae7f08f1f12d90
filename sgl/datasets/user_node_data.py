r"""Feature files of a user's edge list, read into :class:`NodeRows` before they meet the graph.

A node-data file is either **row-ordered** (row ``i`` belongs to the ``i``-th node) or
**keyed** (each row names its node id). Which node a row lands on is decided later, by
:mod:`sgl.datasets.user_ids`, once every file's ids are known (ids may be relabelled).

Feature files:

* ``.npy`` ``[n, d]`` (row-ordered);
* ``.npz``: a scipy sparse matrix or one array (row-ordered);
* ``.json`` (optionally ``.json.gz``) in the MUSAE layout ``{"0": [3, 17], "1": [5], ...}``:
  each node id maps to the ids of its binary features, giving a 0/1 matrix
  ``[n, max_feature_id + 1]`` (keyed); a JSON list of such lists is row-ordered. Read
  dense, so the matrix must fit in :data:`DENSE_MAX_BYTES`;
* text (CSV/TSV/whitespace), one row per node; a header whose first name is ``id``,
  ``node``, ``node_id``, ``nid`` or ``index`` makes the first column the node id (keyed).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sgl.datasets.user_node_data import read_features
    >>> path = Path(tempfile.mkdtemp()) / "feats.json"
    >>> _ = path.write_text('{"0": [0, 2], "1": [1], "2": []}')
    >>> rows = read_features(path)
    >>> rows.ids.tolist(), rows.values.tolist()
    ([0, 1, 2], [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Union

import numpy as np

from sgl.datasets.download import corrupt_file_error
from sgl.datasets.tables import check_finite_rows, read_table, sniff
from sgl.errors import DatasetError, SGLError

__all__ = ["NodeRows", "read_features", "resolve_file", "load_array", "ID_NAMES", "DENSE_MAX_BYTES"]

PathLike = Union[str, os.PathLike]

#: header names that mark a node-id column
ID_NAMES = ("id", "node", "node_id", "nid", "index")
#: the largest dense matrix a loader builds from a description of it (identity, feature-id lists)
DENSE_MAX_BYTES = 4 * 2**30


@dataclass
class NodeRows:
    """One node-data file as read: ``values`` (``[rows, d]`` float32 features or ``[rows]``
    int64 labels, ``-1`` = unlabeled), ``ids`` (the node id each row names; ``None``: row
    ``i`` is the ``i``-th node) and, for string labels, ``names`` (class ``c`` = ``names[c]``)."""

    path: Path
    values: np.ndarray
    ids: Optional[np.ndarray] = None
    names: Optional[List[str]] = None

    @property
    def keyed(self) -> bool:
        return self.ids is not None


def resolve_file(path: PathLike, root: Optional[PathLike], what: str) -> Path:
    """``path`` (read from ``root`` when relative and ``root`` is given), which must be a file."""
    file = Path(os.path.expanduser(str(path)))
    if not file.is_absolute() and root is not None:
        file = Path(os.path.expanduser(str(root))) / file
    if file.is_dir():
        raise DatasetError(f"{file} is a folder; the {what} must be a file")
    if not file.is_file():
        where = f" (relative paths are read from root={str(root)!r})" if root is not None else ""
        raise DatasetError(f"no {what} at {file}{where}; check the path")
    return file


def load_array(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # truncated, pickled object arrays, not an .npy
        raise corrupt_file_error(path, exc) from exc


def _load_npz_matrix(path: Path) -> np.ndarray:
    import scipy.sparse as sp

    try:
        return sp.load_npz(path).toarray()
    except Exception:
        pass  # not a scipy sparse archive: an np.savez with one array
    try:
        with np.load(path, allow_pickle=False) as archive:
            if len(archive.files) != 1:
                raise DatasetError(f"{path}: a feature .npz must hold a scipy sparse matrix or exactly one array, "
                                   f"found {', '.join(archive.files)}")
            return np.asarray(archive[archive.files[0]])
    except SGLError:
        raise
    except Exception as exc:
        raise corrupt_file_error(path, exc) from exc


def read_features(spec: Any, root: Optional[PathLike] = None) -> NodeRows:
    """Read a feature file (see the module docstring for the formats)."""
    path = resolve_file(spec, root, "feature file")
    name = path.name.lower()
    if name.endswith((".json", ".json.gz")):
        from sgl.datasets.user_features_json import read_json_features

        return NodeRows(path, *read_json_features(path, DENSE_MAX_BYTES))
    if path.suffix in (".npy", ".npz"):
        x = load_array(path) if path.suffix == ".npy" else _load_npz_matrix(path)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
            raise DatasetError(f"{path}: features must be a numeric [num_nodes, num_features] array, got shape "
                               f"{x.shape} and dtype {x.dtype}")
        x = x.astype(np.float32)
        check_finite_rows(x, path, "features")
        return NodeRows(path, x)
    layout = sniff(path, what="feature file")
    has_id = layout.header is not None and layout.header[0].strip().lower() in ID_NAMES
    if layout.num_columns - has_id < 1:
        raise DatasetError(f"{path}: no feature columns besides the node id")
    table = read_table(layout, id_columns=1 if has_id else 0, what="feature file")
    return NodeRows(path, table.values.astype(np.float32), table.ids[:, 0] if has_id else None)
