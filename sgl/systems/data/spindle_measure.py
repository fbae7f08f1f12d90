"""Spindle measured: its wavefront plan executed on real processes against the two baselines, predicted vs measured.

:func:`measure_spindle` builds a :class:`~sgl.systems.data.spindle_model.MultiModalModel`, then

* **calibrates** on the ``world`` workers at once (one thread each, the load of the real run):
  each operator's forward + backward on ``⌈B/g⌉`` rows for every ``g`` (its scaling curve,
  :func:`~sgl.systems.data.spindle_model.calibrate_curves`, averaged over the workers), the
  time of sending one operator output between two workers (the link bandwidth of the planner's
  :class:`~sgl.systems.data.spindle_sim.LinkModel`: ``out_mb / seconds``, latency included, as
  the real transfers are of that size), a small all-reduce (``α``) and the all-reduce of the
  whole gradient;
* **plans** with :class:`~sgl.systems.data.spindle.SpindlePlanner` on those curves and links;
  the baselines are the modelled bench's: one big pipeline (every operator on all devices) and
  an even split of the devices per task (when there are at least as many devices as tasks);
* **runs** every plan with :class:`~sgl.systems.data.spindle_runtime.SpindleRuntime` on the same
  batch (one warm-up step, then ``steps`` timed barrier to barrier, the plans interleaved step by
  step so load on the machine hits them alike; the median step) and prints measured beside
  predicted: the planner's replayed makespan (:func:`~sgl.systems.data.spindle_sim.replay`)
  plus the closing all-reduces (the timed gradient all-reduce + ``α`` for the loss).
"""
from __future__ import annotations

import time
from typing import Any, Dict, Sequence

import numpy as np
import torch

from sgl._checks import check_int
from sgl.errors import PlanError

__all__ = ["measure_spindle"]


def _build(spec: Dict[str, Any], seed: int):
    from sgl.systems.data.spindle_model import MultiModalModel, synthetic_batch

    torch.manual_seed(seed)
    model = MultiModalModel(**spec["model"])
    return model, synthetic_batch(model, spec["rows"], seed)


def _calibrate_worker(rank: int, world: int, spec: Dict[str, Any], seed: int) -> Dict[str, Any]:
    from sgl import comm
    from sgl.systems.data.spindle_model import calibrate_curves

    torch.set_num_threads(1)
    model, batch = _build(spec, seed)
    devices = tuple(g for g in (1, 2, 4, 8, 16) if g <= world)
    curves = calibrate_curves(model, batch, devices, repeats=3)
    out = torch.randn(spec["rows"], model.hidden)
    grads = torch.zeros(sum(p.numel() for p in model.parameters()))
    sends, alpha, closing = [], [], []
    for _ in range(10):
        comm.barrier()
        started = time.perf_counter()
        if rank == 0:
            comm.send(out, 1)
        elif rank == 1:
            comm.recv(out, 0)
        sends.append(time.perf_counter() - started)
        comm.barrier()
        started = time.perf_counter()
        comm.all_reduce(torch.zeros(64))
        alpha.append(time.perf_counter() - started)
        comm.barrier()
        started = time.perf_counter()
        comm.all_reduce(grads)
        closing.append(time.perf_counter() - started)
    return {"curves": curves, "send_s": float(np.median(sends)), "alpha_s": float(np.median(alpha)),
            "closing_s": float(np.median(closing)), "mb": out.numel() * 4 / 1e6}


def _run_worker(rank: int, world: int, spec: Dict[str, Any], seed: int, plans: list, steps: int) -> Dict[str, list]:
    from sgl import comm
    from sgl.systems.data.spindle_runtime import SpindleRuntime

    torch.set_num_threads(1)
    runs = []
    for plan in plans:
        model, batch = _build(spec, seed)
        runs.append((plan, SpindleRuntime(model), batch))
    out: Dict[str, list] = {plan.label: [] for plan in plans}
    for k in range(steps + 1):  # plans interleaved so load on the machine hits them alike; step 0 warms up
        for plan, runtime, batch in runs:
            comm.barrier()
            started = time.perf_counter()
            runtime.step(plan, batch)
            comm.barrier()
            if k:
                out[plan.label].append(time.perf_counter() - started)
    return out


