"""Seeded train/val/test node splits for datasets that ship without one.

Two protocols, both vectorized (a permutation and one stable sort, no per-node loop), so
they also run on million-node graphs:

* :func:`per_class_split` — Shchur et al., "Pitfalls of GNN Evaluation" (2018): a fixed
  number of training and validation nodes *per class*, the rest for testing;
* :func:`planetoid_split` — the "random" Planetoid split (PyG ``RandomNodeSplit``):
  ``train_per_class`` nodes per class, then ``num_val`` / ``num_test`` nodes drawn from
  the remaining ones regardless of class;
* :func:`random_split` — fractions of each class (a stratified 60/20/20 split by default,
  the ratio of the Geom-GCN and heterophily benchmarks), for a user's own graph.

Nodes with a negative label (unlabeled) are never put in any split.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
import torch

from sgl.errors import ConfigError

__all__ = ["per_class_split", "planetoid_split", "random_split"]

Masks = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _labels(y: Any) -> np.ndarray:
    arr = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ConfigError(f"splits need 1-D integer labels, got shape {arr.shape} and dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _check_count(value: Optional[int], name: str) -> None:
    if value is not None and (not isinstance(value, (int, np.integer)) or value < 0):
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")


def _rank_within_class(y: np.ndarray, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """A random order of the labeled nodes, grouped by class, and each node's rank in its class."""
    labeled = np.flatnonzero(y >= 0)
    perm = labeled[rng.permutation(labeled.size)]
    # A stable sort by class keeps the random order inside each class.
    order = perm[np.argsort(y[perm], kind="stable")]
    classes = y[order]
    starts = np.searchsorted(classes, classes, side="left")
    return order, np.arange(order.size) - starts


def _to_masks(n: int, *indices: np.ndarray) -> Masks:
    out = []
    for index in indices:
        mask = torch.zeros(n, dtype=torch.bool)
        mask[torch.from_numpy(np.ascontiguousarray(index, dtype=np.int64))] = True
        out.append(mask)
    return tuple(out)  # type: ignore[return-value]


def per_class_split(
    y: Any,
    train_per_class: int = 20,
    val_per_class: int = 30,
    test_per_class: Optional[int] = None,
    seed: int = 0,
) -> Masks:
    """Boolean ``(train, val, test)`` masks with a fixed number of nodes per class.

    Each class contributes ``train_per_class`` training and ``val_per_class`` validation
    nodes; ``test_per_class=None`` puts all its other nodes in the test set. A class too
    small for the request gives what it has, training first.

    Example:
        >>> import torch
        >>> from sgl.datasets import per_class_split
        >>> y = torch.tensor([0] * 10 + [1] * 10)
        >>> train, val, test = per_class_split(y, train_per_class=2, val_per_class=3, seed=0)
        >>> int(train.sum()), int(val.sum()), int(test.sum())
        (4, 6, 10)
    """
    for value, name in ((train_per_class, "train_per_class"), (val_per_class, "val_per_class"),
                        (test_per_class, "test_per_class")):
        _check_count(value, name)
    labels = _labels(y)
    order, rank = _rank_within_class(labels, np.random.default_rng(seed))
    train = order[rank < train_per_class]
    val = order[(rank >= train_per_class) & (rank < train_per_class + val_per_class)]
    rest = rank >= train_per_class + val_per_class
    if test_per_class is not None:
        rest &= rank < train_per_class + val_per_class + test_per_class
    return _to_masks(labels.size, train, val, order[rest])


def planetoid_split(
    y: Any,
    train_per_class: int = 20,
    num_val: int = 500,
    num_test: int = 1000,
    seed: int = 0,
) -> Masks:
    """Boolean ``(train, val, test)`` masks: ``train_per_class`` per class, then ``num_val``
    and ``num_test`` random nodes from the rest.

    When fewer nodes remain than ``num_val + num_test``, all remaining nodes are shared
    between validation and test in the requested ratio (so small graphs still get both).

    Example:
        >>> import torch
        >>> from sgl.datasets import planetoid_split
        >>> y = torch.arange(3000) % 3
        >>> [int(m.sum()) for m in planetoid_split(y, seed=1)]
        [60, 500, 1000]
    """
    for value, name in ((train_per_class, "train_per_class"), (num_val, "num_val"), (num_test, "num_test")):
        _check_count(value, name)
    labels = _labels(y)
    rng = np.random.default_rng(seed)
    order, rank = _rank_within_class(labels, rng)
    train = order[rank < train_per_class]
    rest = order[rank >= train_per_class]
    rest = rest[rng.permutation(rest.size)]
    if num_val + num_test > rest.size:
        total = max(num_val + num_test, 1)
        num_val = int(round(rest.size * num_val / total))
        num_test = rest.size - num_val
    return _to_masks(labels.size, train, rest[:num_val], rest[num_val:num_val + num_test])


def random_split(y: Any, train_ratio: float = 0.6, val_ratio: float = 0.2, seed: int = 0) -> Masks:
    r"""Boolean ``(train, val, test)`` masks holding ``train_ratio`` / ``val_ratio`` / the rest
    of each class's labeled nodes (stratified, so every class is in every part it can be).

    With :math:`n_c` labeled nodes in class :math:`c`, the first
    :math:`t_c = \lfloor r_{train} n_c + 1/2 \rfloor` of a seeded random order of them train,
    the next :math:`\lfloor (r_{train} + r_{val}) n_c + 1/2 \rfloor - t_c` validate, the rest test.
    Unlabeled nodes (label ``-1``) are in no part.

    Example:
        >>> import torch
        >>> from sgl.datasets import random_split
        >>> y = torch.tensor([0] * 10 + [1] * 5 + [-1] * 3)
        >>> [int(m.sum()) for m in random_split(y, 0.6, 0.2, seed=0)]
        [9, 3, 3]
    """
    for value, name in ((train_ratio, "train_ratio"), (val_ratio, "val_ratio")):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name} must be a fraction in [0, 1], got {value!r}")
    if train_ratio + val_ratio > 1.0 + 1e-9:
        raise ConfigError(f"train_ratio + val_ratio must be at most 1, got {train_ratio} + {val_ratio}")
    labels = _labels(y)
    order, rank = _rank_within_class(labels, np.random.default_rng(seed))
    classes = labels[order]
    sizes = np.bincount(classes, minlength=int(classes.max()) + 1 if classes.size else 0)[classes]
    train_end = np.floor(train_ratio * sizes + 0.5)
    val_end = np.floor((train_ratio + val_ratio) * sizes + 0.5)
    return _to_masks(labels.size, order[rank < train_end], order[(rank >= train_end) & (rank < val_end)],
                     order[rank >= val_end])
