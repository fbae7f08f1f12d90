"""Vero's four quadrants and DimBoost's parameter server over 2 gloo processes equal one process.

One spawned run trains every quadrant (starting processes dominates the cost).
"""
import numpy as np
import pytest
import scipy.sparse as sp

from sgl import comm
from sgl.errors import ConfigError, FeatureError
from sgl.gbdt import GBDTConfig, RowLayout, SparseBins, boost
from sgl.gbdt.dimboost import DimBoostLayout, decode_cells, encode_cells, fit_dimboost
from sgl.gbdt.vero import QUADRANTS, fit_quadrant

CFG = dict(num_trees=3, max_depth=3, max_bins=8, min_child_weight=0.5)


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(240, 7)) * (rng.random((240, 7)) < 0.4)
    y = ((x[:, 0] + x[:, 3] - x[:, 5]) > 0).astype(float)
    return x, y


def _codes(x):
    sb = SparseBins.from_csr(sp.csr_matrix(x), max_bins=8)
    return np.stack([sb.column(j) for j in range(x.shape[1])], 1), sb


def _worker(rank: int, world: int) -> dict:
    x, y = _data()
    codes, sb = _codes(x)
    out = {}
    for q in QUADRANTS:
        r = fit_quadrant(q, codes, y, sb.num_bins, GBDTConfig(**CFG))
        out[q] = (r["trees"], r["meter"])
    for prec in ("fp64", "int8"):
        r = fit_dimboost(sp.csr_matrix(x), y, GBDTConfig(**CFG), precision=prec)
        out["dimboost-" + prec] = (r["trees"], r["meter"], r["dense_bytes"])
    return out


def test_quadrants_and_dimboost_equal_single_process():
    x, y = _data()
    codes, sb = _codes(x)
    single = boost(RowLayout(codes, sb.num_bins), y, GBDTConfig(**CFG)).trees
    res = comm.spawn(_worker, 2, timeout=90.0, comm_timeout=30.0)
    for rank in range(2):
        for q in (*QUADRANTS, "dimboost-fp64"):
            trees = res[rank][q][0]
            assert all(a.same_structure(b, atol=0.0) for a, b in zip(single, trees)), (rank, q)
    meters = {q: res[0][q][1]["bytes_sent"] for q in QUADRANTS}
    assert meters["horizontal-column"] < meters["horizontal-row"]  # half of each histogram
    assert meters["vertical-row"] < meters["horizontal-row"]  # bitmaps, not histograms
    assert res[0]["vertical-row"][1]["by_op"].get("broadcast") is not None
    fp64, int8 = res[0]["dimboost-fp64"], res[0]["dimboost-int8"]
    assert int8[1]["bytes_sent"] < fp64[1]["bytes_sent"] < fp64[2]  # sparse < dense, int8 < fp64
    assert int8[0][0].feature[0] == single[0].feature[0]


def test_single_process_quadrants_and_codec():
    x, y = _data()
    codes, sb = _codes(x)
    single = boost(RowLayout(codes, sb.num_bins), y, GBDTConfig(**CFG)).trees
    leafwise = GBDTConfig(**dict(CFG, growth="leafwise", num_leaves=5, max_depth=0))
    single_lw = boost(RowLayout(codes, sb.num_bins), y, leafwise).trees
    for q in QUADRANTS:
        trees = fit_quadrant(q, codes, y, sb.num_bins, GBDTConfig(**CFG))["trees"]
        assert all(a.same_structure(b) for a, b in zip(single, trees)), q
        trees = fit_quadrant(q, codes, y, sb.num_bins, leafwise)["trees"]
        assert all(a.same_structure(b) and a.num_leaves == 5 for a, b in zip(single_lw, trees)), q
    vals = np.random.default_rng(0).normal(size=(5, 2))
    for prec, tol in (("fp64", 0), ("fp16", 1e-3 * 4), ("int8", np.abs(vals).max() / 127)):
        ids, got = decode_cells(encode_cells(np.arange(5) * 3, vals, prec), prec)
        assert ids.tolist() == [0, 3, 6, 9, 12] and np.abs(got - vals).max() <= tol + 1e-12


def test_bad_input():
    x, y = _data()
    codes, sb = _codes(x)
    with pytest.raises(ConfigError, match="quadrant"):
        fit_quadrant("diagonal", codes, y, sb.num_bins, GBDTConfig(**CFG))
    with pytest.raises(FeatureError, match="out of range"):
        fit_quadrant("vertical-row", codes, y, 2, GBDTConfig(**CFG))
    with pytest.raises(ConfigError, match="precision"):
        DimBoostLayout(sb, precision="fp8")


def test_exact_grid_makes_sums_order_free():
    from sgl.gbdt.boosting import exact_grid

    g = np.random.default_rng(1).normal(size=5000) * 1e3
    q = exact_grid(g, 2 * np.abs(g).sum())
    assert np.abs(q - g).max() < 1e-6
    perm = np.random.default_rng(2).permutation(5000)
    assert q[perm].cumsum()[-1] == q.cumsum()[-1] == q[:1234].sum() + q[1234:].sum()
    assert not exact_grid(np.zeros(3), 0.0).any()
