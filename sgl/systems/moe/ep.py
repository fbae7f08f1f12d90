"""Expert parallelism on :mod:`sgl.comm`: dispatch/combine all-to-all inside autograd, EP and
expert-data-parallel groups, gradient synchronisation, and the padded (GShard) baseline.

Groups: ``world = ep_size * edp_size``; EP group ``i`` is ranks ``[i*ep, (i+1)*ep)`` (each rank
holds ``E / ep`` experts), expert-data-parallel group ``j`` is ranks ``j, j+ep, ...`` (replicas
of the same experts).  Non-expert gradients are summed over the world, expert gradients over
the EDP group; with a loss normalised by the *global* token count this is the single-process
gradient.  Works under ``torchrun`` (``comm.init()``) and :func:`sgl.comm.spawn`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn as nn

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.moe.experts import ExpertBank
from sgl.systems.moe.grad_sync import BucketedGradSync, all_reduce_flat
from sgl.systems.moe.layer import Dispatcher, LocalDispatcher, moe_layers

__all__ = ["all_to_all_autograd", "ExpertParallel", "EPDispatcher", "PaddedDispatcher"]


class _AllToAll(torch.autograd.Function):
    """Forward: rows cut by ``in_splits`` go to the ranks; backward: the reverse all-to-all."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, in_splits: list[int], out_splits: list[int], group: Any) -> torch.Tensor:
        ctx.splits, ctx.group = (in_splits, out_splits), group
        return comm.all_to_all(x.contiguous(), in_splits, out_splits, group=group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        in_splits, out_splits = ctx.splits
        return comm.all_to_all(grad.contiguous(), out_splits, in_splits, group=ctx.group), None, None, None


def all_to_all_autograd(x: torch.Tensor, in_splits: Sequence[int], out_splits: Sequence[int],
                        group: Any = None, size: int | None = None) -> torch.Tensor:
    """Differentiable uneven all-to-all (the identity in a one-rank group; ``size`` = group size)."""
    if not comm.is_initialized() or (size if size is not None else comm.get_world_size(group)) == 1:
        return x
    return _AllToAll.apply(x, list(map(int, in_splits)), list(map(int, out_splits)), group)


class ExpertParallel:
    """EP / expert-data-parallel groups of the current world, and what to do with them.

    ``ep_size`` defaults to the world size (pure EP).  Every rank must construct it (group
    creation is collective).  :meth:`shard` keeps this rank's experts in every MoE layer and
    installs a dispatcher; :meth:`sync_gradients` all-reduces after ``backward`` (or, after
    :meth:`overlap_gradients`, waits for the buckets launched during it).
    """

    def __init__(self, ep_size: int | None = None, timeout: float | None = None) -> None:
        self.world = comm.get_world_size()
        self.rank = comm.get_rank()
        self.ep_size = self.world if ep_size is None else int(ep_size)
        if self.ep_size < 1 or self.world % self.ep_size:
            raise ConfigError(
                f"ExpertParallel: ep_size={ep_size} must divide the world size {self.world}; "
                "pick ep_size in the divisors of the process count")
        self.edp_size = self.world // self.ep_size
        self.ep_rank = self.rank % self.ep_size
        self.timeout = timeout
        self.ep_group: Any = None
        self.edp_group: Any = None
        self.bucketed: BucketedGradSync | None = None
        if comm.is_initialized() and self.world > 1:
            for i in range(self.edp_size):
                ranks = list(range(i * self.ep_size, (i + 1) * self.ep_size))
                g = comm.new_group(ranks) if self.ep_size > 1 else None
                if self.rank in ranks:
                    self.ep_group = g
            for j in range(self.ep_size):
                ranks = list(range(j, self.world, self.ep_size))
                g = comm.new_group(ranks) if self.edp_size > 1 else None
                if self.rank in ranks:
                    self.edp_group = g

    def experts_of(self, num_experts: int) -> tuple[int, int]:
        if num_experts % self.ep_size:
            raise ConfigError(
                f"ExpertParallel: {num_experts} experts cannot be split over ep_size={self.ep_size} "
                "ranks evenly; use a multiple of the EP size")
        per = num_experts // self.ep_size
        return self.ep_rank * per, (self.ep_rank + 1) * per

    def make_dispatcher(self, kind: str = "ep") -> Dispatcher:
        if kind == "padded":
            return PaddedDispatcher(self)
        return EPDispatcher(self) if self.ep_size > 1 else _DPDispatcher(self)

    def shard(self, model: nn.Module, kind: str = "ep") -> nn.Module:
        """Keep this rank's experts in every MoE layer and route through EP (in place)."""
        for layer in moe_layers(model):
            start, stop = self.experts_of(layer.cfg.num_experts)
            layer.experts = layer.experts.shard(start, stop)
            layer.dispatcher = self.make_dispatcher(kind)
        return model

    def overlap_gradients(self, model: nn.Module, bucket_mb: float = 25.0) -> None:
        """Sum non-expert gradients in buckets launched during backward (DDP-style hooks) instead
        of one flat all-reduce after it; call after :meth:`shard`. :meth:`sync_gradients` then waits."""
        if not comm.is_initialized() or self.world == 1:
            return
        dense = [p for p in model.parameters() if not getattr(p, "sgl_expert", False)]
        self.bucketed = BucketedGradSync(dense, None, bucket_mb, self.timeout)

    def sync_gradients(self, model: nn.Module) -> None:
        """Sum non-expert gradients over the world and expert gradients over the EDP group."""
        if not comm.is_initialized() or self.world == 1:
            return
        if getattr(self, "bucketed", None) is not None:
            self.bucketed.finish()
        else:
            dense = [p for p in model.parameters() if p.grad is not None and not getattr(p, "sgl_expert", False)]
            all_reduce_flat(dense, None, self.timeout)
        expert = [p for p in model.parameters() if p.grad is not None and getattr(p, "sgl_expert", False)]
        if self.edp_size > 1:
            all_reduce_flat(expert, self.edp_group, self.timeout)


class _DPDispatcher(LocalDispatcher):
    """EP size 1 under data parallelism: experts local, counts still summed over the world."""

    def __init__(self, ep: ExpertParallel) -> None:
        super().__init__()
        self.ep = ep
        self.routing_ranks = ep.world

    def global_counts(self, counts: torch.Tensor) -> torch.Tensor:
        return comm.all_reduce(counts.clone(), timeout=self.ep.timeout)


class EPDispatcher(Dispatcher):
    """Dropless EP: one small all-to-all of per-expert counts, then the token rows (uneven splits).

    Received rows arrive grouped by (source rank, local expert); they are regrouped by expert,
    run, put back in arrival order and returned by the reverse all-to-all.
    """

    def __init__(self, ep: ExpertParallel) -> None:
        super().__init__()
        self.ep = ep
        self.routing_ranks = ep.world

    def global_counts(self, counts: torch.Tensor) -> torch.Tensor:
        return comm.all_reduce(counts.clone(), timeout=self.ep.timeout)

    def exchange_counts(self, counts: torch.Tensor) -> torch.Tensor:
        """``[P, E_local]``: pairs each source rank sends to each of this rank's experts."""
        p = self.ep.ep_size
        recv = comm.all_to_all(counts.contiguous(), group=self.ep.ep_group, timeout=self.ep.timeout)
        return recv.view(p, -1)

    def exchange(self, rows: torch.Tensor, counts: torch.Tensor, bank: ExpertBank) -> torch.Tensor:
        p = self.ep.ep_size
        recv_counts = self.exchange_counts(counts)
        in_splits = counts.view(p, -1).sum(1).tolist()
        out_splits = recv_counts.sum(1).tolist()
        self.sent_rows += rows.shape[0]
        recv = all_to_all_autograd(rows, in_splits, out_splits, self.ep.ep_group, self.ep.ep_size)
        out = run_grouped(recv, recv_counts, bank)
        return all_to_all_autograd(out, out_splits, in_splits, self.ep.ep_group, self.ep.ep_size)


def run_grouped(recv: torch.Tensor, recv_counts: torch.Tensor, bank: ExpertBank) -> torch.Tensor:
    """Rows in (source, expert) blocks -> regroup by expert -> experts -> arrival order."""
    p, el = recv_counts.shape
    labels = torch.arange(el, device=recv.device).repeat(p).repeat_interleave(recv_counts.reshape(-1).to(recv.device))
    order = torch.argsort(labels, stable=True)
    out = bank(recv[order], recv_counts.sum(0).tolist())
    return out[torch.argsort(order)]


class PaddedDispatcher(Dispatcher):
    """GShard-style fixed-capacity dispatch: every (source, expert) block padded to ``C`` rows.

    ``C`` is the layer's capacity (``MoEConfig.capacity_factor``) or, when dropless, the largest
    per-expert count of any rank (one extra all-reduce ``max``).  Equal splits, so no size
    exchange; padding rows are computed and transferred (the cost this baseline pays).
    """

    def __init__(self, ep: ExpertParallel) -> None:
        super().__init__()
        self.ep = ep
        self.routing_ranks = ep.world
        self.padded_rows = 0

    def global_counts(self, counts: torch.Tensor) -> torch.Tensor:
        return comm.all_reduce(counts.clone(), timeout=self.ep.timeout)

    def exchange(self, rows: torch.Tensor, counts: torch.Tensor, bank: ExpertBank) -> torch.Tensor:
        p, e, h = self.ep.ep_size, counts.numel(), rows.shape[1]
        cap = comm.all_reduce(counts.max().reshape(1).clone(), op="max", timeout=self.ep.timeout)
        c = max(1, int(cap))
        starts = torch.cumsum(counts, 0) - counts
        expert = torch.arange(e, device=rows.device).repeat_interleave(counts)
        slot = expert * c + torch.arange(rows.shape[0], device=rows.device) - starts[expert]
        buf = rows.new_zeros(e * c, h).index_copy(0, slot, rows)
        self.sent_rows += e * c
        self.padded_rows += e * c - rows.shape[0]
        el = e // p
        recv = all_to_all_autograd(buf, [el * c] * p, [el * c] * p, self.ep.ep_group, self.ep.ep_size)
        # [P, El, C, h] -> [El, P*C, h]: each local expert sees its C slots from every source.
        grouped = recv.view(p, el, c, h).transpose(0, 1).reshape(el * p * c, h)
        out = bank(grouped, [p * c] * el).view(el, p, c, h).transpose(0, 1).reshape(p * el * c, h)
        back = all_to_all_autograd(out, [el * c] * p, [el * c] * p, self.ep.ep_group, self.ep.ep_size)
        return back[slot]
