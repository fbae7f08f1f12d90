"""BinMapper: quantile edges, the NaN bin, dtypes and bad input."""
import numpy as np
import pytest

from sgl.errors import ConfigError, FeatureError
from sgl.gbdt import BinMapper


def test_quantile_bins_are_balanced_and_ordered():
    x = np.random.default_rng(0).normal(size=(1000, 2))
    bm = BinMapper(missing="error").fit(x, max_bins=10)
    codes = bm.transform(x)
    assert codes.dtype == np.uint8 and codes.max() == 9 and codes.min() == 0
    counts = np.bincount(codes[:, 0], minlength=10)
    assert counts.min() >= 90 and counts.max() <= 110
    order = np.argsort(x[:, 0])
    assert np.all(np.diff(codes[order, 0].astype(int)) >= 0)  # monotone in the value
    t = bm.threshold(0, 4)
    assert np.all(x[codes[:, 0] <= 4, 0] <= t) and np.all(x[codes[:, 0] > 4, 0] > t)


def test_few_values_get_one_bin_each_and_nan_its_own():
    x = np.array([[3.0], [1.0], [np.nan], [2.0], [1.0]])
    bm = BinMapper().fit(x, max_bins=255)
    assert bm.transform(x).ravel().tolist() == [3, 1, 0, 2, 1]
    assert bm.num_bins == 4


def test_uint16_when_many_bins():
    x = np.arange(1000.0)[:, None]
    bm = BinMapper().fit(x, max_bins=600)
    assert bm.transform(x).dtype == np.uint16 and bm.num_bins == 601


def test_bad_input():
    with pytest.raises(FeatureError, match="empty"):
        BinMapper().fit(np.empty((0, 3)))
    with pytest.raises(FeatureError, match="NaN"):
        BinMapper(missing="error").fit(np.array([[np.nan], [1.0]]))
    bm = BinMapper(missing="error").fit(np.array([[0.0], [1.0]]))
    with pytest.raises(FeatureError, match="NaN"):
        bm.transform(np.array([[np.nan]]))
    with pytest.raises(FeatureError, match="features"):
        bm.transform(np.zeros((2, 2)))
    with pytest.raises(FeatureError, match="inf"):
        BinMapper().fit(np.array([[np.inf], [1.0]]))
    for bad in (1, 70000, 2.5, True):
        with pytest.raises(ConfigError, match="max_bins"):
            BinMapper().fit(np.zeros((3, 1)), max_bins=bad)
    with pytest.raises(ConfigError, match="missing"):
        BinMapper(missing="zero")
    with pytest.raises(ConfigError, match="not fitted"):
        BinMapper().transform(np.zeros((1, 1)))
