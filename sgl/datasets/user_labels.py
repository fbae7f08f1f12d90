r"""Label files of a user's edge list: integer or string classes, the label column chosen by name.

* ``.npy``: a 1-D integer array, row ``i`` = the ``i``-th node; negative = unlabeled.
* text (CSV/TSV/whitespace): one label per line (row-ordered) or a node-id column plus one
  or more other columns. The **id column** is the first one whose header name is ``id``,
  ``node``, ``node_id``, ``nid`` or ``index``; without such a name, the first of two columns
  (``id label`` pairs, with or without a header). The **label column** is ``label_column``
  (a header name, or a 0-based position); else the only column besides the id; else the one
  column named ``label``, ``labels``, ``target``, ``class``, ``y``, ``category``,
  ``ml_target`` or ``page_type`` (MUSAE's target files); anything else is an error that
  lists the columns.

Labels are integer classes (``-1`` or an empty field = unlabeled) or **class names**
(``tvshow``, ``government``, ...): names are numbered ``0..C-1`` in sorted order, which is
deterministic, and the names are kept (class ``c`` = ``names[c]``; the loaded graph carries
them as ``graph.label_names``). A first line that starts with an integer is data, not a header.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sgl.datasets.user_labels import read_labels
    >>> path = Path(tempfile.mkdtemp()) / "target.csv"
    >>> _ = path.write_text("id,facebook_id,page_name,page_type\n0,145,The Voice,tvshow\n"
    ...                     "1,191,U.S. Consulate,government\n2,144,\"Mark, Jr.\",tvshow\n")
    >>> rows = read_labels(path)
    >>> rows.ids.tolist(), rows.values.tolist(), rows.names
    ([0, 1, 2], [1, 0, 1], ['government', 'tvshow'])
"""
from __future__ import annotations

import os
import re
from typing import Any, List, Optional, Union

import numpy as np

from sgl.datasets.tables import TableLayout, _data_lines, sniff
from sgl.datasets.user_node_data import ID_NAMES, NodeRows, load_array, resolve_file
from sgl.errors import ConfigError, DatasetError

__all__ = ["read_labels", "LABEL_NAMES"]

PathLike = Union[str, os.PathLike]

#: header names taken for the label column when a file has several candidate columns
LABEL_NAMES = ("label", "labels", "target", "class", "y", "category", "ml_target", "page_type")
_INT = re.compile(r"^[+-]?\d+$")


def read_labels(spec: Any, root: Optional[PathLike] = None, label_column: Optional[Union[str, int]] = None
                ) -> NodeRows:
    """Read a label file (see the module docstring); ``label_column`` picks its column."""
    path = resolve_file(spec, root, "label file")
    if path.suffix == ".npy":
        if label_column is not None:
            raise ConfigError(f"label_column picks a column of a text label file; {path.name} is a .npy array, "
                              f"so remove label_column")
        y = load_array(path)
        if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)):
            raise DatasetError(f"{path}: labels must be a 1-D integer array, got shape {y.shape} and dtype {y.dtype}")
        return NodeRows(path, y.astype(np.int64))
    layout = sniff(path, what="label file")
    if layout.header is not None and _INT.match(layout.header[0].strip()) and len(layout.header) > 1:
        layout = sniff(path, header=False, what="label file")  # "0 tvshow": data, not a header
    frame = _read_strings(layout)
    header = [name.strip() for name in layout.header] if layout.header is not None else None
    label = _label_column(layout, header, frame.shape[1], label_column)
    id_col = _id_column(header, frame.shape[1], label)
    ids = None
    if id_col is not None:
        ids = _node_ids(layout, frame.iloc[:, id_col].to_numpy(dtype=str), header, id_col)
    values, names = _classes(layout, frame.iloc[:, label].to_numpy(dtype=str))
    return NodeRows(path, values, ids, names)


def _read_strings(layout: TableLayout) -> Any:
    import pandas as pd  # imported on use: keeps `import sgl.datasets` light

    try:
        return pd.read_csv(layout.path, sep=r"\s+" if layout.delimiter is None else layout.delimiter,
                           header=0 if layout.header is not None else None, dtype=str, keep_default_na=False,
                           comment=layout.comment, skip_blank_lines=True, skipinitialspace=True)
    except Exception as exc:  # ParserError: ragged rows, unbalanced quotes
        raise DatasetError(f"{layout.path}: could not read the label file ({exc}); every row needs the same "
                           f"columns as the first") from None


