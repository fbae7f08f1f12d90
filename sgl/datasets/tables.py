"""Delimited text tables (edge lists, feature and label files) read with errors that name the line.

A table is parsed in one pass by pandas' C reader; only when that fails, or when what it
read breaks a rule (a negative node id, NaN, a missing field), the file is scanned line by
line in Python to find the **first** offending line, so every error reads
``edges.csv line 17: ...``. Good files never pay for the scan.

Rules shared by every table:

* blank lines and lines starting with the comment character (``#``, or ``%`` when the file
  starts with one, as KONECT / Matrix Market headers do) are skipped, and text after the
  comment character is ignored;
* the delimiter is a tab, a comma or runs of whitespace, detected from the first line
  unless given;
* a first line whose fields are not all numbers is a header (``header=None``), unless
  ``header`` is given;
* every row has as many fields as the first one.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sgl.datasets.tables import read_table, sniff
    >>> path = Path(tempfile.mkdtemp()) / "edges.tsv"
    >>> _ = path.write_text("src\\tdst\\tweight\\n0\\t1\\t0.5\\n1\\t2\\t2.0\\n")
    >>> layout = sniff(path)
    >>> layout.header, layout.num_columns
    (['src', 'dst', 'weight'], 3)
    >>> table = read_table(layout, id_columns=2, what="edge list")
    >>> table.ids.tolist(), table.values.tolist()
    ([[0, 1], [1, 2]], [[0.5], [2.0]])
"""
from __future__ import annotations

import gzip
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, List, Optional, Tuple, Union

import numpy as np

from sgl.errors import ConfigError, DatasetError

__all__ = ["TableLayout", "Table", "sniff", "read_table", "parse_delimiter", "check_finite_rows"]

PathLike = Union[str, os.PathLike]

_DELIMITERS = {"tab": "\t", "\\t": "\t", "\t": "\t", "comma": ",", ",": ",", ";": ";", "|": "|",
               "space": None, "whitespace": None, " ": None}


def parse_delimiter(value: Optional[str]) -> Optional[str]:
    """``"tab"``/``","``/``"whitespace"``/... -> the separator (``None``: runs of whitespace)."""
    if value is None:
        return None
    key = str(value) if str(value) in _DELIMITERS else str(value).strip().lower()
    if key not in _DELIMITERS:
        raise ConfigError(f"delimiter must be one of tab, comma, whitespace, ';' or '|', got {value!r}")
    return _DELIMITERS[key]


@dataclass
class TableLayout:
    """What :func:`sniff` found: the separator (``None`` = whitespace), the comment
    character, the header fields (``None``: no header) and the width of the first row."""

    path: Path
    delimiter: Optional[str]
    comment: str
    header: Optional[List[str]]
    num_columns: int


@dataclass
class Table:
    """``ids`` ``[rows, id_columns + int_columns]`` int64 and ``values`` ``[rows, rest]`` float64."""

    ids: np.ndarray
    values: np.ndarray


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "r", encoding="utf-8", errors="replace")


def _split(line: str, delimiter: Optional[str]) -> List[str]:
    return line.split() if delimiter is None else [field.strip() for field in line.split(delimiter)]


def _data_lines(path: Path, comment: str) -> Iterator[Tuple[int, str]]:
    """``(line number, text)`` of every line that is neither blank nor a comment."""
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            text = line.split(comment, 1)[0] if comment in line else line
            if text.strip():
                yield number, text.rstrip("\r\n")


def _is_int(field: str) -> bool:
    try:
        int(field)
    except ValueError:
        return False
    return True


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def sniff(path: PathLike, delimiter: Optional[str] = "auto", header: Optional[bool] = None,
          what: str = "table") -> TableLayout:
    """Detect the separator, comment character and header of ``path`` from its first lines.

    ``delimiter="auto"`` detects it (tab, then comma, else whitespace); ``header=None``
    takes a first line that is not all numbers for a header.
    """
    path = Path(path)
    comment = "#"
    with _open(path) as handle:
        for line in handle:
            if line.strip():
                comment = "%" if line.lstrip().startswith("%") else "#"
                break
    first = next(_data_lines(path, comment), None)
    if first is None:
        raise DatasetError(f"{path}: the {what} has no data rows (only blank or comment lines)")
    number, text = first
    if delimiter == "auto":
        delimiter = "\t" if "\t" in text else "," if "," in text else None
    else:
        delimiter = parse_delimiter(delimiter)
    fields = _split(text, delimiter)
    if header is None:
        header = not all(_is_number(f) for f in fields)
    names = fields if header else None
    width = len(fields)
    if header:
        second = next((item for item in _data_lines(path, comment) if item[0] > number), None)
        if second is None:
            raise DatasetError(f"{path}: the {what} has a header line but no data rows")
        width = len(_split(second[1], delimiter))
    return TableLayout(path, delimiter, comment, names, width)


