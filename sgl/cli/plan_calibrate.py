"""``sgl plan calibrate``: measure this machine and write a profile the sequence planners accept.

    sgl plan calibrate --out machine.json [--model tiny] [--threads 1] [--world-size 2] [--quick]
    sgl plan seq ... --profile machine.json          # plan with the measured terms
    sgl plan straggler ... --profile machine.json --tokens 2048

Prints the measured against the fitted times (compute per sequence length, collectives per
message size), the fitted terms, and where the file went.  ``--out`` is checked before anything
is measured.  The library side is :func:`sgl.systems.seq.profile.calibrate_machine`.
"""
from __future__ import annotations

import time
from typing import Any

from sgl.cli.paths import check_output_path
from sgl.errors import PlanError

__all__ = ["register_plan", "cmd_calibrate", "load_profile"]


def register_plan(sub: Any) -> None:
    c = sub.add_parser("calibrate", help="measure this machine (compute, memory, collectives) into a profile "
                                         "for the sequence planners")
    c.add_argument("--out", required=True, help="profile JSON to write")
    c.add_argument("--model", default="tiny", help="runtime model preset to measure (tiny, cpu-small, ...)")
    c.add_argument("--threads", type=int, default=1, help="torch threads per process (as training will use)")
    c.add_argument("--world-size", type=int, default=2, help="processes measured at once (gloo on a CPU)")
    c.add_argument("--quick", action="store_true", help="few short lengths and small messages (seconds, for tests)")
    c.add_argument("--no-executor", action="store_true", help="skip timing the step executor per strategy (its "
                   "fits let the planners cost plans as the executor runs them; on by default)")
    c.add_argument("--budget", type=int, default=1024, help="tokens per device of the executor's calibration "
                   "micro-batches (default 1024)")
    c.add_argument("--timeout", type=float, default=600.0, help="seconds before the measuring processes are stopped")
    c.set_defaults(handler=cmd_calibrate)


def load_profile(path: str, devices: int, memory_gb: float):
    """``(profile, cost model)`` of a ``--profile`` file; prints a note when it was measured elsewhere."""
    from sgl.systems.seq.profile import MachineProfile

    profile = MachineProfile.load(path)
    differences = profile.fingerprint_differences()
    if differences:
        print(f"note: {path} was measured on another machine or setup ({'; '.join(differences)}); "
              f"re-run `sgl plan calibrate` here for measured terms")
    return profile, profile.seq_cost_model(devices, memory_gb)


def cmd_calibrate(args) -> int:
    from sgl._checks import check_int, check_real

    check_output_path(args.out, "file", "--out")
    threads = check_int(args.threads, "--threads", 1, error=PlanError)
    world = check_int(args.world_size, "--world-size", 2, error=PlanError)
    timeout = check_real(args.timeout, "--timeout", 0.0, open_low=True, error=PlanError)
    from sgl.systems.parallel.model import get_model_config
    from sgl.systems.seq.profile_fit import calibrate_machine

    cfg = get_model_config(args.model)
    started = time.perf_counter()
    profile = calibrate_machine(cfg, threads=threads, world_size=world, quick=args.quick, timeout=timeout,
                                executor=not (args.quick or args.no_executor), budget=args.budget)
    seconds = time.perf_counter() - started
    samples = profile.samples
    fits = samples["fits"]
    print(f"sgl plan calibrate: {cfg.name} ({cfg.num_layers} layers, hidden {cfg.hidden_size}, {cfg.num_heads} heads) "
          f"on {profile.fingerprint['device']}, {world} processes x {threads} thread(s)")
    print(f"{'tokens':>7} {'part':<10} {'measured ms':>12} {'fitted ms':>10} {'error':>7}")
    for i, s in enumerate(samples["lengths"]):
        rows = (("attention", fits["attention"][0] * s * s + fits["attention"][1] * s + fits["attention"][2]),
                ("linear", fits["linear"][0] * s + fits["linear"][1]),
                ("head", fits["head"][0] * s + fits["head"][1]),
                ("model", profile.micro_batch_ms_of([s])))
        for part, fitted in rows:
            measured = samples["compute_ms"][part][i]
            print(f"{s:>7} {part:<10} {measured:>12.3f} {fitted:>10.3f} {(fitted - measured) / measured:>+7.1%}")
    for name, fit in ((n, fits[n]) for n in ("ulysses", "ring") if n in fits):
        for s, measured in zip(samples["lengths"], samples["strategy_ms"][name]):
            fitted = fit[0] * s * s + fit[1] * s + fit[2]
            print(f"{s:>7} {name + f' x{world}':<10} {measured:>12.3f} {fitted:>10.3f} "
                  f"{(fitted - measured) / measured:>+7.1%}")
    print(f"{'bytes':>9} {'collective':<11} {'measured ms':>12} {'fitted ms':>10} {'error':>7}")
    for op, link in profile.links.items():
        for m, measured in zip(samples["sizes_bytes"], samples["link_ms"][op]):
            fitted = link.ms(m)
            print(f"{m:>9} {op:<11} {measured:>12.3f} {fitted:>10.3f} {(fitted - measured) / measured:>+7.1%}")
    print(f"fitted: attention {profile.attention_ms_per_token2:.3g} ms/token^2/layer, linear "
          f"{profile.linear_ms_per_token:.3g} ms/token/layer, head {profile.head_ms_per_token:.3g} ms/token, "
          f"{profile.micro_batch_ms:.3g} ms per micro-batch, optimizer {profile.optimizer_ms:.3g} ms per step, "
          f"{profile.act_mb_per_token:.3g} MB/token; busiest rank's attention s^2 share vs an even split: Ulysses "
          f"{profile.sp_quadratic_factor:.2f}x, ring {profile.cp_quadratic_factor:.2f}x")
    for key, (a, b, c, o) in sorted(profile.strategy_fits.get("fits", {}).items()):
        print(f"fitted: executor {key}: {a:.3g} ms/token^2 + {b:.3g} ms/token per sequence, {c:.3g} ms per "
              f"micro-batch, {o:.3g} ms per step")
    for op, link in profile.links.items():
        print(f"fitted: {op} alpha {link.alpha_s * 1e6:.1f} us, beta {link.beta_s_per_byte * 1e9:.3g} ns/byte "
              f"({1e-9 / link.beta_s_per_byte if link.beta_s_per_byte else float('inf'):.3g} GB/s)")
    zero = [name for name, value in (("attention quadratic", profile.attention_ms_per_token2),
                                     ("linear", profile.linear_ms_per_token))
            if value == 0.0] + [f"{op} beta" for op, link in profile.links.items() if link.beta_s_per_byte == 0.0]
    if zero:
        print(f"note: {', '.join(zero)} fitted to 0: the samples are too noisy or too short to show it (a busy "
              f"machine, or --quick); re-run without --quick on a quiet machine for usable terms")
    profile.save(args.out)
    print(f"wrote {args.out} (measured in {seconds:.1f} s)")
    return 0
