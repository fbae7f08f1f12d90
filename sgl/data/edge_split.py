"""The held-out edge sets of a link-prediction split.

Made by :func:`sgl.tasks.split_edges` (a random split) or read with a dataset (OGB's
official split, ``graph.link_split`` of :func:`sgl.datasets.load_ogb_link`); consumed by the
link-prediction tasks in :mod:`sgl.tasks`.

Example:
    >>> import torch
    >>> from sgl.data import EdgeSplit, Graph
    >>> train = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=4)
    >>> pairs = lambda *p: torch.tensor(p).t()
    >>> split = EdgeSplit(train, pairs([1, 2]), pairs([0, 3]), pairs([2, 3]), pairs([1, 3]),
    ...                   train_pos=pairs([0, 1]))
    >>> split.metric, split.test_pos.tolist()
    ('auc', [[2], [3]])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from sgl.data.graph import Graph

__all__ = ["EdgeSplit"]


@dataclass
class EdgeSplit:
    """Training graph (held-out edges removed in both directions) and ``[2, k]`` pair sets.

    ``train_pos``: the training edges once each (``[2, m]``, ``u < v``), the positives of
    supervised training. ``metric``: what selects the epoch on validation (``"auc"``, or the
    dataset's official ``"hits@50"``, ``"mrr"``...). ``neg_per_pos``: 0 when the negatives of
    a set are shared by all its positives; ``M`` when positive ``i`` has its own ``M``
    negatives at columns ``i * M .. (i + 1) * M - 1`` of ``val_neg`` / ``test_neg``
    (ogbl-citation2's layout, ranked by MRR).
    """

    train_graph: Graph
    val_pos: torch.Tensor
    val_neg: torch.Tensor
    test_pos: torch.Tensor
    test_neg: torch.Tensor
    train_pos: Optional[torch.Tensor] = None
    metric: str = "auc"
    neg_per_pos: int = 0

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name}={getattr(self, name).size(1)}" for name in
                          ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg")
                          if getattr(self, name) is not None)
        return f"EdgeSplit({sizes}, metric={self.metric!r}, neg_per_pos={self.neg_per_pos})"
