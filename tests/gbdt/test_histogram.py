"""Histograms equal brute force in every storage; the subtraction trick equals a direct build."""
import numpy as np
import scipy.sparse as sp

from sgl.gbdt import (
    BinMapper, SparseBins, build_histogram, build_histogram_columns, build_histogram_csr, subtract,
)


def _data(seed=0, n=300, f=5, bins=7):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, bins, size=(n, f)).astype(np.uint8)
    return codes, rng.normal(size=n), rng.uniform(0.1, 1, size=n), bins


def _brute(codes, rows, g, h, bins):
    out = np.zeros((codes.shape[1], bins, 2))
    for r in rows:
        for f in range(codes.shape[1]):
            out[f, codes[r, f]] += (g[r], h[r])
    return out


def test_row_and_column_stores_equal_brute_force():
    codes, g, h, bins = _data()
    rows = np.random.default_rng(1).choice(300, 120, replace=False)
    ref = _brute(codes, rows, g, h, bins)
    assert np.allclose(build_histogram(codes, rows, g, h, bins), ref)
    col = build_histogram_columns(np.ascontiguousarray(codes.T), rows, g, h, bins)
    assert np.array_equal(col, build_histogram(codes, rows, g, h, bins))  # bit-identical


def test_subtraction_equals_direct_build():
    codes, g, h, bins = _data(2)
    rows = np.arange(300)
    left = rows[codes[:, 0] <= 3]
    right = rows[codes[:, 0] > 3]
    parent = build_histogram(codes, rows, g, h, bins)
    sib = subtract(parent, build_histogram(codes, left, g, h, bins))
    assert np.allclose(sib, build_histogram(codes, right, g, h, bins), atol=1e-12)


def test_csr_histogram_equals_dense():
    rng = np.random.default_rng(3)
    dense = rng.normal(size=(200, 12)) * (rng.random((200, 12)) < 0.15)
    g, h = rng.normal(size=200), rng.uniform(0.1, 1, size=200)
    sb = SparseBins.from_csr(sp.csr_matrix(dense), max_bins=8)
    bm = BinMapper().fit(dense, max_bins=8)
    assert sb.nnz < 0.3 * dense.size
    rows = np.arange(0, 200, 3)
    got = build_histogram_csr(sb.indptr, sb.indices, sb.codes, sb.zero_bin, rows, g, h, sb.num_bins)
    codes = np.stack([sb.column(j) for j in range(12)], axis=1)
    assert np.allclose(got, build_histogram(codes, rows, g, h, sb.num_bins))
    # with few distinct values per column the sparse and dense binners agree
    onehot = (rng.random((50, 6)) < 0.3).astype(float)
    sb2 = SparseBins.from_csr(sp.csr_matrix(onehot), max_bins=8)
    assert np.array_equal(np.stack([sb2.column(j) for j in range(6)], 1),
                          BinMapper().fit(onehot, 8).transform(onehot))
