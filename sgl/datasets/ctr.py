r"""Click-through-rate (CTR) data: Criteo, Avazu, MovieLens-100k as implicit CTR, synthetic.

Every loader returns a :class:`CTRData`: dense features (``log(x+1)`` already applied),
per-field categorical ids remapped to ``0..field_dims[f]-1`` where **0 is the unknown
bucket** (values never seen, seen fewer than ``min_count`` times, or missing), and 0/1
labels. :meth:`CTRData.global_ids` adds per-field offsets so all fields index one table of
``sum(field_dims)`` rows, which is what the embedding backends in :mod:`sgl.embeddings` take.

Text formats are read **streaming**, ``chunk_rows`` lines at a time: a first pass counts
per-field values (only the vocabulary is kept), a second pass encodes chunk by chunk, so a
45M-row Criteo file is never held as text. :func:`iter_ctr_chunks` yields encoded chunks
without concatenating them, for files whose encoded arrays do not fit in memory either.

Dense preprocessing (the Criteo convention of the HET/DeepCTR scripts): missing → 0,
``x > -1`` → ``log(x + 1)``, values ``<= -1`` (Criteo's ``I2`` has a few) are kept as they are.

Example:
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> data = make_synthetic_ctr(1000, field_dims=[50, 20, 8], num_dense=2, seed=0)
    >>> len(data), data.sparse.shape, data.field_dims
    (1000, (1000, 3), [50, 20, 8])
    >>> int(data.global_ids().max()) < sum(data.field_dims)
    True
    >>> train, val, test = data.split((0.8, 0.1, 0.1), seed=0)
    >>> len(train), len(val), len(test)
    (800, 100, 100)
"""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from sgl.errors import ConfigError, DatasetError

__all__ = [
    "CTRData",
    "CTRFormat",
    "CRITEO_FORMAT",
    "AVAZU_FORMAT",
    "make_synthetic_ctr",
    "build_vocabulary",
    "iter_ctr_chunks",
    "read_ctr_file",
    "load_criteo",
    "load_avazu",
    "load_movielens_100k",
    "load_synthetic_ctr",
    "transform_dense",
]

PathLike = Union[str, os.PathLike]

_DEFAULT_CHUNK = 1 << 16


