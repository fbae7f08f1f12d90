"""A bank of expert MLPs stored as stacked ``[E, ...]`` weights (sliceable for EP, flattenable for FSEP).

Three ways to run the experts over rows grouped by expert, equal up to rounding:

* ``"grouped"`` — one grouped GEMM per matrix (``torch._grouped_mm``, on CPU and GPU in torch
  2.13) when the shapes allow it (row strides a multiple of 16 bytes, fp32/bf16/fp16), else
* ``"padded"`` — every expert's rows padded to the largest count and one ``bmm`` per matrix;
* ``"loop"`` — one small matmul per expert (the reference).

``"auto"`` (the default) is ``"grouped"`` where torch has it and the shapes allow it, else
``"padded"``.  Under ``torch.autocast`` the experts compute in the autocast dtype (bf16) from the
fp32 master weights (the casts are differentiable: gradients arrive in fp32) and the output is
cast back to the input's dtype, so the combine and the residual stream keep theirs.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl._checks import check_choice

__all__ = ["ExpertBank", "expert_mlp", "run_experts", "EXPERT_IMPLS", "grouped_supported"]

EXPERT_IMPLS = ("auto", "grouped", "padded", "loop")
_GROUPED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def expert_mlp(x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor | None, w2: torch.Tensor) -> torch.Tensor:
    """``(silu(x W1) * x W3) W2`` (SwiGLU) or ``gelu(x W1) W2`` when ``w3`` is None."""
    hidden = F.silu(x @ w1) * (x @ w3) if w3 is not None else F.gelu(x @ w1)
    return hidden @ w2


def _act(a: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return F.silu(a) * b if b is not None else F.gelu(a)


def _loop(x: torch.Tensor, counts: list[int], w1: torch.Tensor, w3: torch.Tensor | None,
          w2: torch.Tensor) -> torch.Tensor:
    outs = []
    for i, piece in enumerate(torch.split(x, counts)):
        if piece.shape[0]:
            outs.append(expert_mlp(piece, w1[i], None if w3 is None else w3[i], w2[i]))
    if not outs:
        return x.new_zeros((0, w2.shape[-1])) + 0.0 * w2.sum()
    return torch.cat(outs)


class _ContiguousGrad(torch.autograd.Function):
    """Identity whose backward hands on a contiguous gradient (``_grouped_mm``'s backward refuses
    the stride-0 gradients that e.g. ``sum()`` produces)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad.contiguous()


def _aligned(t: torch.Tensor) -> bool:
    step = 16 // t.element_size()
    return all(s % step == 0 for s in t.stride()[:-1]) and t.stride()[-1] == 1 and t.data_ptr() % 16 == 0


def grouped_supported(x: torch.Tensor, *weights: torch.Tensor | None) -> bool:
    """``torch._grouped_mm`` exists and takes these (contiguous) shapes and dtype."""
    if not hasattr(torch, "_grouped_mm") or x.dtype not in _GROUPED_DTYPES:
        return False
    step = 16 // x.element_size()
    return all(w is None or (w.shape[-1] % step == 0 and w.shape[-2] % step == 0) for w in weights)


def _grouped(x: torch.Tensor, counts: list[int], w1: torch.Tensor, w3: torch.Tensor | None,
             w2: torch.Tensor) -> torch.Tensor:
    offs = torch.tensor(counts, device=x.device).cumsum(0).to(torch.int32)

    def gmm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = a if _aligned(a) else a.contiguous()
        w = w if _aligned(w) else w.contiguous()
        return torch._grouped_mm(a, w, offs=offs)

    x = _ContiguousGrad.apply(x)
    hidden = _act(gmm(x, w1), None if w3 is None else gmm(x, w3))
    return _ContiguousGrad.apply(gmm(hidden, w2))


