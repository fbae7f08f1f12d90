"""``SparseBins``: binned CSR features for high-dimensional sparse data (DimBoost).

Each feature is binned like :class:`~sgl.gbdt.BinMapper` (value bins after an
optional missing bin 0) and remembers the bin of the value 0, its *zero bin*.
Only entries whose code differs from the zero bin are stored, row-wise (CSR, for
histograms) and column-wise (CSC, for partitioning rows), so a one-hot matrix
with 40k columns costs its non-zeros, not rows × columns.  Host-only (numpy/scipy).

>>> import numpy as np, scipy.sparse as sp
>>> X = sp.csr_matrix(np.array([[0.0, 1.0], [2.0, 0.0], [0.0, 1.0]]))
>>> sb = SparseBins.from_csr(X, max_bins=4, missing="error")
>>> sb.zero_bin.tolist(), sb.column(0).tolist(), sb.nnz
([0, 0], [0, 1, 0], 3)
"""
from __future__ import annotations

import numpy as np

from sgl.errors import ConfigError, FeatureError
from sgl.gbdt.binning import _feature_edges

__all__ = ["SparseBins", "is_sparse"]


def is_sparse(X) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a core dependency
        return False
    return sp.issparse(X)


class SparseBins:
    """Binned sparse matrix: CSR ``indptr/indices/codes``, CSC copy, per-feature ``zero_bin``."""

    def __init__(self, indptr, indices, codes, zero_bin, edges, num_rows, missing) -> None:
        import scipy.sparse as sp

        self.indptr, self.indices, self.codes = indptr, indices, codes
        self.zero_bin = zero_bin
        self.edges_ = edges
        self.num_rows = int(num_rows)
        self.missing = missing
        self.offset = 1 if missing == "bin" else 0
        self.num_bins = self.offset + 1 + max((e.size for e in edges), default=0)
        csr = sp.csr_matrix((codes.astype(np.int32) + 1, indices, indptr),
                            shape=(num_rows, len(edges)))
        csc = csr.tocsc()
        csc.sort_indices()
        self._c_indptr, self._c_rows = csc.indptr, csc.indices
        self._c_codes = (csc.data - 1).astype(codes.dtype)

    @property
    def num_features(self) -> int:
        return int(self.zero_bin.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @classmethod
    def from_csr(cls, X, max_bins: int = 255, missing: str = "bin") -> "SparseBins":
        """Bin a scipy sparse matrix ``X`` ``[num_rows, num_features]``."""
        import scipy.sparse as sp

        if missing not in ("bin", "error"):
            raise ConfigError(f"missing must be 'bin' or 'error'; got {missing!r}")
        if isinstance(max_bins, bool) or not isinstance(max_bins, (int, np.integer)) or max_bins < 2:
            raise ConfigError(f"max_bins must be an int >= 2; got {max_bins!r}")
        X = sp.csc_matrix(X, dtype=np.float64)
        n, nf = X.shape
        if n == 0 or nf == 0:
            raise FeatureError(f"X is empty (shape {X.shape}); need at least one row and one feature")
        if np.isinf(X.data).any():
            raise FeatureError("X contains inf; replace it with a finite value or NaN (missing)")
        if missing == "error" and np.isnan(X.data).any():
            raise FeatureError("X has NaN values but missing='error'; impute them or use missing='bin'")
        offset = 1 if missing == "bin" else 0
        edges, zero_bin = [], np.empty(nf, dtype=np.int64)
        for j in range(nf):
            vals = X.data[X.indptr[j]:X.indptr[j + 1]]
            if vals.size < n:  # implicit zeros exist
                uniq = np.unique(np.append(vals[~np.isnan(vals)], 0.0))
                e = ((uniq[:-1] + uniq[1:]) / 2.0 if uniq.size <= max_bins
                     else _feature_edges(X[:, j].toarray().ravel(), max_bins))
            else:
                e = _feature_edges(vals, max_bins)
            edges.append(e)
            zero_bin[j] = np.searchsorted(e, 0.0, side="left") + offset
        nb = offset + 1 + max((e.size for e in edges), default=0)
        dtype = np.uint8 if nb <= 256 else np.uint16
        csr = X.tocsr()
        csr.sort_indices()
        cols = csr.indices
        codes = np.empty(csr.data.shape[0], dtype=np.int64)
        for j in range(nf):  # per feature: vectorised searchsorted over its entries
            sel = np.flatnonzero(cols == j) if nf < 64 else None
            if sel is not None:
                codes[sel] = np.searchsorted(edges[j], csr.data[sel], side="left") + offset
        if nf >= 64:  # many features: one pass over the entries grouped by feature
            order = np.argsort(cols, kind="stable")
            bounds = np.searchsorted(cols[order], np.arange(nf + 1))
            for j in range(nf):
                sel = order[bounds[j]:bounds[j + 1]]
                if sel.size:
                    codes[sel] = np.searchsorted(edges[j], csr.data[sel], side="left") + offset
        if missing == "bin":
            codes[np.isnan(csr.data)] = 0
        keep = codes != zero_bin[cols]
        row_of = np.repeat(np.arange(n), np.diff(csr.indptr))[keep]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(row_of, minlength=n), out=indptr[1:])
        return cls(indptr, cols[keep].astype(np.int64), codes[keep].astype(dtype), zero_bin,
                   edges, n, missing)

    def column(self, feature: int) -> np.ndarray:
        """All rows' codes of one feature (dense)."""
        out = np.full(self.num_rows, self.zero_bin[feature], dtype=self.codes.dtype)
        lo, hi = self._c_indptr[feature], self._c_indptr[feature + 1]
        out[self._c_rows[lo:hi]] = self._c_codes[lo:hi]
        return out

    def transform_subset(self, X, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Dense codes of only ``features`` for new rows ``X``, and the feature → column map."""
        import scipy.sparse as sp

        X = sp.csc_matrix(X, dtype=np.float64)
        if X.shape[1] != self.num_features:
            raise FeatureError(f"X has {X.shape[1]} features but the model was fitted on "
                               f"{self.num_features}")
        fmap = np.full(self.num_features, -1, dtype=np.int64)
        fmap[features] = np.arange(features.size)
        out = np.empty((X.shape[0], features.size), dtype=self.codes.dtype)
        for k, j in enumerate(features):
            col = X[:, j].toarray().ravel()
            c = np.searchsorted(self.edges_[j], col, side="left") + self.offset
            if self.missing == "bin":
                c[np.isnan(col)] = 0
            elif np.isnan(col).any():
                raise FeatureError("X has NaN values but missing='error'")
            out[:, k] = c
        return out, fmap

    def threshold(self, feature: int, bin: int) -> float:
        k = bin - self.offset
        e = self.edges_[feature]
        return float("-inf") if k < 0 else (float(e[k]) if k < e.size else float("inf"))
