"""LobRA measured: its replica plan and per-step dispatch executed on real processes against static replica sets.

:func:`measure_lobra` draws steps from real task length distributions, scales them so the
longest drawn sequence has ``max_len`` tokens (ratios between tasks kept; shortest 4 tokens),
calibrates LobRA's cost model on this machine and runs every plan with
:class:`~sgl.systems.data.lobra_runtime.LobraRuntime` on ``world`` spawned processes:

* **calibration**: the ``world`` workers at once (one thread each, the load of the real run) time
  forward + backward of the LoRA-wrapped base (``arch="tiny"``: :class:`~sgl.systems.runtime.tiny_lm.TinyLM`;
  ``"hf-llama"``: a Hugging Face ``LlamaForCausalLM`` of the same shapes) on
  micro-batches of several shapes and fit ``t = a·Σ L² + b·Σ L + c`` (ms, least squares, averaged
  over the workers), and time a small all-reduce (``α``, ms); a replica of ``d`` processes (data
  parallel inside) is priced ``a/d, b/d`` with the same ``c`` — the pool LobRA's MILP plans over;
* **plans**: LobRA's static MILP (:func:`~sgl.systems.data.lobra.plan_replicas`) on calibration
  steps of another seed, the homogeneous baseline (:func:`~sgl.systems.data.lobra.homogeneous_replicas`)
  and every other replica set of the ``world`` devices; each step of each plan is dispatched by
  :func:`~sgl.systems.data.lobra.dispatch` in the parent (so every rank runs the same work);
* **measured**: the median wall time of a step (barrier to barrier, the slowest rank, after one
  warm-up step; the plans interleaved step by step so load on the machine hits them alike),
  beside the predicted step time: the planner's own :func:`~sgl.systems.data.lobra.step_time` plus
  ``α`` per collective of the step (:func:`~sgl.systems.data.lobra_runtime.collectives_per_step`) plus a
  per-step constant (optimizer, gradient exchange, dispatch) fitted on separate calibration steps: the
  homogeneous set executed on them, measured minus modelled.

On ``world = 2`` the only replica sets are two 1-process replicas or one 2-process replica, so
LobRA's heterogeneity has little room; the runtime, not the ratio, is what 2 processes exercise.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Dict, List

import numpy as np
import torch

from sgl._checks import check_int
from sgl.errors import PlanError

__all__ = ["cpu_lora_pool", "calibrate_lora_cost", "measure_lobra", "scaled_steps"]


def _model(cfg, tasks: int, rank: int, seed: int, arch: str = "tiny"):
    from sgl.systems.data.lobra_models import build_lora_base

    return build_lora_base(cfg, tasks, rank, arch=arch, seed=seed, targets=("q", "v"))


def calibrate_lora_cost(cfg, tasks: int = 3, rank: int = 8, max_len: int = 256, repeats: int = 2,
                        arch: str = "tiny") -> Dict[str, float]:
    """``{a, b, c}`` (ms) of ``t = a·ΣL² + b·ΣL + c`` for one LoRA micro-batch fwd+bwd on this process."""
    from sgl.systems.data.lobra_runtime import micro_batch_backward, task_token_counts

    model = _model(cfg, tasks, rank, 0, arch)
    g = torch.Generator().manual_seed(0)
    shapes = [[max_len], [max_len // 2], [max_len // 4] * 2, [max_len // 8] * 4, [16] * 8, [8], [max_len // 2] * 2]
    rows, times = [], []
    for lens in shapes:
        seqs = [torch.randint(0, cfg.vocab_size, (n,), generator=g) for n in lens]
        owner = [i % tasks for i in range(len(seqs))]
        counts = task_token_counts(seqs, owner, tasks)
        runs = []
        for _ in range(repeats + 1):
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            micro_batch_backward(model, seqs, owner, counts)
            runs.append(time.perf_counter() - started)
        rows.append([sum(n * n for n in lens), sum(lens), 1.0])
        times.append(float(np.median(runs[1:])) * 1e3)  # the first run warms up; median: steps are averaged
    coef, *_ = np.linalg.lstsq(np.array(rows, dtype=np.float64), np.array(times), rcond=None)
    a, b, c = (max(float(x), 0.0) for x in coef)
    return {"a": a, "b": b, "c": c}


def cpu_lora_pool(cost: Dict[str, float], world: int, capacity: int) -> List:
    """One scheme per data-parallel degree ``d`` dividing ``world``: ``a/d``, ``b/d``, ``c``, ``capacity`` tokens."""
    from sgl.systems.seq import SeqStrategy, StrategyCost

    check_int(world, "world", minimum=1, error=PlanError)
    pool = []
    d = 1
    while d <= world:
        if world % d == 0:
            pool.append(StrategyCost(SeqStrategy(sp=d), cost["a"] / d, cost["b"] / d, cost["c"], int(capacity),
                                     f"{d}-process replica"))
        d *= 2
    return pool


def scaled_steps(task_lengths: Dict[str, np.ndarray], mix: Dict[str, int], steps: int, max_len: int,
                 seed: int) -> tuple:
    """``(lengths per step, task id per step, scale)``: drawn per task, scaled so the longest is ``max_len``."""
    rng = np.random.default_rng(seed)
    names = [k for k in mix if mix[k] > 0]
    drawn = [[rng.choice(np.asarray(task_lengths[k]), mix[k]) for k in names] for _ in range(steps)]
    longest = max(int(x.max()) for step in drawn for x in step)
    scale = max_len / longest
    out_len, out_task = [], []
    for step in drawn:
        out_len.append(np.concatenate([np.clip(np.round(x * scale), 4, max_len).astype(np.int64) for x in step]))
        out_task.append(np.concatenate([np.full(len(x), t) for t, x in enumerate(step)]))
    return out_len, out_task, scale


def _alpha_ms(rounds: int = 20) -> float:
    """Median time (ms) of one small all-reduce between the workers: the latency of a collective under this load."""
    from sgl import comm

    probe = torch.zeros(64)
    times = []
    for _ in range(rounds):
        comm.barrier()
        started = time.perf_counter()
        comm.all_reduce(probe)
        times.append((time.perf_counter() - started) * 1e3)
    return float(np.median(times))


def _calibrate_worker(rank: int, world: int, cfg, tasks: int, lora_rank: int, max_len: int,
                      arch: str = "tiny") -> Dict[str, float]:
    torch.set_num_threads(1)
    cost = calibrate_lora_cost(cfg, tasks, lora_rank, max_len, arch=arch)  # all ranks at once: the real load
    cost["alpha"] = _alpha_ms()
    return cost


def _worker(rank: int, world: int, cfg, tasks: int, lora_rank: int, runs: list, seed: int,
            arch: str = "tiny") -> Dict[str, List[float]]:
    from sgl import comm
    from sgl.systems.data.lobra_runtime import LobraRuntime

    torch.set_num_threads(1)
    out: Dict[str, list] = {}
    state = []
    for label, steps in runs:
        model = _model(cfg, tasks, lora_rank, seed, arch)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        state.append((label, steps, LobraRuntime(model, tasks, arch=arch), opt))
        out[label], out[label + "/parts"] = [], []
    # plans interleaved step by step, so a load spike on the machine hits every plan alike; step 0 warms up
    for k in range(len(runs[0][1]) + 1):
        for label, steps, runtime, opt in state:
            step, seqs, owner = steps[max(k - 1, 0)]
            comm.barrier()
            started = time.perf_counter()
            runtime.train_step(step, seqs, owner, opt)
            comm.barrier()
            if k:
                out[label].append((time.perf_counter() - started) * 1e3)
                out[label + "/parts"].append((runtime.timings["compute_s"] * 1e3, runtime.timings["reduce_s"] * 1e3))
    return out


def _work(pool, rep, planned, lens) -> dict:
    """LobRA's ``work`` form of one planned step: per (replica kind, copy), its micro-batches' lengths."""
    keys = [(s, k) for s in sorted(rep) for k in range(rep[s])]
    return {key: [[int(lens[i]) for i in mb] for mb in mbs] for key, mbs in zip(keys, planned.work)}


def _dynamic_run(pool, sets, lobra, bounds, world, lengths, owners, seqs, tasks, cost) -> tuple:
    """The dynamic plan's steps (planned here, as the static ones) and its predicted step time."""
    from sgl.systems.data.lobra import step_time
    from sgl.systems.data.lobra_dynamic_run import DynamicLobraPlanner
    from sgl.systems.data.lobra_runtime import collectives_per_step

    planner = DynamicLobraPlanner(pool, sets, bounds, world=world, start=lobra, microbatch="bucket")
    planned, preds = [], []
    for lens, o in zip(lengths, owners):
        index, step = planner.next(lens)
        rep = planner.sets[index]
        planned.append((step, o))
        preds.append(step_time(pool, _work(pool, rep, step, lens)) + cost["alpha"] * collectives_per_step(
            step, o, lens, tasks, world) + cost["step_ms"])
    row = {"replicas": [planner.sets[i] for i in planner.choices], "lobra": False, "homogeneous": False,
           "predicted_ms": float(np.median(preds)),
           "run": [(p, s, o.tolist()) for (p, o), s in zip(planned, seqs)]}
    return "dynamic", row


