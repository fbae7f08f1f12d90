"""Quantile binning of a dense feature matrix into small integer bin codes.

Each feature gets at most ``max_bins`` value bins.  A feature with no more than
``max_bins`` distinct values gets one bin per value (edges at the midpoints);
otherwise the edges are quantiles of its values.  Bin ``b`` of feature ``f``
holds the values ``x`` with ``edges[f][b-1] < x <= edges[f][b]``.

Missing values (NaN): with ``missing="bin"`` (the default) every feature
reserves bin code 0 for NaN, below every value bin, so a split ``code <= b``
always sends missing values left; with ``missing="error"`` a NaN raises
:class:`~sgl.errors.FeatureError`.  Codes are ``uint8`` when every code fits
(``<= 255``), otherwise ``uint16``.  Host-only (numpy) code.

>>> import numpy as np
>>> X = np.array([[0.0, 1.0], [1.0, np.nan], [2.0, 3.0], [3.0, 3.0]])
>>> bm = BinMapper().fit(X, max_bins=2)
>>> bm.transform(X).tolist()
[[1, 1], [1, 0], [2, 2], [2, 2]]
>>> bm.num_bins                # codes per feature incl. the missing bin 0
3
"""
from __future__ import annotations

import numpy as np

from sgl.errors import ConfigError, FeatureError

__all__ = ["BinMapper"]

_MISSING = ("bin", "error")


def _check_matrix(X: np.ndarray, what: str = "X") -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise FeatureError(f"{what} must be a 2-D [num_rows, num_features] array; got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise FeatureError(f"{what} is empty (shape {X.shape}); need at least one row and one feature")
    if np.isinf(X).any():
        raise FeatureError(f"{what} contains inf; replace it with a finite value or NaN (missing)")
    return X


def _feature_edges(col: np.ndarray, max_bins: int) -> np.ndarray:
    values = col[~np.isnan(col)]
    if values.size == 0:
        return np.empty(0)
    uniq = np.unique(values)
    if uniq.size <= max_bins:
        return (uniq[:-1] + uniq[1:]) / 2.0
    qs = np.linspace(0.0, 1.0, max_bins + 1)[1:-1]
    edges = np.unique(np.quantile(values, qs, method="lower"))
    # the top edge must stay below the maximum so that the last bin is not empty
    return edges[edges < uniq[-1]]


class BinMapper:
    """Maps float features to bin codes by per-feature quantile edges.

    Args:
        missing: ``"bin"`` gives NaN its own bin (code 0) in every feature; ``"error"``
            rejects NaN.

    Attributes (after :meth:`fit`): ``edges_`` (one sorted float64 array of upper
    bin bounds per feature), ``num_bins`` (codes per feature, the same for every
    feature: the widest feature's count, plus the missing bin), ``dtype``.

    >>> import numpy as np
    >>> BinMapper(missing="error").fit(np.arange(10.0)[:, None], 4).transform([[0.0], [9.0]]).ravel()
    array([0, 3], dtype=uint8)
    """

    def __init__(self, missing: str = "bin") -> None:
        if missing not in _MISSING:
            raise ConfigError(f"missing must be one of {_MISSING}; got {missing!r}")
        self.missing = missing
        self.edges_: list[np.ndarray] | None = None
        self.max_bins: int | None = None

    def __repr__(self) -> str:
        return f"BinMapper(missing={self.missing!r}, max_bins={self.max_bins})"

    @property
    def offset(self) -> int:
        """The code of the lowest value bin: 1 with a missing bin, else 0."""
        return 1 if self.missing == "bin" else 0

    def _require_fit(self) -> list[np.ndarray]:
        if self.edges_ is None:
            raise ConfigError("BinMapper is not fitted; call fit(X, max_bins) first")
        return self.edges_

    @property
    def num_features(self) -> int:
        return len(self._require_fit())

    @property
    def num_bins(self) -> int:
        """Bin codes per feature (all features share it), the missing bin included."""
        edges = self._require_fit()
        return self.offset + 1 + max((e.size for e in edges), default=0)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint8) if self.num_bins <= 256 else np.dtype(np.uint16)

    def bins_per_feature(self) -> np.ndarray:
        """The number of codes each feature actually uses (missing bin included)."""
        return np.array([self.offset + 1 + e.size for e in self._require_fit()], dtype=np.int64)

    def fit(self, X: np.ndarray, max_bins: int = 255) -> "BinMapper":
        """Learn per-feature quantile edges from ``X`` ``[num_rows, num_features]``."""
        if isinstance(max_bins, bool) or not isinstance(max_bins, (int, np.integer)) or not (
                2 <= max_bins <= 65535 - self.offset):
            raise ConfigError(f"max_bins must be an int in [2, {65535 - self.offset}]; got {max_bins!r}")
        X = _check_matrix(X)
        if self.missing == "error" and np.isnan(X).any():
            raise FeatureError(
                f"X has {int(np.isnan(X).sum())} NaN values but missing='error'; impute them or use "
                "BinMapper(missing='bin') to give NaN its own bin")
        self.max_bins = int(max_bins)
        self.edges_ = [_feature_edges(X[:, j], self.max_bins) for j in range(X.shape[1])]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Return the ``[num_rows, num_features]`` bin codes (uint8 or uint16, C order)."""
        edges = self._require_fit()
        X = _check_matrix(X)
        if X.shape[1] != len(edges):
            raise FeatureError(f"X has {X.shape[1]} features but the BinMapper was fitted on "
                               f"{len(edges)}")
        nan = np.isnan(X)
        if nan.any() and self.missing == "error":
            raise FeatureError(f"X has {int(nan.sum())} NaN values but missing='error'; impute them "
                               "or use BinMapper(missing='bin')")
        out = np.empty(X.shape, dtype=self.dtype)
        for j, e in enumerate(edges):
            codes = np.searchsorted(e, X[:, j], side="left") + self.offset
            if self.missing == "bin":
                codes[nan[:, j]] = 0
            out[:, j] = codes
        return out

    def fit_transform(self, X: np.ndarray, max_bins: int = 255) -> np.ndarray:
        return self.fit(X, max_bins).transform(X)

    def threshold(self, feature: int, bin: int) -> float:
        """The raw value ``t`` of split ``code <= bin``: values ``<= t`` go left (NaN too)."""
        e = self._require_fit()[feature]
        k = bin - self.offset
        if k < 0:
            return float("-inf")
        return float(e[k]) if k < e.size else float("inf")
