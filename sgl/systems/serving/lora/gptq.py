"""GPTQ: layer-wise weight quantization that compensates each rounding error on later columns.

For a linear layer ``y = W x`` with calibration inputs ``X`` the layer's loss is
``||W X - Q X||^2 = tr((W - Q) H (W - Q)^T)``, ``H = X X^T / n``. GPTQ quantizes the columns
of ``W`` in order; after rounding column ``i`` to ``q_i`` it spreads the error over the columns
not yet quantized with the inverse Hessian ``U = chol(H^{-1})^T`` (upper):

    e = (w_i - q_i) / U_ii,    W[:, j] -= e U_ij   for j > i.

Quantization is asymmetric, ``bits``-bit, per row and per group of ``group_size`` columns:
``q = s (clamp(round(w / s) + z, 0, 2^b - 1) - z)`` with ``s`` rounded to fp16 (the stored
scale, so the packed int4 form of :mod:`~.int4` decodes to exactly these weights).
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

import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["gptq", "gptq_codes", "rtn", "quantized_bytes"]

#: the smallest normal fp16: scales are stored in fp16, so the grid uses fp16-representable ones
_MIN_SCALE = 2.0 ** -14


def _grid(w: torch.Tensor, bits: int):
    """Per-row scale and zero point of the asymmetric ``bits``-bit grid covering ``w [rows, cols]``."""
    top = 2 ** bits - 1
    lo = w.min(1).values.clamp(max=0)
    hi = w.max(1).values.clamp(min=0)
    scale = ((hi - lo) / top).clamp_min(_MIN_SCALE).half().float()
    zero = torch.clamp(torch.round(-lo / scale), 0, top)
    return scale, zero, top


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


def rtn(weight: torch.Tensor, bits: int = 4, group_size: int = 64) -> torch.Tensor:
    """Round-to-nearest on the same per-row, per-group grid (the baseline GPTQ improves on)."""
    group_size = _checks(weight, bits, group_size)
    w = weight.detach().float()
    out = torch.empty_like(w)
    for s in range(0, w.shape[1], group_size):
        scale, zero, top = _grid(w[:, s:s + group_size], bits)
        out[:, s:s + group_size] = _round(w[:, s:s + group_size], scale[:, None], zero[:, None], top)
    return out.to(weight.dtype)


@torch.no_grad()
def gptq(weight: torch.Tensor, hessian: torch.Tensor, bits: int = 4, group_size: int = 64, *,
         damp: float = 0.01, block: int = 128) -> torch.Tensor:
    """The dequantized GPTQ weight of ``weight [out, in]`` under ``hessian [in, in]``."""
    return gptq_codes(weight, hessian, bits, group_size, damp=damp, block=block)[0]


@torch.no_grad()
def gptq_codes(weight: torch.Tensor, hessian: torch.Tensor, bits: int = 4, group_size: int = 64, *,
               damp: float = 0.01, block: int = 128):
    """GPTQ of ``weight [out, in]``: ``(dequantized, codes uint8 [out, in], scales fp16 [out, G], zeros uint8 [out, G])``.

    ``dequantized[:, j] == scales[:, g].float() * (codes[:, j] - zeros[:, g])`` exactly, ``g = j // group_size``.
    """
    group_size = _checks(weight, bits, group_size)
    damp = check_real(damp, "damp", 0.0, 1.0)
    cols = weight.shape[1]
    if hessian.shape != (cols, cols):
        raise ConfigError(f"hessian must be [{cols}, {cols}] for a weight with {cols} columns, "
                          f"got {tuple(hessian.shape)}")
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
    scales = torch.zeros(w.shape[0], groups, dtype=torch.float16, device=w.device)
    zeros = torch.zeros(w.shape[0], groups, dtype=torch.uint8, device=w.device)
    block = max(group_size, (check_int(block, "block", minimum=1) // group_size) * group_size)
    scale = zero = top = None
    for b0 in range(0, cols, block):
        b1 = min(b0 + block, cols)
        wb, errs, ub = w[:, b0:b1].clone(), torch.zeros(w.shape[0], b1 - b0, device=w.device), u[b0:b1, b0:b1]
        for i in range(b1 - b0):
            if (b0 + i) % group_size == 0:   # the group's grid from its current (error-updated) weights
                scale, zero, top = _grid(wb[:, i:i + group_size], bits)
                scales[:, (b0 + i) // group_size] = scale.half()
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
    return q.to(weight.dtype), codes, scales, zeros


def quantized_bytes(numel: int, rows: int, cols: int, bits: int, group_size: int) -> int:
    """Storage of a packed ``bits``-bit weight with an fp16 scale and a ``bits``-bit zero per row and group
    (the formula; :class:`~.int4.Int4Linear` measures its buffers)."""
    groups = rows * (cols // group_size)
    return numel * bits // 8 + groups * 2 + (groups * bits + 7) // 8
