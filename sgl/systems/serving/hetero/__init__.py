"""Cost-efficient LLM serving on heterogeneous GPUs: the MILP plan, its input tables, calibration,
and :func:`run_serving_plan`, which executes a plan on this machine (one process per replica)."""
from sgl.systems.serving.hetero.milp import (ServingPlan, best_homogeneous, cheapest_feasible_budget, makespan_for,
                                             plan_min_cost, plan_serving)
from sgl.systems.serving.hetero.run import ReplicaRun, ServingRun, assign_requests, run_serving_plan, scale_requests
from sgl.systems.serving.hetero.spec import (DeployConfig, GPUType, ServingProblem, Workload, from_melange,
                                             load_problem)

__all__ = ["GPUType", "DeployConfig", "Workload", "ServingProblem", "load_problem", "from_melange", "ServingPlan",
           "plan_serving", "plan_min_cost", "cheapest_feasible_budget", "makespan_for", "best_homogeneous",
           "run_serving_plan", "ServingRun", "ReplicaRun", "assign_requests", "scale_requests"]
