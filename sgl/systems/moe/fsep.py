"""LAER-MoE's Fully Sharded Expert Parallel runtime.

Every expert's weights (flattened ``w1, w3, w2``, padded to a multiple of ``N``) are sharded
over all ``N`` ranks: rank ``s`` owns columns ``[s*P/N, (s+1)*P/N)`` of every expert, and the
optimizer only ever sees its shard.  Each step, under the current layout ``hosts[r]`` (the
experts rank ``r`` runs), one all-to-all delivers to every rank the full weights of its hosted
experts; tokens go to a replica (this rank if it hosts the expert, else spread evenly over the
hosts); the backward of the same all-to-all returns weight gradients to the shard owners, where
``index_select``'s backward sums the replicas.  Changing the layout only changes who receives
which shards, so it can change every step; with ``balance='laer'|'flexmoe'`` the next layout is
planned in a background thread from this step's loads and applied a step later.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.moe.ep import all_to_all_autograd, run_grouped
from sgl.systems.moe.experts import run_experts
from sgl.systems.moe.grad_sync import BucketedGradSync, all_reduce_flat
from sgl.systems.moe.layer import Dispatcher, moe_layers
from sgl.systems.moe.router import Assignment

__all__ = ["FSEPRuntime", "FSEPShard", "round_robin_layout", "check_layout"]


def round_robin_layout(num_experts: int, world: int, slots: int) -> list[list[int]]:
    """Static layout: rank ``r`` hosts experts ``(r*slots + c) % E`` (distinct when ``slots <= E``)."""
    return [sorted({(r * slots + c) % num_experts for c in range(slots)}) for r in range(world)]


def check_layout(hosts: list[list[int]], num_experts: int, world: int) -> list[list[int]]:
    if len(hosts) != world:
        raise ConfigError(f"an FSEP layout lists {len(hosts)} ranks, the world has {world}")
    seen = set()
    for r, h in enumerate(hosts):
        if len(set(h)) != len(h) or any(not 0 <= e < num_experts for e in h):
            raise ConfigError(f"FSEP layout of rank {r} {h} must name distinct experts in [0, {num_experts})")
        seen.update(h)
    if len(seen) != num_experts:
        raise ConfigError(f"FSEP layout leaves experts {sorted(set(range(num_experts)) - seen)} unhosted")
    return [sorted(h) for h in hosts]


class FSEPShard(nn.Module):
    """This rank's ``[E, P/N]`` slice of every expert's flattened weights."""

    def __init__(self, w1: torch.Tensor, w3: torch.Tensor | None, w2: torch.Tensor, rank: int, world: int) -> None:
        super().__init__()
        e, h, f = w1.shape
        self.shapes = [(h, f)] + ([(h, f)] if w3 is not None else []) + [(f, h)]
        flat = torch.cat([t.reshape(e, -1) for t in (w1, w3, w2) if t is not None], 1)
        self.numel = flat.shape[1]
        per = -(-self.numel // world)
        flat = torch.nn.functional.pad(flat, (0, per * world - self.numel))
        self.shard = nn.Parameter(flat[:, rank * per:(rank + 1) * per].clone())
        self.shard.sgl_expert = True  # type: ignore[attr-defined]
        self.world = world

    def unflatten(self, full: torch.Tensor) -> list[torch.Tensor]:
        """``[C, P_padded]`` -> ``[w1, (w3), w2]`` stacked over the C experts."""
        out, offset = [], 0
        for a, b in self.shapes:
            out.append(full[:, offset:offset + a * b].reshape(-1, a, b))
            offset += a * b
        return out


class _Bank:
    def __init__(self, weights: list[torch.Tensor], impl: str) -> None:
        self.w1, self.w2 = weights[0], weights[-1]
        self.w3 = weights[1] if len(weights) == 3 else None
        self.impl = impl

    def __call__(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        return run_experts(rows, counts, self.w1, self.w3, self.w2, self.impl)


class FSEPDispatcher(Dispatcher):
    """Gather hosted experts' weights by all-to-all, route to replicas, run, combine."""

    def __init__(self, runtime: "FSEPRuntime", shard: FSEPShard, impl: str = "auto") -> None:
        super().__init__()
        self.rt, self.shard, self.impl = runtime, shard, impl
        self.routing_ranks = runtime.world

    def global_counts(self, counts: torch.Tensor) -> torch.Tensor:
        return comm.all_reduce(counts.clone(), timeout=self.rt.timeout)

    def _materialize(self) -> _Bank:
        rt, hosts, n = self.rt, self.rt.hosts, self.rt.world
        idx = torch.tensor([e for r in range(n) for e in hosts[r]], dtype=torch.long, device=self.shard.shard.device)
        send = self.shard.shard.index_select(0, idx)  # backward: index_add sums the replicas
        mine = len(hosts[rt.rank])
        recv = all_to_all_autograd(send, [len(h) for h in hosts], [mine] * n, None, n)
        full = recv.view(n, mine, -1).transpose(0, 1).reshape(mine, -1)
        return _Bank(self.shard.unflatten(full), self.impl)

    def __call__(self, x: torch.Tensor, a: Assignment, bank: Any) -> torch.Tensor:
        from sgl.systems.moe.layer import combine

        rt, n, hosts = self.rt, self.rt.world, self.rt.hosts
        local = self._materialize()
        slot_of = np.full((n, self.rt.num_experts), -1)
        for r in range(n):
            slot_of[r, hosts[r]] = np.arange(len(hosts[r]))
        expert = a.expert.cpu().numpy()  # the replica choice is host bookkeeping over E experts
        dest = np.empty(len(expert), dtype=np.int64)
        for e in np.unique(expert):
            sel = np.flatnonzero(expert == e)
            reps = np.flatnonzero(slot_of[:, e] >= 0)
            dest[sel] = rt.rank if slot_of[rt.rank, e] >= 0 else reps[np.arange(sel.size) % reps.size]
        cmax = max(len(h) for h in hosts)
        key = torch.as_tensor(dest * cmax + slot_of[dest, expert], device=x.device)
        order = torch.argsort(key, stable=True)
        send_counts = torch.bincount(key, minlength=n * cmax).view(n, cmax)
        recv_counts = comm.all_to_all(send_counts.reshape(-1).contiguous(), timeout=rt.timeout).view(n, cmax)
        recv_counts = recv_counts[:, :len(hosts[rt.rank])]
        in_splits, out_splits = send_counts.sum(1).tolist(), recv_counts.sum(1).tolist()
        rows = x[a.token][order]
        self.sent_rows += rows.shape[0]
        recv = all_to_all_autograd(rows, in_splits, out_splits, None, n)
        out = run_grouped(recv, recv_counts, local)
        back = all_to_all_autograd(out, out_splits, in_splits, None, n)
        return combine(x, a, back[torch.argsort(order)])


