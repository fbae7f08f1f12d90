"""The heterogeneous-GPU serving MILP against brute force, its JSON inputs and its errors."""
import itertools
import json

import numpy as np
import pytest

from sgl.errors import ConfigError, PlanError
from sgl.systems.serving.hetero import (DeployConfig, GPUType, ServingProblem, Workload, best_homogeneous,
                                        cheapest_feasible_budget, from_melange, load_problem, makespan_for,
                                        plan_serving)


def _random_problem(seed):
    rng = np.random.default_rng(seed)
    gpus = [GPUType("A", float(rng.uniform(2, 5)), 3), GPUType("B", float(rng.uniform(0.5, 2)), 4)]
    work = [Workload(f"w{j}", float(rng.integers(1000, 20000))) for j in range(3)]
    configs = []
    for name, gpu_counts, tp, pp in (("A1", {"A": 1}, 1, 1), ("A2", {"A": 2}, 2, 1), ("B1", {"B": 1}, 1, 1),
                                     ("AB", {"A": 1, "B": 1}, 1, 2)):
        thr = {w.name: float(rng.uniform(1, 30)) for w in work if rng.random() > 0.2}
        configs.append(DeployConfig(name, gpu_counts, thr, tp, pp))
    configs[2] = DeployConfig("B1", {"B": 1}, {w.name: float(rng.uniform(1, 10)) for w in work})
    return ServingProblem(gpus, configs, work)


def _brute_force(prob, budget):
    prices = prob.config_prices
    avail = {g.name: g.available for g in prob.gpus}
    best = float("inf")
    for n in itertools.product(*(range(0, 5) for _ in prob.configs)):
        if np.dot(prices, n) > budget + 1e-9:
            continue
        used = {g: sum(k * c.gpus.get(g, 0) for k, c in zip(n, prob.configs)) for g in avail}
        if any(used[g] > avail[g] for g in avail):
            continue
        best = min(best, makespan_for(prob, np.array(n))[0])
    return best


@pytest.mark.parametrize("seed", range(4))
def test_milp_equals_brute_force(seed):
    prob = _random_problem(seed)
    budget = cheapest_feasible_budget(prob) * 2.5
    plan = plan_serving(prob, budget, rel_tol=1e-6)
    assert plan.price_per_hour <= budget + 1e-6
    assert plan.makespan_s == pytest.approx(_brute_force(prob, budget), rel=1e-4)
    # every workload fully split
    totals = {w.name: sum(s.get(w.name, 0.0) for s in plan.split.values()) for w in prob.workloads}
    assert all(t == pytest.approx(1.0, abs=1e-5) for t in totals.values())


def test_heterogeneous_never_worse_than_best_homogeneous():
    prob = _random_problem(7)
    budget = cheapest_feasible_budget(prob) * 3
    mixed = plan_serving(prob, budget)
    gpu, homo = best_homogeneous(prob, budget)
    assert gpu in ("A", "B")
    assert mixed.makespan_s <= homo.makespan_s * (1 + 1e-3)


def test_infeasible_budget_names_the_cheapest():
    prob = _random_problem(1)
    floor = cheapest_feasible_budget(prob)
    with pytest.raises(PlanError, match=f"cheapest feasible budget is {floor:g}/h"):
        plan_serving(prob, floor * 0.9)
    assert plan_serving(prob, floor).price_per_hour == pytest.approx(floor)
    with pytest.raises(PlanError, match="budget must be"):
        plan_serving(prob, 0)


def test_json_inputs_and_errors(tmp_path):
    gpus = {"gpus": [{"name": "L4", "price_per_hour": 0.8, "available": 4},
                     {"name": "A100", "price_per_hour": 3.7, "available": 2}],
            "configs": [{"name": "L4x1", "gpus": {"L4": 1}, "throughput": {"chat": 3.0}},
                        {"name": "A100x1", "gpus": {"A100": 1}, "throughput": {"chat": 9.0, "long": 1.0}}]}
    work = {"workloads": [{"name": "chat", "requests": 5000}, {"name": "long", "requests": 200}]}
    (tmp_path / "g.json").write_text(json.dumps(gpus))
    (tmp_path / "w.json").write_text(json.dumps(work))
    prob = load_problem(tmp_path / "g.json", tmp_path / "w.json")
    assert cheapest_feasible_budget(prob) == pytest.approx(3.7)   # only A100 serves "long"
    plan = plan_serving(prob, 6.0)
    assert plan.replicas["A100x1"] >= 1 and plan.split["A100x1"]["long"] == pytest.approx(1.0)
    bad = dict(gpus, configs=[{"name": "x", "gpus": {"V100": 1}, "throughput": {"chat": 1.0}}])
    (tmp_path / "b.json").write_text(json.dumps(bad))
    with pytest.raises(PlanError, match="unknown GPU type"):
        load_problem(tmp_path / "b.json", tmp_path / "w.json")
    (tmp_path / "c.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_problem(tmp_path / "c.json", tmp_path / "w.json")
    with pytest.raises(PlanError, match="tp\\*pp"):
        DeployConfig("x", {"L4": 2}, {"chat": 1.0}, tp=1, pp=1)


def test_melange_format():
    doc = {"gpu_info": {"A10G": {"cost": 1.01, "tputs": [[5, 1], [10, 5]]},
                        "A100": {"cost": 3.67, "tputs": [[20, 2], [50, 20]]}},
           "workload_distribution": [[0.25, 0.125], [0.375, 0.25]], "total_request_rate": 16}
    prob = from_melange(doc, available=16, horizon_s=3600)
    assert [w.requests for w in prob.workloads] == pytest.approx([14400, 7200, 21600, 14400])
    plan = plan_serving(prob, 12.0)
    assert plan.price_per_hour <= 12.0 and plan.makespan_s > 0


def test_roofline_tables_and_calibration():
    from sgl.systems.serving.hetero.tables import GPUSpec, ModelSpec, calibrate, roofline_problem, roofline_throughput

    small = GPUSpec("S", 24, 300, 120, 0.7, 8)
    big = GPUSpec("L", 80, 2000, 300, 3.7, 8)
    model = ModelSpec("7b", 7.0, 2 * 32 * 32 * 128 * 2)
    # long outputs are bandwidth bound: more bandwidth -> more throughput; 13B does not fit one 24 GB GPU
    assert roofline_throughput(big, model, 1, 1, 512, 512) > roofline_throughput(small, model, 1, 1, 512, 512) > 0
    assert roofline_throughput(small, ModelSpec("13b", 13, 800_000), 1, 1, 512, 512) == 0.0
    prob = roofline_problem([small, big], model, {"chat": (256, 256, 1e4), "rag": (2048, 128, 1e3)})
    assert all(c.tp * c.pp == sum(c.gpus.values()) for c in prob.configs)
    name = prob.configs[0].name
    before = dict(prob.configs[0].throughput)
    cal = calibrate(prob, {name: {"chat": before["chat"] / 2}})
    after = cal.configs[0].throughput
    assert after["chat"] == pytest.approx(before["chat"] / 2)
    assert after["rag"] == pytest.approx(before["rag"] / 2)
    assert cal.configs[1].throughput == prob.configs[1].throughput
    with pytest.raises(PlanError, match="unknown config"):
        calibrate(prob, {"nope": {"chat": 1.0}})