@dataclass
class CTRData:
    """A CTR table: dense features, per-field categorical ids and 0/1 labels.

    Attributes:
        dense: float32 ``[N, D]`` (``log(x+1)`` applied; ``D`` may be 0).
        sparse: int64 ``[N, F]``; field ``f`` holds ids in ``[0, field_dims[f])``, 0 = unknown.
        labels: float32 ``[N]`` in {0, 1}.
        field_dims: vocabulary size of each field, including the unknown bucket.
        field_names: one name per field.
        dense_names: one name per dense column.
        check: validate ids and labels (an on-disk store was validated when it was written).
        order_seed: set when the rows are already in a seeded random order (a memory-mapped
            store, :func:`sgl.datasets.ctr_store.open_ctr_store`): :meth:`split` then cuts
            contiguous ranges instead of copying, and only for this seed.
        source_row: for a store, each row's index in the source file.

    ``sparse`` may be int32 or int64 (other integer types become int64); arrays that already
    have the right dtype and layout, memory maps included, are kept as they are.
    """

    dense: np.ndarray
    sparse: np.ndarray
    labels: np.ndarray
    field_dims: List[int]
    field_names: List[str]
    dense_names: List[str] = field(default_factory=list)
    check: bool = field(default=True, repr=False, compare=False)
    order_seed: Optional[int] = field(default=None, repr=False, compare=False)
    source_row: Optional[np.ndarray] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.dense = _keep_or_convert(self.dense, np.float32)
        sparse_dtype = getattr(self.sparse, "dtype", None)
        self.sparse = _keep_or_convert(self.sparse, sparse_dtype if sparse_dtype in (np.int32, np.int64)
                                       else np.int64)
        self.labels = _keep_or_convert(self.labels, np.float32).reshape(-1)
        self.field_dims = [int(d) for d in self.field_dims]
        self.field_names = [str(n) for n in self.field_names]
        n = self.labels.shape[0]
        if self.dense.ndim != 2 or self.dense.shape[0] != n:
            raise DatasetError(f"dense must be [N={n}, D], got shape {self.dense.shape}")
        if self.sparse.ndim != 2 or self.sparse.shape[0] != n:
            raise DatasetError(f"sparse must be [N={n}, F], got shape {self.sparse.shape}")
        if len(self.field_dims) != self.sparse.shape[1] or len(self.field_names) != self.sparse.shape[1]:
            raise DatasetError(f"{self.sparse.shape[1]} sparse fields but {len(self.field_dims)} field_dims "
                               f"and {len(self.field_names)} field_names")
        if not self.dense_names:
            self.dense_names = [f"I{i + 1}" for i in range(self.dense.shape[1])]
        if n and self.sparse.size and self.check:
            low, high = self.sparse.min(axis=0), self.sparse.max(axis=0)
            bad = np.nonzero((low < 0) | (high >= np.asarray(self.field_dims)))[0]
            if bad.size:
                f = int(bad[0])
                raise DatasetError(f"field {self.field_names[f]!r} has ids in [{low[f]}, {high[f]}] but "
                                   f"field_dims[{f}]={self.field_dims[f]}; ids must be in [0, field_dims)")
        if n and self.check and not np.isin(self.labels, (0.0, 1.0)).all():
            raise DatasetError("labels must be 0 or 1")

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_fields(self) -> int:
        return len(self.field_dims)

    @property
    def num_dense(self) -> int:
        return int(self.dense.shape[1])

    @property
    def num_embeddings(self) -> int:
        """Rows of the one table that :meth:`global_ids` indexes: ``sum(field_dims)``."""
        return int(sum(self.field_dims))

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``[F]``: first global id of each field (exclusive cumsum of ``field_dims``)."""
        return np.concatenate([[0], np.cumsum(self.field_dims)[:-1]]).astype(np.int64)

    @property
    def is_mapped(self) -> bool:
        """Whether the arrays are memory maps of an on-disk store (read block by block)."""
        return isinstance(self.sparse, np.memmap)

    def global_ids(self) -> np.ndarray:
        """int64 ``[N, F]``: ``sparse + offsets``, ids into one table of ``sum(field_dims)`` rows."""
        return self._global(self.sparse)

    def batch(self, rows: Union[slice, np.ndarray]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(dense, global ids (int64), labels)`` of ``rows`` only — what a training step reads
        from a memory-mapped store."""
        return np.array(self.dense[rows]), self._global(self.sparse[rows]), np.array(self.labels[rows])

    def _global(self, sparse: np.ndarray) -> np.ndarray:
        return sparse.astype(np.int64, copy=False) + self.offsets[None, :]

    def subset(self, index: Union[slice, np.ndarray]) -> "CTRData":
        """The rows ``index`` (an int array, a boolean mask or a slice), sharing vocabularies.

        A slice of a memory-mapped store stays mapped (no copy); index arrays copy the rows.
        """
        return CTRData(self.dense[index], self.sparse[index], self.labels[index], list(self.field_dims),
                       list(self.field_names), list(self.dense_names), check=False,
                       order_seed=self.order_seed if isinstance(index, slice) else None,
                       source_row=None if self.source_row is None else self.source_row[index])

    def split(self, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
              ) -> Tuple["CTRData", "CTRData", "CTRData"]:
        """Random train/validation/test split with sizes ``floor(fraction * N)`` (test gets the rest)."""
        if len(fractions) != 3 or any(not isinstance(f, Real) or f < 0 for f in fractions) \
                or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
            raise ConfigError(f"fractions must be three non-negative numbers summing to 1, got {tuple(fractions)}")
        n = len(self)
        n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
        if self.order_seed is not None:
            if seed != self.order_seed:
                raise ConfigError(f"these rows were shuffled on disk with seed {self.order_seed}, so split() cuts "
                                  f"contiguous ranges and needs seed={self.order_seed} (got {seed}); build the "
                                  f"store with shuffle_seed={seed} for another split")
            return (self.subset(slice(0, n_train)), self.subset(slice(n_train, n_train + n_val)),
                    self.subset(slice(n_train + n_val, n)))
        order = np.random.default_rng(seed).permutation(n)
        return (self.subset(order[:n_train]), self.subset(order[n_train:n_train + n_val]),
                self.subset(order[n_train + n_val:]))

    def __repr__(self) -> str:
        return (f"CTRData(rows={len(self)}, dense={self.num_dense}, fields={self.num_fields}, "
                f"ids={self.num_embeddings}, ctr={float(self.labels.mean()) if len(self) else float('nan'):.3f})")


