"""Calibrate the sequence cost model on this machine with the runtime's small Transformer.

:func:`calibrate_cost_model` times one :class:`~sgl.systems.runtime.tiny_lm.TransformerBlock`
forward + backward on single sequences of several lengths ``s`` (median of ``repeats``), scales
by the layer count and fits FlexSP's per-sequence form by non-negative least squares

.. math:: T(s) = α_1 s^2 + α_2 s + β \\quad (\\text{ms, whole model, one device}),

and takes the activation memory per token from the existing profiler
(:func:`sgl.systems.runtime.profile_model`: bytes autograd saves per sample / its sequence
length × layers).  The result is a :class:`SeqCostModel` for the measured model (its parameter
count, width and depth) that every planner accepts, plus a report of measured vs fitted times.
On this machine that is a CPU calibration: it describes CPU runs, not GPUs.

The rest of the module holds the machine micro-benchmarks behind
:func:`sgl.systems.seq.profile.calibrate_machine` (``sgl plan calibrate``): :func:`compute_samples`
(attention, token-wise layer work, embedding + head, the whole model, saved activations, one
optimiser step), :func:`link_samples` (all-reduce, all-to-all, send/recv per message size),
:func:`calibration_worker` (one process of the calibration) and :func:`fit_relative` (NNLS on
relative error).

>>> model, report = calibrate_cost_model("tiny", lengths=(16, 64), repeats=1, devices=2, memory_gb=1.0)
>>> sorted(report) == ["act_mb_per_token", "alpha1", "alpha2", "beta", "fitted_ms", "lengths", "measured_ms"]
True
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence, Tuple

import numpy as np

from sgl.errors import PlanError
from sgl.systems.seq.cost import SeqCostModel, SeqHardware, SeqModelSpec

__all__ = ["calibrate_cost_model", "compute_samples", "strategy_samples", "link_samples", "calibration_worker",
           "fit_relative", "runtime_paths", "COMPUTE_PARTS", "LINKS"]


def _layer_ms(block, hidden: int, s: int, repeats: int) -> float:
    import torch

    x = torch.randn(1, s, hidden, requires_grad=True)
    times = []
    for r in range(repeats + 1):                  # the first run warms up
        t0 = time.perf_counter()
        block(x).sum().backward()
        if r:
            times.append((time.perf_counter() - t0) * 1e3)
    return float(statistics.median(times))


def calibrate_cost_model(model="tiny", lengths: Sequence[int] = (32, 128, 512), *, repeats: int = 3,
                         devices: int = 2, memory_gb: float = 8.0, threads: int = 1
                         ) -> Tuple[SeqCostModel, dict]:
    """``(cost model, report)`` measured on this process (module doc)."""
    import torch
    from scipy.optimize import nnls

    from sgl.systems.parallel.model import get_model_config
    from sgl.systems.runtime.profiler import profile_model
    from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock

    cfg = get_model_config(model)
    lengths = sorted({int(s) for s in lengths})
    if len(lengths) < 2 or lengths[0] < 1:
        raise PlanError(f"calibration needs at least two sequence lengths >= 1, got {lengths}")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        block = TransformerBlock(cfg)
        measured = np.array([_layer_ms(block, cfg.hidden_size, s, repeats) for s in lengths]) * cfg.num_layers
        prof = profile_model(cfg, batch_size=1, repeats=1, max_tp=1, threads=threads)
    finally:
        torch.set_num_threads(previous)
    s = np.asarray(lengths, dtype=np.float64)
    design = np.stack([s * s, s, np.ones_like(s)], axis=1)
    scale = design.max(axis=0)
    coef, _ = nnls(design / scale, measured)
    alpha1, alpha2, beta = (coef / scale).tolist()
    act = prof.act_mb[1] / cfg.seq_length * cfg.num_layers
    params_b = sum(p.numel() for p in TinyLM(cfg).parameters()) / 1e9
    spec = SeqModelSpec(layers=cfg.num_layers, hidden=cfg.hidden_size, kv_hidden=cfg.hidden_size,
                        params_b=params_b, act_mb_per_token=act)
    hardware = SeqHardware(memory_mb=memory_gb * 1024.0, alpha1=alpha1, alpha2=alpha2, beta=beta)
    report = {"lengths": lengths, "measured_ms": measured.round(3).tolist(),
              "fitted_ms": (design @ np.array([alpha1, alpha2, beta])).round(3).tolist(),
              "alpha1": alpha1, "alpha2": alpha2, "beta": beta, "act_mb_per_token": act}
    return SeqCostModel(spec, hardware, devices), report


# ---------------------------------------------------------------------------------------------
# Machine micro-benchmarks behind :func:`sgl.systems.seq.profile.calibrate_machine`: every rank of
# a ``sgl.comm.spawn`` group times the compute parts at once (a lone process on a shared CPU runs
# faster than each of several training processes), then the collectives the executors call.

#: the compute parts timed per sequence length (fwd + bwd), in the order of the profile's samples
COMPUTE_PARTS = ("attention", "linear", "head", "model")
#: the collectives timed per message size, named as the profile's links
LINKS = ("all_reduce", "all_to_all", "send_recv")


def _timed(fn, repeats: int, device) -> list:
    """Milliseconds of ``repeats`` calls of ``fn`` after one warm-up (device-synchronised)."""
    import torch

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fn()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _tokenwise(block, x):
    """A layer's token-wise work (norms, q/k/v/o projections, MLP): :func:`sequence_parallel_block` minus attention."""
    import torch.nn.functional as F

    y = block.ln1(x)
    a = block.q(y) + block.k(y) + block.v(y)        # the projections' cost; attention itself is timed apart
    x = x + block.o(a)
    y = block.ln2(x)
    hidden = F.silu(block.w1(y)) * block.w3(y) if block.w3 is not None else F.gelu(block.w1(y))
    return x + block.w2(hidden)


