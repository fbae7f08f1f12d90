"""Top-k gating: scores, selection (with the aux-loss-free bias), capacity dropping, the balance loss.

The router turns ``T`` tokens into an :class:`Assignment`: the kept (token, expert, weight)
triples sorted by expert (stable in token order), which every dispatcher consumes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from sgl.systems.moe.config import MoEConfig

__all__ = ["Assignment", "TopKRouter", "balance_loss"]


@dataclass
class Assignment:
    """Kept (token, expert) pairs of one forward, grouped by expert.

    ``token[a]``, ``expert[a]``, ``weight[a]`` (the gate weight, differentiable) for ``a`` in
    ``[0, A)``, sorted by ``expert`` and, within an expert, by first choices before second
    choices, then token order; ``counts[e]`` = pairs of expert ``e``; ``indices`` ``[T, k]`` is the
    raw top-k choice (before capacity) and ``dropped`` the number of pairs capacity removed.
    """

    token: torch.Tensor
    expert: torch.Tensor
    weight: torch.Tensor
    counts: torch.Tensor
    indices: torch.Tensor
    dropped: int


class TopKRouter(nn.Module):
    r"""Linear gate ``s = g(W x)`` (``g`` softmax or sigmoid), top-k selection on ``s + b``.

    The bias ``b`` (a buffer, DeepSeek-V3's aux-loss-free balancing) only changes *which* experts
    are chosen; the weights are the unbiased scores ``s_{t,e}`` of the chosen experts, rescaled
    to sum to one when ``normalize_weights``.  Capacity: with ``C = ceil(cf * T * k / E)`` each
    expert keeps its first ``C`` pairs (first choices have priority, GShard); with ``groups`` the
    ``T`` tokens form that many contiguous groups, each with its own ``C`` of ``T / groups``.

    >>> cfg = MoEConfig(hidden_size=8, ffn_hidden_size=16, num_experts=4, top_k=2)
    >>> a, probs = TopKRouter(cfg)(torch.randn(5, 8))
    >>> int(a.counts.sum()), probs.shape
    (10, torch.Size([5, 4]))
    """

    def __init__(self, cfg: MoEConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.weight = nn.Parameter(torch.empty(cfg.num_experts, cfg.hidden_size))
        self.register_buffer("expert_bias", torch.zeros(cfg.num_experts))
        gen = torch.Generator().manual_seed(cfg.seed)
        bound = 1.0 / math.sqrt(cfg.hidden_size)
        with torch.no_grad():
            self.weight.copy_(torch.rand(self.weight.shape, generator=gen) * 2 * bound - bound)

    def forward(self, x: torch.Tensor, groups: int = 1) -> tuple[Assignment, torch.Tensor]:
        cfg = self.cfg
        logits = x @ self.weight.t()
        if logits.dtype in (torch.float16, torch.bfloat16):  # scores in fp32 under autocast (as Mixtral's)
            logits = logits.float()
        scores = torch.softmax(logits, dim=-1) if cfg.gate == "softmax" else torch.sigmoid(logits)
        with torch.no_grad():
            indices = torch.topk(scores + self.expert_bias, cfg.top_k, dim=-1).indices
        weights = scores.gather(1, indices)
        if cfg.normalize_weights and (cfg.top_k > 1 or cfg.gate == "sigmoid"):
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return route(indices, weights, cfg.num_experts, cfg.capacity(x.shape[0] // groups), groups), scores

    def update_bias(self, global_counts: torch.Tensor) -> None:
        """One aux-loss-free step: raise the bias of under-loaded experts, lower over-loaded ones."""
        rate = self.cfg.bias_update_rate
        if rate > 0:
            load = global_counts.to(self.expert_bias.dtype)
            self.expert_bias.add_(rate * torch.sign(load.mean() - load))


def route(indices: torch.Tensor, weights: torch.Tensor, num_experts: int, capacity: int | None,
          groups: int = 1) -> Assignment:
    """Group top-k choices by expert (first choices first) and drop those over ``capacity`` in
    each of ``groups`` contiguous token groups."""
    t, k = indices.shape
    # Choice-major order: all first choices, then all second choices (GShard priority).
    flat_expert = indices.t().reshape(-1)
    flat_token = torch.arange(t, device=indices.device).repeat(k)
    flat_weight = weights.t().reshape(-1)
    order = torch.argsort(flat_expert, stable=True)
    expert = flat_expert[order]
    counts = torch.bincount(expert, minlength=num_experts)
    dropped = 0
    if capacity is not None:
        # Position of each pair in its (group, expert) block, in priority order.
        block = (flat_token * groups // t) * num_experts + flat_expert
        b_order = torch.argsort(block, stable=True)
        b_counts = torch.bincount(block, minlength=groups * num_experts)
        starts = torch.cumsum(b_counts, 0) - b_counts
        position = torch.empty_like(block)
        position[b_order] = torch.arange(block.numel(), device=block.device) - starts[block[b_order]]
        keep = position[order] < capacity
        dropped = int((~keep).sum())
        order, expert = order[keep], expert[keep]
        counts = torch.bincount(expert, minlength=num_experts)
    return Assignment(flat_token[order], expert, flat_weight[order], counts, indices, dropped)


def balance_loss(scores: torch.Tensor, global_counts: torch.Tensor, top_k: int) -> torch.Tensor:
    r"""Switch/GShard auxiliary loss ``E * sum_e f_e * P_e``.

    ``f_e`` = share of the (token, expert) pairs routed to ``e`` (from ``global_counts``, summed
    over every rank so the loss equals the single-process one), ``P_e`` = mean gate score of ``e``
    over this rank's tokens.  It is 1 for a perfectly uniform router.
    """
    e = scores.shape[1]
    f = global_counts.to(scores.dtype) / max(1, int(global_counts.sum()))
    p = scores.mean(dim=0)
    return e * (f * p).sum()
