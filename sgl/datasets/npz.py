r"""Graphs in the gnn-benchmark ``.npz`` layout (Shchur et al., "Pitfalls of GNN Evaluation").

One ``.npz`` archive holds the adjacency and the attributes as CSR triplets plus labels:
``adj_data, adj_indices, adj_indptr, adj_shape``, ``attr_data, attr_indices, attr_indptr,
attr_shape``, ``labels`` (and ``node_names``, ``class_names``, unused). Amazon
Computers/Photo, Coauthor CS/Physics and a Cora copy ship in this format.

Processing follows PyG's ``torch_geometric.io.read_npz``: features are densified and
binarized (``x > 0`` becomes 1), self-loops are removed and the graph is made undirected
and deduplicated. The files have no split; a seeded per-class split is drawn
(:func:`sgl.datasets.per_class_split`: 20 training and 30 validation nodes per class,
the rest for testing, the Shchur et al. protocol).

Dense features cost ``num_nodes * num_features * 4`` bytes: ~1.2 GB for Coauthor Physics
(34,493 x 8,415), as in PyG.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

import numpy as np
import scipy.sparse as sp
import torch

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error, ensure_files
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.splits import per_class_split
from sgl.errors import ConfigError, SGLError

__all__ = ["NPZ_FILES", "load_npz", "read_npz"]

PathLike = Union[str, os.PathLike]

_URL = "https://github.com/shchur/gnn-benchmark/raw/master/data/npz"

#: Registered name -> file name in shchur/gnn-benchmark ``data/npz/`` (PyG's names too).
NPZ_FILES = {
    "cora-npz": "cora.npz",
    "amazon-computers": "amazon_electronics_computers.npz",
    "amazon-photo": "amazon_electronics_photo.npz",
    "coauthor-cs": "ms_academic_cs.npz",
    "coauthor-physics": "ms_academic_phy.npz",
}

# shchur/gnn-benchmark @ 1e72912 : data/npz/cora.npz
_SHA256 = {"cora.npz": "068e22d90c3849b4057dfb05851741428992af058efcd4e7ebb4186f3d581de2"}

_REQUIRED = ("adj_data", "adj_indices", "adj_indptr", "adj_shape",
             "attr_data", "attr_indices", "attr_indptr", "attr_shape", "labels")


def _csr(arrays: dict, prefix: str, path: Path) -> sp.csr_matrix:
    try:
        shape = tuple(int(v) for v in arrays[f"{prefix}_shape"])
        return sp.csr_matrix((arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]),
                             shape=shape)
    except Exception as exc:  # inconsistent CSR triplets
        raise corrupt_file_error(path, f"{prefix}_* do not form a valid sparse matrix: {exc}") from exc


def read_npz(path: PathLike, train_per_class: int = 20, val_per_class: int = 30, seed: int = 0,
             name: Optional[str] = None) -> Graph:
    """Read one gnn-benchmark ``.npz`` file into an undirected :class:`~sgl.data.Graph` (no download).

    Example:
        >>> import os
        >>> from sgl.datasets import read_npz
        >>> path = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "gnn_benchmark_npz", "cora.npz")
        >>> g = read_npz(path) if os.path.isfile(path) else None
        >>> (g.num_nodes, g.num_edges) if g is not None else (2708, 10556)
        (2708, 10556)
    """
    path = Path(path)
    try:
        # allow_pickle=False: node_names/class_names may be object arrays; they are never read.
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in _REQUIRED if k not in archive.files]
            if missing:
                raise corrupt_file_error(path, f"the archive lacks the keys {', '.join(missing)}")
            arrays = {k: archive[k] for k in _REQUIRED}
    except SGLError:
        raise
    except Exception as exc:  # BadZipFile, truncated members, CRC errors, pickled arrays
        raise corrupt_file_error(path, exc) from exc

    adj = _csr(arrays, "adj", path)
    attr = _csr(arrays, "attr", path)
    labels = np.asarray(arrays["labels"])
    n = adj.shape[0]
    if adj.shape[0] != adj.shape[1]:
        raise corrupt_file_error(path, f"adj_shape {adj.shape} is not square")
    if attr.shape[0] != n or labels.shape != (n,):
        raise corrupt_file_error(
            path, f"{n} nodes in the adjacency but {attr.shape[0]} feature rows and labels of shape {labels.shape}"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise corrupt_file_error(path, f"labels have dtype {labels.dtype}; expected integer classes")

    coo = adj.tocoo()
    indptr, indices, _ = edges_to_csr(coo.row, coo.col, n, undirected=True, remove_self_loops=True)
    # PyG binarizes: some copies store term counts instead of 0/1.
    x = (attr.toarray() > 0).astype(np.float32)
    y = torch.from_numpy(labels.astype(np.int64))
    train, val, test = per_class_split(y, train_per_class, val_per_class, seed=seed)
    return csr_graph(indptr, indices, x=torch.from_numpy(x), y=y,
                     train_mask=train, val_mask=val, test_mask=test, name=name or path.stem)


def load_npz(
    name: str,
    root: Optional[PathLike] = None,
    train_per_class: int = 20,
    val_per_class: int = 30,
    seed: int = 0,
    download: bool = True,
) -> Graph:
    """Amazon Computers/Photo, Coauthor CS/Physics or Cora from gnn-benchmark ``.npz`` files.

    Args:
        name: one of ``cora-npz``, ``amazon-computers``, ``amazon-photo``, ``coauthor-cs``,
            ``coauthor-physics`` (case-insensitive).
        root: folder holding the ``.npz`` directly or in ``<name>/raw/``; default
            ``$SGL_DATA`` or ``~/.sgl/datasets``. A missing file is downloaded from
            shchur/gnn-benchmark.
        train_per_class, val_per_class, seed: the seeded per-class split.
        download: set ``False`` to fail instead of downloading.

    Example:
        >>> import os
        >>> from sgl.datasets import load_npz
        >>> root = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "gnn_benchmark_npz")
        >>> g = load_npz("cora-npz", root=root) if os.path.isdir(root) else None
        >>> g.split_sizes() if g is not None else (140, 210, 2358)
        (140, 210, 2358)
    """
    key = str(name).lower().replace("_", "-")
    if key not in NPZ_FILES:
        raise ConfigError(f"unknown gnn-benchmark dataset {name!r}; expected one of {', '.join(NPZ_FILES)}")
    filename = NPZ_FILES[key]
    folder = ensure_files(root, [key], [filename], {filename: f"{_URL}/{filename}"}, _SHA256, download=download)
    return read_npz(folder / filename, train_per_class, val_per_class, seed, name=key)
