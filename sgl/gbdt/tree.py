"""A regression tree as plain arrays, with binned prediction and a readable dump.

Node ``i`` is a leaf when ``feature[i] == -1``; otherwise rows whose bin code of
``feature[i]`` is ``<= threshold_bin[i]`` go to ``left[i]``, the others to
``right[i]``.  ``value[i]`` is the leaf's output (learning rate applied).

>>> import numpy as np
>>> t = Tree(feature=np.array([0, -1, -1]), threshold_bin=np.array([1, -1, -1]),
...          left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
...          value=np.array([0.0, -0.5, 0.5]), gain=np.array([2.0, 0.0, 0.0]),
...          hess=np.array([4.0, 2.0, 2.0]))
>>> t.predict_binned(np.array([[0], [3]], dtype=np.uint8)).tolist()
[-0.5, 0.5]
>>> print(t.dump())
0: [f0 <= bin 1] gain=2 hess=4 -> 1, 2
  1: leaf -0.5 hess=2
  2: leaf 0.5 hess=2
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["Tree"]


@dataclass
class Tree:
    """One tree: ``feature``, ``threshold_bin``, ``left``, ``right``, ``value`` (+ ``gain``, ``hess``)."""

    feature: np.ndarray
    threshold_bin: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    hess: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def num_leaves(self) -> int:
        return int((self.feature < 0).sum())

    @property
    def depth(self) -> int:
        depth = np.zeros(self.num_nodes, dtype=np.int64)
        for i in range(self.num_nodes):  # children always have larger ids than parents
            if self.feature[i] >= 0:
                depth[self.left[i]] = depth[self.right[i]] = depth[i] + 1
        return int(depth.max())

    def leaf_index(self, codes: np.ndarray, feature_map: np.ndarray | None = None) -> np.ndarray:
        """The leaf each row of binned ``codes`` ``[num_rows, num_features]`` falls in.

        ``feature_map`` maps a tree feature id to its column in ``codes`` (when ``codes``
        holds only some features).
        """
        node = np.zeros(codes.shape[0], dtype=np.int64)
        rows = np.arange(codes.shape[0])
        active = rows[self.feature[node] >= 0]
        while active.size:
            n = node[active]
            f = self.feature[n] if feature_map is None else feature_map[self.feature[n]]
            go_left = codes[active, f] <= self.threshold_bin[n]
            node[active] = np.where(go_left, self.left[n], self.right[n])
            active = active[self.feature[node[active]] >= 0]
        return node

    def predict_binned(self, codes: np.ndarray) -> np.ndarray:
        return self.value[self.leaf_index(codes)]

    def same_structure(self, other: "Tree", atol: float = 1e-9) -> bool:
        """Same splits (feature, bin, children) and leaf values within ``atol``."""
        return (self.num_nodes == other.num_nodes
                and all(np.array_equal(getattr(self, k), getattr(other, k))
                        for k in ("feature", "threshold_bin", "left", "right"))
                and bool(np.allclose(self.value, other.value, atol=atol, rtol=0)))

    def dump(self, threshold: Callable[[int, int], float] | None = None,
             feature_names: list[str] | None = None) -> str:
        """Indented text, one node a line; ``threshold(feature, bin)`` adds raw thresholds."""
        lines: list[str] = []
        stack = [(0, 0)]
        while stack:
            i, d = stack.pop()
            pad = "  " * d
            f = int(self.feature[i])
            if f < 0:
                lines.append(f"{pad}{i}: leaf {self.value[i]:.6g} hess={self.hess[i]:.6g}")
                continue
            name = feature_names[f] if feature_names else f"f{f}"
            cond = f"{name} <= bin {int(self.threshold_bin[i])}"
            if threshold is not None:
                cond += f" (x <= {threshold(f, int(self.threshold_bin[i])):.6g})"
            lines.append(f"{pad}{i}: [{cond}] gain={self.gain[i]:.6g} hess={self.hess[i]:.6g} "
                         f"-> {int(self.left[i])}, {int(self.right[i])}")
            stack.append((int(self.right[i]), d + 1))
            stack.append((int(self.left[i]), d + 1))
        return "\n".join(lines)
