"""The boosting loop, shared by the single-process model and the distributed drivers.

Each round computes the loss derivatives at the current scores, grows one tree
on the layout (which hides where rows and columns live) and adds the tree's leaf
values to the scores of the rows that reached them.

Gradients and hessians are rounded to a power-of-two grid fine enough that every
partial sum of them is exact in float64 (:func:`exact_grid`): a histogram is then
the same whatever the order or the split of its rows, so every layout -- one
process, Vero's quadrants, DimBoost -- grows bit-identical trees.  The rounding
error is ~2⁻⁵¹ of the total absolute gradient, far below anything a split can see.

>>> import numpy as np
>>> from sgl.gbdt.config import GBDTConfig
>>> from sgl.gbdt.layout import RowLayout
>>> codes = np.array([[0], [0], [1], [1]], dtype=np.uint8)
>>> res = boost(RowLayout(codes, 2), np.array([0.0, 0.0, 1.0, 1.0]),
...             GBDTConfig(num_trees=2, max_depth=1, loss="squared", min_child_weight=0.0))
>>> len(res.trees), round(res.base_score, 2)
(2, 0.5)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.grower import grow_tree
from sgl.gbdt.loss import base_score, gradients
from sgl.gbdt.tree import Tree

__all__ = ["BoostResult", "boost", "exact_grid"]


def exact_grid(values: np.ndarray, abs_total: float) -> np.ndarray:
    """Round ``values`` to multiples of ``2^-k`` with ``abs_total < 2^(52-k)``.

    Any sum of a subset of the rounded values is then an exact float64 number, so sums
    are associative.  ``abs_total`` must bound the absolute sum over *all* workers' rows.
    """
    if not abs_total > 0:
        return np.zeros_like(values)
    k = 51 - int(np.ceil(np.log2(abs_total)))
    return np.ldexp(np.rint(np.ldexp(values, k)), -k)


@dataclass
class BoostResult:
    """Trees, the starting score, this worker's final training scores and the wall time."""

    trees: list[Tree]
    base_score: float
    raw: np.ndarray
    seconds: float = 0.0
    history: list[float] = field(default_factory=list)


def boost(layout, y: np.ndarray, config: GBDTConfig) -> BoostResult:
    """Boost ``config.num_trees`` trees on ``layout`` for this worker's labels ``y``."""
    start = time.perf_counter()
    y = np.asarray(y, dtype=np.float64)
    total, count = layout.allsum(np.array([y.sum(), float(y.size)]))
    mean = np.array([total / count])
    base = base_score(config.loss, mean)
    raw = np.full(y.shape[0], base)
    trees: list[Tree] = []
    for _ in range(config.num_trees):
        grad, hess = gradients(config.loss, y, raw)
        g_abs, h_abs = layout.allsum(np.array([np.abs(grad).sum(), hess.sum()]))
        layout.set_gradients(exact_grid(grad, 2.0 * g_abs), exact_grid(hess, 2.0 * h_abs))
        tree, leaf_of_row = grow_tree(layout, config)
        raw += tree.value[leaf_of_row]
        trees.append(tree)
    return BoostResult(trees, base, raw, time.perf_counter() - start)
