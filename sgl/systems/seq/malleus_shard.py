"""Which part of a :class:`~sgl.systems.runtime.tiny_lm.TinyLM` each rank holds under a Malleus plan.

A :class:`~sgl.systems.seq.malleus.MalleusPlan` gives every pipeline its stages (TP groups of any
size) and every stage its layers.  The model's parameters are listed once, in a canonical order
(:func:`param_layout`): unit ``"embed"`` (the embedding), units ``0 … L-1`` (the layers) and unit
``"head"`` (final norm + LM head).  Inside a TP group of ``t`` devices, member ``k`` holds rows
``[k·n/t, (k+1)·n/t)`` of the column-parallel matrices (``q``, ``k``, ``v``, ``w1``, ``w3``: whole
heads, Megatron's split) and the same columns of the row-parallel ones (``o``, ``w2``); norms,
the embedding and the head are replicated inside the group.  A :class:`Holding` is one rank's
share; :func:`build_stage` cuts it out of the full seeded model.

Why not DTensor's ``parallelize_module``: Malleus puts TP groups of *different sizes* side by side
(a stage of 2 devices feeding a stage of 1), which one device mesh cannot describe; the two
Megatron collectives (identity forward / all-reduce backward, and the reverse) are written here.

>>> layout = param_layout(_tiny(), ["embed", 0, "head"])
>>> [(p.unit, p.name, p.kind) for p in layout][:3]
[('embed', 'weight', 'rep'), (0, 'ln1.weight', 'rep'), (0, 'ln1.bias', 'rep')]
>>> Holding(0, 0, 2, [0], False, False).slice_of(layout[3])   # q.weight: first half of the rows
(slice(0, 32, None), slice(None, None, None))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl import comm
from sgl.systems.parallel.model import TransformerConfig
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock

__all__ = ["ParamSpec", "Holding", "param_layout", "build_stage", "StageModule", "reduce_gradients"]

Unit = Union[str, int]
_COL = ("q.weight", "k.weight", "v.weight", "w1.weight", "w3.weight")
_ROW = ("o.weight", "w2.weight")


def _tiny() -> TransformerConfig:
    return TransformerConfig("tiny", 2, 64, 4, 128, 256, 32)


@dataclass(frozen=True)
class ParamSpec:
    """One full parameter: its unit, its name inside the unit, full shape, split kind, flat offset."""

    unit: Unit
    name: str
    shape: Tuple[int, ...]
    kind: str            # "col" (rows split), "row" (columns split) or "rep" (replicated in a TP group)
    offset: int

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def split_dim(self) -> int:
        return 1 if self.kind == "row" else 0


def _unit_params(cfg: TransformerConfig, unit: Unit) -> List[Tuple[str, Tuple[int, ...], str]]:
    h, f, v = cfg.hidden_size, cfg.ffn_hidden_size, cfg.vocab_size
    if unit == "embed":
        return [("weight", (v, h), "rep")]
    if unit == "head":
        return [("norm.weight", (h,), "rep"), ("norm.bias", (h,), "rep"), ("head.weight", (v, h), "rep")]
    out = [("ln1.weight", (h,), "rep"), ("ln1.bias", (h,), "rep")]
    out += [(f"{n}.weight", (h, h), "col") for n in ("q", "k", "v")] + [("o.weight", (h, h), "row")]
    out += [("ln2.weight", (h,), "rep"), ("ln2.bias", (h,), "rep"), ("w1.weight", (f, h), "col")]
    if cfg.gated_mlp:
        out.append(("w3.weight", (f, h), "col"))
    return out + [("w2.weight", (h, f), "row")]


def param_layout(cfg: TransformerConfig, units: Optional[Sequence[Unit]] = None) -> List[ParamSpec]:
    """Every parameter of ``units`` (default: the whole model) in canonical order with flat offsets."""
    units = ["embed", *range(cfg.num_layers), "head"] if units is None else list(units)
    out, offset = [], 0
    for u in units:
        for name, shape, kind in _unit_params(cfg, u):
            spec = ParamSpec(u, name, shape, kind, offset)
            out.append(spec)
            offset += spec.numel
    return out


@dataclass(frozen=True)
class Holding:
    """One rank's share: member ``k`` of a TP group of ``t``, its ``layers``, embedding / head flags."""

    pipeline: int
    k: int
    t: int
    layers: Tuple[int, ...]
    first: bool
    last: bool

    def __init__(self, pipeline: int, k: int, t: int, layers: Sequence[int], first: bool, last: bool) -> None:
        for name, value in (("pipeline", pipeline), ("k", k), ("t", t), ("layers", tuple(layers)),
                            ("first", first), ("last", last)):
            object.__setattr__(self, name, value)

    @property
    def units(self) -> List[Unit]:
        return (["embed"] if self.first else []) + list(self.layers) + (["head"] if self.last else [])

    def interval(self, spec: ParamSpec) -> Tuple[int, int]:
        """``[lo, hi)`` along ``spec``'s split dimension that this holding keeps."""
        n = spec.shape[spec.split_dim]
        if spec.kind == "rep":
            return 0, n
        return self.k * n // self.t, (self.k + 1) * n // self.t

    def slice_of(self, spec: ParamSpec) -> Tuple[slice, ...]:
        lo, hi = self.interval(spec)
        full = slice(None)
        if spec.kind == "rep":
            return (full,) * len(spec.shape)
        return (slice(lo, hi), full) if spec.split_dim == 0 else (full, slice(lo, hi))


