"""GPTQ: layer-wise weight quantization that compensates each rounding error on later columns.

For a linear layer ``y = W x`` with calibration inputs ``X`` the layer's loss is
``||W X - Q X||^2 = tr((W - Q) H (W - Q)^T)``, ``H = X X^T / n``. GPTQ quantizes the columns
of ``W`` in order; after rounding column ``i`` to ``q_i`` it spreads the error over the columns
not yet quantized with the inverse Hessian ``U = chol(H^{-1})^T`` (upper):

    e = (w_i - q_i) / U_ii,    W[:, j] -= e U_ij   for j > i.

Quantization is asymmetric, ``bits``-bit, per row and per group of ``group_size`` columns:
``q = s (clamp(round(w / s) + z, 0, 2^b - 1) - z)`` with ``s`` the *stored* scale, so the packed
int4 form of :mod:`~.int4` decodes to exactly these weights. ``scale_format`` (:mod:`~.scales`)
says how ``s`` is stored: ``"log12"`` (default) rounds the group's scale ``(max - min) / (2^b - 1)``
*up* to the next 12-bit log code ``2 ** (e0 + k d)`` of the layer (``e0``, ``d`` chosen up front
from the weight's RTN group scales with a margin), ``"fp16"`` rounds it to the nearest fp16.
:func:`gptq_codes` returns the integer codes, scales and zeros themselves; :func:`rtn` is the
round-to-nearest baseline with the same grid.

>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> w, x = torch.randn(16, 32, generator=g), torch.randn(32, 256, generator=g)
>>> h = x @ x.T / 256
>>> err = lambda q: float(((w - q) @ x).pow(2).mean())
>>> err(gptq(w, h, bits=3, group_size=16)) < err(rtn(w, bits=3, group_size=16))
True
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.serving.lora.scales import check_scale_format, log12_range, log12_round_up, log12_table

__all__ = ["gptq", "gptq_codes", "rtn", "quantized_bytes", "GPTQCodes"]

#: the smallest normal fp16: fp16 scales are stored in fp16, so the grid uses fp16-representable ones
_MIN_SCALE = 2.0 ** -14


class GPTQCodes(NamedTuple):
    """What :func:`gptq_codes` returns.

    ``dequantized`` ``[out, in]`` (the weight's dtype); ``codes`` uint8 ``[out, in]``; ``scales``
    ``[out, G]``: fp16 values (``"fp16"``) or int16 12-bit log codes (``"log12"``); ``zeros``
    uint8 ``[out, G]``; ``scale_base``/``scale_step``: the layer's fp32 ``e0`` and ``d`` (``log12``
    only, else None).

    >>> r = gptq_codes(torch.randn(2, 32), torch.eye(32), group_size=32)
    >>> r.scale_format, r.codes.shape, r.scales.dtype, r.scale_base.dtype
    ('log12', torch.Size([2, 32]), torch.int16, torch.float32)
    """
    dequantized: torch.Tensor
    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor
    scale_format: str
    scale_base: Optional[torch.Tensor] = None
    scale_step: Optional[torch.Tensor] = None


def _grid(w: torch.Tensor, bits: int, table: Optional[torch.Tensor] = None):
    """Per-row scale, zero point, top code and stored scale of the ``bits``-bit grid covering ``w [rows, cols]``.

    ``table``: the layer's 4096 log12 scales (the scale is rounded up to one of them, stored as its
    code); None: the scale is rounded to fp16 (stored as fp16).
    """
    top = 2 ** bits - 1
    lo = w.min(1).values.clamp(max=0)
    hi = w.max(1).values.clamp(min=0)
    if table is None:
        stored = ((hi - lo) / top).clamp_min(_MIN_SCALE).half()
        scale = stored.float()
    else:
        stored = log12_round_up((hi - lo) / top, table)
        scale = table[stored]
    zero = torch.clamp(torch.round(-lo / scale), 0, top)
    return scale, zero, top, stored


def _table(weight: torch.Tensor, bits: int, group_size: int, scale_format: str):
    """``(table, e0, d)`` for ``log12`` (from the weight's RTN group scales), ``(None, None, None)`` for fp16."""
    if check_scale_format(scale_format) == "fp16":
        return None, None, None
    e0, d = log12_range(weight, bits, group_size)
    return log12_table(e0, d), e0, d


def _round(w, scale, zero, top):
    return scale * (torch.clamp(torch.round(w / scale) + zero, 0, top) - zero)


def _checks(weight: torch.Tensor, bits: int, group_size: int) -> int:
    check_int(bits, "bits", 2, 8)
    group_size = check_int(group_size, "group_size", minimum=1)
    if weight.dim() != 2:
        raise ConfigError(f"quantize a 2-D weight [out, in], got shape {tuple(weight.shape)}")
    if weight.shape[1] % group_size:
        raise ConfigError(f"group_size={group_size} does not divide the {weight.shape[1]} input columns")
    return group_size


def rtn(weight: torch.Tensor, bits: int = 4, group_size: int = 64, *, scale_format: str = "log12") -> torch.Tensor:
    """Round-to-nearest on the same per-row, per-group grid (the baseline GPTQ improves on)."""
    group_size = _checks(weight, bits, group_size)
    w = weight.detach().float()
    table = _table(w, bits, group_size, scale_format)[0]
    out = torch.empty_like(w)
    for s in range(0, w.shape[1], group_size):
        scale, zero, top, _ = _grid(w[:, s:s + group_size], bits, table)
        out[:, s:s + group_size] = _round(w[:, s:s + group_size], scale[:, None], zero[:, None], top)
    return out.to(weight.dtype)


@torch.no_grad()
def gptq(weight: torch.Tensor, hessian: torch.Tensor, bits: int = 4, group_size: int = 64, *,
         damp: float = 0.01, block: int = 128, scale_format: str = "log12") -> torch.Tensor:
    """The dequantized GPTQ weight of ``weight [out, in]`` under ``hessian [in, in]``."""
    return gptq_codes(weight, hessian, bits, group_size, damp=damp, block=block, scale_format=scale_format)[0]


@torch.no_grad()
def gptq_codes(weight: torch.Tensor, hessian: torch.Tensor, bits: int = 4, group_size: int = 64, *,
               damp: float = 0.01, block: int = 128, scale_format: str = "log12") -> GPTQCodes:
    """GPTQ of ``weight [out, in]``: a :class:`GPTQCodes` (dequantized weight, codes, scales, zeros, scale range).

    ``dequantized[:, j] == s[:, g] * (codes[:, j] - zeros[:, g])`` exactly, ``g = j // group_size``, with
    ``s = scales.float()`` (``"fp16"``) or ``s = log12_table(scale_base, scale_step)[scales]`` (``"log12"``).
    """
    group_size = _checks(weight, bits, group_size)
    damp = check_real(damp, "damp", 0.0, 1.0)
    cols = weight.shape[1]
    if hessian.shape != (cols, cols):
        raise ConfigError(f"hessian must be [{cols}, {cols}] for a weight with {cols} columns, "
                          f"got {tuple(hessian.shape)}")
    table, e0, d = _table(weight, bits, group_size, scale_format)
    w = weight.detach().float().clone()
    h = hessian.detach().double().clone()
    dead = torch.diag(h) == 0
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    h += damp * torch.diag(h).mean() * torch.eye(cols, dtype=h.dtype, device=h.device)
    u = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True).float()
    q = torch.zeros_like(w)
    codes = torch.zeros(w.shape, dtype=torch.uint8, device=w.device)
    groups = cols // group_size
    scales = torch.zeros(w.shape[0], groups, dtype=torch.float16 if table is None else torch.int16, device=w.device)
    zeros = torch.zeros(w.shape[0], groups, dtype=torch.uint8, device=w.device)
    block = max(group_size, (check_int(block, "block", minimum=1) // group_size) * group_size)
    scale = zero = top = None
    for b0 in range(0, cols, block):
        b1 = min(b0 + block, cols)
        wb, errs, ub = w[:, b0:b1].clone(), torch.zeros(w.shape[0], b1 - b0, device=w.device), u[b0:b1, b0:b1]
        for i in range(b1 - b0):
            if (b0 + i) % group_size == 0:   # the group's grid from its current (error-updated) weights
                scale, zero, top, stored = _grid(wb[:, i:i + group_size], bits, table)
                scales[:, (b0 + i) // group_size] = stored.to(scales.dtype)
                zeros[:, (b0 + i) // group_size] = zero.to(torch.uint8)
            col = wb[:, i]
            code = torch.clamp(torch.round(col / scale) + zero, 0, top)
            qc = scale * (code - zero)
            codes[:, b0 + i] = code.to(torch.uint8)
            q[:, b0 + i] = qc
            err = (col - qc) / ub[i, i]
            wb[:, i:] -= err[:, None] * ub[i, i:][None, :]
            errs[:, i] = err
        w[:, b1:] -= errs @ u[b0:b1, b1:]
    return GPTQCodes(q.to(weight.dtype), codes, scales, zeros, check_scale_format(scale_format), e0, d)


def quantized_bytes(numel: int, rows: int, cols: int, bits: int, group_size: int, scale_format: str = "log12") -> int:
    """Storage of a packed ``bits``-bit weight (the formula; :class:`~.int4.Int4Linear` measures its buffers).

    ``"fp16"``: an fp16 scale and a ``bits``-bit zero per row and group; ``"log12"``: one uint16 per
    row and group (12-bit log scale code + a zero of ``bits <= 4`` bits) and two fp32 per layer.
    """
    groups = rows * (cols // group_size)
    if check_scale_format(scale_format) == "fp16":
        return numel * bits // 8 + groups * 2 + (groups * bits + 7) // 8
    if bits > 4:
        raise ConfigError(f"log12 packs the zero point with the 12-bit scale code in 16 bits: bits must be <= 4, "
                          f"got {bits}; use scale_format='fp16'")
    return numel * bits // 8 + groups * 2 + 8