def runtime_paths() -> tuple:
    """``(attention, lm, name)``: what the step executor runs -- per-document attention costing ``Σ s_i²``
    (:mod:`~sgl.systems.seq.doc_attention`, :func:`~sgl.systems.seq.executor.varlen_lm`) -- or, where that
    runtime is absent, the dense-mask reference (:func:`varlen_attention`, :func:`sequence_parallel_lm`)."""
    try:
        from sgl.systems.seq.doc_attention import document_attention
        from sgl.systems.seq.executor import varlen_lm
    except ImportError:
        from sgl.systems.seq.sp_block import sequence_parallel_lm
        from sgl.systems.seq.varlen import varlen_attention

        return varlen_attention, sequence_parallel_lm, "varlen (dense mask)"
    return document_attention, varlen_lm, "document attention (executor)"


def compute_samples(cfg, lengths: Sequence[int], repeats: int, device) -> dict:
    """Per length: ms of attention (one layer), token-wise layer work (one layer), embedding + LM head + loss,
    the whole model through the packed runtime path, and MB saved for backward by the whole model."""
    import torch
    import torch.nn.functional as F

    from sgl.systems.runtime.measure import SavedTensorBytes
    from sgl.systems.runtime.tiny_lm import TinyLM
    from sgl.systems.seq.varlen import cu_seqlens

    attention, lm, path = runtime_paths()

    torch.manual_seed(0)
    model = TinyLM(cfg).to(device)
    block = model.blocks[0]
    params = list(model.parameters())
    heads, head_dim = cfg.num_heads, cfg.head_dim
    out: dict = {part: [] for part in COMPUTE_PARTS}
    out["saved_mb"] = []

    def run(loss_fn):
        def step():
            model.zero_grad(set_to_none=True)
            loss_fn().backward()
        return step

    for s in lengths:
        cu = cu_seqlens([s]).to(device)
        q, k, v = (torch.randn(s, heads, head_dim, device=device, requires_grad=True) for _ in range(3))
        x = torch.randn(s, cfg.hidden_size, device=device, requires_grad=True)
        tokens = torch.randint(cfg.vocab_size, (s,), device=device)

        def whole():
            logits = lm(model, tokens, cu, "local")
            return F.cross_entropy(logits[:-1], tokens[1:]) if s > 1 else logits.sum()

        out["attention"].append(_timed(run(lambda: attention(q, k, v, cu).sum()), repeats, device))
        out["linear"].append(_timed(run(lambda: _tokenwise(block, x).sum()), repeats, device))
        out["head"].append(_timed(run(lambda: F.cross_entropy(model.head(model.norm(model.embed(tokens))), tokens)),
                                  repeats, device))
        out["model"].append(_timed(run(whole), repeats, device))
        counter = SavedTensorBytes(params)
        with counter.hooks():
            loss = whole()
        del loss
        out["saved_mb"].append(counter.peak / 2**20)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for p in params:
        p.grad = torch.zeros_like(p)
    out["optimizer"] = _timed(opt.step, repeats, device)
    out["device"] = str(device)
    out["path"] = path
    return out


