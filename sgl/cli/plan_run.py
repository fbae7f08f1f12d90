"""``sgl plan run``: execute a parallel plan with the Galvatron executor on N local processes.

    sgl plan run --kind dp --procs 2 --arch hf-llama --steps 4            # DDP on a tiny HF Llama
    sgl plan run --kind sdp --procs 2 --arch hf-mixtral                    # FSDP2 ZeRO-3 on a tiny HF Mixtral
    sgl plan run --kind pp --procs 2 --arch hf-llama --schedule zero-bubble --chunks 2
    sgl plan run --plan plan.json --arch hf-llama --check                  # a searched plan; compare to 1 process

``--kind`` builds a uniform plan (``dp``, ``sdp`` = ZeRO-3, ``tp``, ``pp``) for ``--procs``;
``--plan`` reads a plan JSON (ours or Galvatron's). The processes run gloo on a CPU, NCCL with
``--backend nccl`` (one GPU per process). Prints each rank's losses, median step time and
model-state memory; ``--check`` also trains the same steps in one process and prints the largest
loss difference (a plan the executor cannot run is refused with a ``PlanError`` naming the
dimension before any process starts).
"""
from __future__ import annotations

from typing import Any

from sgl.errors import PlanError

__all__ = ["register_plan", "cmd_run"]

_ARCHS = ("tiny", "hf-llama", "hf-mixtral", "hf-qwen2-moe")   # sgl.systems.runtime.models.ARCHS (kept torch-free here)


def register_plan(sub: Any) -> None:
    r = sub.add_parser("run", help="execute a parallel plan (DDP, FSDP2, TP, PP, CP, OSDP) on local processes")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--kind", choices=("dp", "sdp", "tp", "pp"), help="a uniform plan over --procs processes")
    which.add_argument("--plan", help="a plan JSON (sgl plan search --out, or Galvatron's)")
    r.add_argument("--procs", type=int, default=None, help="processes (with --kind; a --plan file names its own)")
    r.add_argument("--arch", choices=_ARCHS, default="hf-llama", help="model implementation (default hf-llama)")
    r.add_argument("--model", default="tiny", help="shape preset (sgl.systems.parallel.get_model_config; default tiny)")
    r.add_argument("--steps", type=int, default=4)
    r.add_argument("--global-bsz", type=int, default=8)
    r.add_argument("--chunks", type=int, default=1, help="micro-batches per step")
    r.add_argument("--lr", type=float, default=1e-3)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--schedule", default="", help="pipeline schedule: 1f1b, interleaved-1f1b, zero-bubble, ...")
    r.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism on TP layers")
    r.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    r.add_argument("--timeout", type=float, default=600.0)
    r.add_argument("--check", action="store_true", help="also train in one process and print the loss gap")
    r.set_defaults(handler=cmd_run)


def cmd_run(args) -> int:
    from sgl._checks import check_int, check_real
    from sgl.systems.parallel import format_plan, load_plan
    from sgl.systems.runtime import ExecConfig, make_plan, run_plans, train_reference

    steps = check_int(args.steps, "--steps", 1, error=PlanError)
    cfg = ExecConfig(model=args.model, arch=args.arch, steps=steps,
                     global_bsz=check_int(args.global_bsz, "--global-bsz", 1, error=PlanError),
                     chunks=check_int(args.chunks, "--chunks", 1, error=PlanError),
                     lr=check_real(args.lr, "--lr", 0.0, open_low=True, error=PlanError), seed=args.seed,
                     schedule=args.schedule, sequence_parallel=args.sequence_parallel)
    if args.kind:
        if args.procs is None:
            raise PlanError("--kind needs --procs N (the processes of the plan)")
        plan = make_plan(args.kind, check_int(args.procs, "--procs", 1, error=PlanError), cfg)
    else:
        plan = load_plan(args.plan, args.procs)
    print(format_plan(plan))
    reports = run_plans([plan], cfg, timeout=args.timeout, backend=args.backend)[0]
    print(f"\n{args.arch} ({args.model}), {plan.num_devices} processes ({args.backend}), {steps} steps of "
          f"{cfg.global_bsz} sequences")
    print(f"{'rank':>4s}  {'step ms':>8s}  {'state MB':>8s}  losses")
    for rank, rep in enumerate(reports):
        losses = " ".join(f"{x:.4f}" for x in rep["losses"])
        print(f"{rank:4d}  {rep['step_ms']:8.1f}  {rep['model_state_mb']:8.2f}  {losses}")
    if args.check:
        reference = train_reference(cfg)
        gap = max(abs(a - b) for rep in reports for a, b in zip(rep["losses"], reference))
        print(f"1 process: {' '.join(f'{x:.4f}' for x in reference)}  (largest |difference| {gap:.2e})")
    return 0
