r"""On-disk CTR stores: encode a Criteo/Avazu text file once, then memory-map it.

:func:`~sgl.datasets.ctr.read_ctr_file` streams the *text*, but it still concatenates the
encoded arrays in memory: for the 45.8M-row Criteo file that is ~12 GB (int64 ids) and twice
that while concatenating. A store keeps nothing but the vocabulary in memory:

1. the vocabulary pass (as :func:`~sgl.datasets.ctr.build_vocabulary`);
2. an encoding pass that scatters every encoded chunk's rows to ``K`` bucket files on disk,
   each row to a bucket drawn from ``shuffle_seed`` (``K`` so that one bucket fits in
   ``memory_bytes``);
3. a pass that loads one bucket at a time, permutes it and appends it to the final
   ``.npy`` arrays — a two-pass external shuffle, so the store's row order is a seeded
   random permutation of the file's rows and a contiguous range of it is a random sample.

The folder (``dense.npy`` float32, ``sparse.npy`` int32 when every field fits, ``labels.npy``,
``source_row.npy`` = each row's index in the file, ``meta.json``) is written under a temporary
name and renamed into place only when complete, so a crash or a malformed row leaves no
half-written store. Its name carries a key of the source file (size, modification time) and
of the options, so an edited source file is encoded again rather than read stale.

:func:`open_ctr_store` returns a :class:`~sgl.datasets.ctr.CTRData` whose arrays are
read-only memory maps: :meth:`~sgl.datasets.ctr.CTRData.split` cuts contiguous ranges (no
copy) and :func:`sgl.tasks.ctr.train_ctr` reads it block by block.

Example:
    >>> import tempfile, os
    >>> from sgl.datasets.ctr import build_ctr_store, open_ctr_store
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "train.txt")
    >>> with open(path, "w") as f:
    ...     for i in range(10):
    ...         _ = f.write("\t".join([str(i % 2)] + [str(i)] * 13 + [f"c{i % 3}"] * 26) + "\n")
    >>> store = build_ctr_store(path, progress=False)
    >>> data = open_ctr_store(store)
    >>> len(data), data.is_mapped, data.sparse.dtype.name, data.field_dims[0]
    (10, True, 'int32', 4)
    >>> sorted(data.source_row.tolist()) == list(range(10))
    True
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from pathlib import Path
from typing import Dict, Optional, Union

import numpy as np

from sgl._checks import check_int
from sgl.datasets.ctr._common import _DEFAULT_CHUNK, PathLike
from sgl.datasets.ctr.data import CTRData
from sgl.datasets.ctr.text import CRITEO_FORMAT, CTRFormat, _check_read_args, build_vocabulary, iter_ctr_chunks
from sgl.errors import ConfigError, DatasetError

__all__ = ["build_ctr_store", "open_ctr_store", "ctr_store_path", "STORE_VERSION"]


#: Bumped whenever the layout of a store changes; older stores are encoded again.
STORE_VERSION = 1
_ARRAYS = ("dense", "sparse", "labels", "source_row")
_MAX_BUCKETS = 256  # 4 open files per bucket while encoding


def _format_spec(fmt: CTRFormat) -> Dict[str, object]:
    return {"num_columns": fmt.num_columns, "label": fmt.label, "dense": list(fmt.dense),
            "sparse": list(fmt.sparse), "header_first": fmt.header_first}


def _default_dir(path: Path) -> Path:
    """Where stores go when no folder is given: ``processed/`` next to the file."""
    return path.parent / "processed"


def ctr_store_path(path: PathLike, out_dir: Optional[PathLike] = None, fmt: CTRFormat = CRITEO_FORMAT,
                   min_count: int = 1, max_rows: Optional[int] = None, shuffle_seed: int = 0) -> Path:
    """The folder :func:`build_ctr_store` writes for these arguments (``out_dir`` defaults to
    ``processed/`` next to the file). The name holds a key of the file's size and modification
    time and of the options, so any change gives a new folder."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise DatasetError(f"CTR file {path} does not exist or cannot be read: {exc}") from exc
    spec = {"version": STORE_VERSION, "file": path.name, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "format": _format_spec(fmt), "min_count": min_count, "max_rows": max_rows,
            "shuffle_seed": shuffle_seed}
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    base = _default_dir(path) if out_dir is None else Path(out_dir).expanduser()
    return base / f"{path.stem}-store-{key}"


