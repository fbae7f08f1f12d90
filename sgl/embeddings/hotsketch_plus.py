r"""The CAFE+ sketch (TOIS'25): HotSketch + an LRU filter part, automatic threshold, global time decay.

* **LRU filter part** — ``num_filter_buckets`` buckets of 4 slots (key ``uint32``, count
  ``float32``, last-use clock ``uint32``: 48 bytes per bucket) in front of the main
  :class:`~sgl.embeddings.hotsketch.HotSketch`. A key not in the main part accumulates here
  first; it moves to the main part when its count reaches ``promote_fraction * threshold``, or
  when the LRU policy evicts it with a count ``>= keep_fraction * threshold``. One-off keys
  thus never displace (and inherit the scores of) the main part's residents.
* **Global time decay** (forward decay) — a global factor ``g`` grows by ``alpha`` per
  :meth:`step`; an insert adds ``v * g`` and every comparison uses ``threshold * g``, which is
  the same as multiplying all old scores by ``1/alpha`` per step without touching them. When
  ``g`` passes ``1e4`` every stored score is divided by ``g`` and ``g`` restarts at 1 (the
  paper does this lazily per bucket with flip bits; one vectorised pass is exact too).
* **Automatic threshold** — every ``adjust_every`` steps, when more than ``1.2 * num_hot``
  or (once the sketch holds ``num_hot`` keys) fewer than ``0.8 * num_hot`` keys score above
  the threshold, the threshold becomes the ``num_hot``-th largest score; hot slots below it
  are demoted and the best non-hot ones promoted. (The paper adjusts upwards only; lowering
  too keeps the hot table full when the initial threshold is set high.)

Example:
    >>> import numpy as np
    >>> sketch = HotSketchPlus(num_buckets=8, num_hot=2, num_filter_buckets=2, threshold=2.0)
    >>> keys, hot = sketch.insert(np.array([5, 5, 6, 5]), np.ones(4, dtype=np.float32))
    >>> keys.tolist(), sketch.query(np.array([5, 6]))[0].tolist()
    ([5], [0, -1])
    >>> sketch.memory_bytes()  # (8 + 2) buckets x 48 B + 2 free-list entries x 4 B
    488
"""
from __future__ import annotations

from typing import Tuple

import numba
import numpy as np

from sgl._checks import check_int, check_real
from sgl.embeddings.base import check_scalar
from sgl.embeddings.hotsketch import BUCKET_BYTES, EMPTY_KEY, SLOTS, HotSketch, _bucket, _find, _place, check_keys
from sgl.errors import EmbeddingError

__all__ = ["HotSketchPlus"]

_RESCALE_AT = 1e4


@numba.njit(cache=True, inline="always")
def _filter_bucket(key, num_buckets):
    # a second multiplicative hash, independent of the main part's
    return ((np.uint64(key) * np.uint64(40503) + np.uint64(2166136261)) & np.uint64(0xFFFFFFFF)) \
        % np.uint64(num_buckets)


@numba.njit(cache=True)
def _insert_plus(keys, scores, hot, free, top, fkeys, fcounts, ftime, now, ids, values, threshold,
                 promote, keep, new_keys, new_hot):
    n_new = 0
    for i in range(ids.shape[0]):
        key = ids[i]
        v = values[i]
        if _find(keys, _bucket(key, keys.shape[0]), key)[0] >= 0:  # already in the main table
            n_new = _place(keys, scores, hot, free, top, key, v, threshold, new_keys, new_hot, n_new)
            continue
        fb = _filter_bucket(key, fkeys.shape[0])
        slot, empty = _find(fkeys, fb, key)
        if slot >= 0:
            fcounts[fb, slot] += v
            ftime[fb, slot] = now
        elif empty >= 0:
            slot = empty
            fkeys[fb, slot] = key
            fcounts[fb, slot] = v
            ftime[fb, slot] = now
        else:
            old = 0
            for j in range(1, fkeys.shape[1]):
                if ftime[fb, j] < ftime[fb, old]:
                    old = j
            evicted = fkeys[fb, old]
            count = fcounts[fb, old]
            slot = old
            fkeys[fb, slot] = key
            fcounts[fb, slot] = v
            ftime[fb, slot] = now
            if count >= keep:
                n_new = _place(keys, scores, hot, free, top, evicted, count, threshold, new_keys, new_hot, n_new)
        if fcounts[fb, slot] >= promote:
            n_new = _place(keys, scores, hot, free, top, key, fcounts[fb, slot], threshold, new_keys, new_hot,
                           n_new)
            fkeys[fb, slot] = EMPTY_KEY
            fcounts[fb, slot] = 0.0
            ftime[fb, slot] = 0
    return n_new


