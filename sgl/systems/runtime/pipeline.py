"""A hand-written 1F1B pipeline over :func:`sgl.comm.send` / :func:`sgl.comm.recv`.

Stage ``k`` (= rank ``k``; the executor runs pipeline plans with ``pp`` = world size and
``tp = 1``) holds its ``pp_division[k]`` layers, the first stage the embedding and the last the
norm and LM head; activations go forward and gradients back, one micro-batch at a time.
"""
from __future__ import annotations

import time
from typing import Any, Dict

import torch

from sgl import comm
from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.config import ExecConfig, batch_for_step
from sgl.systems.runtime.measure import SavedTensorBytes, step_report
from sgl.systems.runtime.tiny_lm import TinyLM, lm_loss

__all__ = ["run_pipeline"]


def run_pipeline(rank: int, world: int, plan: Plan, cfg: ExecConfig, model: TinyLM,
                 device: torch.device) -> Dict[str, Any]:
    """1F1B: stage k runs its layers; forward activations go to k+1, gradients come back."""
    first, last = rank == 0, rank == world - 1
    start = sum(plan.pp_division[:rank])
    mine = list(model.blocks)[start:start + plan.pp_division[rank]]
    params = [p for b in mine for p in b.parameters()]
    if first:
        params += list(model.embed.parameters())
    if last:
        params += list(model.norm.parameters()) + list(model.head.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr)
    counter = SavedTensorBytes(params)
    mc = cfg.model_config()
    chunks = plan.chunks
    mb_size = plan.global_bsz // chunks
    shape = (mb_size, mc.seq_length, mc.hidden_size)
    losses, times = [], []

    def forward(tokens: torch.Tensor, i: int):
        with counter.hooks():
            if first:
                x = model.embed(tokens)
            else:
                x = comm.recv(shape, rank - 1, tag=i).requires_grad_()
            inp = x
            for block in mine:
                x = block(x)
            if last:
                out = lm_loss(model.head(model.norm(x)), tokens) / chunks
            else:
                out = x
        return inp, out

    def backward(inp: torch.Tensor, out: torch.Tensor, i: int) -> None:
        if last:
            out.backward()
        else:
            grad = comm.recv(shape, rank + 1, tag=10_000 + i)
            out.backward(grad)
        if not first:
            comm.send(inp.grad, rank - 1, tag=10_000 + i)

    for step in range(cfg.steps):
        micro = batch_for_step(cfg, step).to(device).chunk(chunks)
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        in_flight = []
        total = 0.0
        warmup = min(world - rank - 1, chunks)
        # Stage k runs pp-k-1 forwards ahead.  In the steady phase it takes the gradient of
        # its oldest micro-batch *before* posting its newest activation: with blocking
        # send/recv that order is deadlock-free (each successor already sent that gradient).
        done_f = 0
        for _ in range(warmup):
            inp, out = forward(micro[done_f], done_f)
            comm.send(out.detach(), rank + 1, tag=done_f)
            in_flight.append((inp, out, done_f))
            done_f += 1
        while in_flight or done_f < chunks:
            pending = None
            if done_f < chunks:
                inp, out = forward(micro[done_f], done_f)
                if last:
                    total += float(out.detach())
                in_flight.append((inp, out, done_f))
                pending = (out, done_f)
                done_f += 1
            inp, out, i = in_flight.pop(0)
            backward(inp, out, i)
            if pending is not None and not last:
                comm.send(pending[0].detach(), rank + 1, tag=pending[1])
        opt.step()
        times.append(time.perf_counter() - started)
        loss = torch.tensor([total], device=device)
        comm.broadcast(loss, src=world - 1)
        losses.append(float(loss.detach()))
    return step_report(losses, times, params, opt, counter) | {"stage": rank}
