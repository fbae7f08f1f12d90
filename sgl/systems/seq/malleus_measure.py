"""Measured Malleus: the straggler-aware plan against the straggler-oblivious plan on real processes.

:func:`measure_malleus` runs ``world`` local processes with one rank slowed ``factor`` times
(:func:`~sgl.systems.seq.malleus_runtime.inject_straggler`).  Every rank first times one layer's
forward + backward on one micro-batch (the planner's ``layer_ms``, the minimum over ranks, taken
before any slow-down).  Training then starts on the oblivious plan (uniform TP groups, layers and
micro-batches); its step timings give the per-rank rates, :meth:`MalleusTrainer.replan` re-plans
and migrates the model states live, and training continues on the straggler-aware plan.  The
result holds each plan's median measured step time, the measured ratio, the planner's own
(modelled) ratio at the measured rates and at the injected ones, and predicted against measured
step time per plan.  The prediction counts the layers only (no embedding, LM head, optimiser or
gradient all-reduce), so it under-predicts by that fixed part.

A tiny run (a few seconds; the benchmark uses :data:`BENCH_MODEL` and more steps):

>>> from sgl.systems.parallel.model import TransformerConfig
>>> out = measure_malleus(world=1, model=TransformerConfig("t", 2, 16, 2, 32, 32, 8), micro_batches=2,
...                       steps=1, warmup=0)             # one rank: nothing to re-plan around
>>> out["aware"]["micro_batches"], out["measured_ratio"] > 0
([2], True)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Union

import numpy as np
import torch

from sgl import comm
from sgl._checks import check_choice, check_int
from sgl.errors import PlanError
from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.seq.malleus_runtime import (MALLEUS_ARCHS, MalleusRunConfig, MalleusTrainer, _worker_threads,
                                             inject_straggler, time_layer_ms)

__all__ = ["BENCH_MODEL", "measure_malleus"]

#: the benchmark's model: compute-bound on a CPU core (~10-30 ms per layer and micro-batch)
BENCH_MODEL = TransformerConfig("malleus-bench", 6, 128, 4, 352, 512, 128)


def _phase(trainer: MalleusTrainer, warmup: int, steps: int) -> list:
    times = []
    for s in range(warmup + steps):
        _, seconds = trainer.step(trainer.steps_done)
        if s >= warmup:
            times.append(seconds * 1e3)
    return times


def _measure_worker(rank: int, world: int, cfg: MalleusRunConfig, warmup: int, steps: int, rounds: int,
                    rates_from: str, own_process: bool = True) -> Dict[str, Any]:
    if own_process:
        _worker_threads(cfg)
    mine = torch.tensor([time_layer_ms(cfg)], dtype=torch.float64, device=comm.wire_device())
    layer_ms = float(comm.all_reduce(mine, op="min")[0])
    cfg = dataclasses.replace(cfg, layer_ms=layer_ms)
    planner = cfg.planner(world)
    injected = np.ones(world)
    injected[cfg.straggler.rank] = cfg.straggler.factor
    oblivious = planner.oblivious(np.ones(world))
    trainer = MalleusTrainer(rank, world, oblivious, cfg)
    obl_ms = _phase(trainer, warmup, steps)
    step_rates = trainer.measured_rates()
    probe_rates = trainer.probe_rates()
    rates = probe_rates if rates_from == "probe" else step_rates
    predicted_obl = planner.oblivious(rates).step_ms
    moved = trainer.replan(rates)                       # live: re-plan and migrate
    aware_plan = trainer.plan
    aware_ms = _phase(trainer, 0, steps)
    for _ in range(rounds - 1):                         # alternate, so load drift hits both sides
        trainer.migrate_to(oblivious)
        obl_ms += _phase(trainer, 0, steps)
        trainer.migrate_to(aware_plan)
        aware_ms += _phase(trainer, 0, steps)
    trainer.sender.close()
    obl, aware = float(np.median(obl_ms)), float(np.median(aware_ms))
    return {
        "layout": f"tp={cfg.tp} pp={cfg.pp} dp={planner.dp}", "arch": cfg.arch, "world": world,
        "factor": cfg.straggler.factor,
        "layer_ms": layer_ms, "measured_rates": moved["rates"], "rates_from": rates_from,
        "step_rates": [round(float(r), 3) for r in step_rates],
        "probe_rates": [round(float(r), 3) for r in probe_rates],
        "oblivious": {"measured_ms": obl, "predicted_ms": predicted_obl, "all_ms": obl_ms,
                      "micro_batches": oblivious.micro_batches, "layers": oblivious.layers},
        "aware": {"measured_ms": aware, "predicted_ms": aware_plan.step_ms, "all_ms": aware_ms,
                  "micro_batches": aware_plan.micro_batches, "layers": aware_plan.layers,
                  "pipelines": aware_plan.pipelines},
        "measured_ratio": obl / aware,
        "modelled_ratio": predicted_obl / aware_plan.step_ms,
        "modelled_ratio_injected": planner.oblivious(injected).step_ms / planner.plan(injected).step_ms,
        "migration": {k: moved[k] for k in ("received_mb", "planned_mb", "migration_s")},
    }


def measure_malleus(world: int = 2, factor: float = 2.0, straggler_rank: int = 0, *,
                    model: Union[str, TransformerConfig] = BENCH_MODEL, layout: str = "dp", micro_batches: int = 12,
                    micro_batch_size: int = 2, steps: int = 2, warmup: int = 1, rounds: int = 2,
                    rates_from: str = "steps", seed: int = 0, arch: str = "tiny",
                    timeout: float = 300.0, backend: str = "gloo") -> Dict[str, Any]:
    """Measured step time of the straggler-aware vs the oblivious plan with one injected straggler.

    ``layout`` is ``"dp"`` (``world`` one-device pipelines: the plans differ in micro-batches per
    pipeline), ``"pp"`` (one pipeline of ``world`` one-device stages: they differ in layers per
    stage) or ``"tp"`` (one TP group of ``world``: the aware plan regroups it).  ``rounds`` > 1
    migrates back and forth between the two plans, ``steps`` measured steps each time.
    ``rates_from`` picks the rates the re-plan uses: ``"steps"`` (the oblivious steps' compute
    timings, :meth:`MalleusTrainer.measured_rates`; seconds of data) or ``"probe"`` (every rank
    times one layer at once, :meth:`MalleusTrainer.probe_rates`; quicker, noisier on a shared
    CPU); both are reported.  ``arch`` is the model implementation (``"tiny"``: TinyLM, ``"hf-llama"``:
    Hugging Face ``LlamaForCausalLM`` with the same shapes; :data:`MALLEUS_ARCHS`).
    """
    world = check_int(world, "world", 1, error=PlanError)
    check_choice(layout, "layout", ("dp", "pp", "tp"), error=PlanError)
    check_choice(rates_from, "rates_from", ("probe", "steps"), error=PlanError)
    check_choice(arch, "arch", MALLEUS_ARCHS, error=PlanError)
    straggler = inject_straggler(straggler_rank, factor)
    warmup = check_int(warmup, "warmup", 0, error=PlanError)
    rounds = check_int(rounds, "rounds", 1, error=PlanError)
    if straggler.rank >= world:
        raise PlanError(f"straggler rank {straggler.rank} does not exist among {world} processes")
    mc = get_model_config(model)
    if layout == "pp" and world > mc.num_layers:
        raise PlanError(f"layout='pp' puts one stage per process: {world} processes for {mc.num_layers} layers")
    tp, pp = {"dp": (1, 1), "pp": (1, world), "tp": (world, 1)}[layout]
    cfg = MalleusRunConfig(model=mc, micro_batches=micro_batches, micro_batch_size=micro_batch_size,
                           steps=warmup + 2 * rounds * check_int(steps, "steps", 1, error=PlanError), seed=seed,
                           tp=tp, pp=pp, straggler=straggler, arch=arch)
    if world == 1:         # no processes to spawn: measure here (collectives are identities)
        return _measure_worker(0, 1, cfg, warmup, steps, rounds, rates_from, own_process=False)
    return comm.spawn(_measure_worker, world, cfg, warmup, steps, rounds, rates_from, timeout=timeout,
                      backend=backend)[0]

