"""A bank of expert MLPs stored as stacked ``[E, ...]`` weights (sliceable for EP, flattenable for FSEP)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ExpertBank", "expert_mlp", "run_experts"]


def expert_mlp(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor | None, w2: torch.Tensor) -> torch.Tensor:
    """``(silu(x W1) * x W3) W2`` (SwiGLU) or ``gelu(x W1) W2`` when ``w3`` is None."""
    hidden = F.silu(x @ w1) * (x @ w3) if w3 is not None else F.gelu(x @ w1)
    return hidden @ w2


def run_experts(x: torch.Tensor, counts: list[int], w1: torch.Tensor, w3: torch.Tensor | None,
                w2: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` grouped by expert (``counts[i]`` rows for stacked expert ``i``) through their MLPs."""
    outs = []
    for i, piece in enumerate(torch.split(x, counts)):
        if piece.shape[0]:
            outs.append(expert_mlp(piece, w1[i], None if w3 is None else w3[i], w2[i]))
    if not outs:
        return x.new_zeros((0, w2.shape[-1])) + 0.0 * w2.sum()
    return torch.cat(outs)


class ExpertBank(nn.Module):
    """Experts ``first .. first + n - 1`` of an MoE layer: ``w1, w3: [n, h, f]``, ``w2: [n, f, h]``.

    Weights are initialised for all ``num_experts`` from ``seed`` (like ``nn.Linear``: uniform in
    ``±1/sqrt(fan_in)``) and then sliced, so every rank of an EP group builds identical experts.

    >>> bank = ExpertBank(4, 8, 16, "swiglu", seed=0)
    >>> bank.shard(2, 4).w1.shape, bank.shard(2, 4).first
    (torch.Size([2, 8, 16]), 2)
    """

    def __init__(self, num_experts: int, hidden: int, ffn: int, activation: str, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed + 1)

        def init(*shape: int) -> nn.Parameter:
            bound = 1.0 / math.sqrt(shape[1])
            return nn.Parameter(torch.rand(shape, generator=gen) * 2 * bound - bound)

        self.first = 0
        self.w1 = init(num_experts, hidden, ffn)
        self.w3 = init(num_experts, hidden, ffn) if activation == "swiglu" else None
        self.w2 = init(num_experts, ffn, hidden)
        for p in self.parameters():
            p.sgl_expert = True  # type: ignore[attr-defined]  # gradients sync over expert-DP only

    @property
    def num_local(self) -> int:
        return self.w1.shape[0]

    def shard(self, start: int, stop: int) -> "ExpertBank":
        """A bank holding copies of experts ``start .. stop - 1``."""
        out = ExpertBank.__new__(ExpertBank)
        nn.Module.__init__(out)
        out.first = self.first + start
        out.w1 = nn.Parameter(self.w1.detach()[start:stop].clone())
        out.w3 = None if self.w3 is None else nn.Parameter(self.w3.detach()[start:stop].clone())
        out.w2 = nn.Parameter(self.w2.detach()[start:stop].clone())
        for p in out.parameters():
            p.sgl_expert = True  # type: ignore[attr-defined]
        return out

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        return run_experts(x, counts, self.w1, self.w3, self.w2)

    def __repr__(self) -> str:
        return f"ExpertBank(experts={self.first}..{self.first + self.num_local - 1}, hidden={self.w1.shape[1]}, ffn={self.w1.shape[2]})"
