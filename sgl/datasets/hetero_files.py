r"""Heterogeneous graphs from a user's files in the two common public layouts: MAGNN/PyG and HGB.

Both load as a :class:`~sgl.data.HeteroGraph` with the conventions of the built-in sets
(:mod:`sgl.datasets.hetero`): node ids per type ``0..n_t-1``, **one direction stored per
relation** (the heterogeneous operators and models read every relation both ways), labels
and split masks on one target type.

**MAGNN / PyG raw layout** (a folder, or a zip such as ``IMDB_processed.zip`` read in place):

* ``adjM.npz``: scipy sparse ``[N, N]`` over all nodes, the union of all relations; read as
  undirected (MAGNN's matrices are symmetric; a non-symmetric one is symmetrized, with a warning);
* ``node_types.npy``: the integer type of each node (types ``0..T-1``; node ``v`` is the
  ``k``-th node of its type when ``k`` nodes of that type come before it);
* ``features_<t>.npz`` (scipy sparse or one array) or ``features_<t>.npy``: features of type
  ``t``; a type without a file is featureless;
* ``labels.npy``: classes of type 0, the target; ``train_val_test_idx.npz`` (``train_idx``,
  ``val_idx``, ``test_idx``: type-0 node ids). Without it, a seeded stratified split is drawn.

Types are named ``"0"``, ``"1"``, ...; each pair of types ``a < b`` joined in ``adjM`` gives the
relation ``(str(b), "to", str(a))`` (toward the lower type, so toward the target), and edges
within a type ``(str(a), "to", str(a))``, each stored once.

**HGB** (Lv et al., *Are we really making much progress?*, KDD 2021; THUDM/HGB's
``data_loader.py``), a folder holding tab-separated ``node.dat``
(``node_id  node_name  node_type  [features, comma-separated]``), ``link.dat``
(``src  dst  link_type  weight``), ``label.dat`` (``node_id  node_name  node_type  label``:
the training labels) and optionally ``label.dat.test`` (the test labels). Types are named by
their numbers; link type ``r`` from type ``s`` to ``d`` is the relation ``(s, "r<r>", d)``.
HGB lists most relations in both directions (``paper-author`` and ``author-paper``); a link
type that is exactly the reverse of an earlier one is not stored again. Link weights are
not kept (a warning says so when they are not all 1). The target is the type in
``label.dat``; validation is a seeded random ``val_ratio`` (default 0.2, as HGB's scripts) of
``label.dat``, the rest trains, ``label.dat.test`` tests (without it: a seeded stratified
split of ``label.dat``). A node with several labels (HGB's IMDB: ``0,2``) is an error: these
models classify one label per node. ``graph.node_ids`` maps each type to its nodes' HGB ids.
"""
from __future__ import annotations

import io
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from sgl.data import HeteroGraph
from sgl.datasets.download import corrupt_file_error
from sgl.errors import DatasetError

__all__ = ["read_magnn", "read_hgb", "hetero_layout", "MAGNN_FILES", "HGB_FILES"]

PathLike = Union[str, os.PathLike]

MAGNN_FILES = ("adjM.npz", "node_types.npy")
HGB_FILES = ("node.dat", "link.dat", "label.dat")


def hetero_layout(path: Path) -> Optional[str]:
    """``"magnn"`` / ``"hgb"`` for a folder (or zip, MAGNN only) in that layout, else ``None``."""
    if path.is_dir():
        names = set(os.listdir(path))
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = {name.rsplit("/", 1)[-1] for name in archive.namelist()}
    else:
        return None
    if set(MAGNN_FILES) <= names:
        return "magnn"
    if path.is_dir() and set(HGB_FILES) & names and "node.dat" in names:
        return "hgb"
    return None


# ---------------------------------------------------------------------------- MAGNN / PyG
class _Members:
    """The files of a folder or of a zip archive (members may sit in one sub-folder), by name."""

    def __init__(self, path: Path) -> None:
        self.path, self.archive, self.prefix = path, None, ""
        if path.is_dir():
            return
        try:
            self.archive = zipfile.ZipFile(path)
        except Exception as exc:
            raise corrupt_file_error(path, exc) from exc
        anchors = [name for name in self.archive.namelist() if name.rsplit("/", 1)[-1] == MAGNN_FILES[0]]
        if anchors:
            self.prefix = min(anchors, key=len)[:-len(MAGNN_FILES[0])]

    def has(self, name: str) -> bool:
        if self.archive is None:
            return (self.path / name).is_file()
        return self.prefix + name in self.archive.NameToInfo

    def require(self, name: str) -> None:
        if not self.has(name):
            where = "the zip lacks the member" if self.archive is not None else "the folder lacks the file"
            raise DatasetError(f"{self.path}: {where} {name!r} (MAGNN/PyG layout: {', '.join(MAGNN_FILES)}, "
                               f"features_<type>.npz|.npy, labels.npy, train_val_test_idx.npz)")

    def open(self, name: str) -> Any:
        self.require(name)
        if self.archive is None:
            return self.path / name
        return io.BytesIO(self.archive.read(self.prefix + name))

    def close(self) -> None:
        if self.archive is not None:
            self.archive.close()


