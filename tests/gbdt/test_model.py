"""Tree growth and the GBDT model: exact greedy brute force, leaf-wise, sparse = dense, LightGBM."""
import os

import numpy as np
import pytest
import scipy.sparse as sp

from sgl.errors import ConfigError, FeatureError
from sgl.gbdt import GBDT, BinMapper, ColumnLayout, GBDTConfig, RowLayout, grow_tree, leaf_value


def _brute_tree(codes, rows, g, h, depth, cfg):
    """Exact greedy on binned data: every (feature, bin) by direct sums over the node's rows."""
    G, H = g[rows].sum(), h[rows].sum()
    best = None
    if depth < cfg.max_depth:
        for f in range(codes.shape[1]):
            for b in range(int(codes[:, f].max())):
                left = codes[rows, f] <= b
                GL, HL = g[rows][left].sum(), h[rows][left].sum()
                GR, HR = G - GL, H - HL
                if HL < cfg.min_child_weight or HR < cfg.min_child_weight or HL <= 0 or HR <= 0:
                    continue
                lam = cfg.reg_lambda
                gain = GL**2 / (HL + lam) + GR**2 / (HR + lam) - G**2 / (H + lam)
                if gain > cfg.min_split_gain and (best is None or gain > best[0] + 1e-9):
                    best = (gain, f, b)
    if best is None:
        return round(cfg.learning_rate * leaf_value(G, H, cfg.reg_lambda), 9)
    _, f, b = best
    left = codes[rows, f] <= b
    return (f, b, _brute_tree(codes, rows[left], g, h, depth + 1, cfg),
            _brute_tree(codes, rows[~left], g, h, depth + 1, cfg))


def _nested(tree, i=0):
    if tree.feature[i] < 0:
        return round(float(tree.value[i]), 9)
    return (int(tree.feature[i]), int(tree.threshold_bin[i]), _nested(tree, tree.left[i]),
            _nested(tree, tree.right[i]))


@pytest.mark.parametrize("layout_cls", [RowLayout, ColumnLayout])
def test_tree_equals_exact_greedy_brute_force(layout_cls):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(150, 4))
    codes = BinMapper(missing="error").fit_transform(x, 6)
    g = rng.normal(size=150) + x[:, 1]
    h = rng.uniform(0.2, 1.0, size=150)
    cfg = GBDTConfig(max_depth=3, reg_lambda=0.5, min_child_weight=2.0, learning_rate=0.3)
    lay = layout_cls(codes, 6)
    lay.set_gradients(g, h)
    tree, leaf_of_row = grow_tree(lay, cfg)
    assert _nested(tree) == _brute_tree(codes, np.arange(150), g, h, 0, cfg)
    assert np.array_equal(tree.leaf_index(codes), leaf_of_row)
    assert tree.depth == 3


def test_leafwise_stops_at_num_leaves_and_best_first():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 5))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(float)
    m = GBDT(GBDTConfig(num_trees=3, growth="leafwise", num_leaves=5, max_depth=0, max_bins=32)).fit(x, y)
    assert all(t.num_leaves == 5 for t in m.trees)
    t = m.trees[0]  # best-first: the root's gain is the largest of the tree
    assert t.gain[0] == t.gain.max()


def test_breast_cancer_close_to_lightgbm_and_sparse_equals_dense():
    lgb = pytest.importorskip("lightgbm")
    from sklearn.metrics import roc_auc_score

    from sgl.datasets.tabular import load_tabular

    d = load_tabular("breast_cancer", seed=0)
    cfg = GBDTConfig(num_trees=60, max_depth=3, max_bins=63, learning_rate=0.1)
    m = GBDT(cfg).fit(d.X_train, d.y_train)
    ours = roc_auc_score(d.y_test, m.predict_proba(d.X_test))
    ref = lgb.LGBMClassifier(n_estimators=60, max_depth=3, num_leaves=8, max_bin=63, learning_rate=0.1,
                             reg_lambda=1.0, min_child_weight=1.0, min_child_samples=1,
                             min_data_in_bin=1, verbose=-1).fit(d.X_train, d.y_train)
    theirs = roc_auc_score(d.y_test, ref.predict_proba(d.X_test)[:, 1])
    assert ours > 0.97 and abs(ours - theirs) < 0.01
    # the same data as a sparse matrix (zeros implicit) grows the same trees
    Xs = sp.csr_matrix(d.X_train[:200] * (d.X_train[:200] > np.median(d.X_train[:200], 0)))
    cfg2 = GBDTConfig(num_trees=5, max_depth=3, max_bins=16)
    dense = GBDT(cfg2).fit(Xs.toarray(), d.y_train[:200])
    sparse = GBDT(cfg2).fit(Xs, d.y_train[:200])
    assert all(a.same_structure(b, atol=1e-9) for a, b in zip(dense.trees, sparse.trees))
    assert np.allclose(dense.predict_raw(Xs.toarray()), sparse.predict_raw(Xs))


def test_squared_loss_fits_and_dump_reads():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, size=(400, 2))
    y = np.where(x[:, 0] > 0, 2.0, -1.0)
    m = GBDT(GBDTConfig(num_trees=30, max_depth=2, loss="squared", learning_rate=0.3)).fit(x, y)
    assert np.abs(m.predict(x) - y).mean() < 0.1
    assert "f0 <= bin" in m.dump(0) and "leaf" in m.dump(0)


def test_bad_input():
    x = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(FeatureError, match="empty"):
        GBDT(GBDTConfig(num_trees=1)).fit(np.empty((0, 2)), np.empty(0))
    with pytest.raises(FeatureError, match="NaN"):
        GBDT(GBDTConfig(num_trees=1, missing="error")).fit(np.where(x > 1, np.nan, x), np.ones(20))
    with pytest.raises(FeatureError, match="0, 1"):
        GBDT(GBDTConfig(num_trees=1)).fit(x, np.arange(20.0))
    with pytest.raises(FeatureError, match="labels"):
        GBDT(GBDTConfig(num_trees=1)).fit(x, np.ones(5))
    with pytest.raises(FeatureError, match="out of range"):
        RowLayout(np.full((3, 1), 9, dtype=np.uint8), num_bins=4)
    with pytest.raises(ConfigError, match="max_depth"):
        GBDTConfig(growth="depthwise", max_depth=0).validate()
    with pytest.raises(ConfigError, match="not fitted"):
        GBDT().predict(x)
    with pytest.raises(ConfigError, match="predict_proba"):
        GBDT(GBDTConfig(num_trees=1, loss="squared")).fit(x, x[:, 0]).predict_proba(x)
