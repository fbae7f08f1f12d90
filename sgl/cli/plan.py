"""``sgl plan search | profile | show`` (and the extensions' ``seq``, ``straggler``, ``calibrate``, ...).

    sgl plan search --model llama-7b --devices 8 --memory 80GiB [--profile DIR] [--out plan.json]
    sgl plan profile --out DIR [--world-size 2]      # measure this machine (CPU/gloo here)
    sgl plan show plan.json [--model llama-7b]

``--out`` is checked before the search or the profiling starts.
"""
from __future__ import annotations

import importlib
import time
from pathlib import Path

from sgl._checks import check_real, parse_bytes
from sgl.cli.paths import check_output_path
from sgl.errors import ConfigError, PlanError

__all__ = ["register", "parse_memory_gb", "PLAN_EXTENSIONS"]

#: modules that add ``sgl plan <kind>`` subcommands through ``register_plan(subparsers)``
#: (sequence plans, LoRA/Spindle plans, serving plans); their parsers import no torch either
PLAN_EXTENSIONS: tuple = ("sgl.cli.plan_seq", "sgl.cli.plan_calibrate", "sgl.cli.plan_run", "sgl.cli.plan_serving",
                         "sgl.cli.plan_data")

#: dest -> the name its value has in PlanSearchConfig (error messages name the flag)
_LIBRARY_NAMES = {"memory": "memory_gb", "granularity": "granularity_mb", "profile": "profile_dir",
                  "reserve": "reserve_fraction"}


def parse_memory_gb(text: str) -> float:
    """A per-device budget in GiB (Galvatron's ``memory_constraint`` unit, 2^30 bytes).

    Sizes follow the one convention of :func:`sgl._checks.parse_bytes`: ``"80GiB"`` -> 80,
    ``"80GB"`` -> 80·10^9 bytes = 74.5 GiB, ``"512MiB"`` -> 0.5; a bare number is GiB.
    """
    text = str(text).strip()
    try:
        number = float(text)
    except ValueError:
        return parse_bytes(text, "memory budget", error=PlanError) / 2**30
    return check_real(number, "memory budget (--memory)", 0.0, open_low=True, error=PlanError)


def _int_list(text: str, flag: str) -> list:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ConfigError(f"{flag} expects positive integers, got {text!r}")
    return values


def _plan_out(out: str) -> Path:
    """``--out``: a ``.json`` file, or a folder that gets Galvatron's file name (as ``save_plan``)."""
    path = Path(out).expanduser()
    kind = "dir" if path.is_dir() or path.suffix.lower() != ".json" else "file"
    return check_output_path(path, kind, "--out")


def register(subparsers) -> None:
    plan = subparsers.add_parser("plan", help="hybrid-parallel plan search (Galvatron / BMW / OSDP)")
    sub = plan.add_subparsers(dest="plan_command", required=True)

    s = sub.add_parser("search", help="search a Galvatron-format parallel plan")
    s.add_argument("--model", default="llama-7b", help="preset name (llama-7b, llama-13b, ...)")
    s.add_argument("--devices", type=int, default=None, help="total devices (power of two)")
    s.add_argument("--nodes", type=int, default=None, help="number of nodes (default devices / devices-per-node)")
    s.add_argument("--devices-per-node", type=int, default=None, help="default min(devices, 8)")
    s.add_argument("--memory", default="80GiB", help="per-device budget, e.g. 80GiB (GiB = 2^30 bytes, "
                                                    "GB = 10^9; a bare number is GiB)")
    s.add_argument("--profile", default=None, help="folder of Galvatron-format profile JSONs (default: shipped A100)")
    s.add_argument("--space", default="full", help="full | 3d | dp+tp | dp+pp | dp | sdp | tp | pp")
    s.add_argument("--batch-sizes", default="8,16,32,64,128,256", help="global batch sizes to try")
    s.add_argument("--max-chunks", type=int, default=64)
    s.add_argument("--max-tp", type=int, default=None)
    s.add_argument("--max-pp", type=int, default=None)
    s.add_argument("--no-ckpt", action="store_true", help="disable activation checkpointing")
    s.add_argument("--sp-space", default="tp", choices=("tp", "tp+sp"), help="tp+sp adds Ulysses SP")
    s.add_argument("--granularity", type=float, default=16.0, help="DP memory unit in MB")
    s.add_argument("--reserve", type=float, default=0.0,
                   help="fraction of the budget kept free (Galvatron keeps 0.2 above 20 GB)")
    s.add_argument("--partition", default="exact", help="exact | bmw | even | memory")
    s.add_argument("--mode", default="galvatron", choices=("galvatron", "osdp"))
    s.add_argument("--pipeline-type", default="pipedream_flush", choices=("pipedream_flush", "gpipe"))
    s.add_argument("--default-dp-type", default="ddp", choices=("ddp", "zero2"))
    s.add_argument("--baselines", action="store_true", help="also print pure DP/SDP/TP/3D under the same cost model")
    s.add_argument("--out", default=None, help="write the plan JSON here (a folder gets Galvatron's file name)")
    s.set_defaults(handler=_search, library_names=_LIBRARY_NAMES)

    p = sub.add_parser("profile", help="measure a small Transformer and the links of this machine")
    p.add_argument("--out", required=True, help="folder for the Galvatron-format profile JSONs")
    p.add_argument("--model", default="tiny", help="preset to profile (CPU: keep it small)")
    p.add_argument("--world-size", type=int, default=2, help="gloo processes for the bandwidth probe")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads per process (as training will use)")
    p.add_argument("--size-mb", type=float, default=16.0, help="message size of the bandwidth probe")
    p.set_defaults(handler=_profile)

    w = sub.add_parser("show", help="print a plan JSON as a table (with predictions when --model is given)")
    w.add_argument("plan", help="plan JSON (ours or Galvatron's)")
    w.add_argument("--devices", type=int, default=None, help="world size, for Galvatron files without sgl_* keys")
    w.add_argument("--model", default=None, help="re-evaluate the plan with this model's profile")
    w.add_argument("--profile", default=None)
    w.set_defaults(handler=_show)

    for name in PLAN_EXTENSIONS:
        importlib.import_module(name).register_plan(sub)


