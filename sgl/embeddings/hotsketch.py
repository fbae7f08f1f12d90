r"""HotSketch (CAFE, SIGMOD'24): find the features with the largest accumulated importance.

``num_buckets`` buckets of 4 slots; a slot holds (key ``uint32``, score ``float32``, hot id
``int32``) = 12 bytes, so a bucket costs 48 bytes. A key lives in bucket ``hash(key) mod s``.
``insert(key, v)``:

* key present → ``score += v``;
* else an empty slot → store ``(key, v)``;
* else the bucket is full → if its smallest slot is not hot, the new key **takes it over and
  inherits its score** (``score += v``, as in SpaceSaving); a hot smallest slot drops the insert.

After an insert, a non-hot slot with ``score >= threshold`` takes a hot id from the free
list (``0..num_hot-1``) when one is free — a hot id is held by exactly one slot. Hot slots
are never replaced, so a hot feature keeps its row until :meth:`HotSketch.decay` multiplies
every score by ``factor`` and releases the hot ids of slots that fell below the threshold.
:meth:`HotSketch.insert` runs that decay automatically when the importance inserted since
the last decay exceeds ``decay_every * num_buckets * threshold`` (the paper's ``s·T·10``).

The loops are sequential by nature (every insert depends on the previous ones), so they are
compiled with numba.

Example:
    >>> import numpy as np
    >>> sketch = HotSketch(num_buckets=8, num_hot=4, threshold=3.0)
    >>> new_keys, new_hot = sketch.insert(np.array([7, 7, 7, 9]), np.ones(4, dtype=np.float32))
    >>> new_keys.tolist(), sketch.query(np.array([7, 9]))[0].tolist()
    ([7], [0, -1])
    >>> sketch.memory_bytes()  # 8 buckets x 48 B + 4 free-list entries x 4 B
    400
"""
from __future__ import annotations

from typing import Tuple

import numba
import numpy as np

from sgl._checks import check_int, check_real
from sgl.embeddings.base import check_scalar
from sgl.errors import EmbeddingError

__all__ = ["HotSketch", "SLOTS", "BUCKET_BYTES", "EMPTY_KEY", "bucket_of"]

SLOTS = 4
#: key uint32 + score float32 + hot id int32, per slot
SLOT_BYTES = 12
BUCKET_BYTES = SLOTS * SLOT_BYTES
#: the largest uint32 marks an empty slot, so keys must be < 2^32 - 1
EMPTY_KEY = np.uint32(0xFFFFFFFF)
MAX_KEY = int(EMPTY_KEY) - 1


@numba.njit(cache=True, inline="always")
def _bucket(key, num_buckets):
    return ((np.uint64(key) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)) % np.uint64(num_buckets)


def bucket_of(keys: np.ndarray, num_buckets: int) -> np.ndarray:
    """The bucket of each key (Knuth's multiplicative hash), as the compiled kernels compute it."""
    keys = np.asarray(keys, dtype=np.uint64)
    return ((keys * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)) % np.uint64(num_buckets)


@numba.njit(cache=True)
def _find(keys, b, key):
    """(slot of ``key`` in bucket ``b`` or -1, first empty slot before it or -1)."""
    empty = -1
    for j in range(keys.shape[1]):
        if keys[b, j] == key:
            return j, empty
        if empty < 0 and keys[b, j] == EMPTY_KEY:
            empty = j
    return -1, empty


@numba.njit(cache=True)
def _place(keys, scores, hot, free, top, key, v, threshold, new_keys, new_hot, n_new):
    """Insert one (key, v) into the main table; returns the updated count of promotions."""
    b = _bucket(key, keys.shape[0])
    slot, empty = _find(keys, b, key)
    if slot >= 0:
        scores[b, slot] += v
    elif empty >= 0:
        slot = empty
        keys[b, slot] = key
        scores[b, slot] = v
        hot[b, slot] = -1
    else:
        low = 0
        for j in range(1, keys.shape[1]):
            if scores[b, j] < scores[b, low]:
                low = j
        if hot[b, low] >= 0:
            return n_new
        slot = low
        keys[b, slot] = key
        scores[b, slot] += v
    if hot[b, slot] < 0 and scores[b, slot] >= threshold and top[0] > 0:
        top[0] -= 1
        hot[b, slot] = free[top[0]]
        new_keys[n_new] = key
        new_hot[n_new] = free[top[0]]
        n_new += 1
    return n_new


