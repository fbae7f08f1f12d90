"""Group-scale formats of the packed base: ``fp16`` values or ``log12`` codes ("double-quantised" scales).

``fp16`` stores each group's scale as an fp16 number (16 bits, plus a separate ``bits``-bit zero).
``log12`` stores a 12-bit code ``k`` of the scale in the log domain,

    s = 2 ** (e0 + k d),    k in [0, 4095],

with two fp32 numbers per layer: the base exponent ``e0`` and the step ``d``. :func:`log12_range`
picks them from the layer's round-to-nearest group scales ``(max - min) / (2^b - 1)`` widened by a
``margin`` (in octaves) on both sides, since GPTQ later sets each group's scale from error-updated
weights: ``d = (e_max - e0) / 4095`` (``d <= 1/256`` -- a relative step ``<= 0.27 %`` -- whenever the
scales span at most ``16 - 2 margin`` octaves). :func:`log12_round_up` maps a wanted scale to the
smallest code whose scale is ``>=`` it (the grid still covers the group; clamped at both ends), so
a quantizer that uses the returned scale decodes *exactly* from the stored code. The table of
the 4096 scales (:func:`log12_table`) is computed in one call, in float64 rounded to fp32, and
both GPTQ and :class:`~.int4.Int4Linear` index it, so a scale never depends on where an fp32
``exp2`` kernel would put an element (vectorised body or scalar tail); float64 also makes a table
computed on another device all but certain to round to the same fp32 values (exactness is tested
on the CPU).

>>> import torch
>>> w = torch.tensor([[0.5, -1.0, 2.0, 0.0], [0.01, 0.0, -0.02, 0.03]])
>>> e0, d = log12_range(w, bits=4, group_size=4)
>>> table = log12_table(e0, d)
>>> raw = torch.tensor([0.2, 0.0033])
>>> code = log12_round_up(raw, table)
>>> bool((table[code] >= raw).all()), bool((table[code - 1] < raw).all())
(True, True)
"""
from __future__ import annotations

from typing import Tuple

import torch

from sgl._checks import check_choice, check_real
from sgl.errors import ConfigError

__all__ = ["SCALE_FORMATS", "LOG12_LEVELS", "check_scale_format", "log12_range", "log12_table", "log12_round_up"]

#: the supported formats of the per-group scales
SCALE_FORMATS = ("log12", "fp16")
#: number of 12-bit log-scale codes
LOG12_LEVELS = 4096
#: widest step allowed: a 2.2 % relative step, 128 octaves over the 4096 codes
_MAX_STEP = 1.0 / 32
#: highest representable exponent: fp32 overflows at 2 ** 128
_MAX_EXPONENT = 127.0


def check_scale_format(scale_format: str) -> str:
    """``scale_format`` if it is one of :data:`SCALE_FORMATS`, else a ConfigError."""
    return check_choice(scale_format, "scale_format", SCALE_FORMATS)


def group_scales(weight: torch.Tensor, bits: int, group_size: int) -> torch.Tensor:
    """Round-to-nearest scales ``(max(w, 0) - min(w, 0)) / (2^b - 1)`` per row and group ``[out, G]`` (fp32)."""
    w = weight.detach().float().reshape(weight.shape[0], -1, group_size)
    lo = w.amin(-1).clamp(max=0)
    hi = w.amax(-1).clamp(min=0)
    return (hi - lo) / (2 ** bits - 1)


def log12_range(weight: torch.Tensor, bits: int, group_size: int, margin: float = 1.0
                ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The layer's ``(e0, d)`` (fp32 0-dim tensors on ``weight``'s device) covering its group scales.

    ``[e0, e0 + 4095 d]`` spans ``[log2 min, log2 max]`` of the positive RTN group scales of
    ``weight [out, in]`` widened by ``margin`` octaves on each side. Raises ConfigError when the
    weight is not finite or its scales cannot be represented (a step over 1/32 or an fp32 overflow).
    """
    margin = check_real(margin, "margin", 0.0, 16.0)
    if not bool(torch.isfinite(weight).all()):
        raise ConfigError("the weight has inf or NaN entries; log12 scales need a finite weight")
    raw = group_scales(weight, bits, group_size)
    pos = raw[raw > 0]
    if pos.numel() == 0:                    # an all-zero weight: every code decodes it exactly
        lo_e, hi_e = -24.0, -24.0 + 2 * margin + 1.0
    else:
        lo_e = float(torch.log2(pos.min())) - margin
        hi_e = float(torch.log2(pos.max())) + margin
    if hi_e - lo_e <= 0:
        hi_e = lo_e + 1.0
    step = (hi_e - lo_e) / (LOG12_LEVELS - 1)
    if step > _MAX_STEP or hi_e > _MAX_EXPONENT:
        raise ConfigError(f"the layer's group scales span 2^{lo_e + margin:.1f}..2^{hi_e - margin:.1f}: "
                          f"log12 codes cover at most {(LOG12_LEVELS - 1) * _MAX_STEP:.0f} octaves below "
                          f"2^{_MAX_EXPONENT:.0f}; use scale_format='fp16' or rescale the weight")
    dev = weight.device
    return (torch.tensor(lo_e, dtype=torch.float32, device=dev), torch.tensor(step, dtype=torch.float32, device=dev))


def log12_table(e0: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """The 4096 fp32 scales ``2 ** (e0 + k d)`` (computed in float64, on ``e0``'s device)."""
    wide = torch.float32 if e0.device.type == "mps" else torch.float64   # MPS has no float64
    k = torch.arange(LOG12_LEVELS, dtype=wide, device=e0.device)
    return torch.exp2(e0.to(wide) + k * d.to(wide)).float()


def log12_round_up(scale: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The smallest code ``k`` (int64) with ``table[k] >= scale``, clamped to ``[0, 4095]``."""
    return torch.searchsorted(table, scale.float().contiguous()).clamp_(max=LOG12_LEVELS - 1)
