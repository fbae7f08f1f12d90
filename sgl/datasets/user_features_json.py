r"""Binary node features given as lists of feature ids, in JSON: the MUSAE layout.

MUSAE's sets (Rozemberczki et al., *Multi-scale attributed node embedding*: Facebook page-page,
GitHub, Twitch, Wikipedia, Deezer, LastFM) ship ``*_features.json`` as
``{"0": [feature ids of node 0], "1": [...], ...}``: node ``v`` has feature ``j`` iff ``j``
is in its list. :func:`read_json_features` turns that into the 0/1 matrix
``[rows, max_feature_id + 1]`` (float32), keyed by the node ids; a top-level JSON *list* of
lists is read the same way, row ``i`` = the ``i``-th node.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from sgl.datasets.user_features_json import read_json_features
    >>> path = Path(tempfile.mkdtemp()) / "musae_features.json"
    >>> _ = path.write_text('{"1": [3], "0": [0, 3]}')
    >>> x, ids = read_json_features(path)
    >>> ids.tolist(), x.shape
    ([1, 0], (2, 4))
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy as np

from sgl.errors import DatasetError

__all__ = ["read_json_features"]

_EXPECTED = ('a .json feature file maps each node id to the list of its feature ids, as MUSAE\'s '
             '*_features.json: {"0": [3, 17], "1": [5], ...} (or is a list of such lists, one per node)')


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse(path: Path) -> Any:
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                           f"{_EXPECTED}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: could not read the JSON feature file ({exc}); {_EXPECTED}") from None


def read_json_features(path: Path, max_bytes: int = 4 * 2**30) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """``(x, ids)``: the 0/1 feature matrix of a MUSAE-layout JSON file and the node id of each
    row (``None`` for a list of lists: row ``i`` = the ``i``-th node); see the module docstring."""
    data = _parse(path)
    ids: Optional[np.ndarray] = None
    if isinstance(data, dict):
        keys = list(data)
        parsed = []
        for key in keys:
            text = key.strip()
            if not (text.isdigit() or (text.startswith("+") and text[1:].isdigit())):
                raise DatasetError(f"{path}: the key {key!r} is not a node id (a non-negative integer); {_EXPECTED}")
            parsed.append(int(text))
        ids = np.asarray(parsed, dtype=np.int64)
        lists: List[Any] = [data[key] for key in keys]
        labels = keys
    elif isinstance(data, list):
        lists, labels = data, [str(i) for i in range(len(data))]
    else:
        raise DatasetError(f"{path}: the JSON holds a {type(data).__name__}; {_EXPECTED}")
    if not lists:
        raise DatasetError(f"{path}: the JSON feature file lists no nodes; {_EXPECTED}")
    lengths = np.empty(len(lists), dtype=np.int64)
    for row, (label, features) in enumerate(zip(labels, lists)):
        if not isinstance(features, list) or not all(_is_index(j) for j in features):
            shown = features if not isinstance(features, list) else next(j for j in features if not _is_index(j))
            raise DatasetError(f"{path}: node {label} has {shown!r} where a list of feature ids (non-negative "
                               f"integers) is expected; {_EXPECTED}")
        lengths[row] = len(features)
    columns = np.fromiter((j for features in lists for j in features), dtype=np.int64, count=int(lengths.sum()))
    width = int(columns.max()) + 1 if columns.size else 0
    if width == 0:
        raise DatasetError(f"{path}: no node lists any feature id, so there are no features; {_EXPECTED}")
    size = 4 * len(lists) * width
    if size > max_bytes:
        raise DatasetError(f"{path}: {len(lists):,} nodes x {width:,} feature ids is a {size / 2**30:.1f} GiB dense "
                           f"matrix, over the {max_bytes / 2**30:.0f} GiB limit; renumber the feature ids "
                           f"0..d-1 without gaps, or reduce them (e.g. keep the most frequent)")
    x = np.zeros((len(lists), width), dtype=np.float32)
    x[np.repeat(np.arange(len(lists)), lengths), columns] = 1.0
    return x, ids
