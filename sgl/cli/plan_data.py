"""``sgl plan lora`` and ``sgl plan spindle``: multi-tenant LoRA replicas and multi-task wavefront schedules.

    sgl plan lora --devices 16 --task wiki=../shared/datasets/seqlen/wikipedia.txt:16 \\
        --task chat=chat_lengths.txt:64 [--steps 10] [--boundaries 64,128,...] [--pool lora|full] [--rank 16] \\
        [--seed 0] [--out plan.json]
    sgl plan spindle --dag dag.json --devices 16 [--devices-per-node 8] [--mapping exact|p2p|first_fit] [--out s.json]
    sgl plan spindle --dag builtin:mtmm --devices 32

``lora`` samples ``--steps`` joint batches (``COUNT`` sequences of each task per step) from the
tasks' length lists, plans LobRA replicas (HiGHS MILP over the Hydraulis 7B/A100 schemes; their
capacities from a LoRA memory model, frozen bf16 base and one adapter per task, ``--pool lora``,
or from full fine-tuning, ``--pool full``) with per-step dispatch, and prints modelled
GPU-seconds against one homogeneous scheme, beside the any-plan and the static-plan LP bounds.
``spindle`` reads an operator DAG (JSON, format in :mod:`sgl.systems.data.spindle_dag`; or
``builtin:mtmm``, a synthetic 4-task multi-modal step) and prints the wave allocation, the
replayed makespan and the two baselines (one big pipeline, even split per task). ``--out`` is
checked before any work. Library side: :mod:`sgl.systems.data.lobra_study`, :mod:`sgl.systems.data.spindle`.
"""
from __future__ import annotations

import json
from typing import Any

from sgl.cli.paths import check_output_path
from sgl.errors import PlanError

__all__ = ["register_plan", "cmd_lora", "cmd_spindle", "parse_task"]


def register_plan(sub: Any) -> None:
    lo = sub.add_parser("lora", help="LobRA: heterogeneous replicas for joint multi-LoRA fine-tuning (modelled)")
    lo.add_argument("--devices", type=int, required=True, help="GPUs (a power of two)")
    lo.add_argument("--task", action="append", required=True, metavar="NAME=FILE:COUNT",
                    help="a task: its length list (one integer per line, JSON or .npy) and sequences per step; "
                         "repeat for each task")
    lo.add_argument("--steps", type=int, default=10, help="joint steps to replay")
    lo.add_argument("--boundaries", default=None, help="length-bucket bounds, e.g. 64,256,1024,4096")
    lo.add_argument("--calibration-steps", type=int, default=3,
                    help="batches (another seed) on which the static plan is chosen among the MILP's candidates")
    lo.add_argument("--time-limit", type=float, default=2.0, help="MILP time limit per dispatch solve (s)")
    lo.add_argument("--microbatch", choices=("tokens", "bucket"), default="tokens",
                    help="tokens: micro-batches packed by tokens across buckets; bucket: per length bucket (LobRA)")
    lo.add_argument("--search", type=int, default=64,
                    help="also try every replica set on the calibration batches when there are at most this many "
                         "(0: the MILP's candidates only)")
    lo.add_argument("--pool", choices=("lora", "full"), default="lora",
                    help="scheme capacities: LoRA on a frozen base (LobRA) or full fine-tuning (Hydraulis' regression)")
    lo.add_argument("--rank", type=int, default=16, help="LoRA rank of the memory model (one adapter per --task)")
    lo.add_argument("--seed", type=int, default=0)
    lo.add_argument("--out", default=None, help="write the comparison as JSON")
    lo.set_defaults(handler=cmd_lora)

    sp = sub.add_parser("spindle", help="Spindle: wavefront schedule of a multi-task multi-modal operator DAG")
    sp.add_argument("--dag", required=True, help="operator DAG JSON, or builtin:mtmm")
    sp.add_argument("--devices", type=int, required=True)
    sp.add_argument("--devices-per-node", type=int, default=8)
    sp.add_argument("--intra-gbps", type=float, default=150.0, help="intra-node link, GB/s")
    sp.add_argument("--inter-gbps", type=float, default=12.5, help="inter-node link, GB/s")
    sp.add_argument("--mapping", choices=("exact", "p2p", "first_fit"), default="exact",
                    help="exact: least-P2P MILP over all waves where small (else greedy); p2p: greedy; first_fit")
    sp.add_argument("--out", default=None, help="write the schedule (ops, devices, start/end) as JSON")
    sp.set_defaults(handler=cmd_spindle)


