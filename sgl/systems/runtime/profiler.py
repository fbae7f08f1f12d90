"""Measure a Transformer and the local links into Galvatron-format profile JSON.

:func:`profile_model` times one layer's forward per sample and counts the bytes autograd
saves for backward per sample under each tensor-parallel degree (the layer is rebuilt with
its attention and MLP matrices split ``tp`` ways, as one TP rank holds them) and with
checkpointing; embedding/LM-head model states and activations are counted the same way.
:func:`profile_hardware` runs ``world_size`` processes over :mod:`sgl.comm` and measures
all-reduce bus bandwidth, p2p bandwidth and how much a concurrent all-reduce slows compute
(Galvatron's ``overlap_coe``).  On this machine that means CPU and gloo: the figures calibrate
the cost model for CPU runs, they say nothing about GPUs.

>>> from sgl.systems.runtime import profile_model
>>> prof = profile_model("tiny", batch_size=2, repeats=1)
>>> prof.act_mb[1] > prof.act_mb[2] > 0 and prof.ckpt_act_mb < prof.act_mb[1]
True
"""
from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch
import torch.nn as nn

from sgl import comm
from sgl.device import get_device
from sgl.errors import PlanError
from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.parallel.profiles import (PROFILE_LAYOUTS, HardwareProfile, ModelProfile, save_hardware_profile,
                                           save_model_profile)
from sgl.systems.parallel.space import powers_of_two
from sgl.systems.runtime.measure import SavedTensorBytes
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock, lm_loss

__all__ = ["profile_model", "profile_hardware", "profile_to_dir"]

_MB = 2.0 ** 20


