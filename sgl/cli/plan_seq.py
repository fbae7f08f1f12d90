"""``sgl plan seq`` and ``sgl plan straggler``: variable-length and straggler-aware training plans.

    sgl plan seq --lengths ../shared/datasets/seqlen/wikipedia.txt --devices 64 --memory 80GiB \\
        --method flexsp|hydraulis|mesh|switch [--steps 4] [--max-length 393216] [--out plan.json] [--png load.png]
    sgl plan straggler --devices 16 --tp 4 --pp 2 --rates 5,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 [--previous-rates ...]
    sgl plan straggler --devices 64 --tp 8 --pp 4 --setting one-5x --out malleus.json --png load.png

``seq`` samples ``--steps`` seeded global batches from the length list (a token budget per step,
default ``devices × 16384``), plans them with the method and prints the modelled step times
against the best static strategy that holds ``--max-length``; ``straggler`` prints Malleus'
plan against the straggler-oblivious one (and the state migration when ``--previous-rates`` is
given).  ``--out`` (JSON) and ``--png`` (per-device load) are checked before any work.  The
library side is :mod:`sgl.systems.seq` (``compare``, ``MalleusPlanner``).
"""
from __future__ import annotations

import json
from typing import Any, List

from sgl.cli.paths import check_output_path
from sgl.errors import PlanError

__all__ = ["register_plan", "cmd_seq", "cmd_straggler"]

_METHODS = ("flexsp", "hydraulis", "mesh", "switch")
_SETTINGS = ("none", "one-2x", "one-5x", "one-8x", "node-2x", "four-3x", "mixed")


