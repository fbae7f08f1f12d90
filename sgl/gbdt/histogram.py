"""Gradient/hessian histograms of one node (numba kernels, host-only).

A histogram is a float64 array ``[num_features, num_bins, 2]``: ``[..., 0]`` sums
the gradients and ``[..., 1]`` the hessians of the node's rows per (feature, bin).
Both storage layouts sum each cell over the rows in the order given, so a row
store and a column store give bit-identical histograms.

The subtraction trick: a parent's histogram minus one child's is the other
child's, so only the smaller child is ever built (:func:`subtract`).

>>> import numpy as np
>>> codes = np.array([[0, 1], [1, 1], [1, 0]], dtype=np.uint8)
>>> g, h = np.array([1.0, 2.0, 3.0]), np.ones(3)
>>> hist = build_histogram(codes, np.arange(3), g, h, num_bins=2)
>>> hist[:, :, 0].tolist()
[[1.0, 5.0], [3.0, 3.0]]
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["build_histogram", "build_histogram_columns", "build_histogram_csr", "subtract"]


@numba.njit(cache=True, nogil=True)
def _hist_rows(codes, rows, grad, hess, out):  # pragma: no cover - compiled
    nf = codes.shape[1]
    for i in range(rows.shape[0]):
        r = rows[i]
        g = grad[r]
        h = hess[r]
        for f in range(nf):
            b = codes[r, f]
            out[f, b, 0] += g
            out[f, b, 1] += h


@numba.njit(cache=True, nogil=True)
def _hist_cols(codes_t, rows, grad, hess, out):  # pragma: no cover - compiled
    for f in range(codes_t.shape[0]):
        col = codes_t[f]
        for i in range(rows.shape[0]):
            r = rows[i]
            b = col[r]
            out[f, b, 0] += grad[r]
            out[f, b, 1] += hess[r]


@numba.njit(cache=True, nogil=True)
def _hist_csr(indptr, indices, codes, rows, grad, hess, out):  # pragma: no cover - compiled
    for i in range(rows.shape[0]):
        r = rows[i]
        g = grad[r]
        h = hess[r]
        for k in range(indptr[r], indptr[r + 1]):
            f = indices[k]
            b = codes[k]
            out[f, b, 0] += g
            out[f, b, 1] += h


def _rows(rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rows, dtype=np.int64)


def build_histogram(codes: np.ndarray, rows: np.ndarray, grad: np.ndarray, hess: np.ndarray,
                    num_bins: int) -> np.ndarray:
    """Histogram of ``rows`` from a row store ``codes`` ``[num_rows, num_features]``."""
    out = np.zeros((codes.shape[1], num_bins, 2), dtype=np.float64)
    _hist_rows(np.ascontiguousarray(codes), _rows(rows), grad, hess, out)
    return out


def build_histogram_columns(codes_t: np.ndarray, rows: np.ndarray, grad: np.ndarray,
                            hess: np.ndarray, num_bins: int) -> np.ndarray:
    """Histogram of ``rows`` from a column store ``codes_t`` ``[num_features, num_rows]``."""
    out = np.zeros((codes_t.shape[0], num_bins, 2), dtype=np.float64)
    _hist_cols(np.ascontiguousarray(codes_t), _rows(rows), grad, hess, out)
    return out


def build_histogram_csr(indptr: np.ndarray, indices: np.ndarray, codes: np.ndarray,
                        zero_bin: np.ndarray, rows: np.ndarray, grad: np.ndarray, hess: np.ndarray,
                        num_bins: int, totals: tuple[float, float] | None = None) -> np.ndarray:
    """Histogram from a CSR store that keeps only entries off each feature's zero bin.

    Only the stored entries are visited; each feature's implicit entries are then put in
    its ``zero_bin`` as the node total minus the stored sum (DimBoost's sparse build).
    ``totals`` (the node's gradient and hessian sums) is computed when not given.
    """
    rows = _rows(rows)
    out = np.zeros((zero_bin.shape[0], num_bins, 2), dtype=np.float64)
    _hist_csr(indptr, indices, codes, rows, grad, hess, out)
    if totals is None:
        totals = (float(grad[rows].sum()), float(hess[rows].sum()))
    stored = out.sum(axis=1)
    f = np.arange(zero_bin.shape[0])
    out[f, zero_bin, 0] += totals[0] - stored[:, 0]
    out[f, zero_bin, 1] += totals[1] - stored[:, 1]
    return out


def subtract(parent: np.ndarray, child: np.ndarray) -> np.ndarray:
    """The sibling's histogram: ``parent − child`` (the subtraction trick)."""
    return parent - child
