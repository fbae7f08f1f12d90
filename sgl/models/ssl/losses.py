r"""The self-supervised loss terms of GCMAE and its ablations, as plain functions of embeddings.

* :func:`sce_loss` -- GraphMAE's scaled cosine error of reconstructed features;
* :func:`info_nce` -- GRACE's symmetric InfoNCE between two views;
* :func:`adjacency_loss` / :func:`dense_adjacency_loss` -- edge/non-edge BCE of cosine pair
  logits, on sampled pairs or on all :math:`N^2` pairs;
* :func:`variance_loss` -- VICReg's variance hinge against collapsed (over-smoothed) embeddings.
"""
from __future__ import annotations

from typing import Any, Tuple

import torch
import torch.nn.functional as F

__all__ = ["sce_loss", "info_nce", "adjacency_loss", "dense_adjacency_loss", "variance_loss"]


def sce_loss(x_hat: torch.Tensor, x: torch.Tensor, alpha: float = 3.0) -> torch.Tensor:
    r"""Scaled cosine error :math:`\operatorname{mean}_i (1 - \cos(\hat x_i, x_i))^{\alpha}`.

    Example:
        >>> import torch
        >>> round(float(sce_loss(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0]]), 2.0)), 4)
        0.5
    """
    cos = F.cosine_similarity(x_hat, x, dim=-1)
    return (1.0 - cos).clamp_min(0).pow(alpha).mean()


def info_nce(z1: torch.Tensor, z2: torch.Tensor, tau: float = 0.5) -> torch.Tensor:
    r"""Symmetric GRACE InfoNCE between two views (rows are L2-normalised first).

    For node :math:`i`, with :math:`s(a, b) = e^{\cos(a, b)/\tau}`,
    :math:`\ell_i = -\log \frac{s(u_i, v_i)}{\sum_k s(u_i, v_k) + \sum_{k \ne i} s(u_i, u_k)}`;
    the loss is the mean of :math:`\ell` over both directions.

    Example:
        >>> import torch
        >>> z = torch.eye(2)
        >>> round(float(info_nce(z, z, tau=1.0)), 4)   # -log(e / ((e + 1) + (e + 1) - e))
        0.5514
    """
    h1, h2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    # three similarity matrices serve both directions (h2 h1^T is the transpose of h1 h2^T)
    s11, s22, s12 = torch.exp(h1 @ h1.t() / tau), torch.exp(h2 @ h2.t() / tau), torch.exp(h1 @ h2.t() / tau)
    pos = s12.diagonal()
    # GRACE: positive over (all inter-view pairs + all intra-view pairs except the self-pair)
    loss12 = -torch.log(pos / (s11.sum(1) + s12.sum(1) - s11.diagonal()))
    loss21 = -torch.log(pos / (s22.sum(1) + s12.sum(0) - s22.diagonal()))
    return 0.5 * (loss12.mean() + loss21.mean())


def adjacency_loss(z: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, temperature: float = 0.25) -> torch.Tensor:
    r"""Binary cross-entropy of edge logits :math:`\cos(z_u, z_v)/\tau` on positive and negative pairs.

    ``pos``/``neg`` are ``[2, P]`` / ``[2, Q]`` node pairs; positives target 1, negatives 0,
    each set weighted by its size (mean over all pairs).

    Example:
        >>> import torch
        >>> z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> round(float(adjacency_loss(z, torch.tensor([[0], [1]]), torch.tensor([[0], [2]]), 1.0)), 4)
        0.5032
    """
    h = F.normalize(z, dim=1)
    logits = torch.cat([(h[pos[0]] * h[pos[1]]).sum(1), (h[neg[0]] * h[neg[1]]).sum(1)]) / temperature
    target = torch.cat([torch.ones(pos.size(1), device=z.device), torch.zeros(neg.size(1), device=z.device)])
    return F.binary_cross_entropy_with_logits(logits, target)


class _SoftplusGramSum(torch.autograd.Function):
    r""":math:`\sum_{u,v} \mathrm{softplus}(h_u \cdot h_v / \tau)` with the symmetric gradient
    :math:`2\,\sigma(HH^\top/\tau)\,H/\tau` (one matrix product instead of autograd's two)."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, temperature: float) -> torch.Tensor:  # type: ignore[override]
        logits = (h @ h.t()) / temperature
        ctx.save_for_backward(h, torch.sigmoid(logits))
        ctx.temperature = temperature
        return F.softplus(logits).sum()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, None]:  # type: ignore[override]
        h, sig = ctx.saved_tensors
        return grad * 2.0 * (sig @ h) / ctx.temperature, None


def dense_adjacency_loss(z: torch.Tensor, edge_index: torch.Tensor, temperature: float = 0.25) -> torch.Tensor:
    r"""Whole-matrix form of :func:`adjacency_loss`: every node pair is scored (memory :math:`O(N^2)`).

    With logits :math:`\ell_{uv} = \cos(z_u, z_v)/\tau` over all :math:`N^2` ordered pairs
    (self-pairs included, as the encoder's graph has self-loops), the loss is
    :math:`\tfrac12 \operatorname{mean}_{A_{uv}=1} \mathrm{BCE}(\ell_{uv}, 1) +
    \tfrac12 \operatorname{mean}_{A_{uv}=0} \mathrm{BCE}(\ell_{uv}, 0)`, where :math:`A` is
    ``edge_index`` plus self-loops: edges and non-edges weigh the same, as in the sampled form.
    Use it for graphs of up to a few tens of thousands of nodes.

    Example:
        >>> import torch
        >>> z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> no_edges = torch.zeros(2, 0, dtype=torch.long)
        >>> round(float(dense_adjacency_loss(z, no_edges, 1.0)), 4)   # (softplus(-1) + softplus(0)) / 2
        0.5032
    """
    n = z.size(0)
    h = F.normalize(z, dim=1)
    # the distinct positive pairs (edges and self-loops) are scored directly; the negatives'
    # sum is the sum over all pairs minus the positives' (no N x N mask is built)
    loops = torch.arange(n, device=z.device)
    keys = torch.unique(torch.cat([edge_index[0] * n + edge_index[1], loops * n + loops]))
    src, dst = keys // n, keys % n
    pos_logits = (h[src] * h[dst]).sum(1) / temperature
    num_pos, num_neg = keys.numel(), n * n - keys.numel()
    pos_part = F.softplus(-pos_logits).sum() / num_pos
    if not num_neg:
        return 0.5 * pos_part
    all_sum = _SoftplusGramSum.apply(h, float(temperature))
    neg_part = (all_sum - F.softplus(pos_logits).sum()) / num_neg
    return 0.5 * (pos_part + neg_part)


def variance_loss(z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    r"""VICReg variance hinge :math:`\operatorname{mean}_d \max(0, 1 - \sqrt{\operatorname{Var}(z_{:,d}) + \epsilon})`.

    ``Var`` is the unbiased variance over rows.

    Example:
        >>> import torch
        >>> round(float(variance_loss(torch.tensor([[0.0, 0.0], [0.5, 4.0]]), eps=0.0)), 4)   # var 0.125, 8
        0.3232
    """
    std = torch.sqrt(z.var(dim=0) + eps)
    return F.relu(1.0 - std).mean()
