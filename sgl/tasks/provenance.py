"""What a run record says about where its numbers came from: versions and the data's hash.

Every record of :func:`sgl.tasks.run` carries :func:`run_provenance`: the SGL version, the
torch version and a content hash of the dataset the run trained on, so two records with
different numbers can be told apart by code or by data. The hash is cheap next to training:

* a :class:`~sgl.data.Graph`: its structure (:meth:`~sgl.data.Graph.content_hash`) and the
  bytes of its features, labels and split masks (and of its edge split, ``graph.link_split``);
* a collection of graphs: every graph's hash and the graph labels;
* CTR data: the bytes of arrays held in memory, and for memory-mapped arrays (an on-disk
  store of Criteo-size data) the file's name, size and modification time;
* a disk store (``store:DIR``): the sha256 checksums its manifest already holds.

    >>> import sgl
    >>> graph = sgl.datasets.load("karate")
    >>> dataset_hash(graph) == dataset_hash(sgl.datasets.load("karate"))
    True
    >>> sorted(run_provenance(graph))
    ['dataset_hash', 'sgl_version', 'torch_version']
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Union

import numpy as np
import torch

from sgl.errors import StoreError

__all__ = ["run_provenance", "dataset_hash", "store_hash"]

_GRAPH_ARRAYS = ("x", "y", "train_mask", "val_mask", "test_mask")


def _update(digest: Any, name: str, value: Any) -> None:
    """Feed one array (tensor, ndarray or memory map) or ``None`` into ``digest``."""
    digest.update(name.encode())
    if value is None:
        digest.update(b"none")
        return
    if isinstance(value, torch.Tensor):
        if value.is_sparse:
            value = value.coalesce()
            _update(digest, f"{name}.indices", value.indices())
            _update(digest, f"{name}.values", value.values())
            return
        value = value.detach().contiguous().cpu().numpy()
    array = np.asarray(value) if not isinstance(value, np.memmap) else value
    digest.update(f"{array.dtype}{array.shape}".encode())
    filename = getattr(array, "filename", None)
    if isinstance(array, np.memmap) and filename:
        stat = os.stat(filename)  # a memory map of a large store: its file stands for its bytes
        digest.update(f"{os.path.abspath(filename)}:{stat.st_size}:{stat.st_mtime_ns}:{array.offset}".encode())
    elif array.size:  # dtype and shape are in already: an empty array adds no bytes
        digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def dataset_hash(data: Any) -> str:
    """A hex digest of a loaded dataset's content (see the module docstring for what it covers)."""
    digest = hashlib.blake2b(digest_size=16)
    if hasattr(data, "content_hash") and hasattr(data, "indptr"):  # a Graph
        digest.update(data.content_hash().encode())
        for name in _GRAPH_ARRAYS:
            _update(digest, name, getattr(data, name, None))
        split = getattr(data, "link_split", None)
        if split is not None:  # a dataset's own edge split (OGB link sets) decides what is trained and tested
            for name in ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg"):
                _update(digest, f"link_split.{name}", getattr(split, name, None))
    elif hasattr(data, "graphs") and hasattr(data, "labels"):  # a GraphDataset
        for graph in data.graphs:
            digest.update(dataset_hash(graph).encode())
        _update(digest, "labels", data.labels)
    elif all(hasattr(data, name) for name in ("dense", "sparse", "labels", "field_dims")):  # CTRData
        for name in ("dense", "sparse", "labels"):
            _update(digest, name, getattr(data, name))
        digest.update(str(list(data.field_dims)).encode())
    else:
        raise TypeError(f"no content hash for a {type(data).__name__}")
    return digest.hexdigest()


def store_hash(path: Union[str, "os.PathLike[str]"]) -> str:
    """The hash of a disk store (``sgl preprocess``) from the checksums in its manifest."""
    manifest = Path(path) / "manifest.json"
    try:
        meta = json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the store manifest {manifest}: {exc}") from exc
    arrays = meta.get("arrays") or {}
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(arrays):
        digest.update(f"{name}:{arrays[name].get('sha256')}:{arrays[name].get('bytes')}".encode())
    return digest.hexdigest()


def run_provenance(data: Any = None, *, data_hash: Any = None) -> Dict[str, Any]:
    """``{"sgl_version", "torch_version", "dataset_hash"}`` of a run on ``data`` (or with a
    precomputed ``data_hash``, e.g. :func:`store_hash`, or a zero-argument callable that
    computes it).

    Provenance is called after training: a failure here must never cost the run its results, so
    an exception while hashing leaves ``dataset_hash`` ``None`` and says why in
    ``provenance_error`` (with a warning) instead of propagating. A graph whose labels were
    class names (``graph.label_names``, from ``file:`` label files) adds ``label_names``.

        >>> run_provenance(data_hash=lambda: 1 / 0)["provenance_error"]
        'ZeroDivisionError: division by zero'
    """
    from sgl import __version__

    record: Dict[str, Any] = {"sgl_version": __version__, "torch_version": torch.__version__}
    try:
        if callable(data_hash):
            data_hash = data_hash()
        record["dataset_hash"] = data_hash if data_hash is not None else dataset_hash(data)
    except Exception as exc:  # noqa: BLE001 - the finished run matters more than its hash
        reason = f"{type(exc).__name__}: {exc}"
        warnings.warn(f"the run record has no dataset hash ({reason}); the run's results are kept",
                      RuntimeWarning, stacklevel=2)
        record["dataset_hash"] = None
        record["provenance_error"] = reason
    names = getattr(data, "label_names", None)
    if isinstance(names, (list, tuple)):  # string classes of a user's files: class c is names[c]
        record["label_names"] = [str(name) for name in names]
    return record
