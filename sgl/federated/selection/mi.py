"""KNN estimate of the mutual information between features and a discrete label (Ross, 2014).

For row ``i`` with label ``y_i``, let ``d_i`` be the distance to its ``k``-th nearest row of the same
label and ``m_i`` the number of rows of *any* label within ``d_i`` (the ``k``-th itself included,
``i`` excluded). With ``N`` rows and ``N_y`` rows of label ``y``,

.. math:: \\hat I(X; Y) = \\psi(N) - \\langle \\psi(N_{y_i}) \\rangle + \\psi(k) - \\langle \\psi(m_i) \\rangle.

Rows of a label that the features separate well have ``m_i`` close to ``k``, hence a large estimate;
features independent of the label give about 0. The coalition's features enter only through the
joint distances, so the same estimator runs on Fagin's label-aware ranking prefix
(:func:`~sgl.federated.selection.knn.fagin_knn`) or on a dense distance matrix (PS-MI).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300)
    >>> x = y[:, None] * 3.0 + rng.normal(size=(300, 2))
    >>> d = ((x[:, None] - x[None]) ** 2).sum(-1)
    >>> round(mi_from_distances(d, y, k=5), 2) > 0.5 > round(mi_from_distances(d[::-1, ::-1], y, k=5), 2)
    True
"""
from __future__ import annotations

import numpy as np
from scipy.special import digamma

from sgl.errors import ConfigError, FeatureError

__all__ = ["mi_from_ranks", "mi_from_distances", "check_labels"]


def check_labels(labels, n: int, k: int) -> np.ndarray:
    """Integer class labels of ``n`` rows with more than ``k`` rows per class, or a clear error."""
    y = np.asarray(labels)
    if y.shape != (n,):
        raise FeatureError(f"labels must have shape ({n},) to match the features, got {y.shape}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise FeatureError("labels contain NaN/inf; the MI estimator needs discrete class labels")
    _, inv, counts = np.unique(y, return_inverse=True, return_counts=True)
    if len(counts) < 2:
        raise FeatureError("labels have a single class; mutual information with a constant is 0 by definition")
    if counts.min() <= k:
        raise ConfigError(f"the smallest class has {counts.min()} rows; the KNN MI estimator needs more than "
                          f"k={k} rows per class (lower k or drop the class)")
    return inv.astype(np.int64)


def mi_from_ranks(kth_rank: np.ndarray, labels: np.ndarray, k: int) -> float:
    """The estimate from ``m_i`` (``kth_rank``, the 1-based joint rank of each row's ``k``-th same-label row)."""
    _, inv, counts = np.unique(labels, return_inverse=True, return_counts=True)
    n = len(labels)
    return float(digamma(n) - digamma(counts[inv]).mean() + digamma(k) - digamma(np.asarray(kth_rank)).mean())


def mi_from_distances(dist: np.ndarray, labels: np.ndarray, k: int) -> float:
    """The estimate from a dense ``[n, n]`` matrix of (squared) joint distances; the diagonal is ignored."""
    y = check_labels(labels, dist.shape[0], k)
    d = np.array(dist, dtype=np.float64, copy=True)
    np.fill_diagonal(d, np.inf)
    same = y[:, None] == y[None, :]
    kth = np.partition(np.where(same, d, np.inf), k - 1, axis=1)[:, k - 1]
    m = (d <= kth[:, None]).sum(axis=1)
    return mi_from_ranks(m, y, k)