def _keep_or_convert(values: object, dtype: type) -> np.ndarray:
    """``values`` itself when it is a C-contiguous array of ``dtype`` (a memory map stays one)."""
    if isinstance(values, np.ndarray) and values.dtype == dtype and values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values, dtype=dtype)


def transform_dense(values: np.ndarray) -> np.ndarray:
    """Criteo dense preprocessing: NaN → 0, ``x > -1`` → ``log(x+1)``, ``x <= -1`` kept.

    >>> transform_dense(np.array([0.0, np.e - 1, np.nan, -2.0])).round(3).tolist()
    [0.0, 1.0, 0.0, -2.0]
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.where(np.isnan(values), 0.0, values)
    positive = out > -1
    out[positive] = np.log1p(out[positive])
    return out.astype(np.float32)


# --------------------------------------------------------------------------- text formats


@dataclass(frozen=True)
class CTRFormat:
    """Column layout of a delimited CTR file.

    Attributes:
        num_columns: columns per row.
        label: column index of the 0/1 label.
        dense: column indices of numeric features.
        sparse: column indices of categorical features.
        header_first: the name of the label column in a header line (a first line whose label
            field equals it is skipped).
        field_names / dense_names: names used when the file has no header.
    """

    num_columns: int
    label: int
    dense: Tuple[int, ...]
    sparse: Tuple[int, ...]
    header_first: str
    field_names: Tuple[str, ...]
    dense_names: Tuple[str, ...] = ()


#: Criteo: label, I1..I13, C1..C26 (tab-separated without header, or the DeepCTR CSV with one).
CRITEO_FORMAT = CTRFormat(40, 0, tuple(range(1, 14)), tuple(range(14, 40)), "label",
                          tuple(f"C{i}" for i in range(1, 27)), tuple(f"I{i}" for i in range(1, 14)))
_AVAZU_FIELDS = ("hour", "C1", "banner_pos", "site_id", "site_domain", "site_category", "app_id",
                 "app_domain", "app_category", "device_id", "device_ip", "device_model", "device_type",
                 "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21")
#: Avazu: id, click, hour, then 21 categorical columns (CSV with header); ``hour`` becomes hour of day.
AVAZU_FORMAT = CTRFormat(24, 1, (), tuple(range(2, 24)), "click", _AVAZU_FIELDS)


def _sniff(path: Path) -> Tuple[str, bool]:
    """(delimiter, has_header) from the first line."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
    except OSError as exc:
        raise DatasetError(f"cannot read CTR file {path}: {exc}") from exc
    if not first.strip():
        raise DatasetError(f"CTR file {path} is empty; expected one row per line")
    delimiter = "\t" if "\t" in first else ","
    return delimiter, first


def _lines(path: Path, chunk_rows: int, fmt: CTRFormat, max_rows: Optional[int]
           ) -> Iterator[Tuple[List[int], List[str]]]:
    """Yield (file line number of each row, raw rows) per chunk, checking every row's column count."""
    delimiter, first = _sniff(path)
    head = first.rstrip("\r\n").split(delimiter)
    skip_header = len(head) > fmt.label and head[fmt.label].strip().lower() == fmt.header_first
    separators = fmt.num_columns - 1
    emitted = 0
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        if skip_header:
            handle.readline()
        line_no = 1 if skip_header else 0
        rows: List[str] = []
        numbers: List[int] = []
        for line in handle:
            line_no += 1
            if max_rows is not None and emitted >= max_rows:
                break
            line = line.rstrip("\r\n")
            if not line:
                continue
            if line.count(delimiter) != separators:
                raise DatasetError(f"{path}, line {line_no}: {line.count(delimiter) + 1} columns, expected "
                                   f"{fmt.num_columns} (label, {len(fmt.dense)} dense, {len(fmt.sparse)} "
                                   f"categorical); fix or remove the malformed row")
            rows.append(line)
            numbers.append(line_no)
            emitted += 1
            if len(rows) == chunk_rows:
                yield numbers, rows
                rows, numbers = [], []
        if rows:
            yield numbers, rows