def parse_task(text: str) -> tuple:
    """``NAME=FILE:COUNT`` -> ``(name, file, count)``."""
    name, sep, rest = text.partition("=")
    path, sep2, count = rest.rpartition(":")
    if not sep or not sep2 or not name or not path:
        raise PlanError(f"--task expects NAME=FILE:COUNT (e.g. wiki=lengths.txt:16); got {text!r}")
    try:
        n = int(count)
    except ValueError:
        raise PlanError(f"--task {text!r}: COUNT must be an integer, got {count!r}") from None
    if n < 1:
        raise PlanError(f"--task {text!r}: COUNT must be at least 1")
    return name, path, n


def _write_json(path: str, data: dict) -> None:
    from sgl.fileio import atomic_write

    with atomic_write(path, "w") as handle:
        json.dump(data, handle, indent=1, default=float)


def cmd_lora(args) -> int:
    from sgl._checks import check_int, check_real

    if args.out is not None:
        check_output_path(args.out, "file", "--out")
    devices = check_int(args.devices, "--devices", 1, error=PlanError)
    steps = check_int(args.steps, "--steps", 1, error=PlanError)
    calibration = check_int(args.calibration_steps, "--calibration-steps", 1, error=PlanError)
    time_limit = check_real(args.time_limit, "--time-limit", 0.0, open_low=True, error=PlanError)
    search = check_int(args.search, "--search", 0, error=PlanError)
    specs = [parse_task(t) for t in args.task]
    if len({s[0] for s in specs}) != len(specs):
        raise PlanError("each --task needs its own NAME")
    bounds = None
    if args.boundaries:
        try:
            bounds = [int(x) for x in args.boundaries.split(",") if x.strip()]
        except ValueError:
            raise PlanError(f"--boundaries expects comma-separated integers, got {args.boundaries!r}") from None
        if not bounds or min(bounds) < 1:
            raise PlanError(f"--boundaries expects positive integers, got {args.boundaries!r}")
    from sgl.systems.data.lobra_pool import lobra_pool
    from sgl.systems.data.lobra_study import lobra_compare
    from sgl.systems.seq import read_lengths

    rank = check_int(args.rank, "--rank", 1, error=PlanError)
    pool = lobra_pool(args.pool, devices, rank=rank, adapters=len(specs))
    if not pool:
        raise PlanError(f"no scheme of the pool fits {devices} GPUs; use --devices 1 or more (a power of two)")
    tasks = {name: read_lengths(path) for name, path, _ in specs}
    cap = max(p.capacity for p in pool)
    for name, lengths in tasks.items():
        if not (lengths <= cap).any():
            raise PlanError(f"task {name!r}: every sequence is longer than the longest scheme holds ({cap} tokens)")
    result = lobra_compare(pool, devices, tasks, {n: c for n, _, c in specs}, steps, bounds=bounds, seed=args.seed,
                           time_limit=time_limit, calibration_steps=calibration, microbatch=args.microbatch,
                           search=search, bound_sets=search)
    lob, homo = result["lobra"], result["homogeneous"]
    memory = f"LoRA rank {rank}, {len(specs)} adapters" if args.pool == "lora" else "full fine-tuning"
    print(f"sgl plan lora: {devices} GPUs (Hydraulis 7B A100-40GB schemes, {memory} memory, modelled), "
          f"{steps} steps of " + ", ".join(f"{c} {n}" for n, _, c in specs))
    print(f"{'plan':<24} {'GPU-seconds':>12} {'step s':>8}  replicas")
    print(f"{'one homogeneous scheme':<24} {homo['gpu_seconds']:>12.1f} {homo['step_s']:>8.3f}  {homo['replicas']}")
    print(f"{'LobRA MILP + dispatch':<24} {lob['gpu_seconds']:>12.1f} {lob['step_s']:>8.3f}  {lob['replicas']}")
    print(f"{'any-plan lower bound':<24} {result['lower_bound_gpu_seconds']:>12.1f}")
    static = result["static_bound"]
    exact = static["gpu_seconds"] is not None
    print(f"{'static-plan LP bound':<24} "
          f"{(static['gpu_seconds'] if exact else static['continuous_gpu_seconds']):>12.1f}  "
          + (f"(best of {static['sets']} replica sets)" if exact else "(real-valued replica counts)"))
    print(f"GPU-seconds saved: {100 * result['saving']:.1f} % (ceiling for any plan "
          f"{100 * result['ceiling']:.1f} %, LobRA reaches {100 * result['share_of_ceiling']:.0f} % of it; "
          f"compute-term ceiling {100 * result['compute_ceiling']:.1f} %; any static replica set "
          f"{100 * result['static_ceiling']:.1f} %)")
    if args.out is not None:
        _write_json(args.out, {**result, "tasks": {n: p for n, p, _ in specs}, "seed": args.seed, "pool": args.pool,
                               "rank": rank})
        print(f"wrote {args.out}")
    return 0