@numba.njit(cache=True)
def _insert_many(keys, scores, hot, free, top, ids, values, threshold, new_keys, new_hot):
    n_new = 0
    for i in range(ids.shape[0]):
        n_new = _place(keys, scores, hot, free, top, ids[i], values[i], threshold, new_keys, new_hot, n_new)
    return n_new


@numba.njit(cache=True)
def _query_many(keys, scores, hot, ids, out_hot, out_score):
    for i in range(ids.shape[0]):
        b = _bucket(ids[i], keys.shape[0])
        out_hot[i] = -1
        out_score[i] = 0.0
        for j in range(keys.shape[1]):
            if keys[b, j] == ids[i]:
                out_hot[i] = hot[b, j]
                out_score[i] = scores[b, j]
                break


@numba.njit(cache=True)
def _release_below(keys, scores, hot, free, top, threshold, out_keys, out_hot):
    n = 0
    for b in range(keys.shape[0]):
        for j in range(keys.shape[1]):
            if hot[b, j] >= 0 and scores[b, j] < threshold:
                free[top[0]] = hot[b, j]
                top[0] += 1
                out_keys[n] = keys[b, j]
                out_hot[n] = hot[b, j]
                n += 1
                hot[b, j] = -1
    return n


def check_keys(ids: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise EmbeddingError(f"sketch keys must be integers, got dtype {ids.dtype}")
    ids = ids.reshape(-1)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > MAX_KEY):
        raise EmbeddingError(f"sketch keys span [{int(ids.min())}, {int(ids.max())}]; keys must be in "
                             f"[0, {MAX_KEY}] (4-byte keys)")
    return ids.astype(np.uint32)