def _tp_shard(block: TransformerBlock, cfg: TransformerConfig, tp: int) -> TransformerBlock:
    """The part of a layer one TP rank holds: column-split q/k/v/w1/w3, row-split o/w2."""
    h, f = cfg.hidden_size, cfg.ffn_hidden_size
    block.q, block.k, block.v = (nn.Linear(h, h // tp, bias=False) for _ in range(3))
    block.o = nn.Linear(h // tp, h, bias=False)
    block.w1 = nn.Linear(h, f // tp, bias=False)
    if block.w3 is not None:
        block.w3 = nn.Linear(h, f // tp, bias=False)
    block.w2 = nn.Linear(f // tp, h, bias=False)
    return block


def _saved_per_sample(fn, params: Sequence[torch.Tensor], batch: int) -> float:
    counter = SavedTensorBytes(list(params))
    with counter.hooks():
        out = fn()
    del out
    return counter.peak / batch / _MB


def _time_per_sample(fn, batch: int, repeats: int, device: torch.device) -> float:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()  # warm-up
    samples = []
    for _ in range(max(repeats, 1)):
        sync()
        started = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - started)
    return 1000.0 * statistics.median(samples) / batch


def profile_model(model: str | TransformerConfig = "tiny", batch_size: int = 4, repeats: int = 5,
                  max_tp: int = 8, threads: int = 1, device: str | torch.device | None = None,
                  dtype: torch.dtype = torch.float32) -> ModelProfile:
    """Profile one layer and the embedding/head of ``model`` on ``device``.

    ``device`` resolves as :func:`sgl.device.get_device` does (``None``: ``$SGL_DEVICE``, else
    CUDA when available, else the CPU).

    ``threads`` is the torch thread count to time with; use what each training process will use
    (the executor defaults to 1), otherwise the forward time does not describe the run.
    """
    cfg = get_model_config(model)
    if batch_size < 1 or repeats < 1:
        raise PlanError(f"batch_size and repeats must be >= 1, got {batch_size}, {repeats}")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _profile_model(cfg, batch_size, repeats, max_tp, get_device(device), dtype)
    finally:
        torch.set_num_threads(previous)


def _profile_model(cfg: TransformerConfig, batch_size: int, repeats: int, max_tp: int,
                   device: torch.device, dtype: torch.dtype) -> ModelProfile:
    torch.manual_seed(0)
    x = torch.randn(batch_size, cfg.seq_length, cfg.hidden_size, device=device, dtype=dtype)
    width = torch.finfo(dtype).bits // 8

    def on(module: nn.Module) -> nn.Module:
        return module.to(device=device, dtype=dtype)

    block = on(TransformerBlock(cfg))
    fwd_ms = _time_per_sample(lambda: block(x), batch_size, repeats, device)
    acts: Dict[int, float] = {}
    for tp in powers_of_two(max_tp):
        if cfg.num_heads % tp or cfg.ffn_hidden_size % tp:
            break
        shard = on(_tp_shard(TransformerBlock(cfg), cfg, tp) if tp > 1 else TransformerBlock(cfg))
        acts[tp] = _saved_per_sample(lambda: shard(x), list(shard.parameters()), batch_size)
        del shard
    ckpt_block = on(TransformerBlock(cfg))
    ckpt_block.checkpoint = True
    xg = x.clone().requires_grad_()
    ckpt = _saved_per_sample(lambda: ckpt_block(xg), list(ckpt_block.parameters()), batch_size)

    lm = on(TinyLM(TransformerConfig(cfg.name, 1, cfg.hidden_size, cfg.num_heads, cfg.ffn_hidden_size,
                                     cfg.vocab_size, cfg.seq_length, cfg.gated_mlp)))
    tokens = torch.randint(0, cfg.vocab_size, (batch_size, cfg.seq_length), device=device)
    embed_params = list(lm.embed.parameters())
    head_params = list(lm.norm.parameters()) + list(lm.head.parameters())
    hidden = torch.randn(batch_size, cfg.seq_length, cfg.hidden_size, device=device, dtype=dtype, requires_grad=True)
    first_act = _saved_per_sample(lambda: lm.embed(tokens), embed_params, batch_size)
    last_act = _saved_per_sample(lambda: lm_loss(lm.head(lm.norm(hidden)), tokens), head_params, batch_size)
    other_fwd = _time_per_sample(lambda: lm_loss(lm.head(lm.norm(hidden)), tokens), batch_size, repeats, device)

    def states(params: List[torch.Tensor]) -> float:
        # Galvatron's convention: 4 x fp32 parameter bytes (fp32 Adam: parameter, gradient, two
        # moments; bf16 mixed precision lands close to it).
        return 4.0 * sum(p.numel() for p in params) * 4 / _MB

    del width
    param_mb = sum(p.numel() for p in block.parameters()) * 4 / _MB
    other = {
        "pp_off": (states(embed_params + head_params), first_act + last_act),
        "first": (states(embed_params), first_act),
        "last": (states(head_params), last_act),
    }
    return ModelProfile(param_mb=param_mb, act_mb=acts, ckpt_act_mb=ckpt, other=other, fwd_ms=fwd_ms,
                        other_fwd_ms=other_fwd, batch_size=batch_size, source=f"measured on {device.type} ({dtype}) for {cfg.name}")


def _hardware_worker(rank: int, world: int, size_mb: float, repeats: int) -> Tuple[float, float, float]:
    torch.set_num_threads(1)
    numel = int(size_mb * _MB / 4)
    device = comm.wire_device()         # the rank's GPU under NCCL, the CPU under gloo
    data = torch.ones(numel, device=device)
    comm.all_reduce(data.clone())  # warm-up
    times = []
    for _ in range(repeats):
        comm.barrier()
        started = time.perf_counter()
        comm.all_reduce(data.clone())
        times.append(time.perf_counter() - started)
    t_ar = statistics.median(times)
    p2p_times = []
    for _ in range(repeats):
        comm.barrier()
        started = time.perf_counter()
        if rank == 0:
            comm.send(data, 1)
        elif rank == 1:
            comm.recv(data, 0)
        p2p_times.append(time.perf_counter() - started)
    t_p2p = statistics.median(p2p_times)
    # Overlap: the same matmuls alone, then with an all-reduce running in another thread.
    a = torch.randn(384, 384, device=device)

    def compute() -> float:
        started = time.perf_counter()
        for _ in range(40):
            a @ a
        return time.perf_counter() - started

    compute()
    alone = statistics.median(compute() for _ in range(3))
    overlapped = []
    for _ in range(3):
        comm.barrier()
        worker = threading.Thread(target=lambda: comm.all_reduce(data.clone()))
        worker.start()
        overlapped.append(compute())
        worker.join()
    coe = max(1.0, statistics.median(overlapped) / alone)
    return t_ar, t_p2p, coe


def profile_hardware(world_size: int = 2, size_mb: float = 16.0, repeats: int = 5,
                     timeout: float = 180.0) -> HardwareProfile:
    """All-reduce / p2p bandwidth and overlap slowdown of ``world_size`` local processes (one 'node')."""
    if world_size < 2 or world_size & (world_size - 1):
        raise PlanError(f"world_size must be a power of two >= 2 to measure links, got {world_size}")
    results = comm.spawn(_hardware_worker, world_size, size_mb, repeats, timeout=timeout)
    return _hardware_from(results, world_size, size_mb)


def _hardware_from(results, world_size: int, size_mb: float) -> HardwareProfile:
    t_ar = max(r[0] for r in results)
    t_p2p = max(r[1] for r in results[:2])
    coe = statistics.median(r[2] for r in results)
    gb = size_mb / 1024.0
    busbw = 2 * (world_size - 1) / world_size * gb / t_ar
    allreduce = {}
    for g in powers_of_two(world_size)[1:]:
        # Only the full group was measured; smaller groups on one host are assumed no slower.
        allreduce[(g, 1)] = busbw
        if g < world_size:
            allreduce[(g, 0)] = busbw
    return HardwareProfile(1, world_size, allreduce, {pp: gb / t_p2p for pp in powers_of_two(world_size)[1:]},
                           coe, source=f"measured: {world_size} local gloo processes")


def _cluster_worker(rank: int, world: int, cfg: TransformerConfig, batch_size: int, repeats: int,
                    threads: int, size_mb: float):
    """One process of :func:`profile_to_dir`: layer timing (all ranks at once), then the links."""
    prof = profile_model(cfg, batch_size=batch_size, repeats=repeats, threads=threads, max_tp=1,
                         device=comm.wire_device())
    return (prof.fwd_ms, prof.other_fwd_ms), _hardware_worker(rank, world, size_mb, repeats)


def profile_to_dir(out: str | Path, model: str | TransformerConfig = "tiny", world_size: int = 2,
                   batch_size: int = 4, repeats: int = 5, threads: int = 1, size_mb: float = 16.0) -> List[Path]:
    """Profile model and links; write Galvatron-format JSONs into ``out``; return their paths.

    Forward times are taken in ``world_size`` processes at once (the median over ranks), as
    Galvatron profiles on all devices together: on a shared CPU a lone process runs faster
    than each of several training processes does.
    """
    cfg = get_model_config(model)
    profile = profile_model(cfg, batch_size=batch_size, repeats=repeats, threads=threads)
    if world_size < 2 or world_size & (world_size - 1):
        raise PlanError(f"world_size must be a power of two >= 2 to measure links, got {world_size}")
    results = comm.spawn(_cluster_worker, world_size, cfg, batch_size, repeats, threads, size_mb, timeout=600)
    profile.fwd_ms = statistics.median(r[0][0] for r in results)
    profile.other_fwd_ms = statistics.median(r[0][1] for r in results)
    profile.source += f", times from {world_size} concurrent processes"
    # Both layouts, so that Galvatron 3.0 (``*_all.json``) and Galvatron 1/2 read the same measurement.
    paths = [path for layout in PROFILE_LAYOUTS for path in save_model_profile(profile, out, cfg, "fp32", layout)]
    hardware = _hardware_from([r[1] for r in results], world_size, size_mb)
    paths += list(save_hardware_profile(hardware, out))
    return paths
