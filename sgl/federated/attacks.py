r"""Label inference from the derivatives a passive party receives (Li et al., ICLR 2022).

In two-party split learning the passive party gets :math:`g_i = \partial L/\partial h_i` for
every row of a batch. With a sigmoid-BCE top, :math:`g_i = (p_i - y_i)\,\partial z_i/\partial h_i / B`,
so the minority positives, whose :math:`|p_i - y_i|` stays large, show up as

* **norm attack**: score :math:`\lVert g_i \rVert` (larger for positives);
* **direction attack** (label-free variant of FDL): score :math:`-\frac1B\sum_j \cos(g_i, g_j)`;
  rows of one class point one way, so the minority class has a negative mean cosine to the batch.
  Given a known positive's derivative ``reference``, the score is :math:`\cos(g_i, g_{ref})`.

The leak is measured as the AUC of a score against the true labels (which the harness holds,
never the attacker); :func:`leak_auc` reports :math:`\max(\mathrm{AUC}, 1-\mathrm{AUC})`, the
attacker's best guess of the orientation.

Example:
    >>> import torch
    >>> y = torch.tensor([1., 0., 0., 0.])
    >>> g = torch.tensor([[-0.9, 0.1], [0.1, 0.], [0.12, 0.01], [0.09, -0.01]])
    >>> leak_auc(norm_scores(g), y), leak_auc(direction_scores(g), y)
    (1.0, 1.0)
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["norm_scores", "direction_scores", "roc_auc", "leak_auc"]


def norm_scores(g: torch.Tensor) -> torch.Tensor:
    """``[B]`` row norms of the received derivatives ``g [B, d]``."""
    return g.flatten(1).norm(dim=1)


def direction_scores(g: torch.Tensor, reference: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``[B]`` direction-attack scores: cosine to ``reference`` if given, else minus the mean cosine
    to every row of the batch."""
    unit = F.normalize(g.flatten(1), dim=1)
    if reference is not None:
        return unit @ F.normalize(reference.flatten(), dim=0)
    return -(unit @ unit.mean(0))


def roc_auc(scores: Any, labels: Any) -> float:
    """Area under the ROC curve (ties count half); NaN when a class is absent.

    >>> roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    """
    from scipy.stats import rankdata

    if isinstance(scores, torch.Tensor):
        scores = scores.detach().cpu().numpy()
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1) > 0.5
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def leak_auc(scores: Any, labels: Any) -> float:
    """``max(AUC, 1 - AUC)`` of an attack score against the true labels (0.5 = no leak)."""
    auc = roc_auc(scores, labels)
    return auc if auc != auc else max(auc, 1.0 - auc)