class HotSketch:
    """The CAFE HotSketch with ``num_hot`` hot ids (see the module docstring).

    Args:
        num_buckets: buckets of 4 slots (the paper uses one bucket per hot row).
        num_hot: hot ids handed out, ``0..num_hot-1``.
        threshold: score at which a feature becomes hot.
        decay_factor: multiplier of every score in :meth:`decay`.
        decay_every: automatic decay once ``decay_every * num_buckets * threshold`` importance
            has been inserted since the last one (``0`` disables it).
    """

    def __init__(self, num_buckets: int, num_hot: int, threshold: float, decay_factor: float = 0.99,
                 decay_every: float = 10.0) -> None:
        self.num_buckets = check_int(num_buckets, "num_buckets", 1, error=EmbeddingError)
        self.num_hot = check_int(num_hot, "num_hot", 0, error=EmbeddingError)
        self.threshold = check_scalar(check_real, threshold, f"threshold must be a positive number, got {threshold!r}",
                                      0.0, open_low=True)
        self.decay_factor = check_scalar(check_real, decay_factor, f"decay_factor must be in (0, 1], got {decay_factor!r}",
                                         0.0, 1.0, open_low=True)
        self.decay_every = float(decay_every)
        self.keys = np.full((self.num_buckets, SLOTS), EMPTY_KEY, dtype=np.uint32)
        self.scores = np.zeros((self.num_buckets, SLOTS), dtype=np.float32)
        self.hot = np.full((self.num_buckets, SLOTS), -1, dtype=np.int32)
        # a stack of free hot ids; popping from the end hands out 0, 1, 2, ... first
        self.free = np.arange(self.num_hot - 1, -1, -1, dtype=np.int32)
        self._top = np.array([self.num_hot], dtype=np.int64)
        self.inserted_since_decay = 0.0
        self._released: list = []

    @property
    def num_free(self) -> int:
        return int(self._top[0])

    def free_ids(self) -> np.ndarray:
        return self.free[: self.num_free].copy()

    def memory_bytes(self) -> int:
        """48 bytes per bucket (4 slots of key, score, hot id) + 4 bytes per free-list entry."""
        return self.num_buckets * BUCKET_BYTES + self.num_hot * 4

    def insert(self, ids: np.ndarray, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Add importance ``values[i]`` to key ``ids[i]``, in order; returns the promoted
        ``(keys, hot_ids)``. Runs the automatic decay first when it is due (its releases are
        read back with :meth:`pop_released`)."""
        ids = check_keys(ids)
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        if values.shape != ids.shape:
            raise EmbeddingError(f"{ids.size} keys but {values.size} importance values")
        if values.size and (not np.isfinite(values).all() or values.min() < 0):
            raise EmbeddingError("importance values must be finite and >= 0")
        if self.decay_every > 0 and self.inserted_since_decay > self.decay_every * self.num_buckets * self.threshold:
            self._released.append(self.decay())
        self.inserted_since_decay += float(values.sum(dtype=np.float64))
        new_keys = np.empty(ids.size, dtype=np.uint32)
        new_hot = np.empty(ids.size, dtype=np.int32)
        n = _insert_many(self.keys, self.scores, self.hot, self.free, self._top, ids, values,
                         np.float32(self.threshold), new_keys, new_hot)
        return new_keys[:n].astype(np.int64), new_hot[:n].copy()

    def pop_released(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(keys, hot_ids)`` released by automatic decays since the last call."""
        items, self._released = self._released, []
        if not items:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
        return np.concatenate([k for k, _ in items]), np.concatenate([h for _, h in items])

    def decay(self, factor: float = None) -> Tuple[np.ndarray, np.ndarray]:
        """Multiply every score by ``factor`` (default ``decay_factor``); hot slots that fall
        below the threshold give their hot id back. Returns the demoted ``(keys, hot_ids)``."""
        factor = self.decay_factor if factor is None else float(factor)
        check_scalar(check_real, factor, f"decay factor must be in (0, 1], got {factor!r}", 0.0, 1.0, open_low=True)
        self.scores *= np.float32(factor)
        self.inserted_since_decay = 0.0
        return self.release_below(self.threshold)

    def release_below(self, threshold: float) -> Tuple[np.ndarray, np.ndarray]:
        out_keys = np.empty(max(self.num_hot, 1), dtype=np.uint32)
        out_hot = np.empty(max(self.num_hot, 1), dtype=np.int32)
        n = _release_below(self.keys, self.scores, self.hot, self.free, self._top, np.float32(threshold),
                           out_keys, out_hot)
        return out_keys[:n].astype(np.int64), out_hot[:n].copy()

    def query(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``(hot_id or -1, score or 0)`` for each key."""
        ids = check_keys(ids)
        out_hot = np.empty(ids.size, dtype=np.int32)
        out_score = np.empty(ids.size, dtype=np.float32)
        _query_many(self.keys, self.scores, self.hot, ids, out_hot, out_score)
        return out_hot, out_score

    def hot_assignments(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(keys, hot_ids)`` of every hot slot."""
        mask = self.hot >= 0
        return self.keys[mask].astype(np.int64), self.hot[mask].copy()

    def top_k(self, k: int) -> np.ndarray:
        """The ``k`` stored keys with the largest scores (the sketch's top-k report)."""
        mask = self.keys != EMPTY_KEY
        keys, scores = self.keys[mask], self.scores[mask]
        order = np.argsort(-scores, kind="stable")[:k]
        return keys[order].astype(np.int64)

    def __repr__(self) -> str:
        return (f"HotSketch(buckets={self.num_buckets}, hot={self.num_hot - self.num_free}/{self.num_hot}, "
                f"threshold={self.threshold:g}, bytes={self.memory_bytes():,})")
