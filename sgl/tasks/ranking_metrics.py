r"""Link-prediction metrics: ROC-AUC and AP (scikit-learn), Hits@K and MRR as OGB computes them.

Scores are logits or probabilities of candidate pairs, on any device; only AUC/AP copy them
to the host (scikit-learn). The ranking metrics follow ``ogb.linkproppred.Evaluator``
(ogb 1.3.6) to the comparison operator, and the tests check them against it:

* **Hits@K with a shared negative set** (ogbl-collab, -ddi, -ppa): every positive is ranked
  against the same ``[M]`` negatives; a positive is a hit when its score is *strictly
  greater* than the K-th highest negative score,
  :math:`\mathrm{Hits@K} = \frac{1}{|P|}\sum_{p \in P} [\,s_p > s^{(K)}_{neg}\,]`, and it is
  1.0 when there are fewer than K negatives (OGB's convention).
* **MRR** (ogbl-citation2): positive ``i`` is ranked against its own list of negatives
  ``neg[i, :]`` with OGB's average of the optimistic and the pessimistic rank,
  :math:`r_i = 1 + \tfrac12\big(|\{j: n_{ij} > s_i\}| + |\{j: n_{ij} \ge s_i\}|\big)`, and
  :math:`\mathrm{MRR} = \operatorname{mean}_i 1/r_i`. Given one shared ``[M]`` negative set
  instead, every positive is ranked against all of it (the same numbers as OGB's
  evaluator on the ``[|P|, M]`` matrix of repeated rows, computed by sorting in
  :math:`O((|P| + M)\log M)` time without building that matrix). With per-positive lists, Hits@K is
  ``mean(r_i <= K)``, as OGB reports ``hits@1/3/10`` for citation2.

Example:
    >>> import torch
    >>> pos, neg = torch.tensor([0.9, 0.6, 0.2]), torch.tensor([0.8, 0.5, 0.1, 0.7])
    >>> hits_at_k(pos, neg, 2)          # the 2nd highest negative is 0.7: only 0.9 beats it
    0.3333333333333333
    >>> round(mean_reciprocal_rank(pos, neg), 4)   # ranks 1, 3, 4
    0.5278
    >>> metrics = link_eval(pos, neg, hits_k=[1, 2])
    >>> sorted(metrics), round(metrics["auc"], 4)
    (['ap', 'auc', 'hits@1', 'hits@2', 'mrr'], 0.5833)
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
import torch

from sgl.errors import ConfigError, GraphError

__all__ = ["hits_at_k", "mean_reciprocal_rank", "reciprocal_ranks", "roc_auc_ap", "link_eval", "link_metric",
           "check_metric_name"]


def _scores(value: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise GraphError(f"{name} must be a tensor of scores, got {type(value).__name__}")
    if value.numel() == 0:
        raise GraphError(f"{name} is empty; link metrics need at least one positive and one negative pair")
    return value.detach().float()


def hits_at_k(pos: torch.Tensor, neg: torch.Tensor, k: int) -> float:
    """Fraction of ``pos`` scores strictly above the ``k``-th highest of the shared ``neg`` scores
    (OGB's Hits@K; 1.0 when there are fewer than ``k`` negatives)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"Hits@K needs a positive integer K, got {k!r}")
    pos, neg = _scores(pos, "pos").reshape(-1), _scores(neg, "neg").reshape(-1)
    if neg.numel() < k:
        return 1.0
    kth = torch.topk(neg, k).values[-1]
    return float((pos > kth).sum()) / pos.numel()


def reciprocal_ranks(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """``1 / rank`` of every positive (OGB's averaged optimistic/pessimistic rank, see the module
    docstring): against its own row of a ``[P, M]`` ``neg``, or against all of a shared ``[M]``."""
    pos, neg = _scores(pos, "pos").reshape(-1), _scores(neg, "neg")
    if neg.dim() == 2:
        if neg.size(0) != pos.numel():
            raise GraphError(f"per-positive negatives must be [{pos.numel()}, M] (one row per positive), "
                             f"got {tuple(neg.shape)}")
        column = pos.view(-1, 1)
        optimistic, pessimistic = (neg > column).sum(1), (neg >= column).sum(1)
    else:
        ordered = torch.sort(neg.reshape(-1)).values
        m = ordered.numel()
        # negatives > s: those after the last one <= s; negatives >= s: those after the last one < s
        optimistic = m - torch.searchsorted(ordered, pos, right=True)
        pessimistic = m - torch.searchsorted(ordered, pos, right=False)
    return 1.0 / (0.5 * (optimistic + pessimistic).float() + 1.0)


def mean_reciprocal_rank(pos: torch.Tensor, neg: torch.Tensor) -> float:
    """MRR of ``pos`` against per-positive ``[P, M]`` or shared ``[M]`` negatives (OGB's ranks)."""
    return float(reciprocal_ranks(pos, neg).mean())


def roc_auc_ap(pos: torch.Tensor, neg: torch.Tensor) -> Dict[str, float]:
    """ROC-AUC and average precision of positives against negatives (scikit-learn, on the host)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    pos, neg = _scores(pos, "pos").reshape(-1), _scores(neg, "neg").reshape(-1)
    scores = torch.cat([pos, neg]).double().cpu().numpy()
    target = np.concatenate([np.ones(pos.numel()), np.zeros(neg.numel())])
    return {"auc": float(roc_auc_score(target, scores)), "ap": float(average_precision_score(target, scores))}


def check_metric_name(name: str) -> str:
    """``"auc"``, ``"ap"``, ``"mrr"`` or ``"hits@K"`` (K a positive integer), lower-cased."""
    key = str(name).lower()
    if key in ("auc", "ap", "mrr"):
        return key
    if key.startswith("hits@") and key[5:].isdigit() and int(key[5:]) >= 1:
        return f"hits@{int(key[5:])}"
    raise ConfigError(f"unknown link metric {name!r}; use auc, ap, mrr or hits@K (e.g. hits@50)")


def link_metric(name: str, pos: torch.Tensor, neg: torch.Tensor, neg_per_pos: int = 0) -> float:
    """One metric of :func:`link_eval` (what selects the epoch on validation)."""
    name = check_metric_name(name)
    if name in ("auc", "ap"):
        return roc_auc_ap(pos, neg)[name]
    if neg_per_pos:
        ranks = 1.0 / _per_positive(pos, neg, neg_per_pos)
        return float((1.0 / ranks).mean()) if name == "mrr" else float((ranks <= int(name[5:])).float().mean())
    return mean_reciprocal_rank(pos, neg) if name == "mrr" else hits_at_k(pos, neg, int(name[5:]))


def _per_positive(pos: torch.Tensor, neg: torch.Tensor, neg_per_pos: int) -> torch.Tensor:
    pos, neg = _scores(pos, "pos").reshape(-1), _scores(neg, "neg").reshape(-1)
    if neg.numel() != pos.numel() * neg_per_pos:
        raise GraphError(f"{pos.numel()} positives with {neg_per_pos} negatives each need "
                         f"{pos.numel() * neg_per_pos} negative scores, got {neg.numel()}")
    return reciprocal_ranks(pos, neg.view(pos.numel(), neg_per_pos))


def link_eval(pos: torch.Tensor, neg: torch.Tensor, hits_k: Sequence[int] = (20, 50, 100),
              neg_per_pos: int = 0) -> Dict[str, float]:
    """AUC, AP, Hits@K for every K in ``hits_k``, and MRR of one evaluation set.

    ``neg_per_pos=0``: ``neg`` is one shared negative set. ``neg_per_pos=M``: ``neg`` holds
    ``M`` negatives per positive, positive ``i``'s at ``neg[i * M:(i + 1) * M]`` (the layout
    of ogbl-citation2's ``target_node_neg``); AUC/AP then pool all negatives.
    """
    out = roc_auc_ap(pos, neg)
    if neg_per_pos:
        ranks = 1.0 / _per_positive(pos, neg, neg_per_pos)
        out.update({f"hits@{k}": float((ranks <= k).float().mean()) for k in hits_k})
        out["mrr"] = float((1.0 / ranks).mean())
    else:
        out.update({f"hits@{k}": hits_at_k(pos, neg, int(k)) for k in hits_k})
        out["mrr"] = mean_reciprocal_rank(pos, neg)
    return out