def _cluster_args(args) -> tuple:
    from sgl.systems.parallel import ClusterSpec

    if args.devices is None and args.nodes is None:
        raise PlanError("give --devices N (or --nodes and --devices-per-node)")
    if args.devices is not None:
        cluster = ClusterSpec.from_devices(args.devices, args.devices_per_node)
        if args.nodes is not None and args.nodes != cluster.num_nodes:
            raise PlanError(f"--nodes {args.nodes} contradicts --devices {args.devices} with "
                            f"{cluster.devices_per_node} devices per node")
    else:
        cluster = ClusterSpec(args.nodes, args.devices_per_node or 8)
    return cluster.num_nodes, cluster.devices_per_node


def _search(args) -> int:
    if args.out:
        _plan_out(args.out)
    from sgl.systems.parallel import PlanSearchConfig, PlanSearcher, format_plan, save_plan

    nodes, per_node = _cluster_args(args)
    config = PlanSearchConfig(
        model=args.model, num_nodes=nodes, devices_per_node=per_node, memory_gb=parse_memory_gb(args.memory),
        space=args.space, batch_sizes=tuple(_int_list(args.batch_sizes, "--batch-sizes")), max_chunks=args.max_chunks,
        max_tp=args.max_tp, max_pp=args.max_pp, ckpt=not args.no_ckpt, sp_space=args.sp_space,
        granularity_mb=args.granularity, partition=args.partition, mode=args.mode,
        pipeline_type=args.pipeline_type, default_dp_type=args.default_dp_type, profile_dir=args.profile,
        reserve_fraction=args.reserve,
    )
    searcher = PlanSearcher(config)
    result = searcher.search()
    print(format_plan(result.plan))
    print(f"search: {result.tasks} tasks evaluated in {result.seconds:.2f} s")
    if args.baselines:
        ours = result.plan.throughput
        for name in ("dp", "sdp", "tp", "3d"):
            try:
                base = searcher.search(baseline=name).plan
                print(f"baseline {name:>3}: {base.throughput:8.2f} samples/s   searched/baseline = {ours / base.throughput:.3f}")
            except PlanError as exc:
                print(f"baseline {name:>3}: infeasible ({str(exc).split('; ')[-1]})")
    if args.out:
        path = save_plan(result.plan, args.out)
        print(f"plan written to {path}")
    return 0


def _profile(args) -> int:
    check_output_path(args.out, "dir", "--out")
    from sgl.systems.runtime import profile_to_dir

    started = time.perf_counter()
    paths = profile_to_dir(args.out, model=args.model, world_size=args.world_size, batch_size=args.batch_size,
                           repeats=args.repeats, threads=args.threads, size_mb=args.size_mb)
    for path in paths:
        print(f"wrote {path}")
    print(f"profiled in {time.perf_counter() - started:.1f} s (CPU/gloo figures, not GPU)")
    return 0


def _show(args) -> int:
    from sgl.systems.parallel import PlanSearchConfig, PlanSearcher, format_plan, load_plan

    plan = load_plan(args.plan, num_devices=args.devices)
    if args.model:
        searcher = PlanSearcher(PlanSearchConfig(model=args.model, num_nodes=plan.num_nodes,
                                             devices_per_node=plan.devices_per_node, profile_dir=args.profile))
        plan.model = searcher.model.name
        plan.time_ms, plan.stage_memory_mb = searcher.evaluate(plan)
    print(format_plan(plan))
    return 0