def measure_spindle(tasks: Sequence = (("vqa", ("vision", "text"), 4), ("asr", ("audio",), 8)), *, world: int = 2,
                    rows: int = 64, steps: int = 3, hidden: int = 64, seed: int = 0,
                    timeout: float = 170.0, arch: str = "tiny") -> Dict[str, Any]:
    """Spindle's plan, one big pipeline and an even split executed on ``world`` processes; see the module doc.

    ``arch`` is the shared LM tower: ``"tiny"`` (Transformer encoder layers) or ``"hf-llama"`` (a tiny
    Hugging Face Llama's decoder layers, :class:`~sgl.systems.data.spindle_hf.LlamaTower`).
    """
    from sgl import comm
    from sgl.systems.data.spindle import SpindleConfig, SpindlePlanner, big_pipeline, even_split
    from sgl.systems.data.spindle_model import SPINDLE_ARCHS, MultiModalModel, spindle_dag
    from sgl.systems.data.spindle_runtime import big_pipeline_plan, even_split_plan, spindle_exec_plan

    check_int(world, "world", minimum=2, error=PlanError)
    check_int(steps, "steps", minimum=1, error=PlanError)
    spec = {"rows": int(rows), "model": {"tasks": tuple(tasks), "hidden": hidden, "query_tokens": 8, "text_len": 32,
                                         "image_size": 32, "audio_len": 4096, "arch": arch}}
    if arch not in SPINDLE_ARCHS:  # before any process starts
        raise PlanError(f"unknown backbone arch {arch!r}; choose one of {list(SPINDLE_ARCHS)}")
    cal = comm.spawn(_calibrate_worker, world, spec, seed, timeout=timeout)
    names = list(cal[0]["curves"])
    curves = {op: (cal[0]["curves"][op][0], tuple(float(np.mean([c["curves"][op][1][j] for c in cal]))
                                                  for j in range(len(cal[0]["curves"][op][1]))))
              for op in names}
    send_s = float(np.median([c["send_s"] for c in cal]))
    alpha = float(np.median([c["alpha_s"] for c in cal]))
    gbps = cal[0]["mb"] / 1e3 / max(send_s, 1e-9)
    # the gradient and loss all-reduces every plan ends with, timed at their real size
    closing = alpha + float(np.median([c["closing_s"] for c in cal]))
    model = MultiModalModel(**spec["model"])
    dag = spindle_dag(model, curves, rows)
    config = SpindleConfig(devices=world, devices_per_node=world, intra_gbps=gbps, inter_gbps=gbps)
    result = SpindlePlanner(dag, config).plan()
    plans = [spindle_exec_plan(dag, result, world), big_pipeline_plan(model, world)]
    plans[1].predicted_s = big_pipeline(dag, world, config.link).makespan
    if len(model.tasks) <= world:
        plans.append(even_split_plan(model, world))
        plans[2].predicted_s = even_split(dag, world, config.link).makespan
    measured = comm.spawn(_run_worker, world, spec, seed, plans, steps, timeout=timeout)
    rows_out = {}
    for plan in plans:
        ms = float(np.median([max(r[plan.label][k] for r in measured) for k in range(steps)])) * 1e3
        pred = (plan.predicted_s + closing) * 1e3
        rows_out[plan.label] = {"measured_ms": ms, "predicted_ms": pred, "error": abs(pred - ms) / ms,
                                "devices": {op: list(r) for op, r in plan.devices.items()}}
    spin = rows_out["spindle"]
    for name in ("one big pipeline", "even split"):
        if name in rows_out:
            rows_out[name]["measured_ratio"] = rows_out[name]["measured_ms"] / spin["measured_ms"]
            rows_out[name]["modelled_ratio"] = rows_out[name]["predicted_ms"] / spin["predicted_ms"]
    return {"world": world, "rows": rows, "steps": steps, "link_gbps": gbps, "alpha_ms": alpha * 1e3, "arch": arch,
            "curves_ms": {op: [round(t * 1e3, 2) for t in c[1]] for op, c in curves.items()},
            "plans": rows_out, "median_error": float(np.median([r["error"] for r in rows_out.values()]))}
