"""Disk-backed graph and feature stores: memory-mapped ``.npy`` files plus a manifest.

A store is a folder::

    manifest.json     format, shapes, dtypes, byte sizes and sha256 of every array file
    indptr.npy        int64 [num_nodes + 1]   CSR row pointer over destinations (as Graph)
    indices.npy       int32/int64 [num_edges] source node of every edge
    features.npy      float32/float16 [num_nodes, num_features]
    labels.npy        int64 [num_nodes] (optional), train/val/test_mask.npy bool (optional)

:class:`StoreWriter` fills the arrays in a hidden temporary sibling folder and, only when
every array is complete, writes the manifest and renames the folder into place
(*atomic finalize*): a crash or an exception mid-write never leaves a folder that opens as a
valid store. :func:`open_store` validates the manifest against the files (presence, dtype,
shape, exact size — a truncated file is caught — and, by default, the sha256 checksums)
and raises :class:`sgl.errors.StoreError` saying what does not match.

Reads of the adjacency and the features go through :mod:`sgl.samplers.io`, which counts
bytes and requests.

Example:
    >>> import tempfile, os, sgl, torch
    >>> from sgl.samplers import write_store, open_store
    >>> g = sgl.datasets.load("karate")
    >>> path = write_store(g, os.path.join(tempfile.mkdtemp(), "karate"))
    >>> store = open_store(path)
    >>> store
    GraphStore(num_nodes=34, num_edges=156, num_features=34, feature_dtype=float32)
    >>> store.features().read(torch.tensor([0, 1])).shape
    torch.Size([2, 34])
    >>> store.counter.stats("features")
    {'bytes': 272, 'requests': 1}
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import torch

from sgl.errors import StoreError
from sgl.fileio import atomic_write, make_temp_dir, sha256_file
from sgl.samplers.io import CountedArray, IOCounter, count_runs

__all__ = ["StoreWriter", "write_store", "open_store", "GraphStore", "FeatureStore", "DiskAdjacency",
           "ResidentRows", "FORMAT"]

FORMAT = "sgl-graph-store"
VERSION = 1
_FEATURE_DTYPES = ("float32", "float16")
_MASKS = ("train_mask", "val_mask", "test_mask")
PathLike = Union[str, os.PathLike]


class StoreWriter:
    """Write a store array by array, then :meth:`finalize` it atomically.

    Use as a context manager; leaving the block with an exception discards everything.

    Args:
        path: the store folder to create.
        num_nodes, num_edges, num_features: array sizes.
        feature_dtype: ``"float32"`` or ``"float16"``.
        index_dtype: dtype of ``indices`` (``"int32"`` halves adjacency I/O below 2^31 nodes).
        overwrite: replace an existing store at ``path`` (only after the new one is complete).
        log: receives one line per stale temporary folder removed (default: a ``UserWarning``).

    The arrays are filled in ``.<name>.sgl-<host>-<pid>-*.tmp`` next to ``path``; a writer
    that was killed leaves that folder behind, and the next writer of the same store removes
    it once its process is gone (:func:`sgl.fileio.remove_stale_temps`). The finished store
    gets the permissions of ``mkdir`` under the user's umask.
    """

    def __init__(self, path: PathLike, num_nodes: int, num_edges: int, num_features: int,
                 feature_dtype: str = "float32", index_dtype: Optional[str] = None, overwrite: bool = False,
                 log: Optional[Callable[[str], None]] = None) -> None:
        if feature_dtype not in _FEATURE_DTYPES:
            raise StoreError(f"feature_dtype must be one of {_FEATURE_DTYPES}, got {feature_dtype!r}")
        if num_nodes < 1 or num_edges < 0 or num_features < 1:
            raise StoreError(f"need num_nodes >= 1, num_edges >= 0, num_features >= 1; got "
                             f"{num_nodes}, {num_edges}, {num_features}")
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise StoreError(f"{str(self.path)!r} already exists; pass overwrite=True (--overwrite) to replace it")
        index_dtype = index_dtype or ("int32" if num_nodes < 2**31 else "int64")
        self.meta: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "num_nodes": int(num_nodes),
                                     "num_edges": int(num_edges), "num_features": int(num_features),
                                     "feature_dtype": feature_dtype, "index_dtype": index_dtype}
        self.overwrite = overwrite
        self.log = log
        self.tmp = make_temp_dir(self.path, ".tmp", log=log)
        self.arrays: Dict[str, np.memmap] = {}
        self._finalized = False
        self.indptr = self._create("indptr", (num_nodes + 1,), "int64")
        self.indices = self._create("indices", (num_edges,), index_dtype)
        self.features = self._create("features", (num_nodes, num_features), feature_dtype)

    def _create(self, name: str, shape: Sequence[int], dtype: str) -> np.memmap:
        array = np.lib.format.open_memmap(self.tmp / f"{name}.npy", mode="w+", dtype=dtype, shape=tuple(shape))
        self.arrays[name] = array
        return array

    def add_node_array(self, name: str, values: Any, dtype: str) -> None:
        """Store labels (``"labels"``, int64) or a mask (``"train_mask"``..., bool), one entry per node."""
        values = values.numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
        if values.shape[0] != self.meta["num_nodes"]:
            raise StoreError(f"{name} has {values.shape[0]} entries, expected num_nodes={self.meta['num_nodes']}")
        self._create(name, values.shape, dtype)[:] = values.astype(dtype)

    def finalize(self) -> Path:
        """Flush, checksum, write the manifest last, then rename the folder into place."""
        files: Dict[str, Any] = {}
        for name, array in self.arrays.items():
            array.flush()
            file = self.tmp / f"{name}.npy"
            files[name] = {"file": file.name, "dtype": str(array.dtype), "shape": list(array.shape),
                           "bytes": file.stat().st_size, "sha256": sha256_file(file)}
        self.arrays.clear()
        with atomic_write(self.tmp / "manifest.json", "w") as handle:
            json.dump({**self.meta, "arrays": files}, handle, indent=2)
        if self.path.exists():
            trash = make_temp_dir(self.path, ".old", log=self.log)
            os.replace(self.path, trash / "store")
            os.replace(self.tmp, self.path)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(self.tmp, self.path)
        self._finalized = True
        return self.path

    def abort(self) -> None:
        self.arrays.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or not self._finalized:
            self.abort()


def write_store(graph: Any, path: PathLike, feature_dtype: str = "float32", overwrite: bool = False,
                chunk_rows: int = 1 << 16, progress: bool = False, log: Optional[Callable[[str], None]] = None) -> Path:
    """Write any :class:`sgl.data.Graph` with features as a store (atomically); returns the folder.

    ``log`` receives a line for each stale temporary folder of a killed earlier run that is
    removed first (see :class:`StoreWriter`).
    """
    if graph.x is None:
        raise StoreError("the graph has no node features (graph.x); a feature store needs them")
    x = graph.x
    if x.dim() != 2:
        raise StoreError(f"features must be 2-D [num_nodes, num_features], got {tuple(x.shape)}")
    with StoreWriter(path, graph.num_nodes, graph.num_edges, int(x.size(1)), feature_dtype=feature_dtype,
                     overwrite=overwrite, log=log) as writer:
        writer.indptr[:] = graph.indptr.numpy()
        writer.indices[:] = graph.indices.numpy()
        rows = range(0, graph.num_nodes, chunk_rows)
        if progress:
            from tqdm.auto import tqdm

            rows = tqdm(rows, desc="features", disable=None)
        for start in rows:
            writer.features[start:start + chunk_rows] = x[start:start + chunk_rows].float().numpy()
        if graph.y is not None and graph.y.dim() == 1 and not graph.y.is_floating_point():
            writer.add_node_array("labels", graph.y, "int64")
        for mask in _MASKS:
            value = getattr(graph, mask)
            if value is not None:
                writer.add_node_array(mask, value, "bool")
        return writer.finalize()


# ---------------------------------------------------------------------------------------- reading
def _fail(path: Path, what: str) -> StoreError:
    return StoreError(f"store {str(path)!r}: {what}; rebuild it with `sgl preprocess --dataset NAME --out DIR`")


def _open_array(root: Path, name: str, entry: Dict[str, Any], verify: str) -> np.ndarray:
    file = root / str(entry.get("file", f"{name}.npy"))
    if not file.exists():
        raise _fail(root, f"array file {file.name} is missing")
    size = file.stat().st_size
    if size != entry.get("bytes"):
        raise _fail(root, f"{file.name} has {size} bytes but the manifest says {entry.get('bytes')} "
                          f"(truncated or replaced)")
    try:
        array = np.load(file, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError/OSError/EOFError on bad headers or short files
        raise _fail(root, f"{file.name} is not a readable .npy file ({exc})") from exc
    if str(array.dtype) != entry.get("dtype"):
        raise _fail(root, f"{file.name} has dtype {array.dtype} but the manifest says {entry.get('dtype')}")
    if list(array.shape) != list(entry.get("shape", [])):
        raise _fail(root, f"{file.name} has shape {list(array.shape)} but the manifest says {entry.get('shape')}")
    if verify == "checksum" and sha256_file(file) != entry.get("sha256"):
        raise _fail(root, f"{file.name} does not match its sha256 checksum (corrupt)")
    return array


class GraphStore:
    """An opened, validated store; see :func:`open_store`.

    Attributes:
        counter: the :class:`~sgl.samplers.io.IOCounter` every read of this store goes to.
        indptr: the row pointer, held in memory (``8 (N + 1)`` bytes, read once).
        y, train_mask, val_mask, test_mask: in-memory tensors (or None).
    """

    def __init__(self, path: PathLike, verify: str = "checksum", counter: Optional[IOCounter] = None) -> None:
        if verify not in ("checksum", "size"):
            raise StoreError(f"verify must be 'checksum' or 'size', got {verify!r}")
        root = Path(path)
        self.path = root
        if not root.is_dir():
            raise StoreError(f"no store folder at {str(root)!r}; build one with `sgl preprocess --dataset NAME --out DIR`")
        manifest = root / "manifest.json"
        if not manifest.exists():
            raise _fail(root, "manifest.json is missing (an unfinished or foreign folder)")
        try:
            meta = json.loads(manifest.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise _fail(root, f"manifest.json is not valid JSON ({exc})") from exc
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
            raise _fail(root, f"manifest.json is not an {FORMAT} v{VERSION} manifest")
        arrays = meta.get("arrays")
        if not isinstance(arrays, dict) or not {"indptr", "indices", "features"} <= set(arrays):
            raise _fail(root, "the manifest must list indptr, indices and features")
        if meta.get("feature_dtype") not in _FEATURE_DTYPES:
            raise _fail(root, f"feature dtype {meta.get('feature_dtype')!r} is not one of {_FEATURE_DTYPES}")
        self.meta = meta
        self.num_nodes, self.num_edges = int(meta["num_nodes"]), int(meta["num_edges"])
        self.num_features = int(meta["num_features"])
        self._arrays = {name: _open_array(root, name, entry, verify) for name, entry in arrays.items()}
        expect = {"indptr": ((self.num_nodes + 1,), "int64"), "indices": ((self.num_edges,), meta.get("index_dtype")),
                  "features": ((self.num_nodes, self.num_features), meta["feature_dtype"])}
        for name, (shape, dtype) in expect.items():
            array = self._arrays[name]
            if tuple(array.shape) != shape or str(array.dtype) != dtype:
                raise _fail(root, f"{name} has shape {array.shape} / dtype {array.dtype}; the store's sizes need "
                                  f"{shape} / {dtype}")
        if self._arrays["indices"].dtype.kind not in "iu":
            raise _fail(root, f"indices must be integers, got {self._arrays['indices'].dtype}")
        self.counter = counter or IOCounter()
        indptr = np.array(self._arrays["indptr"])
        self.counter.record("indptr", indptr.nbytes, 1)
        if indptr[0] != 0 or indptr[-1] != self.num_edges or (np.diff(indptr) < 0).any():
            raise _fail(root, "indptr is not a valid CSR row pointer (must start at 0, end at num_edges, never decrease)")
        self.indptr = indptr
        self.feature_dtype = meta["feature_dtype"]
        self.y = torch.from_numpy(np.array(self._arrays["labels"])) if "labels" in self._arrays else None
        for mask in _MASKS:
            setattr(self, mask, torch.from_numpy(np.array(self._arrays[mask])) if mask in self._arrays else None)

    @property
    def num_classes(self) -> int:
        return 0 if self.y is None else int(self.y.max()) + 1

    @property
    def feature_row_bytes(self) -> int:
        return self.num_features * np.dtype(self.feature_dtype).itemsize

    @property
    def index_bytes(self) -> int:
        return int(self._arrays["indices"].dtype.itemsize)

    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def features(self) -> "FeatureStore":
        """The feature rows, read through this store's counter."""
        return FeatureStore(self._arrays["features"], self.counter)

    def adjacency(self) -> "DiskAdjacency":
        """The neighbour lists, read through this store's counter (what samplers take)."""
        return DiskAdjacency(self)

    def raw_indices(self) -> np.ndarray:
        """The memory-mapped ``indices`` array, *uncounted* (for one-off preprocessing passes)."""
        return self._arrays["indices"]

    def __repr__(self) -> str:
        return (f"GraphStore(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"num_features={self.num_features}, feature_dtype={self.feature_dtype})")