def _frame(rows: List[str], delimiter: str):
    """All columns as strings (empty = missing), parsed by pandas' C reader."""
    import csv
    import io

    import pandas as pd

    return pd.read_csv(io.StringIO("\n".join(rows)), sep=delimiter, header=None, dtype=str, na_filter=False,
                       quoting=csv.QUOTE_NONE, engine="c")


def _header_names(path: Path, fmt: CTRFormat) -> Tuple[List[str], List[str]]:
    delimiter, first = _sniff(path)
    head = [h.strip() for h in first.rstrip("\r\n").split(delimiter)]
    if len(head) == fmt.num_columns and head[fmt.label].lower() == fmt.header_first:
        return [head[c] for c in fmt.sparse], [head[c] for c in fmt.dense]
    return list(fmt.field_names), list(fmt.dense_names)


def _categorical_columns(frame, fmt: CTRFormat) -> List[np.ndarray]:
    columns = []
    for c in fmt.sparse:
        col = frame[c]
        if fmt is AVAZU_FORMAT and c == 2:  # hour YYMMDDHH -> hour of day
            col = col.str[-2:]
        columns.append(col.to_numpy())
    return columns


def _parse_numbers(frame, columns: Sequence[int], what: str, path: Path, numbers: List[int]) -> np.ndarray:
    """Float matrix of ``columns``; empty = NaN; a non-numeric value names its line and column."""
    import pandas as pd

    out = np.empty((len(frame), len(columns)), dtype=np.float64)
    for j, c in enumerate(columns):
        text = frame[c].str.strip()
        values = pd.to_numeric(text, errors="coerce")
        bad = values.isna().to_numpy() & (text != "").to_numpy() & (text.str.lower() != "nan").to_numpy()
        if bad.any():
            r = int(np.nonzero(bad)[0][0])
            raise DatasetError(f"{path}, line {numbers[r]}, column {c + 1}: {what} value {text.iloc[r]!r} "
                               f"is not a number; fix or remove the row")
        out[:, j] = values.to_numpy(dtype=np.float64, na_value=np.nan)
    return out


def build_vocabulary(path: PathLike, fmt: CTRFormat = CRITEO_FORMAT, min_count: int = 1,
                     chunk_rows: int = _DEFAULT_CHUNK, max_rows: Optional[int] = None) -> List[np.ndarray]:
    """First streaming pass: per field, the values seen ``>= min_count`` times, most frequent first.

    Value ``vocab[f][i]`` gets id ``i + 1`` (0 is the unknown bucket); empty strings (missing)
    are never in a vocabulary.
    """
    import pandas as pd

    path = Path(path)
    delimiter, _ = _sniff(path)
    counters = [Counter() for _ in fmt.sparse]
    for _, rows in _lines(path, chunk_rows, fmt, max_rows):
        for counter, col in zip(counters, _categorical_columns(_frame(rows, delimiter), fmt)):
            counts = pd.Series(col).value_counts(sort=False)
            counter.update(dict(zip(counts.index.tolist(), counts.to_numpy().tolist())))
    vocab = []
    for counter in counters:
        counter.pop("", None)
        kept = sorted(((v, c) for v, c in counter.items() if c >= min_count), key=lambda vc: (-vc[1], vc[0]))
        vocab.append(np.array([v for v, _ in kept], dtype=object))
    return vocab


