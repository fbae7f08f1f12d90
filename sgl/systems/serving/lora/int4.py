"""Packed int4 weights: two 4-bit codes per byte, per row and group a scale and a 4-bit zero.

A GPTQ-quantized weight ``W [out, in]`` is stored as ``qweight`` uint8 ``[out, in / 2]`` (code
``c[:, 2i]`` in the low nibble, ``c[:, 2i + 1]`` in the high one) plus, ``G = in / group_size``,
per ``scale_format`` (:mod:`~.scales`):

* ``"log12"`` (default): ``qparams`` uint16 ``[out, G]`` holding ``k << 4 | z`` (the 12-bit log
  scale code ``k`` and the 4-bit zero ``z``) and two fp32 0-dim buffers ``scale_base`` (``e0``) and
  ``scale_step`` (``d``), ``s = 2 ** (e0 + k d)``: ``4 + 16 / g`` bits per weight plus 8 bytes per
  layer (4.5 at ``g = 32``, 3.56x below bf16 for a large layer);
* ``"fp16"``: ``scales`` fp16 ``[out, G]`` and ``qzeros`` uint8 ``[out, ceil(G / 2)]`` (zeros packed
  like the codes): ``4 + 20 / g`` bits per weight (4.625 at ``g = 32``, 3.46x below bf16).

:class:`Int4Linear` decodes ``W = s (c - z)`` inside its forward, for the matmul only, and keeps
no float copy; the decoded weight equals :func:`~.gptq.gptq`'s exactly (same scale format), so
the forward equals ``F.linear`` with the dequantized weight. A dtype cast of the module moves
the scale buffers but keeps their dtype (fp16 scales, fp32 ``e0`` / ``d``).

>>> import torch
>>> from sgl.systems.serving.lora.gptq import gptq_codes
>>> g = torch.Generator().manual_seed(0)
>>> w, x = torch.randn(8, 64, generator=g), torch.randn(64, 100, generator=g)
>>> r = gptq_codes(w, x @ x.T / 100, bits=4, group_size=32)
>>> lin = Int4Linear.from_codes(r.codes, r.scales, r.zeros, group_size=32,
...                             scale_base=r.scale_base, scale_step=r.scale_step)
>>> torch.equal(lin.dequantize(), r.dequantized), lin.qparams.shape, lin.nbytes()   # 256 + 32 + 8 bytes
(True, torch.Size([8, 2]), 296)
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from sgl._checks import check_int
from sgl.errors import ConfigError
from sgl.systems.serving.lora.scales import LOG12_LEVELS, check_scale_format, log12_table

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
    """``y = x W^T + b`` with ``W`` held as packed int4 codes, per-group scales and int4 zeros.

    Args:
        in_features, out_features: the layer's shape (``group_size`` must divide ``in_features``).
        group_size: input columns per (scale, zero).
        bias: an optional float bias (kept as is).
        scale_format: ``"log12"`` (12-bit log scale codes packed with the zeros in uint16, two fp32
            per layer) or ``"fp16"`` (fp16 scales, zeros packed two per byte).

    The buffers are on the device the module is moved to; the forward decodes the weight in
    the input's dtype for its matmul only (a transient, freed after the call).

    >>> import torch
    >>> lin = Int4Linear(256, 8)                     # all codes 0: a zero weight until filled
    >>> lin(torch.ones(2, 256)).abs().sum().item(), lin.nbytes(), Int4Linear(256, 8, scale_format="fp16").nbytes()
    (0.0, 1160, 1184)
    """

    def __init__(self, in_features: int, out_features: int, group_size: int = 32,
                 bias: Optional[torch.Tensor] = None, device=None, scale_format: str = "log12") -> None:
        super().__init__()
        self.in_features = check_int(in_features, "in_features", minimum=1)
        self.out_features = check_int(out_features, "out_features", minimum=1)
        self.group_size = check_int(group_size, "group_size", minimum=1)
        self.scale_format = check_scale_format(scale_format)
        if in_features % group_size:
            raise ConfigError(f"group_size={group_size} does not divide in_features={in_features}")
        self.groups = groups = in_features // group_size
        self.register_buffer("qweight", torch.zeros(out_features, (in_features + 1) // 2, dtype=torch.uint8,
                                                    device=device))
        if self.scale_format == "fp16":
            self.register_buffer("scales", torch.zeros(out_features, groups, dtype=torch.float16, device=device))
            self.register_buffer("qzeros", torch.zeros(out_features, (groups + 1) // 2, dtype=torch.uint8,
                                                       device=device))
        else:
            self.register_buffer("qparams", torch.zeros(out_features, groups, dtype=torch.uint16, device=device))
            self.register_buffer("scale_base", torch.zeros((), dtype=torch.float32, device=device))
            self.register_buffer("scale_step", torch.zeros((), dtype=torch.float32, device=device))
        self.bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None

    @classmethod
    def from_codes(cls, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, group_size: int,
                   bias: Optional[torch.Tensor] = None, *, scale_format: str = "log12",
                   scale_base: Optional[torch.Tensor] = None, scale_step: Optional[torch.Tensor] = None
                   ) -> "Int4Linear":
        """Pack ``codes [out, in]``, ``scales [out, G]`` and ``zeros [out, G]`` (see :func:`~.gptq.gptq_codes`).

        ``scales``: fp16 values for ``"fp16"``; 12-bit codes for ``"log12"``, which also needs the
        layer's ``scale_base`` and ``scale_step`` (``e0``, ``d``).
        """
        out_f, in_f = codes.shape
        lin = cls(in_f, out_f, group_size, bias, device=codes.device, scale_format=scale_format)
        shape = (out_f, lin.groups)
        if tuple(scales.shape) != shape or tuple(zeros.shape) != shape:
            raise ConfigError(f"scales and zeros must be {shape} for codes {tuple(codes.shape)} "
                              f"and group_size={group_size}, got {tuple(scales.shape)} and {tuple(zeros.shape)}")
        lin.qweight.copy_(pack_int4(codes))
        if lin.scale_format == "fp16":
            if scale_base is not None or scale_step is not None:
                raise ConfigError("scale_base/scale_step apply to scale_format='log12' only")
            lin.scales.copy_(scales.to(torch.float16))
            lin.qzeros.copy_(pack_int4(zeros))
            return lin
        if scale_base is None or scale_step is None:
            raise ConfigError("scale_format='log12' needs the layer's scale_base and scale_step "
                              "(GPTQCodes.scale_base / .scale_step of gptq_codes(..., scale_format='log12'))")
        if scales.is_floating_point():
            raise ConfigError("scale_format='log12' takes integer scale codes in [0, 4095], got float scales")
        k, z = scales.to(torch.int32), zeros.to(torch.int32)
        if k.numel() and (int(k.min()) < 0 or int(k.max()) >= LOG12_LEVELS):
            raise ConfigError(f"log12 scale codes must lie in [0, {LOG12_LEVELS - 1}]")
        if z.numel() and (int(z.min()) < 0 or int(z.max()) > 15):
            raise ConfigError("int4 zeros must lie in [0, 15]")
        lin.qparams.copy_(((k << 4) | z).to(torch.uint16))
        lin.scale_base.copy_(torch.as_tensor(scale_base, dtype=torch.float32))
        lin.scale_step.copy_(torch.as_tensor(scale_step, dtype=torch.float32))
        return lin

    #: buffers whose dtype is part of the format: a dtype cast of the module (``.to(torch.bfloat16)``)
    #: moves them but keeps their dtype, so the decoded weight stays exact
    _EXACT = ("scales", "scale_base", "scale_step")

    def _apply(self, fn, recurse=True):
        keep = {n: b for n, b in self._buffers.items() if n in self._EXACT and b is not None}
        super()._apply(fn, recurse)
        for n, old in keep.items():
            if self._buffers[n].dtype != old.dtype:
                self._buffers[n] = old.to(device=self._buffers[n].device)
        return self

    def _scales_zeros(self):
        """Per row and group: the fp32 scales and zeros ``[out, G]``."""
        if self.scale_format == "fp16":
            return self.scales.to(torch.float32), unpack_int4(self.qzeros, self.groups).to(torch.float32)
        p = self.qparams.to(torch.int32)
        scales = log12_table(self.scale_base, self.scale_step)[(p >> 4).long()]
        return scales, (p & 0x0F).to(torch.float32)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The weight ``s (c - z)`` ``[out, in]`` in ``dtype`` (a new tensor; nothing is cached)."""
        codes = unpack_int4(self.qweight, self.in_features).to(torch.float32)
        scales, zeros = self._scales_zeros()
        g = self.group_size
        w = scales.repeat_interleave(g, 1) * (codes - zeros.repeat_interleave(g, 1))
        return w.to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantize(x.dtype), self.bias)

    def nbytes(self) -> int:
        """Bytes of the quantized weight, measured from the buffers' storages (bias excluded)."""
        return sum(b.untyped_storage().nbytes() for name, b in self.named_buffers(recurse=False))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}, "
                f"scale_format={self.scale_format!r}")
