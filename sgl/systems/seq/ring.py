"""Ring-attention context parallelism on :mod:`sgl.comm` (blockwise attention, online softmax).

Rank ``r`` of ``P`` keeps its query shard ``q_r`` (contiguous packed tokens, :func:`shard_bounds`)
and passes its ``(K, V)`` block around the ring: at step ``s`` it holds the block of rank
``(r - s) mod P``, computes the block's partial attention ``(o, lse)`` under the per-document
causal mask (global token indices, ``cu_seqlens``), merges it into its running result with the
online-softmax rule

.. math:: L = \\log(e^{L_1} + e^{L_2}),\\qquad o = e^{L_1 - L} o_1 + e^{L_2 - L} o_2,

and sends the block on to rank ``r + 1`` (one :func:`sgl.comm.all_to_all` carrying ``K`` and
``V`` together, uneven shard sizes allowed).  The shift is an autograd function whose backward
sends the block's gradient back to rank ``r - 1``, so ``dK, dV`` travel the ring in reverse
and the backward equals single-process attention's.  Fully masked blocks (the causal future)
are still computed with zero weight, so every rank runs the same sequence of collectives in
backward as in forward.

>>> import torch
>>> from sgl.systems.seq.varlen import cu_seqlens, varlen_attention
>>> q = k = v = torch.randn(5, 2, 4)
>>> cu = cu_seqlens([2, 3])
>>> torch.allclose(ring_attention(q, k, v, cu), varlen_attention(q, k, v, cu), atol=1e-6)
True
"""
from __future__ import annotations

from typing import Optional

import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.seq.varlen import _check_cu, attention_block, merge_blocks, shard_bounds, varlen_mask

__all__ = ["ring_shift", "ring_attention"]


def _shift(x: torch.Tensor, recv_rows: int, forward: bool, group) -> torch.Tensor:
    world, rank = comm.get_world_size(group), comm.get_rank(group)
    if world == 1:
        return x
    dst = (rank + 1) % world if forward else (rank - 1) % world
    src = (rank - 1) % world if forward else (rank + 1) % world
    empty = x.new_empty((0,) + tuple(x.shape[1:]))
    inputs = [x.contiguous() if j == dst else empty for j in range(world)]
    splits = [recv_rows if j == src else 0 for j in range(world)]
    return comm.all_to_all(inputs, output_splits=splits, group=group)[src]


class _RingShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, recv_rows, group):
        ctx.rows, ctx.group = x.shape[0], group
        return _shift(x, recv_rows, True, group)

    @staticmethod
    def backward(ctx, grad):
        return _shift(grad.contiguous(), ctx.rows, False, ctx.group), None, None


def ring_shift(x: torch.Tensor, recv_rows: int, group=None) -> torch.Tensor:
    """Send ``x`` to rank ``r+1``, return the ``recv_rows`` rows from rank ``r-1`` (differentiable)."""
    return _RingShift.apply(x, int(recv_rows), group)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, group=None,
                   causal: bool = True, scale: Optional[float] = None) -> torch.Tensor:
    """This rank's rows ``[T_r, H, d]`` of packed varlen attention (shards as :func:`shard_bounds`)."""
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise ConfigError(f"ring_attention wants q, k, v of one shape [tokens, heads, head_dim], got "
                          f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    world, rank = comm.get_world_size(group), comm.get_rank(group)
    cu = _check_cu(cu)
    bounds = shard_bounds(int(cu[-1]), world)
    start, stop = bounds[rank]
    if q.shape[0] != stop - start:
        raise ConfigError(f"rank {rank} holds {q.shape[0]} tokens; the packed batch of {int(cu[-1])} tokens "
                          f"over {world} ranks gives it {stop - start} (shard_bounds)")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    q_idx = torch.arange(start, stop, device=q.device)
    kv = torch.stack([k, v], dim=1)                       # [T_r, 2, H, d]: one transfer per step
    out = lse = None
    for step in range(world):
        src = (rank - step) % world
        k_idx = torch.arange(*bounds[src], device=q.device)
        o, l = attention_block(q, kv[:, 0], kv[:, 1], varlen_mask(cu, q_idx, k_idx, causal), scale)
        out, lse = (o, l) if out is None else merge_blocks(out, lse, o, l)
        if step < world - 1:
            nxt = (rank - step - 1) % world
            kv = ring_shift(kv, bounds[nxt][1] - bounds[nxt][0], group)
    return out
