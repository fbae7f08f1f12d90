"""Run a searched plan on a decoder LM with real PyTorch parallelism over :mod:`sgl.comm`.

The model is :attr:`ExecConfig.arch`'s: our :class:`TinyLM` (the fast test model) or a Hugging
Face ``LlamaForCausalLM`` (``arch="hf-llama"``); :mod:`sgl.systems.runtime.models` finds its
layers generically.  What each plan dimension becomes (2 gloo processes on CPU; NCCL on GPUs
runs the same code):

* ``dp``, ``sdp`` (ZeRO-3), ``default_dp_type="zero2"``, ``tp`` and OSDP ``split`` -> DDP, FSDP2
  ZeRO-3 / ZeRO-2, DTensor TP (the model's ``base_model_tp_plan``) and split matmuls, mixed
  layer by layer as :mod:`sgl.systems.runtime.parallelize` describes (TP x DP, TP x ZeRO-3);
* ``pp > 1`` -> :mod:`torch.distributed.pipelining` schedules (:mod:`sgl.systems.runtime.pipeline`),
  combined with DP / ZeRO / TP inside each stage;
* ``ckpt`` -> :func:`torch.utils.checkpoint.checkpoint` around that layer;
* ``cp_sizes_enc > 1`` (ring context parallelism) and ``use_sp = 1`` (Ulysses) -> every sequence
  split over the group, attention through :mod:`sgl.systems.seq` (:mod:`sgl.systems.runtime.cp`),
  weights replicated over it (DDP / ZeRO over ``dp x g`` ranks); Hugging Face decoders, pp = 1.

What the executor cannot run is refused with a :class:`PlanError` naming the dimension
(:func:`~sgl.systems.runtime.plans.check_plan`); a plan is never run as something else.

Every rank builds the same initial weights from the seed, so losses can be compared with
:func:`train_reference` (one process, the whole batch).  Per-rank measurements come back too
(:mod:`sgl.systems.runtime.measure`): step time, model-state bytes (parameters + gradients +
Adam states actually held) and the peak of activation bytes saved for backward.

>>> from sgl.systems.runtime import ExecConfig, train_reference
>>> losses = train_reference(ExecConfig(steps=2, global_bsz=4))
>>> len(losses), losses[0] > losses[1]
(2, True)
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from typing import Any, Dict, List, Sequence

import torch
import torch.nn as nn

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.config import ExecConfig, batch_for_step
from sgl.systems.runtime.cp import flat_plan, sequence_mode, sequence_setup
from sgl.systems.runtime.measure import SavedTensorBytes, local_tensor, step_report
from sgl.systems.runtime.parallelize import parallelize
from sgl.systems.runtime.pipeline import run_pipeline
from sgl.systems.runtime.models import build_model, decoder_of, set_checkpoint
from sgl.systems.runtime.plans import check_model, check_plan
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["train_reference", "run_plan", "run_plans", "plan_worker", "plans_worker"]


def train_reference(cfg: ExecConfig) -> List[float]:
    """Single-process training on the whole batch: the losses a parallel run must reproduce."""
    torch.set_num_threads(cfg.threads)
    model = build_model(cfg)
    decoder = decoder_of(model)
    device = next(model.parameters()).device
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    for step in range(cfg.steps):
        tokens = batch_for_step(cfg, step, device)
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(decoder.logits(tokens), tokens)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def plan_worker(rank: int, world: int, plan_json: Dict[str, Any], cfg_dict: Dict[str, Any]) -> Dict[str, Any]:
    """Body of one process (module level so :func:`sgl.comm.spawn` can pickle it)."""
    cfg = ExecConfig(**cfg_dict)
    torch.set_num_threads(cfg.threads)
    plan = Plan.from_galvatron(plan_json, num_devices=world)
    check_plan(plan, world, cfg)
    # The weights are built on the host from the seed first, so every backend starts from the
    # same model; then they follow the backend's device (the rank's GPU under NCCL).
    device = comm.wire_device()
    model = build_model(cfg).to(device)
    decoder = decoder_of(model)
    check_model(plan, decoder)
    for layer, s in zip(decoder.layers, plan.strategies):
        set_checkpoint(layer, s.ckpt)
    if plan.pp > 1:
        return run_pipeline(rank, world, plan, cfg, model, device)
    seq = sequence_setup(model, plan, world, device) if sequence_mode(plan)[1] > 1 else None
    setup = parallelize(model, flat_plan(plan, world) if seq else plan, rank, world, device,
                        sequence_parallel=cfg.sequence_parallel)
    if seq is None:
        per_rank = plan.global_bsz // setup.dp
        local_tokens = lambda tokens: tokens[setup.dp_rank * per_rank:(setup.dp_rank + 1) * per_rank]  # noqa: E731
        micro_loss = lambda mb: lm_loss(decoder.logits(mb, setup.module), mb)  # noqa: E731
    else:
        local_tokens, micro_loss = seq.local_batch, lambda mb: seq.loss(setup.module, mb)  # noqa: E731
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    counter = SavedTensorBytes(list(model.parameters()))
    losses, times = [], []
    for step in range(cfg.steps):
        tokens = local_tokens(batch_for_step(cfg, step, device))
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        micro = tokens.chunk(plan.chunks)
        total = 0.0
        for i, mb in enumerate(micro):
            sync = contextlib.nullcontext()
            if isinstance(setup.module, nn.parallel.DistributedDataParallel) and i < len(micro) - 1:
                sync = setup.module.no_sync()
            with sync, counter.hooks():
                loss = micro_loss(mb) / len(micro)
                loss.backward()
            total += float(loss.detach())
        for p in setup.manual_sync:
            if p.grad is not None:
                comm.all_reduce(local_tensor(p.grad), op="mean", group=setup.dp_group)
        opt.step()
        times.append(time.perf_counter() - started)
        # Every rank of a TP group holds the same loss, so the world mean is the DP mean; a
        # sequence group's ranks hold degree x their shard's part, whose mean is the whole loss.
        losses.append(float(comm.all_reduce(torch.tensor([total], device=device), op="mean")))
    return step_report(losses, times, list(model.parameters()), opt, counter) | {"sharded_units": setup.sharded_units}


def plans_worker(rank: int, world: int, plan_jsons: List[Dict[str, Any]], cfg_dicts: List[Dict[str, Any]]):
    """Run several plans one after another in the same process group (saves start-up time)."""
    return [plan_worker(rank, world, p, c) for p, c in zip(plan_jsons, cfg_dicts)]


def run_plans(plans: Sequence[Plan], cfg: ExecConfig | Sequence[ExecConfig], *, timeout: float = 300.0,
              backend: str = "gloo", start_method: str = "spawn") -> List[List[Dict[str, Any]]]:
    """Run each plan in ``num_devices`` local processes; ``out[i][rank]`` is a report.

    ``cfg`` is one :class:`ExecConfig` for all plans or one per plan (e.g. different pipeline
    schedules in one process group); each plan's ``global_bsz`` and ``chunks`` override its own.
    ``start_method="fork"`` lets the processes inherit what this one imported (``transformers``
    takes seconds to import); CPU/gloo only.

    ``backend="gloo"`` runs on CPU; ``"nccl"`` puts rank ``r`` on GPU ``r`` (one GPU per rank).

    Raises:
        PlanError: a plan the executor cannot run (checked before any process starts).
        CommError: a process failed or the run exceeded ``timeout`` seconds.
    """
    if not plans:
        return []
    world = plans[0].num_devices
    per_plan = [cfg] * len(plans) if isinstance(cfg, ExecConfig) else list(cfg)
    if len(per_plan) != len(plans):
        raise PlanError(f"run_plans got {len(per_plan)} configs for {len(plans)} plans; pass one, or one per plan")
    cfgs = []
    for plan, one in zip(plans, per_plan):
        if plan.num_devices != world:
            raise PlanError("run_plans needs plans for the same number of devices")
        c = ExecConfig(**{**asdict(one), "global_bsz": plan.global_bsz, "chunks": plan.chunks})
        check_plan(plan, world, c)
        cfgs.append(asdict(c))
    by_rank = comm.spawn(plans_worker, world, [p.to_galvatron() for p in plans], cfgs, timeout=timeout,
                         backend=backend, start_method=start_method)
    return [[by_rank[r][i] for r in range(world)] for i in range(len(plans))]


def run_plan(plan: Plan, cfg: ExecConfig, *, timeout: float = 120.0, backend: str = "gloo") -> List[Dict[str, Any]]:
    """Run one plan; one report per rank (see :func:`run_plans`)."""
    return run_plans([plan], cfg, timeout=timeout, backend=backend)[0]
