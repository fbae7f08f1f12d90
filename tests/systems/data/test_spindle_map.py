"""Spindle's exact device mapping: equal to brute force on small cases, never worse than the greedy rule."""
import itertools

import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.data.spindle import SpindleConfig, SpindlePlanner
from sgl.systems.data.spindle_dag import mtmm_dag, random_dag
from sgl.systems.data.spindle_map import candidate_blocks, exact_mapping, mapping_cost
from sgl.systems.data.spindle_sim import LinkModel


def _brute_force(widths, wave_of, edges, devices, link):
    options = [candidate_blocks(w, devices, link.devices_per_node) for w in widths]
    best = np.inf
    for choice in itertools.product(*options):
        ok = all(not set(choice[a]) & set(choice[b]) for a in range(len(widths)) for b in range(a)
                 if wave_of[a] == wave_of[b])
        if ok:
            best = min(best, mapping_cost(choice, edges, link))
    return best


def _random_instance(rng, devices):
    waves, widths, wave_of = int(rng.integers(2, 4)), [], []
    for w in range(waves):
        left = devices
        for _ in range(int(rng.integers(1, 4))):
            if left == 0:
                break
            width = int(rng.choice([x for x in (1, 2, 4) if x <= left]))
            widths.append(width)
            wave_of.append(w)
            left -= width
    edges = {}
    for u in range(len(widths)):
        for a in range(len(widths)):
            if wave_of[a] < wave_of[u] and rng.random() < 0.6:
                edges[(a, u)] = [float(rng.uniform(10, 500)) for _ in range(int(rng.integers(1, 3)))]
    return widths, wave_of, edges


def test_exact_mapping_equals_brute_force_on_small_instances():
    rng = np.random.default_rng(0)
    link = LinkModel(2, 100.0, 10.0)
    for _ in range(25):
        widths, wave_of, edges = _random_instance(rng, 4)
        blocks, cost = exact_mapping(widths, wave_of, edges, 4, link)
        assert blocks is not None
        assert cost == pytest.approx(_brute_force(widths, wave_of, edges, 4, link), abs=1e-12)
        assert cost == pytest.approx(mapping_cost(blocks, edges, link))
        for w in set(wave_of):  # lanes of one wave on disjoint devices
            used = [d for u, b in enumerate(blocks) if wave_of[u] == w for d in b]
            assert len(used) == len(set(used))


def test_exact_mapping_limits_and_errors():
    link = LinkModel(2)
    assert exact_mapping([], [], {}, 4, link) == ([], 0.0)
    assert exact_mapping([1] * 3, [0, 1, 2], {}, 4, link, max_lanes=2) == (None, float("inf"))
    assert exact_mapping([2, 2], [0, 1], {(0, 1): [100.0]}, 4, link, max_vars=3) == (None, float("inf"))
    assert exact_mapping([2, 3], [0, 0], {}, 4, link)[0] is None  # blocks (0, 1) and (0, 1, 2) overlap
    with pytest.raises(PlanError, match="same or an earlier wave"):
        exact_mapping([1, 1], [0, 0], {(0, 1): [1.0]}, 4, link)
    with pytest.raises(PlanError, match="wave indices"):
        exact_mapping([1, 1], [0], {}, 4, link)


def test_planner_uses_the_exact_mapping_and_it_is_never_worse_than_greedy():
    rng = np.random.default_rng(3)
    equal = 0
    for trial in range(10):
        dag = random_dag(rng, 4)
        exact = SpindlePlanner(dag, SpindleConfig(devices=4, devices_per_node=2))
        result = exact.plan()
        greedy = SpindlePlanner(dag, SpindleConfig(devices=4, devices_per_node=2, mapping="p2p")).plan()
        assert exact.mapping_used == "exact"
        assert result.schedule.p2p_seconds <= greedy.schedule.p2p_seconds + 1e-12
        equal += result.schedule.p2p_seconds == pytest.approx(greedy.schedule.p2p_seconds, abs=1e-12)
    assert equal >= 1  # the greedy rule is often, not always, optimal
    planner = SpindlePlanner(mtmm_dag(), SpindleConfig(devices=32))
    exact32 = planner.plan().schedule.p2p_seconds
    greedy32 = SpindlePlanner(mtmm_dag(), SpindleConfig(devices=32, mapping="p2p")).plan().schedule.p2p_seconds
    assert planner.mapping_used == "exact" and exact32 < greedy32  # the greedy one pays 2.2x here
