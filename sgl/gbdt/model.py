"""``GBDT``: a histogram gradient-boosted decision tree model (binary logloss or squared loss).

Math: the model is ``F(x) = F₀ + Σ_t η f_t(x)`` where each tree ``f_t`` is fitted to
the second-order expansion of the loss at ``F_{t−1}``: a leaf with gradient sum
``G`` and hessian sum ``H`` outputs ``−G/(H+λ)`` and a split is scored by
:func:`~sgl.gbdt.split_gain`.  Features are quantile-binned once
(:class:`~sgl.gbdt.BinMapper`); trees split on bin codes.  ``predict_proba``
returns ``σ(F(x))`` for logloss.  Sparse input (scipy CSR) uses DimBoost's sparse
histograms (:class:`~sgl.gbdt.SparseBins`); the trees are the same as on the
dense matrix.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200, 3)); y = (X[:, 0] > 0).astype(float)
>>> model = GBDT(GBDTConfig(num_trees=5, max_depth=2, max_bins=16)).fit(X, y)
>>> bool(((model.predict_proba(X) > 0.5) == y).mean() > 0.9)
True
"""
from __future__ import annotations

import numpy as np

from sgl.errors import ConfigError, FeatureError
from sgl.gbdt.binning import BinMapper
from sgl.gbdt.boosting import boost
from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.layout import CSRLayout, RowLayout
from sgl.gbdt.loss import check_labels, sigmoid
from sgl.gbdt.sparse import SparseBins, is_sparse
from sgl.gbdt.tree import Tree

__all__ = ["GBDT"]


class GBDT:
    """Histogram GBDT; ``fit(X, y)`` then ``predict``/``predict_proba`` (see the module doc)."""

    def __init__(self, config: GBDTConfig | None = None) -> None:
        self.config = (config or GBDTConfig()).validate()
        self.trees: list[Tree] = []
        self.base_score = 0.0
        self.binner: BinMapper | SparseBins | None = None
        self.fit_seconds = 0.0

    def __repr__(self) -> str:
        return f"GBDT({self.config}, fitted_trees={len(self.trees)})"

    def fit(self, X, y: np.ndarray) -> "GBDT":
        cfg = self.config
        if is_sparse(X):
            sb = SparseBins.from_csr(X, cfg.max_bins, missing=cfg.missing)
            layout = CSRLayout(sb)
            self.binner = sb
        else:
            self.binner = BinMapper(cfg.missing).fit(X, cfg.max_bins)
            layout = RowLayout(self.binner.transform(X), self.binner.num_bins)
        yv = check_labels(cfg.loss, y, layout.num_rows)
        res = boost(layout, yv, cfg)
        self.trees, self.base_score, self.fit_seconds = res.trees, res.base_score, res.seconds
        return self

    def _codes(self, X) -> tuple[np.ndarray, np.ndarray | None]:
        if self.binner is None:
            raise ConfigError("GBDT is not fitted; call fit(X, y) first")
        if isinstance(self.binner, SparseBins):
            if not is_sparse(X):
                raise FeatureError("this GBDT was fitted on a sparse matrix; pass a scipy CSR matrix")
            used = np.unique(np.concatenate([t.feature[t.feature >= 0] for t in self.trees]
                                            + [np.empty(0, dtype=np.int64)]))
            return self.binner.transform_subset(X, used)
        return self.binner.transform(X), None

    def predict_raw(self, X) -> np.ndarray:
        """``F(x)``: the raw score (log-odds for logloss)."""
        codes, fmap = self._codes(X)
        raw = np.full(codes.shape[0], self.base_score)
        for t in self.trees:
            raw += t.value[t.leaf_index(codes, fmap)]
        return raw

    def predict_proba(self, X) -> np.ndarray:
        """``σ(F(x))``, the probability of label 1 (logloss only)."""
        if self.config.loss != "logloss":
            raise ConfigError("predict_proba needs loss='logloss'; use predict for squared loss")
        return sigmoid(self.predict_raw(X))

    def predict(self, X) -> np.ndarray:
        """Class labels (0/1) for logloss, values for squared loss."""
        raw = self.predict_raw(X)
        return (raw > 0).astype(np.int64) if self.config.loss == "logloss" else raw

    def dump(self, tree: int = 0, feature_names: list[str] | None = None) -> str:
        """One tree as indented text, with raw thresholds when the binner knows them."""
        thr = self.binner.threshold if self.binner is not None else None
        return self.trees[tree].dump(thr, feature_names)
