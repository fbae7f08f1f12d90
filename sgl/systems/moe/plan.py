"""Modelled communication and iteration time of each method on a routing trace (``sgl moe plan``).

For every (step, layer) of a trace laid out on a topology (EP: device ``d`` hosts experts
``[d*E/D, (d+1)*E/D)``; sample ``s`` starts on device ``s // (S/D)``):

* NetMoE: combine all-to-all rows/bytes/time under the original and the NetMoE placement, and
  the solver's wall time;
* balancing: ``loads[i, e]`` (tokens device ``i`` sends to expert ``e``) under static EP, FlexMoE
  and LAER layouts with ``slots`` expert slots per device, LAER's time model.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from sgl.errors import ConfigError
from sgl.systems.moe.balance import CostParams, flexmoe_plan, iteration_time, laer_plan, static_layout
from sgl.systems.moe.netmoe import device_counts, original_placement, placement_cost
from sgl.systems.moe.netmoe_bound import placement_lower_bound, placement_lp_bound
from sgl.systems.moe.netmoe_refine import netmoe_refined
from sgl.systems.moe.topology import Topology, alltoall_time
from sgl.systems.moe.traces import RoutingTrace

__all__ = ["netmoe_report", "balance_report", "trace_balance_report", "source_loads"]


def _check(trace: RoutingTrace, topo: Topology) -> None:
    steps, layers, samples, experts = trace.shape
    d = topo.num_devices
    if experts % d:
        raise ConfigError(f"the trace has {experts} experts, which {d} devices ({topo.nodes}x{topo.devices_per_node}) "
                          "cannot share evenly under EP; pick a topology whose device count divides the experts")
    if samples % d:
        raise ConfigError(f"the trace has {samples} samples per step, not divisible by {d} devices; "
                          "every device must hold the same number of samples")


def source_loads(expert_counts: np.ndarray, num_devices: int) -> np.ndarray:
    """``[S, E]`` per-sample counts -> ``[D, E]`` tokens each device sends to each expert."""
    s = expert_counts.shape[0]
    return np.add.reduceat(expert_counts, np.arange(0, s, s // num_devices), axis=0)


def netmoe_report(trace: RoutingTrace, topo: Topology, bytes_per_token: float,
                  count_residual: bool = True, bounds: bool = False,
                  exact_time_limit: float | None = None, refine: int = 0) -> dict[str, Any]:
    """Summed all-to-all bytes and time over every (step, layer), original vs NetMoE, and solver ms.

    As in the runtime, samples stay where layer ``l`` placed them: layer ``l+1`` dispatches from
    there and its solver starts from there (the residual of a sample moves from its current rank).
    ``*_time_s`` is the combine; ``*_a2a_time_s`` adds the dispatch (dispatch + combine per layer).

    ``bounds``: also the ceiling of *any* placement (:mod:`~sgl.systems.moe.netmoe_bound`):
    ``bound_time_s`` the LP bound on the combine from where the samples are (with this report's
    residual accounting), ``bound_nores_time_s`` the LP bound without residual rows (valid for
    every start and accounting), ``relaxed_inter_bytes`` every sample on its cheapest node with
    no slot capacity; ``*_ratio`` divides by the original placement's figure.  With
    ``exact_time_limit`` (seconds per layer) the integral min–max problem is solved too (a MILP):
    the bounds become ``max(LP, the solver's dual bound)`` and ``best_time_s`` /
    ``best_nores_time_s`` sum the best placement it found (the optimum where ``exact_solved`` = 1).
    ``refine``: NetMoE followed by that many min–max swap rounds (``netmoe_refine``).
    """
    _check(trace, topo)
    d = topo.num_devices
    res = trace.tokens_per_sample if count_residual else 0
    keys = ("orig_time_s", "netmoe_time_s", "orig_a2a_time_s", "netmoe_a2a_time_s", "orig_inter_bytes",
            "netmoe_inter_bytes", "orig_intra_bytes", "netmoe_intra_bytes")
    exact = bounds and exact_time_limit is not None
    if bounds:
        keys += ("bound_time_s", "bound_nores_time_s", "relaxed_inter_bytes")
    if exact:
        keys += ("best_time_s", "best_nores_time_s", "exact_solved")
    tot = {k: 0.0 for k in keys}
    solve = []
    for step in trace.counts:
        p0 = original_placement(step.shape[1], d)
        cur = p0.copy()
        for layer in step:
            c = device_counts(layer, d)
            order = np.argsort(cur, kind="stable")  # slot order: samples grouped by current rank
            t0 = time.perf_counter()
            p_ord = netmoe_refined(c[order], topo, tokens=res, rounds=refine)
            solve.append(time.perf_counter() - t0)
            a = placement_cost(c, p0, topo, bytes_per_token, res)
            b = placement_cost(c[order], p_ord, topo, bytes_per_token, res)
            if bounds:
                for key, cc, tk in (("", c[order], res), ("_nores", c, 0)):
                    low = placement_lp_bound(cc, topo, bytes_per_token, tk)["time_s"]
                    if exact:
                        ex = placement_lp_bound(cc, topo, bytes_per_token, tk, integral=True,
                                                time_limit=exact_time_limit)
                        low = max(low, ex["dual_bound_s"])
                        tot[f"best{key}_time_s"] += ex["time_s"]
                        tot["exact_solved"] += 0.5 * ex["optimal"]
                    tot[f"bound{key}_time_s"] += low
                tot["relaxed_inter_bytes"] += placement_lower_bound(c[order], topo, bytes_per_token, res)["inter_bytes"]
            disp_a = alltoall_time(_dispatch_volume(c, p0, d), topo, bytes_per_token)["time_s"]
            disp_b = alltoall_time(_dispatch_volume(c, cur, d), topo, bytes_per_token)["time_s"]
            tot["orig_time_s"] += a["time_s"]
            tot["netmoe_time_s"] += b["time_s"]
            tot["orig_a2a_time_s"] += a["time_s"] + disp_a
            tot["netmoe_a2a_time_s"] += b["time_s"] + disp_b
            for kind in ("inter", "intra"):
                tot[f"orig_{kind}_bytes"] += a[f"{kind}_bytes"]
                tot[f"netmoe_{kind}_bytes"] += b[f"{kind}_bytes"]
            cur = np.empty_like(p_ord)
            cur[order] = p_ord
    tot["time_ratio"] = tot["netmoe_time_s"] / max(tot["orig_time_s"], 1e-300)
    tot["a2a_time_ratio"] = tot["netmoe_a2a_time_s"] / max(tot["orig_a2a_time_s"], 1e-300)
    tot["inter_bytes_ratio"] = tot["netmoe_inter_bytes"] / max(tot["orig_inter_bytes"], 1e-300)
    if bounds:
        tot["bound_time_ratio"] = tot["bound_time_s"] / max(tot["orig_time_s"], 1e-300)
        tot["bound_nores_time_ratio"] = tot["bound_nores_time_s"] / max(tot["orig_time_s"], 1e-300)
        tot["relaxed_inter_bytes_ratio"] = tot["relaxed_inter_bytes"] / max(tot["orig_inter_bytes"], 1e-300)
    if exact:
        tot["best_time_ratio"] = tot["best_time_s"] / max(tot["orig_time_s"], 1e-300)
        tot["best_nores_time_ratio"] = tot["best_nores_time_s"] / max(tot["orig_time_s"], 1e-300)
        tot["exact_solved"] /= max(1, len(solve))
    tot["solver_ms_per_layer"] = 1e3 * float(np.mean(solve))
    return tot


def _dispatch_volume(counts: np.ndarray, place: np.ndarray, d: int) -> np.ndarray:
    """``[D, D]`` dispatch rows: sample ``s`` on ``place[s]`` sends ``counts[s, e]`` to ``e``'s device."""
    v = np.zeros((d, d), dtype=np.int64)
    np.add.at(v, place, counts)
    return v


def balance_report(loads: np.ndarray, topo: Topology, slots: int, cost: CostParams,
                   seed: int = 0) -> dict[str, dict[str, float]]:
    """Static / FlexMoE / LAER on one ``[D, E]`` load matrix: imbalance and modelled time."""
    e = loads.shape[1]
    st = static_layout(e, topo, slots)
    t0 = time.perf_counter()
    fx = flexmoe_plan(loads, st, topo, cost)
    t1 = time.perf_counter()
    la = laer_plan(loads, topo, slots, cost, seed=seed)
    t2 = time.perf_counter()
    out = {name: iteration_time(loads, a, topo, cost) for name, a in (("static", st), ("flexmoe", fx), ("laer", la))}
    out["flexmoe"]["planner_ms"] = 1e3 * (t1 - t0)
    out["laer"]["planner_ms"] = 1e3 * (t2 - t1)
    return out


def trace_balance_report(trace: RoutingTrace, topo: Topology, slots: int, cost: CostParams,
                         seed: int = 0) -> dict[str, dict[str, float]]:
    """:func:`balance_report` summed over the trace's (step, layer) pairs (times) / averaged (ratios)."""
    _check(trace, topo)
    acc: dict[str, dict[str, float]] = {}
    n = 0
    for step in trace.counts:
        for layer in step:
            r = balance_report(source_loads(layer, topo.num_devices).astype(float), topo, slots, cost, seed)
            n += 1
            for m, vals in r.items():
                for k, v in vals.items():
                    acc.setdefault(m, {}).setdefault(k, 0.0)
                    acc[m][k] += v
    return {m: {k: (v if k == "time_s" else v / n) for k, v in vals.items()} for m, vals in acc.items()}
