"""Ulysses sequence parallelism on :mod:`sgl.comm`: all-to-all between sequence and head shards.

Each of ``P`` ranks holds a contiguous slice of the packed sequence, ``x_r`` of shape
``[T_r, H, d]``.  :func:`seq_to_heads` is one all-to-all after which rank ``r`` holds *all*
``T = Σ T_r`` tokens for its ``H/P`` heads (``[T, H/P, d]``: rank ``r`` sends head chunk ``j``
of its tokens to rank ``j``, and concatenates what it receives in rank order); attention then
runs locally and exactly, and :func:`heads_to_seq` (the inverse all-to-all) brings the output
back to the sequence layout.  Both are autograd functions whose backward is the other one, so
gradients flow through the exchange:

.. math:: \\mathrm{out}_r = \\mathrm{A2A}^{-1}\\bigl(\\mathrm{Attn}_{\\text{varlen}}(\\mathrm{A2A}(q),
          \\mathrm{A2A}(k), \\mathrm{A2A}(v))\\bigr)_r .

Uneven sequence shards are fine (``sgl.comm.all_to_all`` takes uneven splits); ``H`` must be
divisible by ``P``.  In one process (no :func:`sgl.comm.init`) both maps are the identity.

>>> import torch
>>> from sgl.systems.seq.varlen import cu_seqlens, varlen_attention
>>> q = k = v = torch.randn(6, 4, 8)
>>> cu = cu_seqlens([4, 2])
>>> torch.allclose(ulysses_attention(q, k, v, cu), varlen_attention(q, k, v, cu))
True
"""
from __future__ import annotations

from typing import List

import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.seq.varlen import _check_cu, shard_bounds, varlen_attention

__all__ = ["seq_to_heads", "heads_to_seq", "ulysses_attention"]


def _world(group) -> int:
    return comm.get_world_size(group)


def _seq_to_heads(x: torch.Tensor, sizes: List[int], group) -> torch.Tensor:
    world = _world(group)
    if world == 1:
        return x
    heads = x.shape[1]
    if heads % world:
        raise ConfigError(f"Ulysses needs the head count ({heads}) divisible by the SP degree ({world})")
    chunks = [c.contiguous() for c in x.chunk(world, dim=1)]
    got = comm.all_to_all(chunks, group=group)
    if [g.shape[0] for g in got] != sizes:
        raise ConfigError(f"Ulysses shards hold {[g.shape[0] for g in got]} tokens, expected {sizes}")
    return torch.cat(got, dim=0)


def _heads_to_seq(y: torch.Tensor, sizes: List[int], group) -> torch.Tensor:
    world = _world(group)
    if world == 1:
        return y
    pieces = [p.contiguous() for p in y.split(sizes, dim=0)]
    got = comm.all_to_all(pieces, group=group)
    return torch.cat(got, dim=1)


class _SeqToHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, sizes, group):
        ctx.sizes, ctx.group = sizes, group
        return _seq_to_heads(x, sizes, group)

    @staticmethod
    def backward(ctx, grad):
        return _heads_to_seq(grad.contiguous(), ctx.sizes, ctx.group), None, None


class _HeadsToSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, sizes, group):
        ctx.sizes, ctx.group = sizes, group
        return _heads_to_seq(y, sizes, group)

    @staticmethod
    def backward(ctx, grad):
        return _seq_to_heads(grad.contiguous(), ctx.sizes, ctx.group), None, None


def seq_to_heads(x: torch.Tensor, sizes: List[int], group=None) -> torch.Tensor:
    """``[T_r, H, d]`` on every rank → ``[Σ T, H/P, d]`` (``sizes`` = every rank's ``T_r``)."""
    return _SeqToHeads.apply(x, list(sizes), group)


def heads_to_seq(y: torch.Tensor, sizes: List[int], group=None) -> torch.Tensor:
    """Inverse of :func:`seq_to_heads`: ``[Σ T, H/P, d]`` → ``[T_r, H, d]``."""
    return _HeadsToSeq.apply(y, list(sizes), group)


def ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor,
                      group=None, causal: bool = True) -> torch.Tensor:
    """Packed varlen attention of this rank's contiguous shard (shards as :func:`shard_bounds`)."""
    world = _world(group)
    cu = _check_cu(cu)
    total = int(cu[-1])
    sizes = [b - a for a, b in shard_bounds(total, world)]
    rank = comm.get_rank(group)
    if q.shape[0] != sizes[rank]:
        raise ConfigError(f"rank {rank} holds {q.shape[0]} tokens; the packed batch of {total} tokens "
                          f"over {world} ranks gives it {sizes[rank]} (shard_bounds)")
    full = [seq_to_heads(t, sizes, group) for t in (q, k, v)]
    return heads_to_seq(varlen_attention(*full, cu, causal), sizes, group)