def cmd_spindle(args) -> int:
    if args.out is not None:
        check_output_path(args.out, "file", "--out")
    from sgl.systems.data.spindle import (SpindleConfig, SpindlePlanner, big_pipeline, even_split)
    from sgl.systems.data.spindle_dag import load_dag, mtmm_dag

    if args.dag == "builtin:mtmm":
        dag = mtmm_dag()
    elif args.dag.startswith("builtin:"):
        raise PlanError(f"unknown built-in DAG {args.dag!r}; the built-in one is builtin:mtmm")
    else:
        dag = load_dag(args.dag)
    config = SpindleConfig(devices=args.devices, devices_per_node=args.devices_per_node, intra_gbps=args.intra_gbps,
                           inter_gbps=args.inter_gbps, mapping=args.mapping)
    planner = SpindlePlanner(dag, config)
    result = planner.plan()
    print(f"sgl plan spindle: {len(dag.ops)} operators, {len(dag.tasks)} tasks, {len(result.waves)} waves on "
          f"{args.devices} GPUs (modelled from the DAG's scaling curves)")
    for k, (ops, alloc) in enumerate(result.waves):
        lanes = "; ".join(f"{lane.width} GPU: " + " -> ".join(dag.ops[ops[i]].name for i in lane.ops)
                          for lane in alloc.lanes)
        print(f"wave {k}: {alloc.makespan:.4f} s (bound {alloc.lower_bound:.4f}, {alloc.method})  {lanes}")
    big = big_pipeline(dag, args.devices, config.link)
    rows = [("spindle", result.makespan), ("one big pipeline", big.makespan)]
    try:
        rows.append(("even split", even_split(dag, args.devices, config.link).makespan))
    except PlanError as err:
        print(f"even split: not possible ({err})")
    print(f"makespan: spindle {result.makespan:.4f} s (lower bound {result.lower_bound:.4f}, P2P "
          f"{result.schedule.p2p_seconds:.4f} s, {planner.mapping_used} mapping)")
    for name, span in rows[1:]:
        print(f"  vs {name}: {span:.4f} s -> spindle {100 * (1 - result.makespan / span):.1f} % faster")
    if args.out is not None:
        data = result.to_dict(dag)
        data["baselines"] = {name: span for name, span in rows[1:]}
        data["mapping_used"] = planner.mapping_used
        _write_json(args.out, data)
        print(f"wrote {args.out}")
    return 0