def build_ctr_store(path: PathLike, out_dir: Optional[PathLike] = None, fmt: CTRFormat = CRITEO_FORMAT,
                    min_count: int = 1, chunk_rows: int = _DEFAULT_CHUNK, max_rows: Optional[int] = None,
                    shuffle_seed: int = 0, memory_bytes: int = 1 << 30, progress: Optional[bool] = None) -> Path:
    """Encode a delimited CTR file into a shuffled, memory-mappable store; return its folder.

    An existing complete store for the same file and options is reused as it is.

    Args:
        path: the text file (as :func:`~sgl.datasets.ctr.read_ctr_file` reads it).
        out_dir: parent folder of the store (default: ``processed/`` next to the file).
        fmt, min_count, chunk_rows, max_rows: as in :func:`~sgl.datasets.ctr.read_ctr_file`.
        shuffle_seed: seed of the stored row order.
        memory_bytes: about how much one shuffle bucket may hold in memory; the file is split
            into ``ceil(file size / memory_bytes)`` buckets, at most 256 (text is larger than
            its encoding, so a bucket's arrays stay below ``memory_bytes``).
        progress: tqdm bars (``None`` = only on a terminal).
    """
    from tqdm.auto import tqdm

    from sgl.fileio import atomic_dir, atomic_write

    check_int(shuffle_seed, "shuffle_seed", 0)
    check_int(memory_bytes, "memory_bytes", 1)
    path = _check_read_args(path, min_count, chunk_rows, max_rows)
    target = ctr_store_path(path, out_dir, fmt, min_count, max_rows, shuffle_seed)
    if target.is_dir():
        open_ctr_store(target)  # a complete store: reuse it (raises on a damaged one)
        return target
    disable = None if progress is None else not progress
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"cannot create the CTR store folder {target.parent} ({exc}); pass a writable "
                           f"out_dir (store=PATH)") from exc
    vocab = build_vocabulary(path, fmt, min_count, chunk_rows, max_rows)
    field_dims = [len(v) + 1 for v in vocab]
    id_dtype = np.int32 if max(field_dims, default=1) < 2 ** 31 else np.int64
    buckets = min(_MAX_BUCKETS, max(1, math.ceil(path.stat().st_size / memory_bytes)))
    rng = np.random.default_rng(shuffle_seed)
    with atomic_dir(target) as tmp:
        parts = tmp / "buckets"
        parts.mkdir()
        files = {(b, name): open(parts / f"{b}.{name}", "wb") for b in range(buckets) for name in _ARRAYS}
        counts = np.zeros(buckets, dtype=np.int64)
        names = None
        row0 = 0
        try:
            for chunk in tqdm(iter_ctr_chunks(path, vocab, fmt, chunk_rows, max_rows), desc=f"encode {path.name}",
                              unit="chunk", disable=disable):
                names = (chunk.field_names, chunk.dense_names)
                n = len(chunk)
                arrays = {"dense": chunk.dense, "sparse": chunk.sparse.astype(id_dtype),
                          "labels": chunk.labels, "source_row": np.arange(row0, row0 + n, dtype=np.int64)}
                row0 += n
                owner = rng.integers(buckets, size=n)
                order = np.argsort(owner, kind="stable")
                bounds = np.searchsorted(owner[order], np.arange(buckets + 1))
                for b in np.nonzero(np.diff(bounds))[0]:
                    rows = order[bounds[b]:bounds[b + 1]]
                    for name, values in arrays.items():
                        files[(int(b), name)].write(values[rows].tobytes())
                    counts[b] += len(rows)
        finally:
            for handle in files.values():
                handle.close()
        total = int(counts.sum())
        if names is None or total == 0:
            raise DatasetError(f"CTR file {path} has no data rows")
        shapes = {"dense": (total, len(fmt.dense)), "sparse": (total, len(fmt.sparse)), "labels": (total,),
                  "source_row": (total,)}
        dtypes = {"dense": np.float32, "sparse": id_dtype, "labels": np.float32, "source_row": np.int64}
        out = {name: np.lib.format.open_memmap(tmp / f"{name}.npy", mode="w+", dtype=dtypes[name],
                                               shape=shapes[name]) for name in _ARRAYS}
        start = 0
        for b in tqdm(range(buckets), desc="shuffle", unit="bucket", disable=disable):
            n = int(counts[b])
            perm = rng.permutation(n)
            for name in _ARRAYS:
                width = shapes[name][1:]
                values = np.fromfile(parts / f"{b}.{name}", dtype=dtypes[name]).reshape((n,) + width)
                out[name][start:start + n] = values[perm]
                os.unlink(parts / f"{b}.{name}")
            start += n
        for array in out.values():
            array.flush()
        del out
        shutil.rmtree(parts)
        meta = {"version": STORE_VERSION, "source": str(path), "rows": total, "field_dims": field_dims,
                "field_names": list(names[0]), "dense_names": list(names[1]), "id_dtype": np.dtype(id_dtype).name,
                "min_count": min_count, "max_rows": max_rows, "shuffle_seed": shuffle_seed, "buckets": buckets}
        with atomic_write(tmp / "meta.json", "w") as handle:
            json.dump(meta, handle, indent=1)
    return target