def _matrix(members: _Members, name: str) -> Any:
    import scipy.sparse as sp

    source = members.open(name)
    try:
        return sp.load_npz(source)
    except Exception:
        pass  # not a scipy sparse archive: an np.savez of one array
    try:
        if isinstance(source, io.BytesIO):
            source.seek(0)
        with np.load(source, allow_pickle=False) as archive:
            if len(archive.files) != 1:
                raise DatasetError(f"{members.path}: {name} must hold a scipy sparse matrix or one array, found "
                                   f"{', '.join(archive.files)}")
            return np.asarray(archive[archive.files[0]])
    except DatasetError:
        raise
    except Exception as exc:
        raise corrupt_file_error(f"{members.path}:{name}", exc) from exc


def _array(members: _Members, name: str) -> np.ndarray:
    try:
        return np.load(members.open(name), allow_pickle=False)
    except DatasetError:
        raise
    except Exception as exc:
        raise corrupt_file_error(f"{members.path}:{name}", exc) from exc


def _dense(matrix: Any) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(matrix.toarray() if hasattr(matrix, "toarray") else matrix,
                                                 dtype=np.float32))


def _type_block(adj: Any, rows: np.ndarray, cols: np.ndarray) -> Any:
    """``adj[rows][:, cols]`` (slices when the ids are one range: MAGNN groups nodes by type)."""
    def part(ids: np.ndarray) -> Any:
        return slice(int(ids[0]), int(ids[-1]) + 1) if ids[-1] - ids[0] + 1 == ids.size else ids
    return adj[part(rows), :][:, part(cols)].tocoo()


def read_magnn(path: PathLike, *, type_names: Optional[Sequence[str]] = None,
               relation_names: Optional[Mapping[Tuple[int, int], str]] = None, name: Optional[str] = None,
               require: Sequence[str] = ()) -> HeteroGraph:
    """A :class:`HeteroGraph` from a MAGNN/PyG folder or zip (see the module docstring).

    ``type_names``: names of types ``0..T-1``; ``relation_names``: ``{(src_type, dst_type): name}``
    (default ``"to"``); ``require``: files that must be present (else all but ``adjM.npz`` and
    ``node_types.npy`` are optional).
    """
    import scipy.sparse as sp

    path = Path(path)
    members = _Members(path)
    try:
        for member in (*MAGNN_FILES, *require):
            members.require(member)
        adj = _matrix(members, "adjM.npz")
        types = _array(members, "node_types.npy")
        adj = sp.csr_matrix(adj)
        if types.ndim != 1 or not np.issubdtype(types.dtype, np.integer) or adj.shape != (types.size, types.size):
            raise corrupt_file_error(path, f"node_types.npy has shape {types.shape} and dtype {types.dtype}, adjM "
                                           f"has shape {adj.shape}; expected one integer type per row of adjM")
        num_types = int(types.max()) + 1 if types.size else 0
        names = list(type_names) if type_names is not None else [str(t) for t in range(num_types)]
        ids = [np.flatnonzero(types == t) for t in range(num_types)]
        empty = [t for t in range(num_types) if ids[t].size == 0]
        if empty or types.min() < 0 or len(names) != num_types:
            raise corrupt_file_error(path, f"node types must be 0..T-1 with nodes of every type and {len(names)} "
                                           f"type names; types {sorted(set(types.tolist()))[:10]} were found")
        if (adj != adj.T).nnz:
            warnings.warn(f"{path.name}: adjM.npz is not symmetric; it is read as undirected (A + A^T)",
                          UserWarning, stacklevel=3)
            adj = ((adj + adj.T) > 0).astype(np.int8).tocsr()
        edges = {}
        for a in range(num_types):
            for b in range(a, num_types):
                block = _type_block(adj, ids[a], ids[b])
                keep = block.col >= block.row if a == b else np.ones(block.nnz, dtype=bool)
                if keep.any():
                    rel = (relation_names or {}).get((b, a), "to")
                    edges[(names[b], rel, names[a])] = torch.from_numpy(
                        np.stack([block.col[keep], block.row[keep]]).astype(np.int64))
        x_dict = {}
        for t in range(num_types):
            for suffix in (".npz", ".npy"):
                file = f"features_{t}{suffix}"
                if members.has(file):
                    x_dict[names[t]] = _dense(_matrix(members, file) if suffix == ".npz" else _array(members, file))
                    break
        node_data: Dict[str, Any] = {}
        if members.has("labels.npy"):
            labels = _array(members, "labels.npy")
            if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
                raise DatasetError(f"{path}: labels.npy has shape {labels.shape} and dtype {labels.dtype}; expected "
                                   f"one integer class per node of type 0 (multi-label sets are not supported)")
            node_data["y"] = torch.from_numpy(labels.astype(np.int64))
        if members.has("train_val_test_idx.npz"):
            with np.load(members.open("train_val_test_idx.npz"), allow_pickle=False) as split:
                missing = [k for k in ("train_idx", "val_idx", "test_idx") if k not in split.files]
                if missing:
                    raise corrupt_file_error(f"{path}:train_val_test_idx.npz", f"it lacks {', '.join(missing)}")
                for key, mask in (("train_idx", "train_mask"), ("val_idx", "val_mask"), ("test_idx", "test_mask")):
                    node_data[mask] = torch.from_numpy(split[key].astype(np.int64).reshape(-1))
    finally:
        members.close()
    counts = {n: int(i.size) for n, i in zip(names, ids)}
    return HeteroGraph.from_edge_index(counts, edges, x_dict=x_dict, target=names[0],
                                       name=name or path.name.split(".")[0], **node_data)
