"""Measured Malleus: the straggler-aware plan against the straggler-oblivious plan on real processes.

:func:`measure_malleus` runs ``world`` local processes with one rank slowed ``factor`` times
(:func:`~sgl.systems.seq.malleus_runtime.inject_straggler`).  Every rank first times one layer's,
the embedding's and the final norm + LM head + loss's forward + backward on one micro-batch, in turn
(:func:`time_parts_ms`; the fastest rank's triple, before any slow-down), so the planner costs the
stages as they run: the embedding on the first stage, the head on the last.  Training then starts on
the oblivious plan (uniform TP groups, layers and micro-batches); its step timings give the per-rank
rates, :meth:`MalleusTrainer.replan` re-plans and migrates the model states live, and training
continues on the straggler-aware plan.  The result holds each plan's median measured step time, the
measured ratio, the planner's own (modelled) ratio at the measured rates and at the injected ones, and
predicted against measured step time per plan (the prediction leaves out the optimiser and the
gradient all-reduce).

``layout="auto"`` lets Malleus re-plan the whole hybrid plan (:func:`~sgl.systems.seq.malleus.plan_any_layout`):
the oblivious side is the planner's choice over every ``(tp, pp)`` for uniform rates, the aware side its
choice for the measured rates.  After the first oblivious block the two plans alternate in ABBA order
(``O A A O O A …``, ``rounds`` pairs, blocks of ``steps`` steps, ``settle`` untimed steps on a freshly
migrated plan), so a load drift hits both sides alike; beside the ratio of the medians each pair's ratio
is kept (``paired_ratios``).  ``pin=True`` pins rank ``r`` to core ``r mod cores``.  Where both plans are
one pipeline of one-device stages (``pp``) or one-device replicas (``dp``),
:func:`~sgl.systems.seq.malleus_oracle.oracle_ceiling` brute-forces every layer / micro-batch split with
this run's measured per-rank compute (``oracle``).

A tiny run (a few seconds; the benchmark uses :data:`BENCH_MODEL` and more steps):

>>> from sgl.systems.parallel.model import TransformerConfig
>>> out = measure_malleus(world=1, model=TransformerConfig("t", 2, 16, 2, 32, 32, 8), micro_batches=2,
...                       steps=1, warmup=0, rounds=1)   # one rank: nothing to re-plan around
>>> out["aware"]["micro_batches"], out["measured_ratio"] > 0
([2], True)
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Dict, List, Tuple, Union

import numpy as np
import torch
import torch.nn as nn

from sgl import comm
from sgl._checks import check_choice, check_int
from sgl.errors import PlanError
from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.runtime.tiny_lm import TransformerBlock, lm_loss
from sgl.systems.seq.malleus import migration_mb, plan_any_layout
from sgl.systems.seq.malleus_oracle import oracle_ceiling
from sgl.systems.seq.malleus_hf import hf_timing_layer
from sgl.systems.seq.malleus_runtime import (MALLEUS_ARCHS, MalleusRunConfig, MalleusTrainer, _worker_threads,
                                             inject_straggler)

__all__ = ["BENCH_MODEL", "measure_malleus", "time_parts_ms", "LAYOUTS"]

#: the benchmark's model: compute-bound on a CPU core (~10-30 ms per layer and micro-batch)
BENCH_MODEL = TransformerConfig("malleus-bench", 6, 128, 4, 352, 512, 128)
#: measured layouts: ``(tp, pp)`` of the oblivious plan on ``world`` ranks; ``auto``: every layout
LAYOUTS = ("dp", "pp", "tp", "auto")


def time_parts_ms(cfg: MalleusRunConfig, repeats: int = 5) -> Tuple[float, float, float]:
    """Median ms of one layer's, the embedding's and the final norm + LM head + loss's forward + backward
    on one micro-batch on this process, as the model of ``cfg.arch`` runs them.  The three are timed in
    turn inside each repeat, so a load change on a shared CPU shifts all three alike and their ratios,
    which are all the planner uses, hold."""
    mc, device = cfg.model_config(), comm.wire_device()
    dtype = {"float32": torch.float32, "float64": torch.float64}[cfg.dtype]
    gen = torch.Generator().manual_seed(cfg.seed)
    tokens = torch.randint(0, mc.vocab_size, (cfg.micro_batch_size, mc.seq_length), generator=gen).to(device)
    embed = nn.Embedding(mc.vocab_size, mc.hidden_size).to(device=device, dtype=dtype)
    if cfg.arch == "tiny":
        norm, layer = nn.LayerNorm(mc.hidden_size), TransformerBlock(mc).to(device=device, dtype=dtype)
    else:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
        norm, layer = LlamaRMSNorm(mc.hidden_size), hf_timing_layer(mc, cfg.kv_heads, device, dtype)
    head = nn.Sequential(norm, nn.Linear(mc.hidden_size, mc.vocab_size, bias=False)).to(device=device, dtype=dtype)
    x = torch.randn(cfg.micro_batch_size, mc.seq_length, mc.hidden_size, generator=gen,
                    dtype=dtype).to(device).requires_grad_()
    runs = (lambda: layer(x).sum().backward(), lambda: embed(tokens).sum().backward(),
            lambda: lm_loss(head(x), tokens).backward())
    times: List[List[float]] = [[] for _ in runs]
    for rep in range(check_int(repeats, "repeats", 1, error=PlanError) + 1):      # the first: warm-up
        for run, out in zip(runs, times):
            t0 = time.perf_counter()
            run()
            if rep:
                out.append((time.perf_counter() - t0) * 1e3)
    layer_ms, embed_ms, head_ms = (float(np.median(t)) for t in times)
    return layer_ms, embed_ms, head_ms


def _pin(rank: int) -> None:
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[rank % len(cores)]})


def _block(trainer: MalleusTrainer, settle: int, steps: int) -> Tuple[List[float], float]:
    """``settle`` untimed then ``steps`` timed steps: (step ms, this rank's compute ms per timed step)."""
    for _ in range(settle):
        trainer.step(trainer.steps_done)
    c0, n0 = trainer.compute_totals
    times = [trainer.step(trainer.steps_done)[1] * 1e3 for _ in range(steps)]
    c1, n1 = trainer.compute_totals
    return times, (c1 - c0) * 1e3 / max(n1 - n0, 1)


def _measure_worker(rank: int, world: int, cfg: MalleusRunConfig, warmup: int, steps: int, rounds: int,
                    rates_from: str, auto: bool = False, settle: int = 1, pin: bool = False,
                    own_process: bool = True) -> Dict[str, Any]:
    if own_process:
        _worker_threads(cfg)
        if pin:
            _pin(rank)
    comm.barrier()                                      # every rank times at once, as in a step
    mine = torch.tensor(time_parts_ms(cfg), dtype=torch.float64, device=comm.wire_device())
    parts = torch.stack(comm.all_gather(mine)).cpu()    # the fastest rank's three timings, taken together
    layer_ms, embed_ms, head_ms = (float(v) for v in parts[int(parts[:, 0].argmin())])
    cfg = dataclasses.replace(cfg, layer_ms=layer_ms, embed_ms=embed_ms, head_ms=head_ms)
    planner = cfg.planner(world)
    injected = np.ones(world)
    injected[cfg.straggler.rank] = cfg.straggler.factor
    if auto:
        oblivious, obl_layout = plan_any_layout(planner.model, world, np.ones(world))
    else:
        oblivious, obl_layout = planner.oblivious(np.ones(world)), (cfg.tp, cfg.pp)
    trainer = MalleusTrainer(rank, world, oblivious, cfg)
    for _ in range(warmup):
        trainer.step(trainer.steps_done)
    first, first_c = _block(trainer, 0, steps)
    step_rates = trainer.measured_rates()
    probe_rates = trainer.probe_rates()
    rates = probe_rates if rates_from == "probe" else step_rates
    if auto:
        aware_plan, aware_layout = plan_any_layout(planner.model, world, rates)
        planned = migration_mb(oblivious, aware_plan, planner.model.state_mb)
        moved = {"rates": [round(float(r), 3) for r in rates], "plan": aware_plan.to_dict(),
                 "planned_mb": planned} | trainer.migrate_to(aware_plan)
        injected_best = plan_any_layout(planner.model, world, injected)[0].step_ms
    else:
        moved = trainer.replan(rates)                   # live: re-plan and migrate
        aware_plan, aware_layout = trainer.plan, (cfg.tp, cfg.pp)
        injected_best = planner.plan(injected).step_ms
    blocks = {"O": [first], "A": []}
    comp: Dict[str, List[float]] = {"O": [first_c], "A": []}
    order = "".join("OA" if r % 2 == 0 else "AO" for r in range(rounds))[1:]     # O | A A O O A ...
    current = "A"
    for i, side in enumerate(order):
        if side != current:
            trainer.migrate_to(aware_plan if side == "A" else oblivious)
            current = side
        fresh = i == 0 or order[i - 1] != side              # a freshly migrated plan settles first
        times, c = _block(trainer, settle if fresh else 0, steps)
        blocks[side].append(times)
        comp[side].append(c)
    trainer.sender.close()
    per_rank = comm.all_gather(torch.tensor([float(np.median(comp["O"])), float(np.median(comp["A"]))],
                                            dtype=torch.float64, device=comm.wire_device()))
    compute = {side: {r: float(t[i]) for r, t in enumerate(per_rank)} for i, side in enumerate("OA")}
    obl_ms = [t for b in blocks["O"] for t in b]
    aware_ms = [t for b in blocks["A"] for t in b]
    obl, aware = float(np.median(obl_ms)), float(np.median(aware_ms))
    paired = [float(np.median(o) / np.median(a)) for o, a in zip(blocks["O"], blocks["A"])]
    predicted_obl = planner.step_ms(oblivious, rates)
    return {
        "layout": "auto" if auto else f"tp={cfg.tp} pp={cfg.pp} dp={planner.dp}", "arch": cfg.arch, "world": world,
        "factor": cfg.straggler.factor, "layer_ms": layer_ms, "embed_ms": embed_ms, "head_ms": head_ms,
        "measured_rates": moved["rates"], "rates_from": rates_from,
        "step_rates": [round(float(r), 3) for r in step_rates],
        "probe_rates": [round(float(r), 3) for r in probe_rates],
        "oblivious": {"measured_ms": obl, "predicted_ms": predicted_obl, "all_ms": obl_ms, "layout": obl_layout,
                      "micro_batches": oblivious.micro_batches, "layers": oblivious.layers,
                      "pipelines": oblivious.pipelines, "compute_ms": compute["O"]},
        "aware": {"measured_ms": aware, "predicted_ms": aware_plan.step_ms, "all_ms": aware_ms, "layout": aware_layout,
                  "micro_batches": aware_plan.micro_batches, "layers": aware_plan.layers,
                  "pipelines": aware_plan.pipelines, "compute_ms": compute["A"]},
        "measured_ratio": obl / aware, "paired_ratios": paired,
        "modelled_ratio": predicted_obl / aware_plan.step_ms,
        "modelled_ratio_injected": planner.step_ms(oblivious, injected) / injected_best,
        "oracle": oracle_ceiling(oblivious, aware_plan, compute["O"], compute["A"], obl),
        "migration": {k: moved[k] for k in ("received_mb", "planned_mb", "migration_s")},
    }


def measure_malleus(world: int = 2, factor: float = 2.0, straggler_rank: int = 0, *,
                    model: Union[str, TransformerConfig] = BENCH_MODEL, layout: str = "dp", micro_batches: int = 12,
                    micro_batch_size: int = 2, steps: int = 2, warmup: int = 1, rounds: int = 2,
                    rates_from: str = "steps", seed: int = 0, arch: str = "tiny", settle: int = 1,
                    pin: bool = False, timeout: float = 300.0, backend: str = "gloo") -> Dict[str, Any]:
    """Measured step time of the straggler-aware vs the oblivious plan with one injected straggler.

    ``layout`` is ``"dp"`` (``world`` one-device pipelines: the plans differ in micro-batches per
    pipeline), ``"pp"`` (one pipeline of ``world`` one-device stages: they differ in layers per
    stage), ``"tp"`` (one TP group of ``world``: the aware plan regroups it) or ``"auto"`` (both sides
    chosen over every layout, module doc).  ``rounds`` ABBA pairs of blocks of ``steps`` measured
    steps, ``settle`` untimed steps after each live migration.  ``rates_from`` picks the rates the
    re-plan uses: ``"steps"`` (the oblivious steps' compute timings,
    :meth:`MalleusTrainer.measured_rates`) or ``"probe"`` (every rank times one layer at once,
    :meth:`MalleusTrainer.probe_rates`; noisier on a shared CPU); both are reported.  ``arch`` is the
    model implementation (``"tiny"``: TinyLM, ``"hf-llama"``: ``LlamaForCausalLM``; :data:`MALLEUS_ARCHS`).
    """
    world = check_int(world, "world", 1, error=PlanError)
    check_choice(layout, "layout", LAYOUTS, error=PlanError)
    check_choice(rates_from, "rates_from", ("probe", "steps"), error=PlanError)
    check_choice(arch, "arch", MALLEUS_ARCHS, error=PlanError)
    straggler = inject_straggler(straggler_rank, factor)
    warmup = check_int(warmup, "warmup", 0, error=PlanError)
    rounds = check_int(rounds, "rounds", 1, error=PlanError)
    settle = check_int(settle, "settle", 0, error=PlanError)
    steps = check_int(steps, "steps", 1, error=PlanError)
    if straggler.rank >= world:
        raise PlanError(f"straggler rank {straggler.rank} does not exist among {world} processes")
    mc = get_model_config(model)
    if layout == "pp" and world > mc.num_layers:
        raise PlanError(f"layout='pp' puts one stage per process: {world} processes for {mc.num_layers} layers")
    tp, pp = {"dp": (1, 1), "pp": (1, world), "tp": (world, 1), "auto": (1, 1)}[layout]
    cfg = MalleusRunConfig(model=mc, micro_batches=micro_batches, micro_batch_size=micro_batch_size,
                           steps=warmup + (2 * rounds + 1) * (steps + settle), seed=seed, tp=tp, pp=pp,
                           straggler=straggler, arch=arch)
    args = (cfg, warmup, steps, rounds, rates_from, layout == "auto", settle, pin)
    if world == 1:         # no processes to spawn: measure here (collectives are identities)
        return _measure_worker(0, 1, *args, own_process=False)
    return comm.spawn(_measure_worker, world, *args, timeout=timeout, backend=backend)[0]