class HotSketchPlus(HotSketch):
    """CAFE+'s sketch (see the module docstring). Scores are stored multiplied by the global
    factor ``g``; :meth:`effective_scores` divides it out.

    Args:
        num_buckets, num_hot, threshold: as for :class:`~sgl.embeddings.hotsketch.HotSketch`.
        num_filter_buckets: buckets of the LRU filter part (CAFE+ uses 1/9 of the main part's).
        alpha: global time-decay rate per :meth:`step` (``1`` = no decay).
        adjust_every: steps between automatic threshold adjustments (``0`` = fixed threshold).
        promote_fraction, keep_fraction: filter → main thresholds, as fractions of ``threshold``.
        min_threshold: the automatic threshold never goes below it.
    """

    def __init__(self, num_buckets: int, num_hot: int, num_filter_buckets: int, threshold: float = 1.0,
                 alpha: float = 1.0005, adjust_every: int = 10, promote_fraction: float = 0.2,
                 keep_fraction: float = 0.05, min_threshold: float = 1e-3) -> None:
        super().__init__(num_buckets, num_hot, threshold, decay_factor=1.0, decay_every=0.0)
        self.num_filter_buckets = check_int(num_filter_buckets, "num_filter_buckets", 1, error=EmbeddingError)
        self.alpha = check_scalar(check_real, alpha, f"alpha (global time decay per step) must be in [1, 2), got {alpha!r}",
                                  1.0, 2.0, open_high=True)
        self.adjust_every = check_int(adjust_every, "adjust_every", 0, error=EmbeddingError)
        self.promote_fraction = float(promote_fraction)
        self.keep_fraction = float(keep_fraction)
        self.min_threshold = float(min_threshold)
        self.filter_keys = np.full((self.num_filter_buckets, SLOTS), EMPTY_KEY, dtype=np.uint32)
        self.filter_counts = np.zeros((self.num_filter_buckets, SLOTS), dtype=np.float32)
        self.filter_time = np.zeros((self.num_filter_buckets, SLOTS), dtype=np.uint32)
        self.scale = 1.0
        self.steps = 0

    def memory_bytes(self) -> int:
        """48 bytes per main and per filter bucket + 4 bytes per free-list entry."""
        return (self.num_buckets + self.num_filter_buckets) * BUCKET_BYTES + self.num_hot * 4

    def effective_scores(self) -> np.ndarray:
        return self.scores / np.float32(self.scale)

    def insert(self, ids: np.ndarray, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Insert ``values * g``; returns the promoted ``(keys, hot_ids)``."""
        ids = check_keys(ids)
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        if values.shape != ids.shape:
            raise EmbeddingError(f"{ids.size} keys but {values.size} importance values")
        if values.size and (not np.isfinite(values).all() or values.min() < 0):
            raise EmbeddingError("importance values must be finite and >= 0")
        new_keys = np.empty(2 * ids.size + 1, dtype=np.uint32)
        new_hot = np.empty(2 * ids.size + 1, dtype=np.int32)
        g = np.float32(self.scale)
        n = _insert_plus(self.keys, self.scores, self.hot, self.free, self._top, self.filter_keys,
                         self.filter_counts, self.filter_time, np.uint32(self.steps + 1), ids, values * g,
                         np.float32(self.threshold) * g, np.float32(self.threshold * self.promote_fraction) * g,
                         np.float32(self.threshold * self.keep_fraction) * g, new_keys, new_hot)
        return new_keys[:n].astype(np.int64), new_hot[:n].copy()

    def step(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """End of a batch: advance the clock and the global decay; adjust the threshold when due.
        Returns ``(promoted keys, their hot ids, demoted keys, their old hot ids)``."""
        self.steps += 1
        self.scale *= self.alpha
        if self.scale > _RESCALE_AT:
            self.scores /= np.float32(self.scale)
            self.filter_counts /= np.float32(self.scale)
            self.scale = 1.0
        if self.adjust_every and self.steps % self.adjust_every == 0:
            return self.adjust_threshold()
        empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
        return empty + empty

    def adjust_threshold(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Move the threshold to the ``num_hot``-th largest score when too many or too few keys
        pass it, then demote/promote so the hot set is the keys above it (as far as ids allow)."""
        stored = self.keys != EMPTY_KEY
        eff = self.effective_scores()
        values = eff[stored]
        k = self.num_hot
        above = int((values >= self.threshold).sum())
        if k and (above > 1.2 * k or (above < 0.8 * k and values.size >= k)):
            kth = float(np.partition(values, values.size - k)[values.size - k])
            self.threshold = max(kth, self.min_threshold)
        demoted_keys, demoted_hot = self.release_below(self.threshold * self.scale)
        candidates = np.nonzero(stored & (self.hot < 0) & (eff >= self.threshold))
        order = np.argsort(-eff[candidates], kind="stable")[: self.num_free]
        rows, cols = candidates[0][order], candidates[1][order]
        n = rows.size
        ids = self.free[self.num_free - n: self.num_free][::-1].copy()
        self._top[0] -= n
        self.hot[rows, cols] = ids
        return self.keys[rows, cols].astype(np.int64), ids, demoted_keys, demoted_hot

    def __repr__(self) -> str:
        return (f"HotSketchPlus(buckets={self.num_buckets}+{self.num_filter_buckets} filter, "
                f"hot={self.num_hot - self.num_free}/{self.num_hot}, threshold={self.threshold:g}, "
                f"bytes={self.memory_bytes():,})")
