"""The heterogeneous-GPU serving MILP: GPU composition, deployment configs, workload split.

Variables: ``n_c ∈ Z≥0`` replicas of config ``c``; ``x_{c,w} ∈ [0, 1]`` share of workload
type ``w`` (``R_w`` requests) sent to ``c`` (throughput ``θ_{c,w}`` requests/s). Minimise the
makespan ``T`` (s) under an hourly price budget ``B`` and GPU availability ``A_g``:

    min T  s.t.  Σ_w x_{c,w} R_w / θ_{c,w} <= T n_c      (each config's replicas finish by T)
                 Σ_c x_{c,w} = 1                         (every request is served)
                 Σ_c p_c n_c <= B,   Σ_c g_{c,g} n_c <= A_g.

``T n_c`` is bilinear, so as in the paper ``T`` is fixed and bisected: for a given ``T`` the
rest is a MILP (HiGHS, through ``scipy.optimize.milp``), solved for the cheapest feasible fleet;
the smallest feasible ``T`` is found to ``rel_tol``, and the final fleet's exact makespan and
split come from the LP with ``n`` fixed. Cost per request = ``Σ_c p_c n_c · T / 3600 / Σ_w R_w``.

>>> from sgl.systems.serving.hetero.spec import DeployConfig, GPUType, ServingProblem, Workload
>>> prob = ServingProblem([GPUType("big", 4.0, 4), GPUType("small", 1.0, 8)],
...     [DeployConfig("big", {"big": 1}, {"short": 40.0, "long": 10.0}),
...      DeployConfig("small", {"small": 1}, {"short": 20.0, "long": 1.0})],
...     [Workload("short", 36000), Workload("long", 3600)])
>>> plan = plan_serving(prob, budget=8.0)
>>> plan.replicas, round(plan.makespan_s)
({'big': 1, 'small': 4}, 420)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from sgl._checks import check_real
from sgl.errors import PlanError
from sgl.systems.serving.hetero.spec import ServingProblem

__all__ = ["ServingPlan", "plan_serving", "plan_min_cost", "cheapest_feasible_budget", "makespan_for",
           "best_homogeneous"]


@dataclass
class ServingPlan:
    """A fleet (``replicas`` per config), the workload split and its makespan and cost."""

    replicas: Dict[str, int]
    split: Dict[str, Dict[str, float]]
    makespan_s: float
    price_per_hour: float
    cost_per_request: float
    solves: int = 0

    def to_dict(self) -> dict:
        return {"replicas": self.replicas, "split": self.split, "makespan_s": self.makespan_s,
                "price_per_hour": self.price_per_hour, "cost_per_request": self.cost_per_request,
                "milp_solves": self.solves}


def _arrays(prob: ServingProblem):
    thr = np.zeros((len(prob.configs), len(prob.workloads)))
    for i, c in enumerate(prob.configs):
        for j, w in enumerate(prob.workloads):
            thr[i, j] = c.throughput.get(w.name, 0.0)
    req = np.array([w.requests for w in prob.workloads], dtype=float)
    use = np.array([[c.gpus.get(g.name, 0) for c in prob.configs] for g in prob.gpus], dtype=float)
    avail = np.array([g.available for g in prob.gpus], dtype=float)
    return thr, req, np.array(prob.config_prices), use, avail


def _milp(prob: ServingProblem, budget: Optional[float], T: Optional[float]) -> Optional[np.ndarray]:
    """Cheapest ``n`` feasible at makespan ``T`` (``None``: unbounded time, a cover) or None."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    thr, req, price, use, avail = _arrays(prob)
    nc, nw = thr.shape
    can = thr > 0
    nx = int(can.sum())
    pairs = np.argwhere(can)
    # variable order: n_0..n_{C-1}, then x for each servable (c, w) pair
    cost = np.concatenate([price, np.zeros(nx)])
    rows, lo, hi = [], [], []
    for w in range(nw):                              # Σ_c x_{c,w} = 1 (only workloads with requests)
        if req[w] <= 0:
            continue
        r = np.zeros(nc + nx)
        r[nc + np.flatnonzero(pairs[:, 1] == w)] = 1.0
        rows.append(r), lo.append(1.0), hi.append(1.0)
    for c in range(nc):
        r = np.zeros(nc + nx)
        idx = np.flatnonzero(pairs[:, 0] == c)
        if T is None:                                # a share needs a replica: x_{c,w} <= n_c
            for k in idx:
                r2 = np.zeros(nc + nx)
                r2[nc + k], r2[c] = 1.0, -1.0
                rows.append(r2), lo.append(-np.inf), hi.append(0.0)
            continue
        r[nc + idx] = req[pairs[idx, 1]] / thr[c, pairs[idx, 1]]
        r[c] = -T
        rows.append(r), lo.append(-np.inf), hi.append(0.0)
    for g in range(len(avail)):
        rows.append(np.concatenate([use[g], np.zeros(nx)])), lo.append(-np.inf), hi.append(avail[g])
    if budget is not None:
        rows.append(np.concatenate([price, np.zeros(nx)])), lo.append(-np.inf), hi.append(budget + 1e-9)
    ub_n = np.array([min(avail[use[:, c] > 0] // use[use[:, c] > 0, c]) for c in range(nc)])
    res = milp(cost, constraints=LinearConstraint(np.array(rows), lo, hi),
               integrality=np.concatenate([np.ones(nc), np.zeros(nx)]),
               bounds=Bounds(np.zeros(nc + nx), np.concatenate([ub_n, np.ones(nx)])))
    if res.status != 0 or res.x is None:
        return None
    return np.round(res.x[:nc]).astype(int)


def makespan_for(prob: ServingProblem, replicas: np.ndarray) -> Tuple[float, np.ndarray]:
    """``(T, x)``: the LP optimum for a fixed fleet ``replicas`` (``inf`` if it cannot serve all)."""
    from scipy.optimize import linprog

    thr, req, *_ = _arrays(prob)
    nc, nw = thr.shape
    can = (thr > 0) & (np.asarray(replicas)[:, None] > 0)
    pairs = np.argwhere(can)
    nx = len(pairs)
    need = req > 0
    if any(not can[:, w].any() for w in np.flatnonzero(need)):
        return float("inf"), np.zeros((nc, nw))
    c_obj = np.zeros(nx + 1)
    c_obj[-1] = 1.0
    a_ub = np.zeros((nc, nx + 1))
    for k, (c, w) in enumerate(pairs):
        a_ub[c, k] = req[w] / thr[c, w]
    a_ub[:, -1] = -np.asarray(replicas, dtype=float)
    a_eq = np.zeros((int(need.sum()), nx + 1))
    for r, w in enumerate(np.flatnonzero(need)):
        a_eq[r, np.flatnonzero(pairs[:, 1] == w)] = 1.0
    res = linprog(c_obj, A_ub=a_ub, b_ub=np.zeros(nc), A_eq=a_eq, b_eq=np.ones(len(a_eq)),
                  bounds=[(0, 1)] * nx + [(0, None)], method="highs")
    if res.status != 0:
        return float("inf"), np.zeros((nc, nw))
    x = np.zeros((nc, nw))
    for k, (c, w) in enumerate(pairs):
        x[c, w] = res.x[k]
    return float(res.x[-1]), x


def cheapest_feasible_budget(prob: ServingProblem) -> float:
    """The hourly price of the cheapest fleet that can serve every workload type (any makespan)."""
    n = _milp(prob, None, None)
    if n is None:
        raise PlanError("no fleet within the GPU availability can serve every workload type; "
                        "add GPUs or configs")
    return float(np.dot(prob.config_prices, n))


def _plan(prob: ServingProblem, n: np.ndarray, solves: int) -> ServingPlan:
    T, x = makespan_for(prob, n)
    price = float(np.dot(prob.config_prices, n))
    total = sum(w.requests for w in prob.workloads)
    split = {c.name: {w.name: round(float(x[i, j]), 6) for j, w in enumerate(prob.workloads) if x[i, j] > 1e-9}
             for i, c in enumerate(prob.configs) if n[i] > 0}
    return ServingPlan({c.name: int(n[i]) for i, c in enumerate(prob.configs) if n[i] > 0}, split, T, price,
                       price * T / 3600.0 / max(total, 1e-12), solves)


def plan_serving(prob: ServingProblem, budget: float, *, rel_tol: float = 1e-4) -> ServingPlan:
    """The fleet with the smallest makespan within ``budget`` per hour (bisection on ``T``)."""
    budget = check_real(budget, "budget", 0.0, open_low=True, error=PlanError)
    rel_tol = check_real(rel_tol, "rel_tol", 0.0, 1.0, open_low=True, error=PlanError)
    floor = cheapest_feasible_budget(prob)
    if budget + 1e-9 < floor:
        raise PlanError(f"budget {budget:g}/h cannot serve every workload type; the cheapest feasible "
                        f"budget is {floor:g}/h")
    cover = _milp(prob, budget, None)
    hi, _ = makespan_for(prob, cover)
    best, solves, lo = cover, 1, 0.0
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        n = _milp(prob, budget, mid)
        solves += 1
        if n is None:
            lo = mid
        else:
            t, _ = makespan_for(prob, n)
            best, hi = n, min(mid, t)
    return _plan(prob, best, solves)


def plan_min_cost(prob: ServingProblem, makespan_s: float) -> ServingPlan:
    """The cheapest fleet that serves every request within ``makespan_s`` (one MILP, Mélange's question)."""
    makespan_s = check_real(makespan_s, "makespan_s", 0.0, open_low=True, error=PlanError)
    n = _milp(prob, None, makespan_s)
    if n is None:
        raise PlanError(f"no fleet within the GPU availability serves the workload in {makespan_s:g} s; "
                        f"allow a longer makespan or more GPUs")
    return _plan(prob, n, 1)


def best_homogeneous(prob: ServingProblem, budget: Optional[float] = None, *,
                     makespan_s: Optional[float] = None) -> Tuple[str, ServingPlan]:
    """The best single-GPU-type fleet ``(gpu, plan)``: smallest makespan within ``budget``, or
    (with ``makespan_s``) lowest cost per request that meets the makespan."""
    if (budget is None) == (makespan_s is None):
        raise PlanError("give exactly one of budget or makespan_s")
    out: List[Tuple[float, str, ServingPlan]] = []
    for g in prob.gpus:
        try:
            sub = prob.restricted(g.name)
            plan = plan_serving(sub, budget) if budget is not None else plan_min_cost(sub, makespan_s)
        except PlanError:
            continue
        out.append((plan.makespan_s if budget is not None else plan.cost_per_request, g.name, plan))
    if not out:
        raise PlanError("no homogeneous fleet can serve every workload type "
                        + (f"within budget {budget:g}/h" if budget is not None else f"within {makespan_s:g} s"))
    _, name, plan = min(out, key=lambda t: t[0])
    return name, plan