def iter_ctr_chunks(path: PathLike, vocab: Sequence[np.ndarray], fmt: CTRFormat = CRITEO_FORMAT,
                    chunk_rows: int = _DEFAULT_CHUNK, max_rows: Optional[int] = None) -> Iterator[CTRData]:
    """Second streaming pass: encoded :class:`CTRData` chunks of at most ``chunk_rows`` rows."""
    import pandas as pd

    path = Path(path)
    delimiter, _ = _sniff(path)
    field_names, dense_names = _header_names(path, fmt)
    indexes = [pd.Index(v) for v in vocab]
    field_dims = [len(v) + 1 for v in vocab]
    for numbers, rows in _lines(path, chunk_rows, fmt, max_rows):
        frame = _frame(rows, delimiter)
        labels = _parse_numbers(frame, [fmt.label], "label", path, numbers)[:, 0]
        wrong = np.isnan(labels) | ~np.isin(labels, (0.0, 1.0))
        if wrong.any():
            r = int(np.nonzero(wrong)[0][0])
            raise DatasetError(f"{path}, line {numbers[r]}: label {frame[fmt.label].iloc[r]!r} is not 0 or 1")
        if fmt.dense:
            dense = transform_dense(_parse_numbers(frame, fmt.dense, "dense", path, numbers))
        else:
            dense = np.zeros((len(rows), 0), dtype=np.float32)
        sparse = np.empty((len(rows), len(fmt.sparse)), dtype=np.int64)
        for f, col in enumerate(_categorical_columns(frame, fmt)):
            sparse[:, f] = indexes[f].get_indexer(col) + 1  # -1 (unseen) -> 0 (unknown bucket)
        yield CTRData(dense, sparse, labels, field_dims, field_names, dense_names)


def _concat(chunks: List[CTRData], fmt: CTRFormat, path: Path, vocab: Sequence[np.ndarray]) -> CTRData:
    if not chunks:
        raise DatasetError(f"CTR file {path} has no data rows")
    return CTRData(np.concatenate([c.dense for c in chunks]), np.concatenate([c.sparse for c in chunks]),
                   np.concatenate([c.labels for c in chunks]), chunks[0].field_dims, chunks[0].field_names,
                   chunks[0].dense_names)


def read_ctr_file(path: PathLike, fmt: CTRFormat = CRITEO_FORMAT, min_count: int = 1,
                  chunk_rows: int = _DEFAULT_CHUNK, max_rows: Optional[int] = None,
                  progress: Optional[bool] = None) -> CTRData:
    """Read a delimited CTR file in two streaming passes (vocabulary, then encoding).

    Args:
        path: the file (tab- or comma-separated, with or without a header line).
        fmt: its column layout (:data:`CRITEO_FORMAT`, :data:`AVAZU_FORMAT`).
        min_count: values seen fewer times map to the unknown bucket 0.
        chunk_rows: lines held as text at once.
        max_rows: read only the first ``max_rows`` data rows.
        progress: tqdm bar over chunks (``None`` = only on a terminal).
    """
    from tqdm.auto import tqdm

    path = _check_read_args(path, min_count, chunk_rows, max_rows)
    vocab = build_vocabulary(path, fmt, min_count, chunk_rows, max_rows)
    chunks = list(tqdm(iter_ctr_chunks(path, vocab, fmt, chunk_rows, max_rows), desc=f"encode {path.name}",
                       unit="chunk", disable=None if progress is None else not progress))
    return _concat(chunks, fmt, path, vocab)


