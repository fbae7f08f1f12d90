"""Executing a heterogeneous serving plan: one process per replica, every request once, slowdowns real."""
import numpy as np
import pytest

from sgl.errors import PlanError
from sgl.systems.serving.hetero import (DeployConfig, GPUType, ServingPlan, ServingProblem, Workload,
                                        assign_requests, plan_serving, run_serving_plan, scale_requests)


def _problem():
    return ServingProblem([GPUType("fast", 3.0, 2), GPUType("slow", 1.0, 4)],
                          [DeployConfig("fast", {"fast": 1}, {"short": 20.0, "long": 10.0}),
                           DeployConfig("slow", {"slow": 1}, {"short": 5.0, "long": 1.0})],
                          [Workload("short", 60), Workload("long", 20)])


def _plan(replicas, split):
    return ServingPlan(replicas, split, makespan_s=1.0, price_per_hour=1.0, cost_per_request=1.0)


def test_two_replicas_serve_every_request_once_and_the_slow_type_is_slower():
    prob = _problem()
    # the same work on both replicas, so only the emulated GPU type differs
    plan = _plan({"fast": 1, "slow": 1}, {"fast": {"short": 0.5}, "slow": {"short": 0.5}})
    prob_short = ServingProblem(prob.gpus, prob.configs, [Workload("short", 60), Workload("long", 0)])
    run = run_serving_plan(plan, prob_short, requests={"short": 16}, shapes={"short": (32, 8)}, batch_size=2,
                           calib_batches=2, timeout=120)
    served = sorted(i for r in run.replicas for ids in r.served.values() for i in ids)
    assert served == list(range(16))
    by = {r.config: r for r in run.replicas}
    assert len(by["fast"].served["short"]) == len(by["slow"].served["short"]) == 8
    # fast's short requests run at this machine's speed, slow's 4x slower (20 / 5 requests/s)
    assert by["fast"].slowdown["short"] == pytest.approx(1.0)
    assert by["slow"].slowdown["short"] == pytest.approx(4.0)
    assert np.isfinite(run.makespan_s) and run.makespan_s == max(r.makespan_s for r in run.replicas)
    assert by["slow"].makespan_s > 1.5 * by["fast"].makespan_s
    # modelled here: the slow replica's 8 requests at K / 5 each
    assert run.modelled_s == pytest.approx(run.scale_s * 8 / 5.0)
    assert run.to_dict()["replicas"][0]["served"]["short"] == 8


def test_assignment_follows_the_split_and_covers_every_request_once():
    prob = _problem()
    plan = plan_serving(prob, budget=4.0)
    counts = scale_requests(prob, 40)
    assert counts == {"short": 30, "long": 10}
    out = assign_requests(plan, prob, counts)
    ids = np.concatenate([v for ws in out.values() for v in ws.values()])
    assert sorted(ids.tolist()) == list(range(40))
    for w, n in counts.items():
        got = {r: len(ws[w]) for r, ws in out.items()}
        want = {f"{c}#{i}": plan.split.get(c, {}).get(w, 0.0) * n / plan.replicas[c]
                for c in plan.replicas for i in range(plan.replicas[c])}
        assert all(abs(got[r] - want[r]) <= 1.0 for r in got)


def test_too_many_replicas_is_a_clear_error():
    plan = _plan({"fast": 1, "slow": 4}, {"fast": {"short": 0.5, "long": 1.0}, "slow": {"short": 0.5}})
    with pytest.raises(PlanError, match="5 replicas but at most max_replicas=4"):
        run_serving_plan(plan, _problem())
    with pytest.raises(PlanError, match="max_replicas=2"):
        run_serving_plan(_plan({"fast": 2, "slow": 1}, {"fast": {"short": 1.0, "long": 1.0}}), _problem(),
                         max_replicas=2)


def test_a_split_that_does_not_cover_a_workload_is_a_clear_error():
    plan = _plan({"fast": 1, "slow": 1}, {"fast": {"short": 0.5}, "slow": {"short": 0.5}})
    with pytest.raises(PlanError, match="covers 0.000 of workload 'long'"):
        run_serving_plan(plan, _problem())
    half = _plan({"fast": 1}, {"fast": {"short": 0.5, "long": 1.0}})
    with pytest.raises(PlanError, match="covers 0.500 of workload 'short'"):
        assign_requests(half, _problem(), {"short": 4, "long": 2})


def test_other_bad_input_is_a_clear_error():
    prob = _problem()
    with pytest.raises(PlanError, match=r"config\(s\) \['huge'\] are not in the problem"):
        run_serving_plan(_plan({"huge": 1}, {"huge": {"short": 1.0, "long": 1.0}}), prob)
    with pytest.raises(PlanError, match="sends work to config 'slow', which has no replicas"):
        run_serving_plan(_plan({"fast": 1}, {"fast": {"short": 1.0}, "slow": {"long": 1.0}}), prob)
    with pytest.raises(PlanError, match="must be a ServingPlan"):
        run_serving_plan({"fast": 1}, prob)
    with pytest.raises(PlanError, match="unknown workload"):
        assign_requests(plan_serving(prob, budget=4.0), prob, {"medium": 3})
    with pytest.raises(PlanError, match="cannot cover 2 workload types"):
        scale_requests(prob, 1)


def test_the_sleeping_slowdown_pays_its_debt_in_full():
    import time

    from sgl.systems.serving.hetero.run import _IdleSlowdown

    slow = _IdleSlowdown(3.0)
    t0 = time.perf_counter()
    for _ in range(40):
        assert slow.slow_down(0, 1e-3) == pytest.approx(3e-3)
    slow.settle()
    # 40 steps of 1 ms owe 80 ms of sleep; overshoot is paid back, so the total stays close
    assert 0.075 <= time.perf_counter() - t0 <= 0.2
    assert slow.owed == 0.0


def test_bad_run_options_are_clear_errors():
    prob = _problem()
    plan = plan_serving(prob, budget=4.0)
    with pytest.raises(PlanError, match="wait"):
        run_serving_plan(plan, prob, wait="nap")
    with pytest.raises(PlanError, match=r"no calibrated time for workload\(s\) \['long'\]"):
        run_serving_plan(plan, prob, request_time_s={"short": 1e-3})
    with pytest.raises(PlanError, match="exceed the model's"):
        run_serving_plan(plan, prob, shapes={"long": (1000, 100)})