def link_samples(rank: int, world: int, sizes: Sequence[int], repeats: int) -> dict:
    """Per message size (bytes per rank): ms of all-reduce, Ulysses-style all-to-all (sizes exchanged
    first, as :func:`~sgl.systems.seq.ulysses.ulysses_attention` calls it) and rank 0 → 1 send/recv."""
    import torch

    from sgl import comm

    device = comm.wire_device()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    out: dict = {name: [] for name in LINKS}
    for size in sizes:
        numel = max(world, int(size) // 4)
        data = torch.zeros(numel, device=device)
        chunks = list(data.chunk(world))

        def one(fn):
            fn()                                   # warm-up
            times = []
            for _ in range(repeats):
                comm.barrier()
                t0 = time.perf_counter()
                fn()
                sync()
                times.append((time.perf_counter() - t0) * 1e3)
            return times

        out["all_reduce"].append(one(lambda: comm.all_reduce(data)))
        out["all_to_all"].append(one(lambda: comm.all_to_all(chunks)))
        if rank == 0:
            out["send_recv"].append(one(lambda: comm.send(data, 1)))
        elif rank == 1:
            out["send_recv"].append(one(lambda: comm.recv(data, 0)))
        else:
            out["send_recv"].append(one(lambda: None))
    return out


def strategy_samples(cfg, lengths: Sequence[int], repeats: int) -> dict:
    """Per length: ms of one layer's Ulysses and ring attention (fwd + bwd, the executor's per-document
    kernels) on one sequence of ``s`` tokens sharded contiguously over the whole world; ``{}`` without
    that runtime.  Ring attention on contiguous shards is causally unbalanced (the last rank meets
    every earlier block), which the local attention's ``a / world`` misses."""
    import torch

    from sgl import comm
    from sgl.systems.seq.varlen import cu_seqlens, shard_bounds

    try:
        from sgl.systems.seq.doc_attention import document_ring_attention, document_ulysses_attention
    except ImportError:
        return {}
    device = comm.wire_device()
    world, rank = comm.get_world_size(), comm.get_rank()
    out: dict = {"ulysses": [], "ring": []}
    if cfg.num_heads % world:
        return {}
    for s in lengths:
        start, stop = shard_bounds(max(int(s), world), world)[rank]
        cu = cu_seqlens([max(int(s), world)]).to(device)
        q, k, v = (torch.randn(stop - start, cfg.num_heads, cfg.head_dim, device=device, requires_grad=True)
                   for _ in range(3))
        for name, fn in (("ulysses", document_ulysses_attention), ("ring", document_ring_attention)):
            out[name].append(_timed(lambda: fn(q, k, v, cu).sum().backward(), repeats, device))
    return out


def calibration_worker(rank: int, world: int, cfg, lengths: Sequence[int], repeats: int, threads: int,
                       sizes: Sequence[int], link_repeats: int) -> tuple:
    """One process of :func:`~sgl.systems.seq.profile.calibrate_machine`: compute samples, then links."""
    import torch

    from sgl import comm

    torch.set_num_threads(threads)
    compute = compute_samples(cfg, lengths, repeats, comm.wire_device())
    comm.barrier()
    compute["strategies"] = strategy_samples(cfg, lengths, repeats)
    comm.barrier()
    return compute, link_samples(rank, world, sizes, link_repeats)


def fit_relative(design: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising the *relative* squared error ``Σ ((design·x - t) / t)²``
    (each sample counts alike, so the small sizes that show latency are not drowned by the large ones)."""
    from scipy.optimize import nnls

    design = np.asarray(design, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    if design.shape[0] < design.shape[1] or np.any(times <= 0):
        raise PlanError(f"cannot fit {design.shape[1]} terms to {design.shape[0]} samples (times {times.tolist()}); "
                        f"give at least {design.shape[1]} sizes / lengths with positive times")
    weighted = design / times[:, None]
    scale = np.abs(weighted).max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(weighted / scale, np.ones_like(times))
    return coef / scale
