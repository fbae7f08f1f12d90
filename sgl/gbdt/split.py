"""Split finding on one node's gradient/hessian histograms.

The gain is XGBoost's structure-score gain *without* the factor ½ and without
the complexity penalty γ (both are constant rescalings or offsets, so they do
not change which split wins; ``min_split_gain`` plays the role of γ, in the same
units as :func:`split_gain`)::

    gain = G_L² / (H_L + λ) + G_R² / (H_R + λ) − (G_L + G_R)² / (H_L + H_R + λ)

A split at ``(feature f, bin b)`` sends the rows whose bin code is ``<= b`` to
the left child.  Ties are broken deterministically: the lowest feature, then the
lowest bin, wins -- so every process that sees the same histograms picks the
same split.

>>> import numpy as np
>>> g = np.array([[-2.0, -1.0, 1.0, 2.0]])   # one feature, four bins
>>> h = np.ones_like(g)
>>> s = find_best_split(g, h, reg_lambda=0.0, min_child_weight=0.0)
>>> (s.feature, s.bin, round(s.gain, 3))
(0, 1, 9.0)
>>> leaf_value(-3.0, 2.0, 1.0)
1.0
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from sgl.errors import ConfigError, FeatureError

__all__ = ["SplitInfo", "find_best_split", "leaf_value", "split_gain"]


@dataclass(frozen=True)
class SplitInfo:
    """The best split of one node: rows with bin code ``<= bin`` of ``feature`` go left.

    ``gain`` is :func:`split_gain`; the four sums are the children's gradient
    and hessian totals (what the children's leaf values and later splits need).

    >>> SplitInfo(3, 7, 1.5, -1.0, 2.0, 1.0, 2.0).feature
    3
    """

    feature: int
    bin: int
    gain: float
    left_grad: float
    left_hess: float
    right_grad: float
    right_hess: float


def split_gain(GL: float, HL: float, GR: float, HR: float, reg_lambda: float) -> float:
    """XGBoost's split gain without the ½ and without γ.

    ``GL²/(HL+λ) + GR²/(HR+λ) − (GL+GR)²/(HL+HR+λ)``; works elementwise on arrays.

    >>> split_gain(-2.0, 2.0, 2.0, 2.0, 0.0)
    4.0
    """
    return GL * GL / (HL + reg_lambda) + GR * GR / (HR + reg_lambda) - (GL + GR) ** 2 / (
        HL + HR + reg_lambda)


def leaf_value(grad_sum: float, hess_sum: float, reg_lambda: float) -> float:
    """The optimal leaf weight ``−G / (H + λ)`` of a second-order boosting step.

    >>> leaf_value(4.0, 3.0, 1.0)
    -1.0
    """
    denom = float(hess_sum) + float(reg_lambda)
    if denom <= 0.0:
        return 0.0
    return -float(grad_sum) / denom


@numba.njit(cache=True, nogil=True)
def _scan(g, h, lam, mcw, use_totals, g_tot, h_tot):  # pragma: no cover - compiled
    """One pass per feature over its bins; the first strict maximum wins (lowest f, then b)."""
    best, bf, bb = -np.inf, -1, -1
    out = np.zeros(4)
    nf, nb = g.shape
    for f in range(nf):
        gt, ht = g_tot, h_tot
        if not use_totals:
            gt, ht = 0.0, 0.0
            for b in range(nb):
                gt += g[f, b]
                ht += h[f, b]
        gl, hl = 0.0, 0.0
        for b in range(nb - 1):
            gl += g[f, b]
            hl += h[f, b]
            gr, hr = gt - gl, ht - hl
            if hl >= mcw and hr >= mcw and hl > 0 and hr > 0:
                gain = gl * gl / (hl + lam) + gr * gr / (hr + lam) - (gl + gr) ** 2 / (hl + hr + lam)
                if gain > best:
                    best, bf, bb = gain, f, b
                    out[0], out[1], out[2], out[3] = gl, hl, gr, hr
    return best, bf, bb, out


def _check_hists(grad_hist: np.ndarray, hess_hist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(grad_hist, dtype=np.float64)
    h = np.asarray(hess_hist, dtype=np.float64)
    if g.ndim != 2 or g.shape != h.shape:
        raise FeatureError(
            f"grad_hist and hess_hist must both be [num_features, num_bins] arrays of one shape; "
            f"got {g.shape} and {h.shape}")
    if not (np.isfinite(g).all() and np.isfinite(h).all()):
        raise FeatureError("histograms contain NaN or inf; check the gradients and hessians")
    return g, h


def find_best_split(grad_hist: np.ndarray, hess_hist: np.ndarray, *, reg_lambda: float,
                    min_child_weight: float, min_split_gain: float = 0.0,
                    totals: tuple[float, float] | None = None) -> SplitInfo | None:
    """Return the best split of one node, or ``None`` if no split qualifies.

    Args:
        grad_hist, hess_hist: float64 ``[num_features, num_bins]`` histograms of one node.
        reg_lambda: L2 penalty λ on leaf weights (``>= 0``).
        min_child_weight: each child's hessian sum must be ``>=`` this.
        min_split_gain: a split must have :func:`split_gain` ``>`` this.
        totals: the node's ``(G, H)``; by default each feature's own row sum.  Pass it when
            a histogram only holds some of the node's rows (sparse histograms, where the
            zero bin is implied): the rows not counted are then treated as the last bin.

    Ties go to the lowest feature, then the lowest bin.
    """
    if reg_lambda < 0 or min_child_weight < 0:
        raise ConfigError(f"reg_lambda and min_child_weight must be >= 0; got {reg_lambda}, "
                          f"{min_child_weight}")
    g, h = _check_hists(grad_hist, hess_hist)
    num_features, num_bins = g.shape
    if num_features == 0 or num_bins < 2:
        return None
    use = totals is not None
    gt, ht = (float(totals[0]), float(totals[1])) if use else (0.0, 0.0)
    best, f, b, sums = _scan(np.ascontiguousarray(g), np.ascontiguousarray(h), float(reg_lambda),
                             float(min_child_weight), use, gt, ht)
    if f < 0 or not np.isfinite(best) or not best > min_split_gain:
        return None
    return SplitInfo(int(f), int(b), float(best), *(float(v) for v in sums))
