"""Run a searched plan on the small Transformer with real PyTorch parallelism over :mod:`sgl.comm`.

What each layer strategy becomes (world sizes where one of these is the whole plan, e.g. 2
gloo processes on CPU; NCCL on GPUs runs the same code):

* ``dp``, ``sdp`` and ``tp`` -> DDP, FSDP2 ZeRO-3 and DTensor TP, mixed layer by layer as
  :mod:`sgl.systems.runtime.parallelize` describes;
* ``pp > 1`` -> the 1F1B pipeline of :mod:`sgl.systems.runtime.pipeline`;
* ``ckpt`` -> :func:`torch.utils.checkpoint.checkpoint` around that layer.

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
from sgl.systems.runtime.config import ExecConfig, batch_for_step, build_tiny_lm
from sgl.systems.runtime.measure import SavedTensorBytes, local_tensor, step_report
from sgl.systems.runtime.parallelize import parallelize
from sgl.systems.runtime.pipeline import run_pipeline
from sgl.systems.runtime.plans import check_plan
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["train_reference", "run_plan", "run_plans", "plan_worker", "plans_worker"]


def train_reference(cfg: ExecConfig) -> List[float]:
    """Single-process training on the whole batch: the losses a parallel run must reproduce."""
    torch.set_num_threads(cfg.threads)
    model = build_tiny_lm(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    for step in range(cfg.steps):
        tokens = batch_for_step(cfg, step)
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model(tokens), tokens)
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
    # Gloo runs on CPU; NCCL on this rank's GPU (the weights are built on CPU from the seed
    # first, so every backend starts from the same model).
    device = torch.device("cuda", comm.get_local_rank()) if comm.get_backend() == "nccl" else torch.device("cpu")
    model = build_tiny_lm(cfg).to(device)
    for block, s in zip(model.blocks, plan.strategies):
        block.checkpoint = s.ckpt
    if plan.pp > 1:
        return run_pipeline(rank, world, plan, cfg, model, device)
    setup = parallelize(model, plan, rank, world, device)
    per_rank = plan.global_bsz // setup.dp
    local_tokens = lambda tokens: tokens[setup.dp_rank * per_rank:(setup.dp_rank + 1) * per_rank]  # noqa: E731
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    counter = SavedTensorBytes(list(model.parameters()))
    losses, times = [], []
    for step in range(cfg.steps):
        tokens = local_tokens(batch_for_step(cfg, step)).to(device)
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        micro = tokens.chunk(plan.chunks)
        total = 0.0
        for i, mb in enumerate(micro):
            sync = contextlib.nullcontext()
            if isinstance(setup.module, nn.parallel.DistributedDataParallel) and i < len(micro) - 1:
                sync = setup.module.no_sync()
            with sync, counter.hooks():
                loss = lm_loss(setup.module(mb), mb) / len(micro)
                loss.backward()
            total += float(loss.detach())
        for p in setup.manual_sync:
            if p.grad is not None:
                comm.all_reduce(local_tensor(p.grad), op="mean", group=setup.dp_group)
        opt.step()
        times.append(time.perf_counter() - started)
        # Every rank of a TP group holds the same loss, so the world mean is the DP mean.
        losses.append(float(comm.all_reduce(torch.tensor([total], device=device), op="mean")))
    return step_report(losses, times, list(model.parameters()), opt, counter)


def plans_worker(rank: int, world: int, plan_jsons: List[Dict[str, Any]], cfg_dicts: List[Dict[str, Any]]):
    """Run several plans one after another in the same process group (saves start-up time)."""
    return [plan_worker(rank, world, p, c) for p, c in zip(plan_jsons, cfg_dicts)]


def run_plans(plans: Sequence[Plan], cfg: ExecConfig, *, timeout: float = 300.0,
              backend: str = "gloo") -> List[List[Dict[str, Any]]]:
    """Run each plan in ``num_devices`` local processes; ``out[i][rank]`` is a report.

    ``backend="gloo"`` runs on CPU; ``"nccl"`` puts rank ``r`` on GPU ``r`` (one GPU per rank).

    Raises:
        PlanError: a plan the executor cannot run (checked before any process starts).
        CommError: a process failed or the run exceeded ``timeout`` seconds.
    """
    if not plans:
        return []
    world = plans[0].num_devices
    cfgs = []
    for plan in plans:
        if plan.num_devices != world:
            raise PlanError("run_plans needs plans for the same number of devices")
        c = ExecConfig(**{**asdict(cfg), "global_bsz": plan.global_bsz, "chunks": plan.chunks})
        check_plan(plan, world, c)
        cfgs.append(asdict(c))
    by_rank = comm.spawn(plans_worker, world, [p.to_galvatron() for p in plans], cfgs, timeout=timeout,
                         backend=backend)
    return [[by_rank[r][i] for r in range(world)] for i in range(len(plans))]


def run_plan(plan: Plan, cfg: ExecConfig, *, timeout: float = 120.0, backend: str = "gloo") -> List[Dict[str, Any]]:
    """Run one plan; one report per rank (see :func:`run_plans`)."""
    return run_plans([plan], cfg, timeout=timeout, backend=backend)[0]
