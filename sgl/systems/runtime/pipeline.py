"""Pipeline parallelism through :mod:`torch.distributed.pipelining`'s schedules.

The ranks form a ``(pp, dp, tp)`` mesh (:func:`~sgl.systems.runtime.parallelize.make_mesh`).
Pipeline rank ``k`` holds a :class:`Stage` with its layers -- ``pp_division[k]`` of them, the
first stage the embedding and the last the norm and LM head -- which then gets TP and FSDP2 /
DDP-style gradient averaging over its ``dp`` group exactly as a non-pipelined model does
(:func:`~sgl.systems.runtime.parallelize.shard_stage`), so PP x DP, PP x ZeRO and PP x TP all
run.  The schedule is the plan's ``pipeline_type`` (``pipedream_flush`` -> ``Schedule1F1B``,
``gpipe`` -> ``ScheduleGPipe``) unless :attr:`ExecConfig.schedule` names another:
``interleaved-1f1b`` (``ScheduleInterleaved1F1B``) and ``zero-bubble``
(``ScheduleInterleavedZeroBubble``, backward split into input- and weight-gradient steps) run
``virtual_stages`` model chunks per rank, placed round-robin (chunk ``c`` on rank ``c mod pp``;
``pp_division`` then describes the chunks' sum per rank and the layers are cut evenly).

Each micro-batch's loss is its mean token cross-entropy and the schedule divides gradients by
the micro-batch count, so a step equals the single-process step on the whole batch.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import torch
import torch.nn as nn

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.config import ExecConfig, batch_for_step
from sgl.systems.runtime.measure import SavedTensorBytes, local_tensor, step_report
from sgl.systems.runtime.models import Decoder, decoder_of
from sgl.systems.runtime.parallelize import _unsharded, make_mesh, shard_stage, tensor_parallel, vocab_parallel
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["Stage", "run_pipeline", "stage_layers"]


class Stage(nn.Module):
    """Layers ``layer_ids`` of a decoder, with the embedding if ``first`` and norm + head if ``last``."""

    def __init__(self, decoder: Decoder, layer_ids: List[int], first: bool, last: bool) -> None:
        super().__init__()
        self.decoder = [decoder]          # a list: not registered, its modules are registered below
        self.embed = decoder.embed_module if first else None
        self.layers = nn.ModuleList(decoder.layers[i] for i in layer_ids)
        self.norm = decoder.norm if last else None
        self.head = decoder.lm_head if last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dec = self.decoder[0]
        if self.embed is not None:
            x = self.embed(x)
        for layer in self.layers:
            x = dec.run_layer(layer, x)
        if self.head is not None:
            x = self.head(self.norm(x))
        return x


def stage_layers(plan: Plan, cfg: ExecConfig) -> tuple[List[List[int]], int]:
    """Layer ids of every pipeline chunk (chunk ``c`` runs on rank ``c mod pp``) and chunks per rank."""
    n = len(plan.strategies)
    if _schedule_name(plan, cfg) in ("1f1b", "gpipe"):
        out, start = [], 0
        for size in plan.pp_division:
            out.append(list(range(start, start + size)))
            start += size
        return out, 1
    v = cfg.virtual_stages
    chunks = plan.pp * v
    if v < 2 or n % chunks:
        raise PlanError(f"pipeline: the {cfg.schedule} schedule cuts the {n} layers into pp x virtual_stages = "
                        f"{plan.pp} x {v} equal chunks; choose virtual_stages >= 2 with {n} divisible by the product")
    if plan.chunks % plan.pp:
        raise PlanError(f"pipeline: the {cfg.schedule} schedule needs chunks (micro-batches, {plan.chunks}) "
                        f"divisible by pp={plan.pp}")
    size = n // chunks
    return [list(range(c * size, (c + 1) * size)) for c in range(chunks)], v


def _schedule_name(plan: Plan, cfg: ExecConfig) -> str:
    if cfg.schedule:
        return cfg.schedule
    return "gpipe" if plan.pipeline_type == "gpipe" else "1f1b"


def _schedule(name: str, stages, n_micro: int, loss_fn):
    from torch.distributed import pipelining as P

    if name == "1f1b":
        return P.Schedule1F1B(stages[0], n_micro, loss_fn=loss_fn)
    if name == "gpipe":
        return P.ScheduleGPipe(stages[0], n_micro, loss_fn=loss_fn)
    if name == "interleaved-1f1b":
        return P.ScheduleInterleaved1F1B(stages, n_micro, loss_fn=loss_fn)
    return P.ScheduleInterleavedZeroBubble(stages, n_micro, loss_fn=loss_fn)


def run_pipeline(rank: int, world: int, plan: Plan, cfg: ExecConfig, model: nn.Module,
                 device: torch.device) -> Dict[str, Any]:
    """Train ``model`` for ``cfg.steps`` steps as pipeline rank of ``plan``; this rank's report."""
    from torch.distributed.pipelining import PipelineStage

    decoder = decoder_of(model)
    mesh = make_mesh(device, plan, world)
    pp_rank, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    dp, tp = mesh["dp"].size(), mesh["tp"].size()
    layout, per_rank = stage_layers(plan, cfg)
    n_chunks = len(layout)
    mine = [c for c in range(n_chunks) if c % plan.pp == pp_rank]
    modules = [Stage(decoder, layout[c], c == 0, c == n_chunks - 1) for c in mine]
    own_layers = [i for c in mine for i in layout[c]]
    if tp > 1:
        tensor_parallel(decoder, [decoder.layers[i] for i in own_layers], mesh["tp"])
        if plan.vtp > 1:
            vocab_parallel(decoder, mesh["tp"], embed=0 in mine, head=n_chunks - 1 in mine)
    sharded = []
    for c, module in zip(mine, modules):
        sharded += shard_stage(decoder, plan, layout[c], mesh["dp"], module, with_vocab=c in (0, n_chunks - 1))
    params = list({id(p): p for m in modules for p in m.parameters()}.values())
    manual = _unsharded(params, sharded) if dp > 1 else []
    pp_group = mesh["pp"].get_group()
    stages = [PipelineStage(m, c, n_chunks, device, group=pp_group) for c, m in zip(mine, modules)]
    schedule = _schedule(_schedule_name(plan, cfg), stages, plan.chunks, lambda out, tgt: lm_loss(out, tgt))
    opt = torch.optim.Adam(params, lr=cfg.lr)
    counter = SavedTensorBytes(params)
    has_first, has_last = 0 in mine, n_chunks - 1 in mine
    shard = plan.global_bsz // dp
    losses: List[float] = []
    times: List[float] = []
    for step in range(cfg.steps):
        tokens = batch_for_step(cfg, step, device)[dp_rank * shard:(dp_rank + 1) * shard]
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        micro_losses: List[torch.Tensor] = []
        args = (tokens,) if has_first else ()
        kwargs: Dict[str, Optional[Any]] = {"target": tokens, "losses": micro_losses} if has_last else {}
        with counter.hooks():
            schedule.step(*args, **kwargs)
        for p in manual:
            if p.grad is not None:
                comm.all_reduce(local_tensor(p.grad), op="mean", group=mesh["dp"].get_group())
        opt.step()
        times.append(time.perf_counter() - started)
        mean = sum(float(x.detach()) for x in micro_losses) / len(micro_losses) if has_last else 0.0
        # The ranks of the last stage (dp x tp of them) hold the losses of their DP shards.
        total = comm.all_reduce(torch.tensor([mean], device=device), op="sum")
        losses.append(float(total) / (world // plan.pp))
    return step_report(losses, times, params, opt, counter) | {
        "stage": pp_rank, "schedule": _schedule_name(plan, cfg), "sharded_units": len(sharded)}