class _CopyToGroup(torch.autograd.Function):
    """Identity forward, all-reduce backward (Megatron's ``f``): the input of column-parallel layers."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[override]
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return _timed_all_reduce(grad.contiguous().clone(), ctx.group), None


class _ReduceFromGroup(torch.autograd.Function):
    """All-reduce forward, identity backward (Megatron's ``g``): the output of row-parallel layers."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[override]
        return _timed_all_reduce(x.contiguous().clone(), group)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return grad, None


#: seconds spent in TP all-reduces since the last reset (subtracted from compute time for the rates)
COMM_SECONDS = [0.0]


def _timed_all_reduce(x: torch.Tensor, group) -> torch.Tensor:
    import time

    t0 = time.perf_counter()
    comm.all_reduce(x, op="sum", group=group)
    COMM_SECONDS[0] += time.perf_counter() - t0
    return x


def _tp_block(block: TransformerBlock, x: torch.Tensor, group) -> torch.Tensor:
    """:meth:`TransformerBlock._forward` on a head / FFN shard with the two TP collectives."""
    b, s, _ = x.shape
    y = _CopyToGroup.apply(block.ln1(x), group)
    q = block.q(y).view(b, s, -1, block.head_dim).transpose(1, 2)
    k = block.k(y).view(b, s, -1, block.head_dim).transpose(1, 2)
    v = block.v(y).view(b, s, -1, block.head_dim).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + _ReduceFromGroup.apply(block.o(a.transpose(1, 2).reshape(b, s, -1)), group)
    y = _CopyToGroup.apply(block.ln2(x), group)
    hidden = F.silu(block.w1(y)) * block.w3(y) if block.w3 is not None else F.gelu(block.w1(y))
    return x + _ReduceFromGroup.apply(block.w2(hidden), group)


class StageModule(nn.Module):
    """This rank's stage: embedding (first stage), its layer shards, norm + head (last stage)."""

    def __init__(self, embed: Optional[nn.Embedding], blocks: Dict[int, TransformerBlock],
                 norm: Optional[nn.LayerNorm], head: Optional[nn.Linear], group, t: int) -> None:
        super().__init__()
        self.embed, self.norm, self.head = embed, norm, head
        self.layer_ids = sorted(blocks)
        self.blocks = nn.ModuleList(blocks[i] for i in self.layer_ids)
        self.group, self.t = group, t

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for block in self.blocks:
            x = block(x) if self.t == 1 else _tp_block(block, x, self.group)
        if self.head is not None:
            x = self.head(self.norm(x))
        return x

    def param_map(self) -> Dict[Tuple[Unit, str], nn.Parameter]:
        """``(unit, name) -> parameter`` in the canonical naming of :func:`param_layout`."""
        out: Dict[Tuple[Unit, str], nn.Parameter] = {}
        if self.embed is not None:
            out[("embed", "weight")] = self.embed.weight
        for i, block in zip(self.layer_ids, self.blocks):
            for name, p in block.named_parameters():
                out[(i, name)] = p
        if self.head is not None:
            out[("head", "norm.weight")] = self.norm.weight
            out[("head", "norm.bias")] = self.norm.bias
            out[("head", "head.weight")] = self.head.weight
        return out


def build_stage(cfg: TransformerConfig, holding: Holding, values: Dict[Tuple[Unit, str], torch.Tensor],
                group, device: torch.device, dtype: torch.dtype) -> StageModule:
    """A :class:`StageModule` whose parameters are ``values`` (already this holding's shards)."""
    small = TransformerConfig(cfg.name, 1, cfg.hidden_size, cfg.num_heads, cfg.ffn_hidden_size // holding.t,
                              cfg.vocab_size, cfg.seq_length, gated_mlp=cfg.gated_mlp)
    blocks = {i: TransformerBlock(small) for i in holding.layers}
    embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size) if holding.first else None
    norm = nn.LayerNorm(cfg.hidden_size) if holding.last else None
    head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False) if holding.last else None
    stage = StageModule(embed, blocks, norm, head, group, holding.t).to(device=device, dtype=dtype)
    for key, p in stage.param_map().items():
        value = values[key]
        # the shard's shape replaces the module's full-size default (q/k/v/o keep `hidden` columns/rows)
        p.data = value.detach().to(device=device, dtype=dtype).clone()
    return stage


