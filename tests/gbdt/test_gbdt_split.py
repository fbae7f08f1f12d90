"""Split finding: brute force over every (feature, bin), tie-breaking, constraints, bad input."""
import numpy as np
import pytest

from sgl.errors import ConfigError, FeatureError
from sgl.gbdt import SplitInfo, find_best_split, leaf_value, split_gain


def _brute(g, h, lam, mcw):
    best = None
    for f in range(g.shape[0]):
        for b in range(g.shape[1] - 1):
            GL, HL = g[f, :b + 1].sum(), h[f, :b + 1].sum()
            GR, HR = g[f, b + 1:].sum(), h[f, b + 1:].sum()
            if HL < mcw or HR < mcw or HL <= 0 or HR <= 0:
                continue
            gain = GL**2 / (HL + lam) + GR**2 / (HR + lam) - (GL + GR)**2 / (HL + HR + lam)
            if best is None or gain > best[0] + 1e-12:
                best = (gain, f, b)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(6, 9))
    h = rng.uniform(0.1, 1.0, size=(6, 9))
    s = find_best_split(g, h, reg_lambda=1.0, min_child_weight=0.5)
    gain, f, b = _brute(g, h, 1.0, 0.5)
    assert (s.feature, s.bin) == (f, b)
    assert s.gain == pytest.approx(gain)
    assert s.left_grad + s.right_grad == pytest.approx(g[f].sum())
    assert s.gain == pytest.approx(split_gain(s.left_grad, s.left_hess, s.right_grad, s.right_hess, 1.0))


def test_ties_go_to_lowest_feature_then_bin():
    g = np.array([[1.0, -1.0, 1.0, -1.0]] * 3)
    h = np.ones_like(g)
    s = find_best_split(g, h, reg_lambda=0.0, min_child_weight=0.0)
    assert (s.feature, s.bin) == (0, 0)  # bins 0 and 2 tie, features 0..2 tie


def test_constraints_and_none():
    g = np.array([[-1.0, 1.0]])
    h = np.array([[1.0, 1.0]])
    assert find_best_split(g, h, reg_lambda=0.0, min_child_weight=1.5) is None
    assert find_best_split(g, h, reg_lambda=0.0, min_child_weight=0.0, min_split_gain=2.0) is None
    assert find_best_split(g, h, reg_lambda=0.0, min_child_weight=0.0, min_split_gain=1.9) is not None
    assert find_best_split(np.zeros((2, 1)), np.ones((2, 1)), reg_lambda=1, min_child_weight=0) is None


def test_leaf_value_and_info():
    assert leaf_value(-6.0, 2.0, 1.0) == pytest.approx(2.0)
    assert isinstance(find_best_split(np.array([[-1.0, 1.0]]), np.ones((1, 2)), reg_lambda=0.0,
                                      min_child_weight=0.0), SplitInfo)


def test_bad_input():
    with pytest.raises(FeatureError, match="shape"):
        find_best_split(np.zeros((2, 3)), np.zeros((3, 2)), reg_lambda=1.0, min_child_weight=1.0)
    with pytest.raises(FeatureError, match="NaN"):
        find_best_split(np.full((1, 2), np.nan), np.ones((1, 2)), reg_lambda=1.0, min_child_weight=1.0)
    with pytest.raises(ConfigError, match="reg_lambda"):
        find_best_split(np.zeros((1, 2)), np.ones((1, 2)), reg_lambda=-1.0, min_child_weight=1.0)
