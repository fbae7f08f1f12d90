"""MovieLens-100k as implicit CTR (``rating >= threshold`` is a click)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

from sgl.datasets.ctr._common import PathLike
from sgl.datasets.ctr.data import CTRData
from sgl.errors import DatasetError

__all__ = ["load_movielens_100k"]


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