def _check_read_args(path: PathLike, min_count: int, chunk_rows: int, max_rows: Optional[int]) -> Path:
    """Validate the arguments every text reader takes; return the file as a Path."""
    _check_int(min_count, "min_count", 1)
    _check_int(chunk_rows, "chunk_rows", 1)
    if max_rows is not None:
        _check_int(max_rows, "max_rows", 1)
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"CTR file {path} does not exist")
    return path


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- Criteo / Avazu

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
    (:mod:`sgl.datasets.ctr_store`; ``True`` = ``processed/`` next to the file) and maps it on
    every later call; ``None`` (default) does so only for files over 2 GiB (the 45.8M-row
    Criteo file would otherwise need ~12 GB of RAM). A stored table is in a seeded random
    row order (``shuffle_seed`` 0), so its ``split(seed=0)`` cuts ranges without copying."""


def _load_text(path: Path, fmt: CTRFormat, store: Union[None, bool, str, PathLike], min_count: int,
               chunk_rows: int, max_rows: Optional[int], progress: Optional[bool]) -> CTRData:
    from sgl.datasets.ctr_store import load_with_store

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


# --------------------------------------------------------------------------- MovieLens-100k

_ML100K_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
_ML100K_FILES = ("u.data", "u.user", "u.item")
_AGE_BINS = np.array([18, 25, 35, 45, 50, 56])  # the MovieLens-1M age groups


def _read_table(path: Path, sep: str, columns: int, name: str) -> List[List[str]]:
    rows = []
    with open(path, "r", encoding="latin-1") as handle:
        for line_no, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.split(sep)
            if len(parts) < columns:
                raise DatasetError(f"{path}, line {line_no}: {len(parts)} fields, expected {columns} ({name})")
            rows.append(parts)
    return rows


def load_movielens_100k(root: Optional[PathLike] = None, threshold: int = 4, download: bool = True) -> CTRData:
    """MovieLens-100k as implicit CTR: ``rating >= threshold`` → click 1, else 0.

    Fields: ``user``, ``item``, ``age`` (the 7 MovieLens-1M age groups), ``gender``,
    ``occupation``, ``genre`` (the first genre flag of the movie). Ratings by a user id 0
    (not a MovieLens user; some copies of ``u.data`` carry such junk rows) are dropped; any
    other user or item missing from ``u.user`` / ``u.item`` is an error. No dense features.
    """
    from sgl.datasets.download import download_zip_folder, find_folder, target_folder

    folder = find_folder(root, ("ml-100k",), _ML100K_FILES)
    if folder is None:
        if not download:
            raise DatasetError(f"MovieLens-100k files {', '.join(_ML100K_FILES)} not found under "
                               f"{root or 'the default root'}")
        folder = download_zip_folder(_ML100K_URL, target_folder(root, ("ml-100k",), _ML100K_FILES), "ml-100k",
                                     last=("u.data",))
    ratings = _read_table(folder / "u.data", "\t", 4, "user, item, rating, timestamp")
    try:
        r = np.array([[int(p[0]), int(p[1]), int(p[2])] for p in ratings], dtype=np.int64)
    except ValueError as exc:
        raise DatasetError(f"{folder / 'u.data'}: non-integer user/item/rating ({exc})") from exc
    r = r[r[:, 0] != 0]
    users = {int(p[0]): p for p in _read_table(folder / "u.user", "|", 5, "id|age|gender|occupation|zip")}
    items = {int(p[0]): p for p in _read_table(folder / "u.item", "|", 24, "id|title|...|19 genre flags")}
    missing_u = np.setdiff1d(r[:, 0], np.array(sorted(users)))
    missing_i = np.setdiff1d(r[:, 1], np.array(sorted(items)))
    if missing_u.size or missing_i.size:
        raise DatasetError(f"{folder / 'u.data'} rates users {missing_u[:5].tolist()} / items "
                           f"{missing_i[:5].tolist()} that are not in u.user / u.item")
    user_ids = np.array(sorted(users))
    item_ids = np.array(sorted(items))
    age = np.array([int(users[u][1]) for u in user_ids])
    gender = np.array([users[u][2] for u in user_ids])
    occupation = np.array([users[u][3] for u in user_ids])
    genre_flags = np.array([[int(x) for x in items[i][5:24]] for i in item_ids])
    genre = genre_flags.argmax(axis=1)  # first flagged genre; all-zero rows -> 0 ("unknown" genre)

    def encode(values: np.ndarray) -> Tuple[np.ndarray, int]:
        uniq, inverse = np.unique(values, return_inverse=True)
        return inverse.reshape(-1) + 1, len(uniq) + 1

    u_pos = np.searchsorted(user_ids, r[:, 0])
    i_pos = np.searchsorted(item_ids, r[:, 1])
    columns, dims = [], []
    for per_entity, pos in ((user_ids, u_pos), (item_ids, i_pos), (np.digitize(age, _AGE_BINS), u_pos),
                            (gender, u_pos), (occupation, u_pos), (genre, i_pos)):
        codes, dim = encode(per_entity)
        columns.append(codes[pos])
        dims.append(dim)
    labels = (r[:, 2] >= threshold).astype(np.float32)
    return CTRData(np.zeros((len(r), 0), np.float32), np.stack(columns, axis=1), labels, dims,
                   ["user", "item", "age", "gender", "occupation", "genre"])


# --------------------------------------------------------------------------- synthetic


def _zipf_sampler(n: int, a: float) -> np.ndarray:
    """CDF of a Zipf law truncated to ranks 1..n (p_k ∝ k^-a)."""
    weights = np.arange(1, n + 1, dtype=np.float64) ** (-a)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def make_synthetic_ctr(num_rows: int, field_dims: Sequence[int], num_dense: int = 13, zipf_a: float = 1.1,
                       seed: int = 0, weight_scale: float = 1.0, interaction_rank: int = 4,
                       bias: float = -1.0) -> CTRData:
    r"""Seeded synthetic CTR data with Zipf-distributed ids and a planted logistic model.

    Field ``f`` draws ids ``1..field_dims[f]-1`` (0 stays the unused unknown bucket) with
    :math:`P(\text{rank } k) \propto k^{-a}`; ranks map to ids through a random permutation,
    so frequent ids are not simply the small ones. The label is Bernoulli of

    .. math:: \sigma\Big(b + \sum_f w_f[x_f] + \sum_{f<g} \langle v_f[x_f], v_g[x_g]\rangle
              + \beta^\top d\Big)

    with per-id weights :math:`w \sim N(0, s^2)`, rank-``interaction_rank`` pairwise factors
    :math:`v \sim N(0, s^2/(r\sqrt{F}))` and dense features :math:`d = \log(1+\text{LogNormal})`.
    Memory is O(N·F + Σ field_dims): it scales to millions of rows and ids.
    """
    num_rows = _check_int(num_rows, "num_rows", 1)
    num_dense = _check_int(num_dense, "num_dense", 0)
    _check_int(interaction_rank, "interaction_rank", 0)
    if len(field_dims) == 0:
        raise ConfigError("field_dims must list at least one field")
    dims = [_check_int(d, f"field_dims[{i}]", 2) for i, d in enumerate(field_dims)]
    if isinstance(zipf_a, bool) or not isinstance(zipf_a, Real) or zipf_a <= 0:
        raise ConfigError(f"zipf_a must be a positive number, got {zipf_a!r}")
    rng = np.random.default_rng(seed)
    num_fields = len(dims)
    sparse = np.empty((num_rows, num_fields), dtype=np.int64)
    logit = np.full(num_rows, float(bias))
    factors = np.zeros((num_rows, interaction_rank))
    factor_sq = np.zeros(num_rows)
    v_scale = weight_scale / math.sqrt(max(interaction_rank, 1) * math.sqrt(num_fields))
    for f, dim in enumerate(dims):
        cdf = _zipf_sampler(dim - 1, zipf_a)
        ranks = np.searchsorted(cdf, rng.random(num_rows), side="right")
        ranks = np.minimum(ranks, dim - 2)
        ids = rng.permutation(dim - 1)[ranks] + 1
        sparse[:, f] = ids
        w = rng.normal(0.0, weight_scale, size=dim)
        logit += w[ids]
        if interaction_rank:
            v = rng.normal(0.0, v_scale, size=(dim, interaction_rank))[ids]
            factors += v
            factor_sq += (v * v).sum(axis=1)
    if interaction_rank:  # sum over pairs f<g of <v_f, v_g> = ((Σv)^2 - Σv^2) / 2
        logit += 0.5 * ((factors * factors).sum(axis=1) - factor_sq)
    dense_raw = rng.lognormal(0.0, 1.0, size=(num_rows, num_dense))
    dense = transform_dense(dense_raw)
    if num_dense:
        beta = rng.normal(0.0, weight_scale / math.sqrt(num_dense), size=num_dense)
        logit += (dense - dense.mean(axis=0)) @ beta
    labels = (rng.random(num_rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    return CTRData(dense, sparse, labels, dims, [f"F{f + 1}" for f in range(num_fields)])


def load_synthetic_ctr(root: Optional[PathLike] = None, num_rows: int = 100_000,
                       field_dims: Optional[Sequence[int]] = None, num_fields: int = 8,
                       ids_per_field: int = 10_000, num_dense: int = 13, zipf_a: float = 1.1,
                       seed: int = 0) -> CTRData:
    """Registry entry ``synthetic-ctr``: :func:`make_synthetic_ctr` with ``num_fields`` fields of
    ``ids_per_field`` ids unless ``field_dims`` is given (``root`` is ignored: nothing is read)."""
    dims = list(field_dims) if field_dims is not None else [_check_int(ids_per_field, "ids_per_field", 2)] * \
        _check_int(num_fields, "num_fields", 1)
    return make_synthetic_ctr(num_rows, dims, num_dense=num_dense, zipf_a=zipf_a, seed=seed)