def _columns(header: Optional[List[str]], width: int) -> str:
    return ", ".join(header) if header is not None else f"{width} unnamed columns (positions 0..{width - 1})"


def _label_column(layout: TableLayout, header: Optional[List[str]], width: int, chosen: Any) -> int:
    if chosen is not None:
        if isinstance(chosen, int) and not isinstance(chosen, bool):
            if not 0 <= chosen < width:
                raise ConfigError(f"label_column={chosen} is out of range: {layout.path.name} has {width} columns "
                                  f"(0..{width - 1})")
            return chosen
        if header is None:
            raise ConfigError(f"label_column={chosen!r} names a column, but {layout.path} has no header line; pass "
                              f"the column's 0-based position instead (label_column=1)")
        lowered = [name.lower() for name in header]
        if str(chosen).strip().lower() not in lowered:
            raise DatasetError(f"{layout.path}: no column named {chosen!r}; its columns are {_columns(header, width)}")
        return lowered.index(str(chosen).strip().lower())
    id_col = _id_column(header, width, None)
    candidates = [c for c in range(width) if c != id_col]
    if len(candidates) == 1:
        return candidates[0]
    named = [c for c in candidates if header is not None and header[c].lower() in LABEL_NAMES]
    if len(named) == 1:
        return named[0]
    why = (f"several columns could hold the labels ({', '.join(header[c] for c in named)})" if named
           else "no column is named like a label column (" + ", ".join(LABEL_NAMES) + ")")
    raise DatasetError(f"{layout.path}: {why}; its columns are {_columns(header, width)}. Pass label_column=NAME "
                       f"(CLI: --dataset-option label_column=NAME)")


def _id_column(header: Optional[List[str]], width: int, label: Optional[int]) -> Optional[int]:
    if header is not None:
        for column, name in enumerate(header):
            if name.lower() in ID_NAMES and column != label:
                return column
    if width >= 2 and label != 0 and (header is None or width == 2):
        return 0  # "id label" pairs
    return None


def _line(layout: TableLayout, row: int) -> str:
    """``PATH line N`` of data row ``row`` (0-based, after the header)."""
    lines = _data_lines(layout.path, layout.comment)
    skip = row + (layout.header is not None)
    for index, (number, _) in enumerate(lines):
        if index == skip:
            return f"{layout.path} line {number}"
    return f"{layout.path} data row {row + 1}"


def _node_ids(layout: TableLayout, column: np.ndarray, header: Optional[List[str]], index: int) -> np.ndarray:
    stripped = np.char.strip(column)
    good = np.array([bool(_INT.match(v)) and not v.startswith("-") for v in stripped], dtype=bool)
    if not good.all():
        row = int(np.flatnonzero(~good)[0])
        name = header[index] if header is not None else f"column {index + 1}"
        raise DatasetError(f"{_line(layout, row)}: the node id ({name}) is {str(column[row])!r}; node ids must be "
                           f"non-negative integers")
    return stripped.astype(np.int64)


def _classes(layout: TableLayout, column: np.ndarray):
    values = np.char.strip(column)
    missing = values == ""
    present = values[~missing]
    if all(_INT.match(v) for v in present):
        y = np.full(values.shape, -1, dtype=np.int64)
        y[~missing] = present.astype(np.int64)
        return np.where(y < 0, -1, y), None
    if all(_is_float(v) for v in present):  # "1.0": a class written as a float
        floats = present.astype(np.float64)
        fractional = np.flatnonzero(~np.isfinite(floats) | (floats % 1 != 0))
        if fractional.size == 0:
            y = np.full(values.shape, -1, dtype=np.int64)
            y[~missing] = floats.astype(np.int64)
            return np.where(y < 0, -1, y), None
        row = int(np.flatnonzero(~missing)[fractional[0]])
        raise DatasetError(f"{_line(layout, row)}: the label is {str(column[row])!r}; labels are integer classes or "
                           f"class names, not fractions")
    names, codes = np.unique(present, return_inverse=True)
    y = np.full(values.shape, -1, dtype=np.int64)
    y[~missing] = codes.reshape(-1)
    return y, [str(name) for name in names]


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
