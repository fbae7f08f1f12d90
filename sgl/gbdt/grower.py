"""Grow one tree on a layout: depth-wise or leaf-wise (best-first), with histogram subtraction.

Every candidate leaf keeps its histogram and best split.  When a node splits,
only the child with the smaller hessian sum has its histogram built; the other
is ``parent − child``.  The hessian sums come from the agreed split, so every
worker of a distributed layout picks the same child to build (for squared loss
the hessian sum is the row count).  Children that reach ``max_depth`` need no
histogram at all.  Depth-wise growth expands candidates in node-id order
(breadth first); leaf-wise growth expands the candidate of highest gain (ties:
lowest node id) until ``num_leaves`` leaves.

>>> import numpy as np
>>> from sgl.gbdt.config import GBDTConfig
>>> from sgl.gbdt.layout import RowLayout
>>> lay = RowLayout(np.array([[0], [0], [1], [1]], dtype=np.uint8), num_bins=2)
>>> lay.set_gradients(np.array([-1.0, -1.0, 1.0, 1.0]), np.ones(4))
>>> cfg = GBDTConfig(max_depth=1, reg_lambda=0.0, min_child_weight=0.0, learning_rate=1.0)
>>> tree, leaf_of_row = grow_tree(lay, cfg)
>>> tree.value[leaf_of_row].tolist()
[1.0, 1.0, -1.0, -1.0]
"""
from __future__ import annotations

import numpy as np

from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.split import SplitInfo, leaf_value
from sgl.gbdt.tree import Tree

__all__ = ["grow_tree"]


class _Nodes:
    def __init__(self) -> None:
        self.feature: list[int] = []
        self.bin: list[int] = []
        self.left: list[int] = []
        self.right: list[int] = []
        self.value: list[float] = []
        self.gain: list[float] = []
        self.hess: list[float] = []

    def add(self, hess: float) -> int:
        for lst, v in ((self.feature, -1), (self.bin, -1), (self.left, -1), (self.right, -1),
                       (self.value, 0.0), (self.gain, 0.0)):
            lst.append(v)
        self.hess.append(float(hess))
        return len(self.feature) - 1

    def to_tree(self) -> Tree:
        i64 = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
        f64 = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
        return Tree(i64(self.feature), i64(self.bin), i64(self.left), i64(self.right),
                    f64(self.value), f64(self.gain), f64(self.hess))


def _can_split(depth: int, config: GBDTConfig) -> bool:
    return config.max_depth <= 0 or depth < config.max_depth


def grow_tree(layout, config: GBDTConfig) -> tuple[Tree, np.ndarray]:
    """Grow one tree from the layout's current gradients.

    Returns the tree and, for each of this worker's rows, the leaf it ended in
    (so the caller can update its scores without predicting again).
    """
    nodes = _Nodes()
    rows = layout.root_rows()
    g, h = (float(v) for v in layout.allsum(np.array([layout.grad[rows].sum(),
                                                       layout.hess[rows].sum()])))
    root = nodes.add(h)
    leaf_of_row = np.zeros(layout.num_rows, dtype=np.int64)
    # candidate: node id -> (rows, (G, H), depth, split or None, histogram or None)
    cand: dict[int, tuple] = {}

    def consider(nid: int, r: np.ndarray, totals: tuple[float, float], depth: int,
                 hist: np.ndarray | None) -> None:
        split = layout.best_split(hist, totals, config) if hist is not None else None
        if split is None:
            nodes.value[nid] = config.learning_rate * leaf_value(totals[0], totals[1],
                                                                 config.reg_lambda)
            leaf_of_row[r] = nid
        else:
            cand[nid] = (r, totals, depth, split, hist)

    root_hist = layout.histogram(rows, (g, h)) if _can_split(0, config) else None
    consider(root, rows, (g, h), 0, root_hist)
    num_leaves = 1
    while cand:
        if config.growth == "leafwise":
            if num_leaves >= config.num_leaves:
                break
            nid = min(cand, key=lambda k: (-cand[k][3].gain, k))
        else:
            nid = min(cand)
        r, _, depth, split, hist = cand.pop(nid)
        split: SplitInfo
        left_rows, right_rows = layout.partition(r, split)
        lt = (split.left_grad, split.left_hess)
        rt = (split.right_grad, split.right_hess)
        lid, rid = nodes.add(split.left_hess), nodes.add(split.right_hess)
        nodes.feature[nid], nodes.bin[nid] = split.feature, split.bin
        nodes.left[nid], nodes.right[nid], nodes.gain[nid] = lid, rid, split.gain
        num_leaves += 1
        lh = rh = None
        if _can_split(depth + 1, config):
            if split.left_hess <= split.right_hess:
                lh = layout.histogram(left_rows, lt)
                rh = hist - lh
            else:
                rh = layout.histogram(right_rows, rt)
                lh = hist - rh
        del hist
        consider(lid, left_rows, lt, depth + 1, lh)
        consider(rid, right_rows, rt, depth + 1, rh)
    for nid, (r, totals, _, _, _) in cand.items():  # leaf-wise stopped at num_leaves
        nodes.value[nid] = config.learning_rate * leaf_value(totals[0], totals[1], config.reg_lambda)
        leaf_of_row[r] = nid
    return nodes.to_tree(), leaf_of_row
