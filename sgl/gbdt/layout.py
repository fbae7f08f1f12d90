"""Where a node's rows and columns live: the single-process layouts of the tree grower.

A *layout* answers four questions for :func:`~sgl.gbdt.grower.grow_tree`, so the
same grower runs on one process and in Vero's four distributed quadrants
(:mod:`sgl.gbdt.vero`) and DimBoost's parameter server (:mod:`sgl.gbdt.dimboost`):

* ``allsum(x)`` -- a float64 vector summed over the workers that split the rows;
* ``histogram(rows, totals)`` -- the node histogram this worker keeps (with any communication);
* ``best_split(hist, totals, config)`` -- the agreed best split (global feature ids) or ``None``;
* ``partition(rows, split)`` -- this worker's rows of the two children.

>>> import numpy as np
>>> lay = RowLayout(np.array([[0], [1], [1]], dtype=np.uint8), num_bins=2)
>>> lay.set_gradients(np.array([-1.0, 1.0, 1.0]), np.ones(3))
>>> hist = lay.histogram(lay.root_rows(), (1.0, 3.0))
>>> hist[0, :, 0].tolist()
[-1.0, 2.0]
"""
from __future__ import annotations

import numpy as np

from sgl.errors import FeatureError
from sgl.gbdt.histogram import build_histogram, build_histogram_columns, build_histogram_csr
from sgl.gbdt.split import SplitInfo, find_best_split

__all__ = ["RowLayout", "ColumnLayout", "CSRLayout", "check_codes"]


def check_codes(codes: np.ndarray, num_bins: int) -> np.ndarray:
    """Validate bin codes: a 2-D unsigned integer array with every code ``< num_bins``."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.dtype.kind != "u":
        raise FeatureError(f"bin codes must be a 2-D unsigned integer array (BinMapper.transform); "
                           f"got dtype {codes.dtype}, shape {codes.shape}")
    if codes.size and int(codes.max()) >= num_bins:
        raise FeatureError(f"bin code {int(codes.max())} is out of range for num_bins={num_bins}; "
                           "codes must be in [0, num_bins)")
    return codes


class RowLayout:
    """All rows and columns on this process, stored row-major ``[num_rows, num_features]``."""

    def __init__(self, codes: np.ndarray, num_bins: int) -> None:
        self.codes = np.ascontiguousarray(check_codes(codes, num_bins))
        self.num_bins = int(num_bins)
        self.grad = self.hess = np.empty(0)

    @property
    def num_rows(self) -> int:
        return int(self.codes.shape[0])

    def set_gradients(self, grad: np.ndarray, hess: np.ndarray) -> None:
        self.grad = np.ascontiguousarray(grad, dtype=np.float64)
        self.hess = np.ascontiguousarray(hess, dtype=np.float64)

    def root_rows(self) -> np.ndarray:
        return np.arange(self.num_rows, dtype=np.int64)

    def allsum(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.float64)

    def _local_histogram(self, rows: np.ndarray) -> np.ndarray:
        return build_histogram(self.codes, rows, self.grad, self.hess, self.num_bins)

    def histogram(self, rows: np.ndarray, totals: tuple[float, float]) -> np.ndarray:
        return self._local_histogram(rows)

    def best_split(self, hist: np.ndarray, totals: tuple[float, float], config) -> SplitInfo | None:
        return find_best_split(hist[:, :, 0], hist[:, :, 1], reg_lambda=config.reg_lambda,
                               min_child_weight=config.min_child_weight,
                               min_split_gain=config.min_split_gain)

    def _column(self, feature: int) -> np.ndarray:
        return self.codes[:, feature]

    def partition(self, rows: np.ndarray, split: SplitInfo) -> tuple[np.ndarray, np.ndarray]:
        go_left = self._column(split.feature)[rows] <= split.bin
        return rows[go_left], rows[~go_left]


class ColumnLayout(RowLayout):
    """All rows and columns on this process, stored column-major ``[num_features, num_rows]``."""

    def __init__(self, codes: np.ndarray, num_bins: int) -> None:
        super().__init__(np.empty((0, 0), dtype=np.uint8), num_bins)
        self.codes_t = np.ascontiguousarray(check_codes(codes, num_bins).T)

    @property
    def num_rows(self) -> int:
        return int(self.codes_t.shape[1])

    def _local_histogram(self, rows: np.ndarray) -> np.ndarray:
        return build_histogram_columns(self.codes_t, rows, self.grad, self.hess, self.num_bins)

    def _column(self, feature: int) -> np.ndarray:
        return self.codes_t[feature]


class CSRLayout(RowLayout):
    """Sparse rows (:class:`~sgl.gbdt.sparse.SparseBins`): only entries off the zero bin are visited.

    The node totals fill each feature's zero bin, so split finding sees the same
    histogram as the dense layout.
    """

    def __init__(self, sparse_bins) -> None:
        super().__init__(np.empty((0, 0), dtype=np.uint8), sparse_bins.num_bins)
        self.sb = sparse_bins

    @property
    def num_rows(self) -> int:
        return int(self.sb.num_rows)

    def _local_histogram(self, rows: np.ndarray, totals=None) -> np.ndarray:
        sb = self.sb
        return build_histogram_csr(sb.indptr, sb.indices, sb.codes, sb.zero_bin, rows, self.grad,
                                   self.hess, self.num_bins, totals)

    def histogram(self, rows: np.ndarray, totals: tuple[float, float]) -> np.ndarray:
        return self._local_histogram(rows, totals)

    def _column(self, feature: int) -> np.ndarray:
        return self.sb.column(feature)
