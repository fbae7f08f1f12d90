"""NetMoE sample placement, the all-to-all cost model and the FlexMoE / LAER planners (numpy)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from sgl.errors import ConfigError, DatasetError
from sgl.systems.moe.balance import (CostParams, flexmoe_plan, iteration_time, laer_plan, route_tokens,
                                     static_layout)
from sgl.systems.moe.netmoe import (combine_volume, device_counts, netmoe_placement, original_placement,
                                    placement_cost)
from sgl.systems.moe.topology import Topology, alltoall_time
from sgl.systems.moe.traces import synthetic_trace


def _affine_counts(samples=32, devices=8, seed=0):
    tr = synthetic_trace(1, 1, samples, devices * 2, tokens=64, top_k=2, affinity=0.8, seed=seed)
    return device_counts(tr.counts[0, 0], devices)


def test_topology_parsing_and_errors():
    assert Topology.parse("4x8").num_devices == 32
    with pytest.raises(ConfigError, match="NODESxDEVICES"):
        Topology.parse("4by8")
    with pytest.raises(ConfigError, match="cannot be split over 3 nodes"):
        Topology.of(8, 3)


def test_alltoall_model_counts_only_off_diagonal_and_splits_link_classes():
    topo = Topology(2, 2, intra_gbps=100.0, inter_gbps=10.0)
    v = np.zeros((4, 4))
    v[0, 0] = 1e9  # local: free
    v[0, 1] = 1e9  # intra
    v[0, 2] = 1e9  # inter
    r = alltoall_time(v, topo, 1.0)
    assert r["intra_bytes"] == 1e9 and r["inter_bytes"] == 1e9
    assert r["time_s"] == pytest.approx(0.1)  # the inter link (10 GB/s) is the bottleneck


def test_netmoe_balanced_deterministic_and_never_worse():
    for nodes, devices in [(2, 8), (4, 16), (1, 4)]:
        c = _affine_counts(devices * 4, devices, seed=nodes)
        topo = Topology.of(devices, nodes)
        p = netmoe_placement(c, topo, tokens=64)
        assert np.array_equal(p, netmoe_placement(c, topo, tokens=64))
        assert np.bincount(p, minlength=devices).tolist() == [4] * devices  # slots respected
        before = placement_cost(c, original_placement(len(c), devices), topo, 128, 64)
        after = placement_cost(c, p, topo, 128, 64)
        assert after["inter_bytes"] <= before["inter_bytes"]
        if nodes > 1:
            assert after["time_s"] < 0.85 * before["time_s"]  # strong affinity: a clear cut


def test_netmoe_stage_one_is_optimal_on_a_small_instance():
    c = _affine_counts(8, 4, seed=3)
    topo = Topology(2, 2)
    p = netmoe_placement(c, topo)  # no residual term: pure inter-node rows
    node_of = np.arange(4) // 2

    def inter(nodes):  # rows leaving each sample's node
        return sum(c[s][node_of != n].sum() for s, n in enumerate(nodes))

    best = min(inter(a) for a in itertools.product((0, 1), repeat=8) if sum(a) == 4)
    assert inter(node_of[p]) == best


def test_netmoe_rejects_bad_inputs():
    topo = Topology(2, 2)
    with pytest.raises(ConfigError, match="cover 3 devices"):
        netmoe_placement(np.ones((4, 3), dtype=int), topo)
    with pytest.raises(DatasetError, match="negative"):
        netmoe_placement(-np.ones((4, 4), dtype=int), topo)
    with pytest.raises(ConfigError, match="spread evenly"):
        netmoe_placement(np.ones((5, 4), dtype=int), topo)
    with pytest.raises(ConfigError, match="divide the expert count"):
        device_counts(np.ones((4, 6), dtype=int), 4)
    assert combine_volume(np.eye(2, dtype=int), np.array([1, 0])).tolist() == [[0, 1], [1, 0]]


def _skewed_loads(devices=32, experts=16, seed=0):
    rng = np.random.default_rng(seed)
    pop = rng.zipf(1.3, experts).astype(float)
    return rng.multinomial(20000, pop / pop.sum(), size=devices).astype(float)


def test_layouts_fill_every_slot_route_every_token_once_and_rank_laer_flex_static():
    topo, cost = Topology(4, 8), CostParams()
    loads = _skewed_loads()
    st = static_layout(16, topo, 4)
    fx = flexmoe_plan(loads, st, topo, cost)
    la = laer_plan(loads, topo, 4, cost, seed=0)
    for a in (st, fx, la):
        assert a.sum(0).tolist() == [4] * 32 and (a.sum(1) >= 1).all()
        assert route_tokens(loads, a, topo).sum() == pytest.approx(loads.sum())  # every token routed once
        assert np.allclose(route_tokens(loads, a, topo).sum(1), loads.sum(1))
    t = [iteration_time(loads, a, topo, cost)["time_s"] for a in (la, fx, st)]
    assert t[0] <= t[1] <= t[2] and t[0] < t[2]
    assert np.array_equal(la, laer_plan(loads, topo, 4, cost, seed=0))  # deterministic under a seed
    assert np.array_equal(fx, flexmoe_plan(loads, st, topo, cost))


def test_planners_reject_bad_traces():
    topo, cost = Topology(2, 4), CostParams()
    with pytest.raises(ConfigError, match="devices=8"):
        laer_plan(np.ones((4, 8)), topo, 2, cost)
    with pytest.raises(DatasetError, match="negative"):
        laer_plan(-np.ones((8, 8)), topo, 2, cost)
    with pytest.raises(ConfigError, match="cannot host"):
        laer_plan(np.ones((8, 32)), topo, 2, cost)
    with pytest.raises(ConfigError, match="no replica"):
        route_tokens(np.ones((8, 4)), np.zeros((4, 8)), topo)


def test_netmoe_guard_never_increases_the_modelled_time():
    rng = np.random.default_rng(0)
    topo = Topology(2, 4)
    for _ in range(20):
        c = rng.poisson(3.0, (16, 8))  # no affinity: the assignment may not pay off
        p = netmoe_placement(c, topo, tokens=8)
        before = placement_cost(c, original_placement(16, 8), topo, 1.0, 8)["time_s"]
        assert placement_cost(c, p, topo, 1.0, 8)["time_s"] <= before
    unguarded = [netmoe_placement(rng.poisson(3.0, (16, 8)), topo, tokens=8, guard=False) for _ in range(5)]
    assert any(not np.array_equal(u, original_placement(16, 8)) for u in unguarded)
