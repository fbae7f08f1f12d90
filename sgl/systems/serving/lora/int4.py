"""Packed int4 weights: two 4-bit codes per byte, fp16 scales and 4-bit zeros per row and group.

A GPTQ-quantized weight ``W [out, in]`` is stored as

* ``qweight`` uint8 ``[out, in / 2]``: code ``c[:, 2i]`` in the low nibble, ``c[:, 2i + 1]`` in the high one;
* ``scales`` fp16 ``[out, G]`` and ``qzeros`` uint8 ``[out, ceil(G / 2)]`` (zeros packed the same way),
  ``G = in / group_size``;

``4 + 16 / g + 4 / g`` bits per weight (4.625 at ``g = 32``, 3.46x below bf16; 4.31 at ``g = 64``,
3.71x). :class:`Int4Linear` decodes ``W = s (c - z)`` inside its forward, for the matmul only,
and keeps no float copy; the decoded weight equals :func:`~.gptq.gptq`'s exactly, so the forward
equals ``F.linear`` with the dequantized weight.

>>> import torch
>>> from sgl.systems.serving.lora.gptq import gptq_codes
>>> g = torch.Generator().manual_seed(0)
>>> w, x = torch.randn(8, 64, generator=g), torch.randn(64, 100, generator=g)
>>> deq, codes, scales, zeros = gptq_codes(w, x @ x.T / 100, bits=4, group_size=32)
>>> lin = Int4Linear.from_codes(codes, scales, zeros, group_size=32)
>>> torch.equal(lin.dequantize(), deq), lin.qweight.shape, lin.nbytes()   # 256 + 32 + 8 bytes
(True, torch.Size([8, 32]), 296)
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["pack_int4", "unpack_int4", "Int4Linear"]


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """``[..., n]`` codes in ``[0, 15]`` -> ``[..., ceil(n / 2)]`` uint8 (even index in the low nibble)."""
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) > 15):
        raise ConfigError("int4 codes must lie in [0, 15]")
    c = codes.to(torch.uint8)
    if c.shape[-1] % 2:
        c = F.pad(c, (0, 1))
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_int4(packed: torch.Tensor, n: int) -> torch.Tensor:
    """The first ``n`` codes (uint8) of :func:`pack_int4`'s ``packed [..., ceil(n / 2)]``."""
    out = torch.stack([packed & 0x0F, packed >> 4], dim=-1).flatten(-2)
    return out[..., :n]


class Int4Linear(torch.nn.Module):
    """``y = x W^T + b`` with ``W`` held as packed int4 codes, fp16 group scales and int4 zeros.

    Args:
        in_features, out_features: the layer's shape (``group_size`` must divide ``in_features``).
        group_size: input columns per (scale, zero).
        bias: an optional float bias (kept as is).

    The buffers are on the device the module is moved to; the forward decodes the weight in
    the input's dtype for its matmul only (a transient, freed after the call).
    """

    def __init__(self, in_features: int, out_features: int, group_size: int = 32,
                 bias: Optional[torch.Tensor] = None, device=None) -> None:
        super().__init__()
        self.in_features = check_int(in_features, "in_features", minimum=1)
        self.out_features = check_int(out_features, "out_features", minimum=1)
        self.group_size = check_int(group_size, "group_size", minimum=1)
        if in_features % group_size:
            raise ConfigError(f"group_size={group_size} does not divide in_features={in_features}")
        groups = in_features // group_size
        self.register_buffer("qweight", torch.zeros(out_features, (in_features + 1) // 2, dtype=torch.uint8,
                                                    device=device))
        self.register_buffer("scales", torch.zeros(out_features, groups, dtype=torch.float16, device=device))
        self.register_buffer("qzeros", torch.zeros(out_features, (groups + 1) // 2, dtype=torch.uint8, device=device))
        self.bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None

    @classmethod
    def from_codes(cls, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, group_size: int,
                   bias: Optional[torch.Tensor] = None) -> "Int4Linear":
        """Pack ``codes [out, in]``, ``scales [out, G]`` (fp16) and ``zeros [out, G]`` (see :func:`~.gptq.gptq_codes`)."""
        out_f, in_f = codes.shape
        lin = cls(in_f, out_f, group_size, bias, device=codes.device)
        if scales.shape != lin.scales.shape or zeros.shape != lin.scales.shape:
            raise ConfigError(f"scales and zeros must be {tuple(lin.scales.shape)} for codes {tuple(codes.shape)} "
                              f"and group_size={group_size}")
        lin.qweight.copy_(pack_int4(codes))
        lin.scales.copy_(scales.to(torch.float16))
        lin.qzeros.copy_(pack_int4(zeros))
        return lin

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight ``s (c - z)`` ``[out, in]`` in ``dtype`` (a new tensor; nothing is cached)."""
        codes = unpack_int4(self.qweight, self.in_features).to(torch.float32)
        zeros = unpack_int4(self.qzeros, self.scales.shape[1]).to(torch.float32)
        g = self.group_size
        w = self.scales.to(torch.float32).repeat_interleave(g, 1) * (codes - zeros.repeat_interleave(g, 1))
        return w.to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantize(x.dtype), self.bias)

    def nbytes(self) -> int:
        """Bytes of the quantized weight, measured from the buffers' storages (bias excluded)."""
        return sum(b.untyped_storage().nbytes() for b in (self.qweight, self.scales, self.qzeros))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}"
