"""Turn a plan's non-pipeline layer strategies into PyTorch parallelism on one rank.

* every layer replicated -> :class:`torch.nn.parallel.DistributedDataParallel`;
* layers with ``sdp`` -> FSDP2 :func:`torch.distributed.fsdp.fully_shard` per layer (ZeRO-3);
  replicated layers next to them get their gradients all-reduced (mean) after backward, which
  is what DDP does, so DP and ZeRO-3 layers mix as in Galvatron's layer-wise plans;
* ``tp > 1`` -> DTensor tensor parallelism (Megatron layout: q/k/v and the MLP's first
  matrices column-wise, the output projections row-wise) on the ``tp`` dimension of a
  (dp, tp) device mesh -- consecutive or strided TP groups as ``tp_consec`` says -- with
  gradients averaged over the ``dp`` dimension when ``dp > 1``.

The caller all-reduces the gradients of :attr:`DataParallelSetup.manual_sync` over
:attr:`DataParallelSetup.dp_group` after backward (see :func:`sgl.systems.runtime.executor.plan_worker`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

import torch
import torch.nn as nn

from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.tiny_lm import TinyLM

__all__ = ["DataParallelSetup", "parallelize"]


@dataclass
class DataParallelSetup:
    """The module to call, the parameters to all-reduce by hand, and this rank's DP coordinates."""

    module: nn.Module
    dp: int
    dp_rank: int
    manual_sync: List[nn.Parameter] = field(default_factory=list)
    dp_group: Optional[Any] = None      # None: the world group


def parallelize(model: TinyLM, plan: Plan, rank: int, world: int, device: torch.device) -> DataParallelSetup:
    """Apply DDP, FSDP2 or DTensor TP (+ DP) to ``model`` in place as ``plan`` (pp = 1) says."""
    tp = plan.strategies[0].tp
    dp = world // tp
    if tp > 1:
        return _tensor_parallel(model, plan, dp, tp, device)
    sharded = [s.sdp for s in plan.strategies]
    if not any(sharded) and not plan.embed_sdp:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
        return DataParallelSetup(ddp, dp, rank)
    from torch.distributed.fsdp import fully_shard

    for block, sdp in zip(model.blocks, sharded):
        if sdp:
            fully_shard(block)
    if plan.embed_sdp:
        fully_shard(model)
    owned = {id(p) for block, sdp in zip(model.blocks, sharded) if sdp for p in block.parameters()}
    manual_sync = [p for p in model.parameters() if id(p) not in owned and not plan.embed_sdp]
    return DataParallelSetup(model, dp, rank, manual_sync)


def _tensor_parallel(model: TinyLM, plan: Plan, dp: int, tp: int, device: torch.device) -> DataParallelSetup:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    # Consecutive TP groups: ranks r*tp .. r*tp+tp-1 (intra-node); strided: every dp-th rank.
    if plan.strategies[0].tp_consec:
        mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
    else:
        mesh = init_device_mesh(device.type, (tp, dp), mesh_dim_names=("tp", "dp"))
    layout = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel(),
              "w1": ColwiseParallel(), "w2": RowwiseParallel()}
    if model.blocks[0].w3 is not None:
        layout["w3"] = ColwiseParallel()
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], layout)
    setup = DataParallelSetup(model, dp, mesh.get_local_rank("dp"))
    if dp > 1:
        # DP across TP groups: every gradient (local shards of TP weights, replicated
        # norms/embedding/head) is averaged over the DP group, as DDP would.
        setup.dp_group = mesh["dp"].get_group()
        setup.manual_sync = list(model.parameters())
    return setup
