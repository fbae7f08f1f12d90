"""The ceiling of any sample placement (NetMoE's bound): valid against brute force, tight when
capacity does not bind, never beaten by NetMoE."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from sgl.errors import ConfigError, DatasetError
from sgl.systems.moe.netmoe import device_counts, netmoe_placement, original_placement, placement_cost
from sgl.systems.moe.netmoe_bound import placement_lower_bound, placement_lp_bound, relaxed_nodes
from sgl.systems.moe.plan import netmoe_report
from sgl.systems.moe.topology import Topology
from sgl.systems.moe.traces import synthetic_trace


def _brute_force(c, topo, tok):
    per = len(c) // topo.num_devices
    slots = np.repeat(np.arange(topo.num_devices), per)
    best_t, best_inter = np.inf, np.inf
    for perm in set(itertools.permutations(slots.tolist())):
        r = placement_cost(c, np.array(perm), topo, 1.0, tok)
        best_t, best_inter = min(best_t, r["time_s"]), min(best_inter, r["inter_bytes"])
    return best_t, best_inter


@pytest.mark.parametrize("seed,tok", [(0, 0), (1, 3), (2, 0), (3, 5)])
def test_bounds_below_every_placement_and_milp_is_the_brute_force_optimum(seed, tok):
    rng = np.random.default_rng(seed)
    topo = Topology(2, 2, intra_gbps=float(rng.uniform(1, 4)), inter_gbps=1.0)
    c = rng.integers(0, 6, (8, 4))
    opt_t, opt_inter = _brute_force(c, topo, tok)
    closed = placement_lower_bound(c, topo, 1.0, tok)
    lp = placement_lp_bound(c, topo, 1.0, tok)["time_s"]
    exact = placement_lp_bound(c, topo, 1.0, tok, integral=True)
    assert closed["inter_bytes"] <= opt_inter + 1e-9
    assert closed["time_s"] <= lp * (1 + 1e-6) and lp <= opt_t * (1 + 1e-6)
    assert exact["optimal"] and exact["time_s"] == pytest.approx(opt_t, rel=1e-6)
    assert placement_cost(c, exact["placement"], topo, 1.0, tok)["time_s"] == pytest.approx(opt_t, rel=1e-6)
    assert np.bincount(exact["placement"], minlength=4).tolist() == [2] * 4
    nm = placement_cost(c, netmoe_placement(c, topo, tok), topo, 1.0, tok)
    assert nm["time_s"] >= lp * (1 - 1e-6) and nm["inter_bytes"] >= closed["inter_bytes"] - 1e-9


def test_netmoe_attains_the_relaxed_inter_bound_when_capacity_does_not_bind():
    rng = np.random.default_rng(0)
    topo = Topology(2, 2)
    c = rng.integers(0, 3, (16, 4))
    prefer = np.tile([0, 1], 8)  # exactly S/N samples prefer each node, from the other node's slots
    c[np.arange(16), 2 * prefer + rng.integers(0, 2, 16)] += 20
    nodes = relaxed_nodes(c, topo, tokens=0)
    assert np.bincount(nodes).tolist() == [8, 8]  # the relaxation is already balanced
    bound = placement_lower_bound(c, topo, 1.0, tokens=0)
    p = netmoe_placement(c, topo, tokens=0, guard=False)
    assert np.array_equal(p // 2, nodes)
    assert placement_cost(c, p, topo, 1.0, 0)["inter_bytes"] == bound["inter_bytes"]
    # Capacity binds once every sample prefers node 0: NetMoE must then sit above the relaxation.
    c2 = c.copy()
    c2[:, :2] += 40
    b2 = placement_lower_bound(c2, topo, 1.0, tokens=0)["inter_bytes"]
    assert placement_cost(c2, netmoe_placement(c2, topo, 0, guard=False), topo, 1.0, 0)["inter_bytes"] > b2


def test_report_ceiling_brackets_netmoe_on_a_trace():
    tr = synthetic_trace(1, 2, 16, 8, tokens=16, top_k=2, affinity=0.5, seed=0)
    topo = Topology(2, 2)
    r = netmoe_report(tr, topo, 8.0, bounds=True, exact_time_limit=5.0)
    assert r["exact_solved"] == 1.0
    assert r["bound_time_s"] <= r["best_time_s"] * (1 + 1e-6) <= r["netmoe_time_s"] * (1 + 1e-6)
    assert r["bound_nores_time_s"] <= r["bound_time_s"] * (1 + 1e-6)
    assert r["bound_time_ratio"] < 1.0  # the optimum really improves on the original here
    q = netmoe_report(tr, topo, 8.0, count_residual=False)
    assert q["netmoe_time_s"] >= r["bound_nores_time_s"] * (1 - 1e-6)
    assert r["relaxed_inter_bytes"] <= r["netmoe_inter_bytes"] + 1e-9


def test_bound_rejects_bad_input():
    c = device_counts(synthetic_trace(1, 1, 8, 4, tokens=8, top_k=1, affinity=0.5).counts[0, 0], 4)
    with pytest.raises(ConfigError, match="topology has 8"):
        placement_lp_bound(c, Topology(2, 4), 1.0)
    with pytest.raises(ConfigError, match="topology has 2"):
        placement_lower_bound(c, Topology(1, 2), 1.0)
    with pytest.raises(DatasetError, match="negative"):
        placement_lower_bound(-c, Topology(2, 2), 1.0)
    assert original_placement(8, 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_swap_refinement_never_raises_the_time_keeps_slots_and_stays_above_the_ceiling():
    from sgl.systems.moe.netmoe_refine import netmoe_refined, refine_placement

    for seed, tok in [(0, 0), (1, 3), (4, 8)]:
        rng = np.random.default_rng(seed)
        topo = Topology(2, 2, intra_gbps=float(rng.uniform(1, 4)), inter_gbps=1.0)
        c = rng.integers(0, 6, (8, 4))
        p0 = netmoe_placement(c, topo, tok)
        q = refine_placement(c, p0, topo, tok)
        assert np.bincount(q, minlength=4).tolist() == [2] * 4
        t0 = placement_cost(c, p0, topo, 1.0, tok)["time_s"]
        t1 = placement_cost(c, q, topo, 1.0, tok)["time_s"]
        assert placement_lp_bound(c, topo, 1.0, tok)["time_s"] <= t1 * (1 + 1e-6) and t1 <= t0 * (1 + 1e-12)
        assert np.array_equal(netmoe_refined(c, topo, tok, rounds=64), q)  # the same search, deterministic
    # Little affinity, residual counted: NetMoE keeps the original, the swaps still even out devices.
    tr = synthetic_trace(1, 1, 32, 8, tokens=16, top_k=2, affinity=0.3, seed=2)
    c = device_counts(tr.counts[0, 0], 4)
    topo = Topology(2, 2)
    p = netmoe_placement(c, topo, 16)
    q = netmoe_refined(c, topo, 16, rounds=64)
    assert placement_cost(c, q, topo, 1.0, 16)["time_s"] < placement_cost(c, p, topo, 1.0, 16)["time_s"]
    with pytest.raises(ConfigError, match="one device per sample"):
        refine_placement(c, p[:-1], topo)
