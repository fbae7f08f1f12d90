"""Delimited CTR text files (Criteo, Avazu): column layouts and the two streaming passes.

A first pass counts per-field values (:func:`build_vocabulary`; only the vocabulary is
kept), a second encodes chunk by chunk (:func:`iter_ctr_chunks`); :func:`read_ctr_file`
runs both and concatenates the chunks in memory.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_int
from sgl.datasets.ctr._common import _DEFAULT_CHUNK, PathLike
from sgl.datasets.ctr.data import CTRData, transform_dense
from sgl.errors import DatasetError

__all__ = ["CTRFormat", "CRITEO_FORMAT", "AVAZU_FORMAT", "build_vocabulary", "iter_ctr_chunks", "read_ctr_file"]


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
    check_int(min_count, "min_count", 1)
    check_int(chunk_rows, "chunk_rows", 1)
    if max_rows is not None:
        check_int(max_rows, "max_rows", 1)
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"CTR file {path} does not exist")
    return path
