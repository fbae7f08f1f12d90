"""Losses of the GBDT: first and second derivatives and the starting score.

``logloss`` (binary, labels in {0, 1}, raw score = log-odds):
``g = σ(F) − y``, ``h = σ(F)(1 − σ(F))``, start ``log(p/(1−p))`` of the mean label.
``squared`` (``½(F − y)²``): ``g = F − y``, ``h = 1``, start at the mean label.

>>> import numpy as np
>>> g, h = gradients("squared", np.array([1.0, 2.0]), np.array([0.0, 0.0]))
>>> g.tolist(), h.tolist()
([-1.0, -2.0], [1.0, 1.0])
"""
from __future__ import annotations

import numpy as np

from sgl.errors import ConfigError, FeatureError

__all__ = ["LOSSES", "gradients", "base_score", "check_labels", "sigmoid"]

LOSSES = ("logloss", "squared")


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def check_labels(loss: str, y: np.ndarray, num_rows: int) -> np.ndarray:
    if loss not in LOSSES:
        raise ConfigError(f"loss must be one of {LOSSES}; got {loss!r}")
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape[0] != num_rows:
        raise FeatureError(f"y has {y.shape[0]} labels but X has {num_rows} rows")
    if not np.isfinite(y).all():
        raise FeatureError("y contains NaN or inf; every row needs a finite label")
    if loss == "logloss" and not np.isin(y, (0.0, 1.0)).all():
        raise FeatureError("loss='logloss' needs labels in {0, 1}; map your classes to 0/1 first")
    return y


def base_score(loss: str, y: np.ndarray) -> float:
    if loss == "logloss":
        p = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
        return float(np.log(p / (1 - p)))
    return float(y.mean())


def gradients(loss: str, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(grad, hess)`` of ``loss`` at raw scores ``raw`` for labels ``y`` (float64)."""
    if loss == "logloss":
        p = sigmoid(raw)
        return p - y, np.maximum(p * (1.0 - p), 1e-16)
    return raw - y, np.ones_like(raw)