def open_store(path: PathLike, verify: str = "checksum", counter: Optional[IOCounter] = None) -> GraphStore:
    """Open and validate a store (``verify="size"`` skips the sha256 pass on large stores)."""
    return GraphStore(path, verify=verify, counter=counter)


class FeatureStore:
    """Feature rows on disk; :meth:`read` returns float32 rows and counts the I/O."""

    def __init__(self, array: np.ndarray, counter: IOCounter) -> None:
        self.rows = CountedArray(array, counter, "features")
        self.num_nodes, self.num_features = (int(s) for s in array.shape)
        self.row_bytes = self.rows.row_bytes

    def read(self, ids: Any) -> torch.Tensor:
        ids = ids.numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
        return torch.from_numpy(self.rows.read_rows(ids).astype(np.float32, copy=False))

    def __getitem__(self, ids: Any) -> torch.Tensor:
        return self.read(ids)

    def __len__(self) -> int:
        return self.num_nodes


class ResidentRows:
    """Neighbour lists of a node set held in memory (a neighbour cache or a partition group's CSR).

    ``slot`` (optional) is a caller-owned ``num_nodes`` map filled with -1 that this set writes
    its slots into and :meth:`release` clears again, so a sequence of short-lived sets (one
    partition group after another) shares one map instead of allocating ``num_nodes`` entries
    each; :attr:`nbytes` then leaves the shared map out (its owner accounts for it).
    """

    def __init__(self, nodes: np.ndarray, indptr: np.ndarray, values: np.ndarray, num_nodes: int,
                 slot: Optional[np.ndarray] = None) -> None:
        self.nodes = nodes
        self.ptr = np.zeros(nodes.size + 1, dtype=np.int64)
        np.cumsum(indptr[nodes + 1] - indptr[nodes], out=self.ptr[1:])
        self.values = values
        self.shared_slot = slot is not None
        self.slot = slot if slot is not None else np.full(num_nodes, -1, dtype=np.int64)
        self.slot[nodes] = np.arange(nodes.size)

    @classmethod
    def load(cls, adjacency: "DiskAdjacency", nodes: np.ndarray, kind: str = "adjacency",
             slot: Optional[np.ndarray] = None) -> "ResidentRows":
        """Read the full neighbour lists of ``nodes`` through the counted I/O layer under ``kind``."""
        nodes = np.unique(np.asarray(nodes, dtype=np.int64))
        indptr = adjacency.indptr
        values = adjacency.reader_for(kind).read_ranges(indptr[nodes], indptr[nodes + 1])
        return cls(nodes, indptr, values, adjacency.num_nodes, slot=slot)

    def release(self) -> None:
        """Forget the rows (clears this set's entries of the slot map)."""
        self.slot[self.nodes] = -1
        self.nodes = self.nodes[:0]
        self.ptr = self.ptr[:1]
        self.values = self.values[:0]

    @staticmethod
    def bytes_for(num_rows: int, num_values: int, index_bytes: int) -> int:
        """Bytes of a set of ``num_rows`` rows holding ``num_values`` neighbour ids (without a slot map)."""
        return int(num_values) * int(index_bytes) + 16 * int(num_rows) + 8

    @property
    def nbytes(self) -> int:
        own = int(self.values.nbytes + self.ptr.nbytes + self.nodes.nbytes)
        return own if self.shared_slot else own + int(self.slot.nbytes)


