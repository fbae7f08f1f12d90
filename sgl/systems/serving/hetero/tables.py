"""Throughput tables: a roofline model from GPU datasheets, and calibration from a measured run.

No per-GPU serving table for these configs is public (Mélange publishes its solver format with
example numbers only), so :func:`roofline_problem` *models* one. For a decoder with ``P``
parameters (2 bytes each), KV bytes ``κ`` per token, a replica of ``tp·pp`` GPUs with memory
``M``, bandwidth ``β`` and peak ``F`` FLOP/s each serves requests of ``(i, o)`` tokens with

    b = floor((0.9 M tp pp - 2P) / (κ (i + o)))            concurrent requests (KV must fit)
    t_step = max(2P / (tp β η_tp), 2 P b / (tp F μ)) + pp·δ  one decode step of the batch
    t_pre  = 2 P i / (tp pp F μ)                             prefill of one request
    θ = b / (b t_pre + o t_step)                            requests per second,

with ``η_tp`` the TP efficiency (communication), ``μ`` the model-FLOP utilisation and ``δ`` a
per-stage latency; a config whose weights or one request's KV do not fit gets no entry.
:func:`calibrate` rescales a table with measured throughputs: measured cells are replaced and
every other cell of a measured config is scaled by the geometric-mean measured/modelled ratio.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Sequence, Tuple

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.serving.hetero.spec import DeployConfig, GPUType, ServingProblem, Workload

__all__ = ["GPUSpec", "ModelSpec", "roofline_throughput", "roofline_problem", "calibrate"]


@dataclass(frozen=True)
class GPUSpec:
    """Datasheet figures of a GPU type: memory (GB), bandwidth (GB/s), dense bf16 TFLOP/s, price ($/h)."""

    name: str
    memory_gb: float
    bandwidth_gbs: float
    tflops: float
    price_per_hour: float
    available: int = 8


@dataclass(frozen=True)
class ModelSpec:
    """A decoder: parameters (billions) and KV bytes per token (``2 · layers · kv_heads · head_dim · 2``)."""

    name: str
    params_b: float
    kv_bytes_per_token: float


def roofline_throughput(gpu: GPUSpec, model: ModelSpec, tp: int, pp: int, tokens_in: int, tokens_out: int, *,
                        tp_efficiency: float = 0.85, mfu: float = 0.5, stage_latency_s: float = 2e-4) -> float:
    """Modelled requests/s of one replica (0 when it does not fit); see the module formula."""
    tp, pp = check_int(tp, "tp", minimum=1), check_int(pp, "pp", minimum=1)
    weights = 2.0 * model.params_b * 1e9
    free = 0.9 * gpu.memory_gb * 1e9 * tp * pp - weights
    batch = math.floor(free / (model.kv_bytes_per_token * (tokens_in + tokens_out))) if free > 0 else 0
    if batch < 1:
        return 0.0
    batch = min(batch, 256)
    eff = tp_efficiency ** math.log2(tp) if tp > 1 else 1.0
    flops = gpu.tflops * 1e12 * mfu
    # one decode step passes every stage in turn: it reads all weights once, tp-way in parallel
    step = max(weights / (tp * gpu.bandwidth_gbs * 1e9 * eff),
               2 * model.params_b * 1e9 * batch / (tp * flops)) + pp * stage_latency_s
    prefill = 2 * model.params_b * 1e9 * tokens_in / (tp * pp * flops)
    return batch / (batch * prefill + tokens_out * step)


def roofline_problem(gpus: Sequence[GPUSpec], model: ModelSpec, workloads: Dict[str, Tuple[int, int, float]],
                     degrees: Iterable[Tuple[int, int]] = ((1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (4, 2))
                     ) -> ServingProblem:
    """A :class:`ServingProblem` whose configs are every (GPU type, TP, PP) that fits the model.

    ``workloads`` maps a name to ``(input tokens, output tokens, requests)``.
    """
    configs: List[DeployConfig] = []
    for g in gpus:
        for tp, pp in degrees:
            if tp * pp > g.available:
                continue
            thr = {name: roofline_throughput(g, model, tp, pp, i, o) for name, (i, o, _) in workloads.items()}
            thr = {k: v for k, v in thr.items() if v > 0}
            if thr:
                configs.append(DeployConfig(f"{g.name}-tp{tp}pp{pp}", {g.name: tp * pp}, thr, tp, pp))
    if not configs:
        raise PlanError(f"{model.name} fits on none of the GPU types {[g.name for g in gpus]}")
    return ServingProblem([GPUType(g.name, g.price_per_hour, g.available) for g in gpus], configs,
                          [Workload(name, r) for name, (_, _, r) in workloads.items()])


def calibrate(prob: ServingProblem, measured: Dict[str, Dict[str, float]]) -> ServingProblem:
    """``prob`` with measured throughputs (config -> workload -> requests/s) folded in."""
    names = {c.name for c in prob.configs}
    unknown = set(measured) - names
    if unknown:
        raise PlanError(f"calibration names unknown config(s) {sorted(unknown)}; known: {sorted(names)}")
    configs = []
    for c in prob.configs:
        got = measured.get(c.name)
        if not got:
            configs.append(c)
            continue
        ratios = []
        for w, v in got.items():
            check_real(v, f"measured throughput of {c.name!r} on {w!r}", 0.0, open_low=True, error=PlanError)
            if w not in c.throughput:
                raise PlanError(f"config {c.name!r} has no modelled throughput for {w!r} to calibrate")
            ratios.append(math.log(v / c.throughput[w]))
        scale = math.exp(sum(ratios) / len(ratios))
        thr = {w: got.get(w, v * scale) for w, v in c.throughput.items()}
        configs.append(replace(c, throughput=thr))
    return ServingProblem(prob.gpus, configs, prob.workloads)