class FSEPRuntime:
    """Installs FSEP in every MoE layer of ``model`` and owns the per-step layouts."""

    def __init__(self, model: nn.Module, spec: Any, ctx: Any) -> None:
        self.world, self.rank = comm.get_world_size(), comm.get_rank()
        self.timeout = spec.timeout
        layers = list(moe_layers(model))
        self.num_experts = layers[0].cfg.num_experts
        self.slots = max(1, -(-self.num_experts // self.world) + (1 if self.world > 1 else 0))
        self.slots = min(self.slots, self.num_experts)
        self.layouts = spec.fsep_layouts
        self.balance = spec.balance
        self.hosts = round_robin_layout(self.num_experts, self.world, self.slots)
        self.layers = layers
        for layer in layers:
            ex = layer.experts
            shard = FSEPShard(ex.w1.detach(), None if ex.w3 is None else ex.w3.detach(), ex.w2.detach(),
                              self.rank, self.world)
            layer.experts = shard
            layer.dispatcher = FSEPDispatcher(self, shard, layer.cfg.expert_impl)
        self._pool = ThreadPoolExecutor(max_workers=1) if self.balance != "none" else None
        self._pending: Future | None = None
        self.plans_applied = 0
        self.bucketed: BucketedGradSync | None = None

    def begin_step(self, step: int) -> None:
        if self.layouts is not None:
            self.hosts = check_layout(self.layouts[step % len(self.layouts)], self.num_experts, self.world)
        elif self._pending is not None:
            self.hosts = check_layout(self._pending.result(), self.num_experts, self.world)
            self._pending = None
            self.plans_applied += 1

    def overlap_gradients(self, model: nn.Module, bucket_mb: float = 25.0) -> None:
        """Sum non-expert gradients in buckets during backward (see :class:`BucketedGradSync`)."""
        if self.world > 1:
            dense = [p for p in model.parameters() if not getattr(p, "sgl_expert", False)]
            self.bucketed = BucketedGradSync(dense, None, bucket_mb, self.timeout)

    def sync_gradients(self, model: nn.Module) -> None:
        if self.bucketed is not None:
            self.bucketed.finish()
        elif self.world > 1:
            dense = [p for p in model.parameters() if p.grad is not None and not getattr(p, "sgl_expert", False)]
            all_reduce_flat(dense, None, self.timeout)
        if self._pool is not None:
            self._submit()

    def _submit(self) -> None:
        """Plan the next layout from this step's loads (summed over layers: one layout for all)."""
        from sgl.systems.moe.balance import CostParams, flexmoe_plan, laer_plan, static_layout
        from sgl.systems.moe.topology import Topology

        e = self.num_experts
        loads = np.zeros((self.world, e))
        for layer in self.layers:
            a = layer.last_assignment
            mine = torch.bincount(a.expert, minlength=e)
            loads += torch.stack(comm.all_gather(mine, timeout=self.timeout)).cpu().numpy()
        topo = Topology(1, self.world)
        cost = CostParams(bytes_per_token=4.0 * self.layers[0].cfg.hidden_size, seconds_per_token=1e-6)
        balance, slots, hosts = self.balance, self.slots, self.hosts

        def plan() -> list[list[int]]:
            if balance == "laer":
                layout = laer_plan(loads, topo, slots, cost)
            else:
                current = np.zeros((e, self.world), dtype=np.int64)
                for r, h in enumerate(hosts):
                    current[h, r] = 1
                layout = flexmoe_plan(loads, current, topo, cost) if current.sum(1).min() > 0 else static_layout(e, topo, slots)
            return [sorted(np.flatnonzero(layout[:, r] > 0).tolist()) for r in range(self.world)]

        self._pending = self._pool.submit(plan)

    def full_grads(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """Dense gradients plus every expert's full gradient rebuilt from the shards (for tests)."""
        out = {n: p.grad.detach().clone() for n, p in model.named_parameters()
               if p.grad is not None and not getattr(p, "sgl_expert", False)}
        for name, mod in model.named_modules():
            if isinstance(mod, FSEPShard):
                parts = comm.all_gather(mod.shard.grad.detach(), timeout=self.timeout)
                full = torch.cat(parts, 1)[:, :mod.numel]
                names = ["w1", "w3", "w2"] if len(mod.shapes) == 3 else ["w1", "w2"]
                for n, t in zip(names, mod.unflatten(full)):
                    out[f"{name}.{n}"] = t
        return out