def _padded(x: torch.Tensor, counts: list[int], w1: torch.Tensor, w3: torch.Tensor | None,
            w2: torch.Tensor) -> torch.Tensor:
    e, h = len(counts), x.shape[1]
    c = max(counts) if counts else 0
    if c == 0:
        return _loop(x, counts, w1, w3, w2)
    cnt = torch.tensor(counts, device=x.device)
    expert = torch.repeat_interleave(torch.arange(e, device=x.device), cnt)
    slot = expert * c + torch.arange(x.shape[0], device=x.device) - (torch.cumsum(cnt, 0) - cnt)[expert]
    buf = x.new_zeros(e * c, h).index_copy(0, slot, x).view(e, c, h)
    hidden = _act(torch.bmm(buf, w1), None if w3 is None else torch.bmm(buf, w3))
    return torch.bmm(hidden, w2).reshape(e * c, -1)[slot]


_IMPLS = {"loop": _loop, "grouped": _grouped, "padded": _padded}


def run_experts(x: torch.Tensor, counts: list[int], w1: torch.Tensor, w3: torch.Tensor | None,
                w2: torch.Tensor, impl: str = "auto") -> torch.Tensor:
    """Rows of ``x`` grouped by expert (``counts[i]`` rows for stacked expert ``i``) through their MLPs.

    ``impl``: ``"auto" | "grouped" | "padded" | "loop"`` (see the module docstring; ``"grouped"``
    falls back to ``"padded"`` where ``_grouped_mm`` cannot take the shapes).

    >>> x, w1, w3, w2 = torch.randn(5, 8), torch.randn(2, 8, 16), torch.randn(2, 8, 16), torch.randn(2, 16, 8)
    >>> torch.allclose(run_experts(x, [2, 3], w1, w3, w2, "grouped"), run_experts(x, [2, 3], w1, w3, w2, "loop"),
    ...                atol=1e-4)
    True
    """
    out_dtype = x.dtype
    if torch.is_autocast_enabled(x.device.type):
        dt = torch.get_autocast_dtype(x.device.type)
        x, w1, w2 = x.to(dt), w1.to(dt), w2.to(dt)
        w3 = None if w3 is None else w3.to(dt)
    with torch.autocast(x.device.type, enabled=False):
        if impl == "auto" or impl == "grouped":
            impl = "grouped" if grouped_supported(x, w1, w3, w2) else "padded"
        y = _IMPLS[impl](x, counts, w1, w3, w2)
    return y.to(out_dtype)


class ExpertBank(nn.Module):
    """Experts ``first .. first + n - 1`` of an MoE layer: ``w1, w3: [n, h, f]``, ``w2: [n, f, h]``.

    Weights are initialised for all ``num_experts`` from ``seed`` (like ``nn.Linear``: uniform in
    ``±1/sqrt(fan_in)``) and then sliced, so every rank of an EP group builds identical experts.
    ``impl`` picks how the experts run (``"auto"``, ``"grouped"``, ``"padded"``, ``"loop"``).

    >>> bank = ExpertBank(4, 8, 16, "swiglu", seed=0)
    >>> bank.shard(2, 4).w1.shape, bank.shard(2, 4).first
    (torch.Size([2, 8, 16]), 2)
    """

    def __init__(self, num_experts: int, hidden: int, ffn: int, activation: str, seed: int = 0,
                 impl: str = "auto") -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed + 1)

        def init(*shape: int) -> nn.Parameter:
            bound = 1.0 / math.sqrt(shape[1])
            return nn.Parameter(torch.rand(shape, generator=gen) * 2 * bound - bound)

        self.first = 0
        self.impl = check_choice(impl, "ExpertBank.impl", EXPERT_IMPLS)
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
        out.impl = self.impl
        out.w1 = nn.Parameter(self.w1.detach()[start:stop].clone())
        out.w3 = None if self.w3 is None else nn.Parameter(self.w3.detach()[start:stop].clone())
        out.w2 = nn.Parameter(self.w2.detach()[start:stop].clone())
        for p in out.parameters():
            p.sgl_expert = True  # type: ignore[attr-defined]
        return out

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        return run_experts(x, counts, self.w1, self.w3, self.w2, self.impl)

    def __repr__(self) -> str:
        return (f"ExpertBank(experts={self.first}..{self.first + self.num_local - 1}, hidden={self.w1.shape[1]}, "
                f"ffn={self.w1.shape[2]}, impl={self.impl})")