def _first_bad_line(layout: TableLayout, id_columns: int, what: str, int_columns: int = 0) -> Optional[DatasetError]:
    """Scan the file in Python for the first row breaking the table's rules."""
    rows = _data_lines(layout.path, layout.comment)
    if layout.header is not None:
        next(rows, None)
    for number, text in rows:
        fields = _split(text, layout.delimiter)
        where = f"{layout.path} line {number}"
        if len(fields) != layout.num_columns:
            return DatasetError(f"{where}: {len(fields)} fields where the {what} has {layout.num_columns} "
                                f"({text.strip()!r}); every row needs the same columns")
        for column, field in enumerate(fields):
            if column < id_columns:
                if not _is_int(field) or int(field) < 0:
                    return DatasetError(f"{where}: column {column + 1} is {field!r}; node ids must be "
                                        f"non-negative integers")
            elif column < id_columns + int_columns:
                if not _is_int(field):
                    return DatasetError(f"{where}: column {column + 1} is {field!r}; the {what} needs integers "
                                        f"(-1 for none)")
            elif not _is_number(field) or not math.isfinite(float(field)):
                kind = "NaN or infinite" if _is_number(field) or not field else "not a number"
                return DatasetError(f"{where}: column {column + 1} is {field!r} ({kind}); the {what} needs "
                                    f"finite numbers (row {text.strip()!r})")
    return None


def read_table(layout: TableLayout, id_columns: int = 0, what: str = "table", int_columns: int = 0) -> Table:
    """Read the whole table: its first ``id_columns`` as node ids, the next ``int_columns`` as
    integers of any sign (labels, ``-1`` = none), the rest as finite floats.

    Raises :class:`~sgl.errors.DatasetError` naming the file and line of the first
    malformed row (wrong width, a negative or non-integer id, NaN, text in a number column).
    """
    import pandas as pd  # imported on use: keeps `import sgl.datasets` light

    width = layout.num_columns
    ints = id_columns + int_columns
    dtype = {c: "int64" if c < ints else "float64" for c in range(width)}
    try:
        frame = pd.read_csv(layout.path, sep=r"\s+" if layout.delimiter is None else layout.delimiter,
                            header=0 if layout.header is not None else None, comment=layout.comment, dtype=dtype,
                            names=list(range(width)), engine="c", skip_blank_lines=True,
                            skipinitialspace=True)
        data = frame.to_numpy()
    except Exception as exc:  # ParserError (ragged rows), ValueError (text in a number column)
        raise (_first_bad_line(layout, id_columns, what, int_columns)
               or _unreadable(layout.path, what, exc)) from None
    ids = data[:, :ints].astype(np.int64) if ints else np.empty((len(data), 0), dtype=np.int64)
    values = data[:, ints:].astype(np.float64)
    if (ids[:, :id_columns] < 0).any() or not np.isfinite(values).all():
        raise (_first_bad_line(layout, id_columns, what, int_columns)
               or _unreadable(layout.path, what, "non-finite values"))
    return Table(ids, values)


def _unreadable(path: Path, what: str, reason: object) -> DatasetError:
    return DatasetError(f"{path}: could not read the {what} ({reason})")


def check_finite_rows(x: np.ndarray, path: PathLike, what: str = "node_features") -> None:
    """Raise naming ``path`` and the first row of ``x`` holding NaN or infinity.

    Example:
        >>> import numpy as np
        >>> from sgl.datasets.tables import check_finite_rows
        >>> try:
        ...     check_finite_rows(np.array([[1.0], [np.nan]]), "feats.npy")
        ... except Exception as exc:
        ...     print(exc)
        feats.npy: node_features row 1 (node 1) holds NaN or infinity (1 such rows); fix or drop those values
    """
    bad = ~np.isfinite(x).all(axis=1) if x.ndim == 2 else ~np.isfinite(x)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DatasetError(f"{path}: {what} row {row} (node {row}) holds NaN or infinity "
                           f"({int(bad.sum())} such rows); fix or drop those values")