def full_values(model: TinyLM) -> Dict[Tuple[Unit, str], torch.Tensor]:
    """``(unit, name) -> tensor`` of a whole model, canonical naming."""
    out: Dict[Tuple[Unit, str], torch.Tensor] = {("embed", "weight"): model.embed.weight.detach()}
    for i, block in enumerate(model.blocks):
        for name, p in block.named_parameters():
            out[(i, name)] = p.detach()
    out[("head", "norm.weight")] = model.norm.weight.detach()
    out[("head", "norm.bias")] = model.norm.bias.detach()
    out[("head", "head.weight")] = model.head.weight.detach()
    return out


def reduce_gradients(stage: Optional[StageModule], holding: Optional[Holding], layout: Sequence[ParamSpec],
                     device: torch.device, dtype: torch.dtype) -> None:
    """Sum every parameter's gradient over all pipelines, whatever their TP split, into each shard.

    Each rank writes its shards' gradients into a zero buffer of the whole model's size (a
    replicated parameter once per TP group, by member 0), one world all-reduce sums them, and each
    rank reads its shards back: the DP sum of the gradients of pipelines that hold a layer at
    different TP degrees.
    """
    total = layout[-1].offset + layout[-1].numel
    buf = torch.zeros(total, device=device, dtype=dtype)
    params = stage.param_map() if stage is not None else {}
    specs = {(s.unit, s.name): s for s in layout}
    for key, p in params.items():
        spec = specs[key]
        if p.grad is None or (spec.kind == "rep" and holding.k != 0):
            continue
        buf[spec.offset:spec.offset + spec.numel].view(spec.shape)[holding.slice_of(spec)] += p.grad
    comm.all_reduce(buf, op="sum")
    for key, p in params.items():
        spec = specs[key]
        p.grad = buf[spec.offset:spec.offset + spec.numel].view(spec.shape)[holding.slice_of(spec)].clone()