def measure_lobra(task_lengths: Dict[str, np.ndarray], mix: Dict[str, int], *, steps: int = 4, world: int = 2,
                  max_len: int = 256, cfg: Any = None, lora_rank: int = 8, seed: int = 0,
                  timeout: float = 170.0, arch: str = "tiny", dynamic: bool = False) -> Dict[str, Any]:
    """Every replica set of ``world`` processes (LobRA's MILP choice marked) executed on the same steps.

    ``arch`` is the frozen base (``"tiny"`` or ``"hf-llama"``, :func:`~sgl.systems.data.lobra_models.build_lora_base`);
    with ``dynamic`` the per-step re-planned set (:class:`~sgl.systems.data.lobra_dynamic_run.DynamicLobraPlanner`
    over every static set, starting from LobRA's, free switches) runs beside them as plan ``"dynamic"``.
    """
    from sgl.systems.data.lobra_models import lora_targets
    from sgl import comm
    from sgl.systems.data.lobra import bucketize_lengths, homogeneous_replicas, plan_replicas, step_time
    from sgl.systems.data.lobra_runtime import collectives_per_step, plan_step
    from sgl.systems.parallel.model import TransformerConfig

    check_int(steps, "steps", minimum=1, error=PlanError)
    check_int(world, "world", minimum=1, error=PlanError)
    cfg = cfg or TransformerConfig("lobra-measure", 2, 64, 4, 128, 256, max_len)
    tasks = sum(1 for k in mix if mix[k] > 0)
    lora_targets(arch)  # a bad arch fails here, before any process starts
    fits = comm.spawn(_calibrate_worker, world, cfg, tasks, lora_rank, max_len, arch, timeout=timeout)
    cost = {k: float(np.mean([f[k] for f in fits])) for k in fits[0]}
    pool = cpu_lora_pool(cost, world, 2 * max_len)
    bounds = [max_len // 8, max_len // 4, max_len // 2, max_len]
    lengths, owners, scale = scaled_steps(task_lengths, mix, steps, max_len, seed)
    calib, calib_owners, _ = scaled_steps(task_lengths, mix, 3, max_len, seed + 1)  # never the measured steps
    bucket, _ = bucketize_lengths(np.concatenate(calib), bounds)
    counts = np.bincount(bucket, minlength=len(bounds)) / len(calib)
    lobra = plan_replicas(pool, world, bounds, np.ceil(counts).astype(np.int64)).replicas
    homo = homogeneous_replicas(pool, world, max_len)
    sets = [dict(zip(range(len(pool)), r)) for r in itertools.product(*[range(world // p.devices + 1) for p in pool])]
    sets = [{s: n for s, n in rep.items() if n} for rep in sets
            if sum(pool[s].devices * n for s, n in rep.items()) == world]
    g = torch.Generator().manual_seed(seed)
    seqs = [[torch.randint(0, cfg.vocab_size, (int(n),), generator=g) for n in step] for step in lengths]
    # the per-step constant the micro-batch fit cannot see (optimizer, gradient exchange, dispatch): the
    # homogeneous set executed on the calibration steps, measured minus modelled
    cal_plans = [plan_step(pool, homo, lens, bounds, world=world, repack=True) for lens in calib]
    cal_seqs = [[torch.randint(0, cfg.vocab_size, (int(n),), generator=g) for n in step] for step in calib]
    cal_model = [step_time(pool, _work(pool, homo, p, lens)) + cost["alpha"] * collectives_per_step(p, o, lens, tasks,
                                                                                                    world)
                 for p, o, lens in zip(cal_plans, calib_owners, calib)]
    cal_meas = comm.spawn(_worker, world, cfg, tasks, lora_rank,
                          [("calibration", [(p, s, o.tolist()) for p, s, o in zip(cal_plans, cal_seqs, calib_owners)])],
                          seed, arch, timeout=timeout)
    cal_ms = [max(r["calibration"][k] for r in cal_meas) for k in range(len(calib))]
    cost["step_ms"] = max(0.0, float(np.median([m - p for m, p in zip(cal_ms, cal_model)])))
    runs, info = [], {}
    for rep in sets:
        label = " + ".join(f"{n}x {pool[s].label}" for s, n in sorted(rep.items()))
        planned = [plan_step(pool, rep, lens, bounds, world=world, repack=True) for lens in lengths]
        work = [_work(pool, rep, p, lens) for p, lens in zip(planned, lengths)]
        colls = [collectives_per_step(p, o, lens, tasks, world) for p, o, lens in zip(planned, owners, lengths)]
        info[label] = {"replicas": rep, "lobra": rep == lobra, "homogeneous": rep == homo,
                       "model_ms": float(np.median([step_time(pool, w) for w in work])),
                       "predicted_ms": float(np.median([step_time(pool, w) + cost["alpha"] * n + cost["step_ms"]
                                                        for w, n in zip(work, colls)]))}
        runs.append((label, [(p, s, o.tolist()) for p, s, o in zip(planned, seqs, owners)]))
    if dynamic:
        label, info["dynamic"] = _dynamic_run(pool, sets, lobra, bounds, world, lengths, owners, seqs, tasks, cost)
        runs.append((label, info["dynamic"].pop("run")))
    measured = comm.spawn(_worker, world, cfg, tasks, lora_rank, runs, seed, arch, timeout=timeout)
    for label in info:
        ms = float(np.median([max(r[label][k] for r in measured) for k in range(steps)]))
        info[label]["compute_ms"] = float(np.median([max(r[label + "/parts"][k][0] for r in measured)
                                                     for k in range(steps)]))
        info[label]["measured_ms"] = ms
        info[label]["error"] = abs(info[label]["predicted_ms"] - ms) / ms
    lobra_label = next(k for k, v in info.items() if v["lobra"])
    homo_label = next(k for k, v in info.items() if v["homogeneous"])
    best_static = min((k for k in info if k != "dynamic"), key=lambda k: info[k]["measured_ms"])
    return {"cost_ms": cost, "scale": scale, "max_len": max_len, "steps": steps, "world": world, "plans": info,
            "arch": arch,
            "lobra": lobra_label, "homogeneous": homo_label, "best_static": best_static,
            "measured_ratio": info[homo_label]["measured_ms"] / info[lobra_label]["measured_ms"],
            "modelled_ratio": info[homo_label]["predicted_ms"] / info[lobra_label]["predicted_ms"],
            "vs_best_static": info[best_static]["measured_ms"] / info[lobra_label]["measured_ms"],
            "median_error": float(np.median([v["error"] for v in info.values()]))}
