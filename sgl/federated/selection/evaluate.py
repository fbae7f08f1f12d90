"""Downstream quality of a selection or a coreset: a scikit-learn model on the chosen columns or rows.

Selection and coreset building see only the training rows; the held-out rows here are the test
split and are used for nothing else.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> blocks = [y[:, None] + rng.normal(size=(200, 2)) * 0.3, rng.normal(size=(200, 2))]
    >>> tr, te = np.arange(150), np.arange(150, 200)
    >>> selection_accuracy(blocks, y, [0], tr, te) > 0.9 > selection_accuracy(blocks, y, [1], tr, te)
    True
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from sgl.errors import ConfigError

__all__ = ["selection_accuracy", "weighted_accuracy"]


def _model(seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))


def selection_accuracy(blocks: Sequence, labels, selected: Sequence[int], train_idx, test_idx,
                       seed: int = 0) -> float:
    """Test accuracy of logistic regression trained on the ``selected`` parties' columns of the train rows."""
    if len(selected) == 0:
        raise ConfigError("no party selected; choose at least one")
    x = np.concatenate([np.asarray(blocks[p], dtype=np.float64) for p in selected], axis=1)
    y = np.asarray(labels)
    model = _model(seed).fit(x[train_idx], y[train_idx])
    return float((model.predict(x[test_idx]) == y[test_idx]).mean())


def weighted_accuracy(x_train, y_train, x_test, y_test, weights: Optional[np.ndarray] = None,
                      seed: int = 0) -> float:
    """Test accuracy of logistic regression trained on (optionally weighted) rows, e.g. a coreset."""
    model = _model(seed)
    kwargs = {} if weights is None else {"logisticregression__sample_weight": np.asarray(weights, dtype=np.float64)}
    model.fit(np.asarray(x_train), np.asarray(y_train), **kwargs)
    return float((model.predict(np.asarray(x_test)) == np.asarray(y_test)).mean())
