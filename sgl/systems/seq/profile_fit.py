"""Fitting a :class:`~sgl.systems.seq.profile.MachineProfile`: :func:`calibrate_machine` measures this
machine on ``world_size`` processes (compute parts, collectives, optionally the step executor per strategy)
and fits the profile's terms (the module doc of :mod:`sgl.systems.seq.profile` says what is timed and fitted).
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.seq.profile import DEFAULT, QUICK, LinkFit, MachineProfile, machine_fingerprint

__all__ = ["calibrate_machine"]


def calibrate_machine(model="tiny", *, lengths: Optional[Sequence[int]] = None, repeats: Optional[int] = None,
                      sizes: Optional[Sequence[int]] = None, link_repeats: Optional[int] = None, threads: int = 1,
                      world_size: int = 2, quick: bool = False, timeout: float = 600.0,
                      backend: str = "gloo", executor: bool = False, budget: int = 1024) -> MachineProfile:
    """Measure this machine for ``model`` (a preset name or ``TransformerConfig``) and fit a profile.

    Defaults come from :data:`DEFAULT` (:data:`QUICK` with ``quick=True``); ``threads`` torch threads
    per process, as training will use; ``backend="nccl"`` measures each rank's GPU instead of the CPU
    (one GPU per process).  See the module doc for what is timed and fitted.  ``executor=True``
    also times the step executor itself per strategy (SP/CP degrees that fit ``world_size``, micro-batches
    up to ``budget`` tokens per device) and stores the fits (:meth:`MachineProfile.fitted_cost_model`):
    the planners then cost plans as the executor runs them.
    """
    from sgl import comm
    from sgl.systems.parallel.model import get_model_config
    from sgl.systems.seq import calibrate as cal

    cfg = get_model_config(model)
    base = QUICK if quick else DEFAULT
    lengths = sorted({check_int(s, "length", 1, error=PlanError) for s in (lengths or base[0])})
    sizes = sorted({check_int(m, "message size", 4, error=PlanError) for m in (sizes or base[2])})
    if len(lengths) < 3 or len(sizes) < 2:
        raise PlanError(f"calibration needs at least 3 distinct sequence lengths and 2 message sizes, got "
                        f"{lengths} and {sizes}")
    repeats = check_int(base[1] if repeats is None else repeats, "repeats", 1, error=PlanError)
    link_repeats = check_int(base[3] if link_repeats is None else link_repeats, "link_repeats", 1, error=PlanError)
    threads = check_int(threads, "threads", 1, error=PlanError)
    world_size = check_int(world_size, "world_size", 2, error=PlanError)
    results = comm.spawn(cal.calibration_worker, world_size, cfg, lengths, repeats, threads, sizes, link_repeats,
                         backend=backend, timeout=timeout)
    profile = _fit(cfg, results, lengths, sizes, threads, world_size)
    if executor:
        profile.strategy_fits = _executor_fits(model if isinstance(model, str) else cfg.name, world_size,
                                               check_int(budget, "budget", 1, error=PlanError), timeout)
    return profile


def _executor_fits(model, world_size: int, budget: int, timeout: float) -> Dict[str, Any]:
    """The step executor timed per strategy on ``world_size`` processes, each fitted (``fit_strategy``)."""
    from sgl import comm
    from sgl.systems.parallel.model import get_model_config
    from sgl.systems.seq.fitted_cost import fit_strategy
    from sgl.systems.seq.measure import MeasureSetup, _calibrate_worker, _candidates

    setup = MeasureSetup(devices=world_size, budget=budget, max_length=budget, model=model)
    candidates = _candidates(setup, get_model_config(model).num_heads)
    timed = comm.spawn(_calibrate_worker, world_size, setup, candidates, timeout=timeout)[0]
    fits = {f"{k[0]}:{k[1]}": [float(x) for x in fit_strategy([(mbs, ms) for key, mbs, ms in timed if key == k])]
            for k in candidates}
    return {"budget": budget, "devices": world_size, "fits": fits}


def _fit(cfg, results, lengths: List[int], sizes: List[int], threads: int, world_size: int) -> MachineProfile:
    from sgl.systems.seq.calibrate import COMPUTE_PARTS, LINKS, fit_relative

    s = np.asarray(lengths, dtype=np.float64)
    ones = np.ones_like(s)
    # compute: the fastest of the repeats (a loaded machine inflates the others; the executor benchmark
    # counts its fastest step too), then the median over ranks (all ranks ran at once)
    med = {part: np.median([[np.min(r) for r in res[0][part]] for res in results], axis=0).tolist()
           for part in COMPUTE_PARTS}
    attn = fit_relative(np.stack([s * s, s, ones], 1), med["attention"])
    lin = fit_relative(np.stack([s, ones], 1), med["linear"])
    head = fit_relative(np.stack([s, ones], 1), med["head"])
    layers = cfg.num_layers
    saved = np.max([res[0]["saved_mb"] for res in results], axis=0)
    optimizer = float(np.median([np.min(res[0]["optimizer"]) for res in results]))
    # links: a collective ends when its slowest rank does; send/recv is the receiver's time
    link_ms: Dict[str, list] = {}
    links: Dict[str, LinkFit] = {}
    m = np.asarray(sizes, dtype=np.float64)
    for op in LINKS:
        per_rank = [[float(np.min(t)) for t in res[1][op]] for res in results]
        link_ms[op] = per_rank[1] if op == "send_recv" else np.max(per_rank, axis=0).tolist()
        alpha, beta = fit_relative(np.stack([np.ones_like(m), m], 1), link_ms[op])
        links[op] = LinkFit(alpha_s=float(alpha) / 1e3, beta_s_per_byte=float(beta) / 1e3)
    from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock

    params = sum(p.numel() for p in TinyLM(cfg).parameters())
    layer_params = sum(p.numel() for p in TransformerBlock(cfg).parameters())
    samples = {"lengths": lengths, "sizes_bytes": sizes, "runtime": results[0][0].get("path", ""),
               "compute_ms": med, "saved_mb": saved.tolist(),
               "optimizer_ms": optimizer, "link_ms": link_ms,
               "raw": {"compute": [res[0] for res in results], "links": [res[1] for res in results]},
               "fits": {"attention": attn.tolist(), "linear": lin.tolist(), "head": head.tolist()}}
    # The parts' own constants double-count per-call overhead (each part runs its own backward), so the
    # whole model's terms are fitted jointly on the whole-model samples and L x the attention samples,
    # which share the quadratic term: unknowns [α1, α2, β, L·a1, L·a0].
    zeros = np.zeros_like(s)
    design = np.concatenate([np.stack([s * s, s, ones, zeros, zeros], 1), np.stack([s * s, zeros, zeros, s, ones], 1)])
    joint = fit_relative(design, np.concatenate([med["model"], layers * np.asarray(med["attention"])]))
    alpha1, alpha2, beta = (float(v) for v in joint[:3])
    head_per_token = min(float(head[0]), alpha2)
    samples["fits"]["model"] = [alpha1, alpha2, beta]
    # Ulysses / ring attention on the whole world: the busiest rank's quadratic term against a / world
    factors = {}
    for name in ("ulysses", "ring"):
        per_rank = [res[0].get("strategies", {}).get(name) for res in results]
        if not all(per_rank) or attn[0] <= 0:
            continue
        times = np.max([[np.min(t) for t in r] for r in per_rank], axis=0)
        fit = fit_relative(np.stack([s * s, s, ones], 1), times)
        samples["strategy_ms"] = dict(samples.get("strategy_ms", {}), **{name: times.tolist()})
        samples["fits"][name] = fit.tolist()
        if fit[0] > 0:                       # a quadratic term the noise hid keeps the balanced default
            # the busiest rank never does less than an even share: a ratio below 1 is noise (the raw fit is kept)
            factors[name] = max(1.0, float(fit[0] * world_size / attn[0]))
    return MachineProfile(
        model=asdict(cfg), attention_ms_per_token2=alpha1 / layers,
        linear_ms_per_token=(float(alpha2) - head_per_token) / layers,
        head_ms_per_token=head_per_token, micro_batch_ms=float(beta),
        optimizer_ms=optimizer, act_mb_per_token=float(np.max(saved / s)), params=int(params),
        layer_params=int(layer_params), links=links, threads=threads, world_size=world_size,
        fingerprint=machine_fingerprint(results[0][0].get("device")), samples=samples,
        sp_quadratic_factor=factors.get("ulysses", 1.0), cp_quadratic_factor=factors.get("ring", 1.0),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
