"""``sgl plan serving``: the heterogeneous-GPU serving MILP on JSON throughput tables.

    sgl plan serving --gpus gpus.json --workload workload.json --budget 30 --out plan.json
    sgl plan serving --gpus gpus.json --workload workload.json --makespan 3600

With ``--budget`` ($/h) it finds the GPU composition, deployment configs and workload split
with the smallest makespan (bisection over MILPs, HiGHS); with ``--makespan`` (s) the cheapest
fleet that finishes in time. Either way it also prints the best homogeneous fleet. The JSON
formats are in :mod:`sgl.systems.serving.hetero.spec`; ``--melange`` reads Mélange's solver
input instead of ``--gpus``/``--workload``.
"""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register_plan", "cmd_plan_serving"]


def register_plan(subparsers: Any) -> None:
    p = subparsers.add_parser("serving", help="heterogeneous-GPU serving plan (MILP over throughput tables)")
    p.add_argument("--gpus", help="JSON with gpus (price, availability) and configs (throughput tables)")
    p.add_argument("--workload", help="JSON with the workload types and their request counts")
    p.add_argument("--melange", help="a Mélange solver input JSON instead of --gpus/--workload")
    p.add_argument("--available", type=int, default=16, help="--melange: GPUs available per type")
    goal = p.add_mutually_exclusive_group(required=True)
    goal.add_argument("--budget", type=float, help="price budget per hour (minimise the makespan)")
    goal.add_argument("--makespan", type=float, help="seconds to serve everything (minimise the cost)")
    p.add_argument("--out", default=None, help="write the plan as JSON here")
    p.set_defaults(handler=cmd_plan_serving)


def cmd_plan_serving(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from sgl.cli.paths import check_output_path
    from sgl.cli.report import write_record
    from sgl.errors import ConfigError
    from sgl.systems.serving.hetero import (best_homogeneous, from_melange, load_problem, plan_min_cost,
                                            plan_serving)

    if args.out:
        check_output_path(args.out, "file")
    if args.melange:
        if args.gpus or args.workload:
            raise ConfigError("give either --melange or --gpus with --workload, not both")
        path = Path(args.melange).expanduser()
        if not path.is_file():
            raise ConfigError(f"--melange {args.melange} does not exist")
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--melange {args.melange} is not valid JSON: {exc}") from None
        prob = from_melange(doc, available=args.available)
    else:
        if not args.gpus or not args.workload:
            raise ConfigError("give --gpus FILE and --workload FILE (or --melange FILE)")
        prob = load_problem(args.gpus, args.workload)
    if args.budget is not None:
        plan = plan_serving(prob, args.budget)
        gpu, homo = best_homogeneous(prob, args.budget)
    else:
        plan = plan_min_cost(prob, args.makespan)
        gpu, homo = best_homogeneous(prob, makespan_s=args.makespan)
    print(f"fleet: " + ", ".join(f"{n} x {c}" for c, n in plan.replicas.items()))
    for c, split in plan.split.items():
        print(f"  {c}: " + ", ".join(f"{w} {100 * x:.1f} %" for w, x in split.items()))
    print(f"makespan: {plan.makespan_s:.1f} s, price {plan.price_per_hour:.2f}/h, "
          f"cost per request {plan.cost_per_request:.6g}")
    print(f"best homogeneous ({gpu}): makespan {homo.makespan_s:.1f} s, price {homo.price_per_hour:.2f}/h, "
          f"cost per request {homo.cost_per_request:.6g}")
    write_record(args.out, {"plan": plan.to_dict(), "homogeneous_gpu": gpu, "homogeneous": homo.to_dict()})
    return 0
