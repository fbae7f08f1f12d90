"""Classification metrics computed on tensors (no sklearn needed)."""
from __future__ import annotations

import torch

__all__ = ["accuracy", "macro_f1"]


def accuracy(pred: torch.Tensor, target: torch.Tensor) -> float:
    """Fraction of ``pred == target``; ``pred`` may be logits ``[n, C]`` or labels ``[n]``.

        >>> accuracy(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]))
        0.6666666666666666
    """
    if pred.dim() == 2:
        pred = pred.argmax(dim=1)
    if target.numel() == 0:
        return float("nan")
    return float((pred == target).double().mean())


def macro_f1(pred: torch.Tensor, target: torch.Tensor, num_classes: int = None) -> float:
    """Unweighted mean of per-class F1 over the classes present in ``target`` or ``pred``.

        >>> round(macro_f1(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0])), 4)
        0.6667
    """
    if pred.dim() == 2:
        pred = pred.argmax(dim=1)
    if target.numel() == 0:
        return float("nan")
    c = int(num_classes or max(int(pred.max()), int(target.max())) + 1)
    confusion = torch.bincount(target * c + pred, minlength=c * c).reshape(c, c).double()
    tp = confusion.diag()
    support = confusion.sum(1)
    predicted = confusion.sum(0)
    present = (support + predicted) > 0
    f1 = 2 * tp / (support + predicted).clamp(min=1)
    return float(f1[present].mean())