def register_plan(sub: Any) -> None:
    s = sub.add_parser("seq", help="plans for variable-length sequences (FlexSP, Hydraulis, DP x CP mesh, switching)")
    s.add_argument("--lengths", required=True, help="length list: one integer per line, a JSON array or .npy")
    s.add_argument("--devices", type=int, required=True, help="devices (a power of two)")
    s.add_argument("--memory", default="80GiB", help="per-device memory, e.g. 80GiB (bare number = GiB)")
    s.add_argument("--method", choices=_METHODS, default="flexsp")
    s.add_argument("--steps", type=int, default=4, help="global batches to plan")
    s.add_argument("--tokens-per-step", type=int, default=None, help="token budget per step (default devices*16384)")
    s.add_argument("--batch-size", type=int, default=None, help="sequences per step instead of a token budget")
    s.add_argument("--max-length", type=int, default=None,
                   help="the run's context length: longer sequences are dropped; the static baseline must hold it "
                        "(default: the longest length in the file)")
    s.add_argument("--mesh-groups", choices=("ring", "ulysses", "best"), default="best",
                   help="--method mesh: ring-attention CP groups, Ulysses SP groups or the cheaper per size")
    s.add_argument("--time-limit", type=float, default=0.5, help="MILP/ILP time limit per solve (s)")
    s.add_argument("--calibrate", default=None, metavar="MODEL",
                   help="fit the cost model on this machine with the runtime's MODEL (e.g. tiny, cpu-small) instead "
                        "of FlexSP's published A100 constants (not for --method hydraulis)")
    s.add_argument("--profile", default=None, metavar="PATH",
                   help="plan with a machine profile written by `sgl plan calibrate` (measured compute, memory and "
                        "collective terms; with --method hydraulis: Hydraulis' strategies costed by it)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None, help="write the plans as JSON")
    s.add_argument("--png", default=None, help="write a bar chart of the per-device load")
    s.set_defaults(handler=cmd_seq)

    g = sub.add_parser("straggler", help="Malleus: straggler-aware TP groups, pipelines, layers and micro-batches")
    g.add_argument("--devices", type=int, required=True)
    g.add_argument("--tp", type=int, default=8, help="nominal tensor-parallel size")
    g.add_argument("--pp", type=int, default=1, help="nominal pipeline stages")
    g.add_argument("--node-size", type=int, default=8)
    group = g.add_mutually_exclusive_group(required=True)
    group.add_argument("--rates", help="comma-separated straggling rate per device (1 = normal, 2 = twice as slow)")
    group.add_argument("--setting", choices=_SETTINGS, help="a simulated straggler setting")
    g.add_argument("--previous-rates", default=None,
                   help="rates of the current plan: re-plan and report the model-state migration")
    g.add_argument("--amortize-steps", type=int, default=None,
                   help="with --previous-rates: weigh the migration time spread over this many steps against the "
                        "step time (default: fastest plan)")
    g.add_argument("--layers", type=int, default=32)
    g.add_argument("--micro-batches", type=int, default=64, help="micro-batches per step")
    g.add_argument("--memory", default="80GiB")
    g.add_argument("--suspend", type=float, default=8.0, help="devices at or above this rate are left idle")
    g.add_argument("--profile", default=None, metavar="PATH",
                   help="take layers, layer time, memory and TP overheads from a `sgl plan calibrate` profile")
    g.add_argument("--tokens", type=int, default=None,
                   help="with --profile: tokens per micro-batch the layer time is measured for (default: the "
                        "profiled model's sequence length)")
    g.add_argument("--out", default=None)
    g.add_argument("--png", default=None)
    g.set_defaults(handler=cmd_straggler)


def _outputs(args) -> None:
    if args.out is not None:
        check_output_path(args.out, "file", "--out")
    if args.png is not None:
        check_output_path(args.png, "file", "--png")


def _write_json(path: str, data: dict) -> None:
    from sgl.fileio import atomic_write

    with atomic_write(path, "w") as handle:
        json.dump(data, handle, indent=1)


def _write_png(path: str, loads: List[Any], labels: List[str], title: str, stacked: bool = True) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from sgl.fileio import atomic_write

    fig, ax = plt.subplots(figsize=(8, 3.5))
    bottom = np.zeros(len(loads[0]))
    width = 1.0 if stacked else 0.8 / len(loads)
    for k, (load, label) in enumerate(zip(loads, labels)):
        x = np.arange(load.size) + (0.0 if stacked else (k - (len(loads) - 1) / 2) * width)
        ax.bar(x, load, width=width * 0.9, bottom=bottom if stacked else 0.0, label=label)
        if stacked:
            bottom += load
    ax.set_xlabel("device")
    ax.set_ylabel("busy time (ms, modelled)")
    ax.set_title(title)
    if len(labels) <= 8:
        ax.legend(fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    with atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())


def cmd_seq(args) -> int:
    from sgl._checks import check_int, check_real
    from sgl.cli.plan import parse_memory_gb

    _outputs(args)
    memory = parse_memory_gb(args.memory)
    devices = check_int(args.devices, "--devices", 1, error=PlanError)
    steps = check_int(args.steps, "--steps", 1, error=PlanError)
    time_limit = check_real(args.time_limit, "--time-limit", 0.0, open_low=True, error=PlanError)
    if args.tokens_per_step is not None and args.batch_size is not None:
        raise PlanError("give either --tokens-per-step or --batch-size, not both")
    from sgl.systems.seq import GlobalBatchSampler, read_lengths
    from sgl.systems.seq.compare import compare

    lengths = read_lengths(args.lengths)
    max_length = int(lengths.max()) if args.max_length is None else check_int(args.max_length, "--max-length", 1,
                                                                              error=PlanError)
    if args.batch_size is not None:
        sampler = GlobalBatchSampler(lengths, batch_size=args.batch_size, seed=args.seed, max_length=max_length)
    else:
        budget = args.tokens_per_step or devices * 16384
        sampler = GlobalBatchSampler(lengths, tokens_per_step=budget, seed=args.seed, max_length=max_length)
    batches = sampler.batches(steps)
    model = None
    if args.profile is not None:
        if args.calibrate is not None:
            raise PlanError("give either --profile (a saved calibration) or --calibrate (measure now), not both")
        from sgl.cli.plan_calibrate import load_profile

        profile, model = load_profile(args.profile, devices, memory)
        print(f"profile {args.profile}: alpha1={profile.alpha1:.3g} ms/token^2, alpha2={profile.alpha2:.3g} ms/token, "
              f"beta={profile.micro_batch_ms:.3g} ms, {profile.act_mb_per_token:.3g} MB/token")
    if args.calibrate is not None:
        if args.method == "hydraulis":
            raise PlanError("--calibrate fits FlexSP's cost form; Hydraulis uses its own fitted pool: drop one of them")
        from sgl.systems.seq.calibrate import calibrate_cost_model

        model, report = calibrate_cost_model(args.calibrate, devices=devices, memory_gb=memory)
        print(f"calibrated on this machine ({args.calibrate}): alpha1={report['alpha1']:.3g} ms/token^2, "
              f"alpha2={report['alpha2']:.3g} ms/token, beta={report['beta']:.3g} ms, "
              f"{report['act_mb_per_token']:.3g} MB/token")
    pool = profile.hydraulis_pool(devices, memory) if args.profile is not None and args.method == "hydraulis" else None
    result = compare(args.method, batches, devices, memory, max_length=max_length, time_limit=time_limit,
                     sample=sampler.pool[:200_000], mesh_groups=args.mesh_groups, model=model, pool=pool)
    print(f"sgl plan seq: {args.method} on {devices} devices, {memory:g} GiB, max length {max_length}, "
          f"static baseline {result.static_label}")
    print(f"{'step':>4} {'seqs':>6} {'tokens':>9} {'longest':>8} {'static ms':>11} {'planned ms':>11} {'ratio':>6} "
          f"{'solver s':>8}  groups")
    for t, (b, p) in enumerate(zip(batches, result.plans)):
        groups = ", ".join(f"{k} x{v}" for k, v in sorted(p.groups_summary().items()))
        print(f"{t:>4} {b.size:>6} {int(b.sum()):>9} {int(b.max()):>8} {result.static_ms[t]:>11.0f} "
              f"{p.time:>11.0f} {result.static_ms[t] / p.time:>6.3f} {p.solver_seconds:>8.2f}  {groups}")
    print(f"total: static {sum(result.static_ms):.0f} ms, planned {sum(result.planned_ms):.0f} ms, "
          f"ratio {result.ratio:.3f} (modelled)")
    for note in result.notes:
        print(f"note: {note}")
    if args.out is not None:
        data = result.to_dict()
        data.update(lengths=str(args.lengths), max_length=max_length, memory_gib=memory, seed=args.seed)
        _write_json(args.out, data)
        print(f"wrote {args.out}")
    if args.png is not None:
        loads = [p.device_load(devices) for p in result.plans]
        _write_png(args.png, loads, [f"step {t}" for t in range(len(loads))],
                   f"{args.method}: per-device load ({devices} devices)")
        print(f"wrote {args.png}")
    return 0


def _parse_rates(text: str, flag: str) -> list:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise PlanError(f"{flag} expects comma-separated numbers (1 = normal speed), got {text!r}") from None


def cmd_straggler(args) -> int:
    from sgl._checks import check_int
    from sgl.cli.plan import parse_memory_gb

    _outputs(args)
    memory = parse_memory_gb(args.memory)
    devices = check_int(args.devices, "--devices", 1, error=PlanError)
    from sgl.systems.seq.malleus import MalleusModel, MalleusPlanner
    from sgl.systems.seq.straggler import check_rates, straggler_setting

    if args.rates is not None:
        rates = check_rates(_parse_rates(args.rates, "--rates"), devices)
    else:
        rates = straggler_setting(args.setting, devices, args.node_size)
    if args.profile is not None:
        from sgl.cli.plan_calibrate import load_profile

        profile, _ = load_profile(args.profile, 1, memory)
        tokens = profile.model["seq_length"] if args.tokens is None else check_int(args.tokens, "--tokens", 1,
                                                                                   error=PlanError)
        model = profile.malleus_model(tokens, args.micro_batches, memory)
        print(f"profile {args.profile}: {model.layers} layers, {model.layer_ms:.3g} ms per layer and "
              f"{tokens}-token micro-batch (--layers is taken from the profile)")
    elif args.tokens is not None:
        raise PlanError("--tokens sizes the micro-batch of a --profile; give --profile PATH or drop --tokens")
    else:
        model = MalleusModel(layers=args.layers, micro_batches=args.micro_batches, memory_mb=memory * 1024)
    planner = MalleusPlanner(model, devices, args.tp, args.pp, node_size=args.node_size, suspend=args.suspend)
    if args.previous_rates is not None:
        previous = check_rates(_parse_rates(args.previous_rates, "--previous-rates"), devices)
        plan = planner.replan(planner.plan(previous), rates, amortize_steps=args.amortize_steps)
    else:
        plan = planner.plan(rates)
    base = planner.oblivious(rates)
    print(f"sgl plan straggler: {devices} devices, nominal tp={args.tp} pp={args.pp}, rates max {rates.max():g}")
    print(f"{'pipe':>4} {'stage':>5} {'devices':<28} {'max rate':>8} {'layers':>6} {'stage ms':>9}  micro-batches")
    for i, (stages, ls, m) in enumerate(zip(plan.pipelines, plan.layers, plan.micro_batches)):
        for j, (st, l) in enumerate(zip(stages, ls)):
            y = planner._group_y(st, rates) * l
            devs = ",".join(map(str, st))
            print(f"{i:>4} {j:>5} {devs:<28} {rates[st].max():>8.2f} {l:>6} {y:>9.1f}  {m if j == 0 else ''}")
    if plan.idle:
        print(f"idle (suspended): {plan.idle}")
    print(f"step: Malleus {plan.step_ms:.0f} ms, straggler-oblivious {base.step_ms:.0f} ms, "
          f"ratio {base.step_ms / plan.step_ms:.2f} (modelled)")
    if args.previous_rates is not None:
        print(f"re-plan: {plan.migration_mb:.0f} MB of model states move")
    if args.out is not None:
        data = {"malleus": plan.to_dict(), "oblivious_step_ms": round(base.step_ms, 3),
                "ratio": round(base.step_ms / plan.step_ms, 4), "rates": rates.tolist()}
        _write_json(args.out, data)
        print(f"wrote {args.out}")
    if args.png is not None:
        _write_png(args.png, [plan.device_load(devices, model, rates), base.device_load(devices, model, rates)],
                   ["Malleus", "oblivious"], "per-device load: Malleus vs straggler-oblivious", stacked=False)
        print(f"wrote {args.png}")
    return 0