def open_ctr_store(folder: PathLike) -> CTRData:
    """Memory-map a store written by :func:`build_ctr_store` as a read-only :class:`CTRData`.

    Its ``order_seed`` is the store's ``shuffle_seed`` and ``source_row`` maps each row to its
    line in the source file. A store with missing, truncated or mismatched files raises
    :class:`~sgl.errors.DatasetError` naming the folder to delete.
    """
    folder = Path(folder)
    fix = f"delete {folder} and load again to re-encode it"
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f"CTR store {folder} has no readable meta.json ({exc}); {fix}") from exc
    if not isinstance(meta, dict) or meta.get("version") != STORE_VERSION:
        raise DatasetError(f"CTR store {folder} has layout version {meta.get('version') if isinstance(meta, dict) else meta!r}, "
                           f"this sgl reads {STORE_VERSION}; {fix}")
    arrays: Dict[str, np.ndarray] = {}
    for name in _ARRAYS:
        try:
            arrays[name] = np.load(folder / f"{name}.npy", mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise DatasetError(f"CTR store {folder}: cannot map {name}.npy ({exc}); {fix}") from exc
    rows = meta["rows"]
    expected = {"dense": (rows, len(meta["dense_names"])), "sparse": (rows, len(meta["field_dims"])),
                "labels": (rows,), "source_row": (rows,)}
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            raise DatasetError(f"CTR store {folder}: {name}.npy has shape {arrays[name].shape}, meta.json says "
                               f"{shape}; {fix}")
    return CTRData(arrays["dense"], arrays["sparse"], arrays["labels"], meta["field_dims"], meta["field_names"],
                   meta["dense_names"], check=False, order_seed=int(meta["shuffle_seed"]),
                   source_row=arrays["source_row"])


def _store_option(store: Union[None, bool, str, PathLike], path: Path, auto_bytes: int) -> Optional[Path]:
    """Where a loader's ``store`` argument puts the store (``None`` = read into memory)."""
    if store is None:
        return _default_dir(path) if path.stat().st_size > auto_bytes else None
    if isinstance(store, bool):
        return _default_dir(path) if store else None
    if isinstance(store, str) and store.lower() in ("true", "false", "auto"):
        return _store_option({"true": True, "false": False, "auto": None}[store.lower()], path, auto_bytes)
    if isinstance(store, (str, os.PathLike)):
        return Path(store)
    raise ConfigError(f"store must be None (auto), True, False or a folder, got {store!r}")


def load_with_store(path: Path, fmt: CTRFormat, store: Union[None, bool, str, PathLike], min_count: int,
                    chunk_rows: int, max_rows: Optional[int], progress: Optional[bool], auto_bytes: int
                    ) -> Optional[CTRData]:
    """The store-backed branch of ``load_criteo``/``load_avazu``: a mapped CTRData, or ``None``
    when ``store`` asks for an in-memory read."""
    out_dir = _store_option(store, path, auto_bytes)
    if out_dir is None:
        return None
    return open_ctr_store(build_ctr_store(path, out_dir, fmt, min_count, chunk_rows, max_rows, progress=progress))
