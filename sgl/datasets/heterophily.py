r"""Heterophily benchmarks in the single-``.npz`` layout (Platonov et al., ICLR 2023).

yandex-research/heterophilous-graphs ships roman-empire, amazon-ratings, minesweeper,
tolokers, questions, the filtered Chameleon/Squirrel (duplicate nodes removed) and
re-packed classic sets (``chameleon.npz``, ``texas.npz``, ``actor.npz``, ...) as one archive
each, with the keys

* ``node_features`` ``[n, d]`` floats, ``node_labels`` ``[n]`` integer classes,
* ``edges`` ``[E, 2]`` node-id pairs, **each undirected edge stored once**,
* ``train_masks``, ``val_masks``, ``test_masks`` ``[10, n]`` booleans: the 10 splits.

Like the authors' loader (``dgl.to_bidirected`` unless the name contains ``directed``) and
PyG's ``HeterophilousGraphDataset``, edges are symmetrized, except in the ``*_directed``
files; duplicates are removed, self-loops kept. ``split`` picks which of the splits fills
the masks. minesweeper, tolokers and questions are binary tasks whose published metric is
ROC AUC, not accuracy.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import numpy as np
import torch

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error, ensure_files, find_folder
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.tables import check_finite_rows
from sgl.errors import ConfigError, SGLError

__all__ = ["HETEROPHILY_FILES", "HETEROPHILY_KEYS", "load_heterophily", "read_heterophily", "find_heterophily_npz"]

PathLike = Union[str, os.PathLike]

# Pinned to one commit of the authors' repository so a download is always the same file.
_URL = ("https://github.com/yandex-research/heterophilous-graphs/raw/"
        "a431395582e929d88271309716bea4fe24ce6318/data")

#: registered name -> file name in yandex-research/heterophilous-graphs ``data/``
HETEROPHILY_FILES: Dict[str, str] = {
    "roman-empire": "roman_empire.npz",
    "amazon-ratings": "amazon_ratings.npz",
    "minesweeper": "minesweeper.npz",
    "tolokers": "tolokers.npz",
    "questions": "questions.npz",
    "chameleon-filtered": "chameleon_filtered.npz",
    "squirrel-filtered": "squirrel_filtered.npz",
    "chameleon-filtered-directed": "chameleon_filtered_directed.npz",
    "squirrel-filtered-directed": "squirrel_filtered_directed.npz",
}

#: the keys every archive of this layout holds
HETEROPHILY_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")
_MASK_KEYS = ("train_masks", "val_masks", "test_masks")


def _read_arrays(path: Path) -> Dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in HETEROPHILY_KEYS if k not in archive.files]
            if missing:
                raise corrupt_file_error(path, f"the archive lacks the keys {', '.join(missing)} of the heterophily "
                                               f"layout ({', '.join(HETEROPHILY_KEYS)})")
            return {k: np.asarray(archive[k]) for k in HETEROPHILY_KEYS}
    except SGLError:
        raise
    except Exception as exc:  # BadZipFile, truncated members, pickled object arrays
        raise corrupt_file_error(path, exc) from exc


def _masks(arrays: Dict[str, np.ndarray], n: int, path: Path) -> np.ndarray:
    stacks = []
    for key in _MASK_KEYS:
        mask = arrays[key]
        if mask.ndim == 1:
            mask = mask[None, :]
        if mask.ndim != 2 or mask.shape[1] != n:
            raise corrupt_file_error(path, f"{key} has shape {arrays[key].shape}; expected [num_splits, {n}]")
        stacks.append(mask.astype(bool))
    if len({m.shape[0] for m in stacks}) != 1:
        raise corrupt_file_error(path, f"the mask arrays hold different numbers of splits "
                                       f"({', '.join(str(m.shape[0]) for m in stacks)})")
    return np.stack(stacks)  # [3, num_splits, n]


def read_heterophily(path: PathLike, split: int = 0, to_undirected: Optional[bool] = None,
                     name: Optional[str] = None) -> Graph:
    """Read one heterophily-layout ``.npz`` into a :class:`~sgl.data.Graph` (no download).

    Args:
        path: the archive.
        split: which of its splits (usually 10) fills the masks.
        to_undirected: ``None`` symmetrizes unless the file name contains ``directed`` (the
            authors' rule); ``True`` always; ``False`` keeps the stored direction, which is
            only meaningful for the ``*_directed`` files (others store each edge once).
        name: the graph's name (default: the file's stem).

    Example:
        >>> import tempfile, numpy as np
        >>> from pathlib import Path
        >>> from sgl.datasets import read_heterophily
        >>> path = Path(tempfile.mkdtemp()) / "tiny.npz"
        >>> masks = np.zeros((10, 3), dtype=bool); masks[:, 0] = True
        >>> np.savez(path, node_features=np.eye(3, dtype=np.float32), node_labels=np.array([0, 1, 1]),
        ...          edges=np.array([[0, 1], [1, 2]]), train_masks=masks, val_masks=masks[:, [1, 0, 2]],
        ...          test_masks=masks[:, [2, 1, 0]])
        >>> g = read_heterophily(path, split=4)
        >>> g.num_nodes, g.num_edges, g.split_sizes(), g.split, g.num_splits
        (3, 4, (1, 1, 1), 4, 10)
    """
    path = Path(path)
    arrays = _read_arrays(path)
    x, labels, edges = arrays["node_features"], arrays["node_labels"], arrays["edges"]
    if x.ndim != 2:
        raise corrupt_file_error(path, f"node_features has shape {x.shape}; expected [num_nodes, num_features]")
    n = x.shape[0]
    if labels.shape != (n,):
        raise corrupt_file_error(path, f"node_labels has shape {labels.shape} for {n} feature rows; expected ({n},)")
    if np.issubdtype(labels.dtype, np.floating) and np.all(np.isfinite(labels)) and np.all(labels == np.round(labels)):
        labels = labels.astype(np.int64)  # some copies store 0/1 targets as floats
    if not np.issubdtype(labels.dtype, np.integer):
        raise corrupt_file_error(path, f"node_labels have dtype {labels.dtype}; expected integer classes")
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise corrupt_file_error(path, f"edges has shape {edges.shape} and dtype {edges.dtype}; expected [E, 2] ids")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        row = int(np.flatnonzero((edges < 0).any(axis=1) | (edges >= n).any(axis=1))[0])
        raise corrupt_file_error(path, f"edges row {row} is {edges[row].tolist()}; node ids must be in 0..{n - 1}")
    x = x.astype(np.float32, copy=False)
    check_finite_rows(x, path)
    masks = _masks(arrays, n, path)
    num_splits = masks.shape[1]
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 0 <= split < num_splits:
        raise ConfigError(f"split must be an integer in 0..{num_splits - 1} ({path.name} holds {num_splits} splits), "
                          f"got {split!r}")
    if to_undirected is None:
        to_undirected = "directed" not in path.stem
    indptr, indices, _ = edges_to_csr(edges[:, 0], edges[:, 1], n, undirected=bool(to_undirected))
    train, val, test = (torch.from_numpy(np.ascontiguousarray(masks[i, int(split)])) for i in range(3))
    graph = csr_graph(indptr, indices, x=torch.from_numpy(x), y=torch.from_numpy(labels.astype(np.int64)),
                      train_mask=train, val_mask=val, test_mask=test, name=name or path.stem)
    graph.split, graph.num_splits = int(split), int(num_splits)
    return graph


def find_heterophily_npz(root: Optional[PathLike], folder_names: Sequence[str],
                         file_names: Sequence[str]) -> Optional[Path]:
    """The first of ``file_names`` found in the usual folders under ``root``, or ``None``."""
    for file_name in file_names:
        folder = find_folder(root, folder_names, [file_name])
        if folder is not None:
            return folder / file_name
    return None


def load_heterophily(
    name: str,
    root: Optional[PathLike] = None,
    split: int = 0,
    to_undirected: Optional[bool] = None,
    download: bool = True,
) -> Graph:
    """roman-empire, amazon-ratings, minesweeper, tolokers, questions or filtered Chameleon/Squirrel.

    Args:
        name: one of :data:`HETEROPHILY_FILES` (case-insensitive, ``_`` = ``-``).
        root: folder holding ``<file>.npz`` directly, in ``<name>/`` or ``<name>/raw/``;
            default ``$SGL_DATA`` or ``~/.sgl/datasets``. A missing file is downloaded from
            yandex-research/heterophilous-graphs.
        split: which of the 10 splits fills the masks (0..9).
        to_undirected: see :func:`read_heterophily` (``None``: as the authors load it).
        download: set ``False`` to fail instead of downloading.

    Example:
        >>> import tempfile, numpy as np
        >>> from pathlib import Path
        >>> from sgl.datasets import load_heterophily
        >>> root = Path(tempfile.mkdtemp())
        >>> masks = np.eye(10, 4, dtype=bool)
        >>> np.savez(root / "tolokers.npz", node_features=np.ones((4, 2), dtype=np.float32),
        ...          node_labels=np.array([0, 1, 0, 1]), edges=np.array([[0, 1], [2, 3]]),
        ...          train_masks=masks, val_masks=masks, test_masks=masks)
        >>> load_heterophily("tolokers", root=root, split=2, download=False).train_mask.nonzero().flatten().tolist()
        [2]
    """
    key = str(name).strip().lower().replace("_", "-")
    if key not in HETEROPHILY_FILES:
        raise ConfigError(f"unknown heterophily dataset {name!r}; expected one of {', '.join(HETEROPHILY_FILES)}")
    filename = HETEROPHILY_FILES[key]
    folder = ensure_files(root, [key, filename[:-4]], [filename], {filename: f"{_URL}/{filename}"}, download=download)
    return read_heterophily(folder / filename, split, to_undirected, name=key)