class DiskAdjacency:
    """Neighbour lists on disk, optionally backed by in-memory :class:`ResidentRows`.

    :meth:`gather` serves rows from the resident sets first (in order) and reads the full
    neighbour list of every other row from disk, counting its bytes.
    """

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.indptr = store.indptr
        self.num_nodes = store.num_nodes
        self.resident: List[ResidentRows] = []
        self._readers: Dict[str, CountedArray] = {}

    def reader_for(self, kind: str) -> CountedArray:
        if kind not in self._readers:
            self._readers[kind] = CountedArray(self.store.raw_indices(), self.store.counter, kind)
        return self._readers[kind]

    def degree(self, nodes: np.ndarray) -> np.ndarray:
        return self.indptr[nodes + 1] - self.indptr[nodes]

    def gather(self, rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
        out = np.empty(positions.size, dtype=np.int64)
        if positions.size == 0:
            return out
        # the row of every position: rows are the frontier, positions are grouped by row
        owner = np.searchsorted(self.indptr, positions, side="right") - 1
        pending = np.ones(positions.size, dtype=bool)
        for res in self.resident:
            slot = res.slot[owner]
            hit = pending & (slot >= 0)
            if hit.any():
                out[hit] = res.values[res.ptr[slot[hit]] + positions[hit] - self.indptr[owner[hit]]]
                pending &= ~hit
        if pending.any():
            miss_rows = np.unique(owner[pending])
            reader = self.reader_for("adjacency")
            lengths = self.indptr[miss_rows + 1] - self.indptr[miss_rows]
            self.store.counter.record("adjacency", int(lengths.sum()) * reader.row_bytes, count_runs(miss_rows))
            out[pending] = reader.array[positions[pending]]
        return out
