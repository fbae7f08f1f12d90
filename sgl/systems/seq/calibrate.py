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

__all__ = ["calibrate_cost_model"]


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
