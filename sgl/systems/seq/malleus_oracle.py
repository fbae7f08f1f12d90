"""The measured ceiling of a Malleus re-plan: brute force over every layer or micro-batch split.

A measured run executes two plans of the same devices, the straggler-oblivious one and
Malleus' (:mod:`~sgl.systems.seq.malleus_measure`), and records each rank's compute per step in
both (the injected straggler's slow-down included).  :func:`oracle_ceiling` fits, per rank, the
compute of one micro-batch from those two points and brute-forces every alternative the plans'
shape allows, with the micro-batch count fixed:

* one pipeline of one-device stages (``pp``): every split of the ``L`` layers over the stages;
  rank ``r`` takes ``c_r(l) = a_r·l + b_r`` per micro-batch (``a_r`` its measured per-layer time,
  ``b_r`` its measured fixed part: embedding, head and loss; where the two points do not give a
  line with ``a_r > 0`` and ``b_r >= 0``, as load noise can, ``c_r`` is taken proportional to
  ``l``), and a pipeline step
  ``m·max_j c_j + Σ_{j≠max} c_j`` (the fill / drain of one micro-batch through the other stages);
* one-device data-parallel pipelines (``dp``): every split of the ``B`` micro-batches, step
  ``max_r m_r·c_r``.

The part of a measured step that this model does not cover (optimiser, gradient all-reduce,
send / receive waits beyond the fill / drain) is the oblivious plan's residue ``F = measured −
modelled``; the ceiling is ``measured oblivious / (best modelled + F)``: the best ratio any split
reaches if it keeps the oblivious plan's overhead.  Other plan shapes (TP groups) return ``None``.

>>> from sgl.systems.seq.malleus import MalleusPlan
>>> obl = MalleusPlan([[[0], [1]]], [[3, 3]], [12], 0.0, [0.0], [])
>>> aware = MalleusPlan([[[0], [1]]], [[2, 4]], [12], 0.0, [0.0], [])
>>> out = oracle_ceiling(obl, aware, {0: 72.0, 1: 36.0}, {0: 48.0, 1: 48.0}, 100.0)   # ms per step
>>> out["best"], round(out["ceiling"], 3)
([2, 4], 1.299)
"""
from __future__ import annotations

import itertools
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from sgl.systems.seq.malleus import MalleusPlan

__all__ = ["oracle_ceiling", "pipeline_ms", "splits"]


def pipeline_ms(stage_ms: Sequence[float], micro_batches: int) -> float:
    """One pipeline's step: ``m`` micro-batches through its slowest stage plus one through the others."""
    c = np.asarray(stage_ms, dtype=float)
    return float(micro_batches * c.max() + c.sum() - c.max())


def splits(total: int, parts: int) -> List[List[int]]:
    """Every way to give ``parts`` places ``>= 1`` each, ``total`` in all."""
    return [[b - a for a, b in zip((0,) + cut, cut + (total,))]
            for cut in itertools.combinations(range(1, total), parts - 1)]


def _one_device_stages(plan: MalleusPlan) -> bool:
    return all(len(st) == 1 for p in plan.pipelines for st in p)


def oracle_ceiling(oblivious: MalleusPlan, aware: MalleusPlan, compute_obl: Mapping[int, float],
                   compute_aware: Mapping[int, float], measured_obl_ms: float) -> Optional[Dict[str, object]]:
    """Brute-force ceiling (module doc) from each rank's measured compute ms per step under both plans;
    ``None`` when the plans are not both one ``pp`` pipeline over the same stage order or both ``dp``."""
    if not (_one_device_stages(oblivious) and _one_device_stages(aware)):
        return None
    if (len(oblivious.pipelines) == 1 and oblivious.pipelines == aware.pipelines
            and len(oblivious.pipelines[0]) > 1):
        ranks = [st[0] for st in oblivious.pipelines[0]]
        m = oblivious.micro_batches[0]
        lo, la = oblivious.layers[0], aware.layers[0]
        a, b = [], []
        for r, l0, l1 in zip(ranks, lo, la):
            c0, c1 = compute_obl[r] / m, compute_aware[r] / m
            slope = (c1 - c0) / (l1 - l0) if l1 != l0 else 0.0
            intercept = c0 - slope * l0
            if slope <= 0 or intercept < 0:           # one split, or noise beyond a line: proportional
                slope, intercept = (c0 + c1) / (l0 + l1), 0.0
            a.append(slope)
            b.append(intercept)
        total = sum(lo)

        def model(ls):
            return pipeline_ms([ai * li + bi for ai, li, bi in zip(a, ls, b)], m)

        kind, candidates, ours, base = "pp", splits(total, len(ranks)), la, lo
        extra = {"per_layer_ms": a, "fixed_ms": b}
    elif all(len(p) == 1 for p in oblivious.pipelines + aware.pipelines):
        ranks = sorted(p[0][0] for p in oblivious.pipelines)
        if sorted(p[0][0] for p in aware.pipelines) != ranks:
            return None
        mo = {p[0][0]: m for p, m in zip(oblivious.pipelines, oblivious.micro_batches)}
        ma = {p[0][0]: m for p, m in zip(aware.pipelines, aware.micro_batches)}
        per = [float(np.mean([compute_obl[r] / mo[r], compute_aware[r] / ma[r]])) for r in ranks]

        def model(ms):
            return float(max(mi * ci for mi, ci in zip(ms, per)))

        kind, candidates = "dp", splits(sum(mo.values()), len(ranks))
        ours, base = [ma[r] for r in ranks], [mo[r] for r in ranks]
        extra = {"per_micro_batch_ms": per, "ranks": ranks}
    else:
        return None
    best = min(candidates, key=model)
    residue = measured_obl_ms - model(base)
    return {"kind": kind, "best": best, "ours": list(ours), "best_model_ms": model(best),
            "ours_model_ms": model(ours), "oblivious_model_ms": model(base), "residue_ms": residue,
            "ceiling": measured_obl_ms / (model(best) + residue),
            "ours_at_residue": measured_obl_ms / (model(ours) + residue), **extra}
