"""OSDP's operator splitting: a linear layer computed as ``k`` slices along its input dimension.

OSDP (IJCAI'23) lowers the peak memory of a ZeRO-3 layer by splitting each of its matrices
``W`` (``out x in``) into ``k`` column blocks ``W_j`` and computing

.. math:: y = x W^T + b = \\sum_{j=1}^{k} x_{[:, j]} W_j^T + b

one slice after the other.  :class:`SplitLinear` holds the slices as separate
:class:`torch.nn.Linear` modules; :func:`split_linears` replaces every ``nn.Linear`` of a layer
by one (keeping the weights) and returns the slices, which the executor shards with FSDP2 one
by one, so only one slice's full weight is gathered at a time.

>>> import torch
>>> lin = torch.nn.Linear(8, 3)
>>> split = SplitLinear.from_linear(lin, 4)
>>> x = torch.randn(2, 8)
>>> torch.allclose(split(x), lin(x), atol=1e-6), len(split.slices)
(True, 4)
"""
from __future__ import annotations

from typing import List

import torch
import torch.nn as nn

from sgl.errors import PlanError

__all__ = ["SplitLinear", "split_linears"]


class SplitLinear(nn.Module):
    """``sum_j slices[j](x[..., block j])``: a linear layer split along its input features."""

    def __init__(self, slices: List[nn.Linear]) -> None:
        super().__init__()
        self.slices = nn.ModuleList(slices)
        self.sizes = [s.in_features for s in slices]

    @classmethod
    def from_linear(cls, linear: nn.Linear, parts: int) -> "SplitLinear":
        """Split ``linear`` into ``parts`` slices (its bias goes to the first one)."""
        if parts < 1 or linear.in_features % parts:
            raise PlanError(f"OSDP split {parts} does not divide the {linear.in_features} input features of a "
                            "linear layer; use a split that divides the layer's widths")
        width = linear.in_features // parts
        slices = []
        for j in range(parts):
            bias = linear.bias is not None and j == 0
            s = nn.Linear(width, linear.out_features, bias=bias, device=linear.weight.device,
                          dtype=linear.weight.dtype)
            with torch.no_grad():
                s.weight.copy_(linear.weight[:, j * width:(j + 1) * width])
                if bias:
                    s.bias.copy_(linear.bias)
            slices.append(s)
        return cls(slices)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = None
        for s, piece in zip(self.slices, x.split(self.sizes, dim=-1)):
            y = s(piece)
            out = y if out is None else out + y
        return out


def split_linears(layer: nn.Module, parts: int) -> List[nn.Linear]:
    """Replace every ``nn.Linear`` inside ``layer`` by a :class:`SplitLinear`; return all slices."""
    targets = [(name, mod) for name, mod in layer.named_modules() if type(mod) is nn.Linear]
    if not targets:
        raise PlanError(f"OSDP split {parts} asked for a layer without nn.Linear matrices ({type(layer).__name__})")
    slices: List[nn.Linear] = []
    for name, mod in targets:
        parent_name, _, child = name.rpartition(".")
        parent = layer.get_submodule(parent_name) if parent_name else layer
        split = SplitLinear.from_linear(mod, parts)
        setattr(parent, child, split)
        slices.extend(split.slices)
    return slices
