"""``sgl memory trace | plan | train``: allocation traces, MEMO memory plans, training beyond memory.

    sgl memory trace --model tiny --batch 4 --out trace.json        # one training step, recorded
    sgl memory trace --arch hf-llama --batch 2 --out trace.json     # ... of a tiny HF LlamaForCausalLM
    sgl memory plan --trace trace.json [--time-limit 10] [--alignment 512] [--out plan.json]
    sgl memory train --model tiny --steps 8 --offload-ratio auto --host-budget 64MB --ssd DIR
    sgl memory train --arch hf-mixtral --steps 2 --offload-ratio 0.5
    sgl memory train --arch hf-llama --steps 2 --tsplit-budget 2MB [--ssd DIR]

``--arch`` picks the implementation (``tiny``: TinyLM, the default; ``hf-llama``, ``hf-mixtral``,
``hf-qwen2-moe``: ``transformers`` models with the ``--model`` preset's shapes, built in code,
nothing downloaded; the names of ``sgl plan run``).  ``plan`` prints (JSON) the bi-level DSA plan's
peak next to first-fit, best-fit, the caching-allocator model and the sum-of-live lower bound.
``train`` wraps every decoder layer in MEMO's token-wise offload (``--offload-ratio`` in [0, 1] or
``auto``: the alpha LP on measured bandwidth and layer time under ``--host-budget``) or, with
``--tsplit-budget BYTES``, runs the layers by TSPLIT's keep/offload/recompute/split plan for that
device budget (profiled on the first batch; the two rewrite the same layers, so ``--tsplit-budget``
takes ``--offload-ratio none`` or none given); with ``--ssd DIR`` it keeps parameters and Adam
states in Angel-PTM-style pages there (``--page-budget`` of host cache); rerun the same command
after a crash to resume at the last committed step.  Library side: :mod:`sgl.systems.memory`.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["register", "cmd_trace", "cmd_plan", "cmd_train"]

_ARCHS = ("tiny", "hf-llama", "hf-mixtral", "hf-qwen2-moe")   # sgl.systems.runtime.models.ARCHS (kept torch-free here)
_ARCH_HELP = "model implementation: tiny (TinyLM, default) or a tiny Hugging Face hf-llama / hf-mixtral / hf-qwen2-moe"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("memory", help="memory traces, DSA plans, offload and paged training")
    sub = parser.add_subparsers(dest="memory_command", required=True)

    trace = sub.add_parser("trace", help="record the allocation trace of one training step of the small LM")
    trace.add_argument("--model", default="tiny", help="Transformer preset (default tiny)")
    trace.add_argument("--arch", choices=_ARCHS, default="tiny", help=_ARCH_HELP)
    trace.add_argument("--batch", type=int, default=4, help="sequences per step (default 4)")
    trace.add_argument("--seq", type=int, help="tokens per sequence (default: the preset's)")
    trace.add_argument("--seed", type=int, default=0)
    trace.add_argument("--out", required=True, help="trace file (.json)")
    trace.set_defaults(handler=cmd_trace)

    plan = sub.add_parser("plan", help="MEMO's bi-level DSA plan of a trace vs online allocators")
    plan.add_argument("--trace", required=True, help="trace file from `sgl memory trace` (or {\"events\": [...]})")
    plan.add_argument("--time-limit", type=float, default=10.0, help="seconds per MIP solve (default 10)")
    plan.add_argument("--alignment", type=int, default=512, help="bytes every request rounds up to (default 512)")
    plan.add_argument("--out", help="write the plan (addresses and peaks) as JSON")
    plan.set_defaults(handler=cmd_plan)

    train = sub.add_parser("train", help="train the small LM with token-wise offload and optional SSD pages")
    train.add_argument("--model", default="tiny", help="Transformer preset (default tiny)")
    train.add_argument("--arch", choices=_ARCHS, default="tiny", help=_ARCH_HELP)
    train.add_argument("--steps", type=int, default=4)
    train.add_argument("--batch", type=int, default=4, help="global batch (default 4)")
    train.add_argument("--lr", type=float, default=1e-3)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--offload-ratio", help="alpha in [0, 1], 'auto' (the alpha LP; the default) or 'none'")
    train.add_argument("--tsplit-budget", help="run the layers by a TSPLIT plan for this device budget (e.g. 2MB); "
                       "needs --offload-ratio none or unset")
    train.add_argument("--host-budget", default="1GB", help="host memory for offloaded activations (default 1GB)")
    train.add_argument("--ssd", help="folder of the paged parameter/optimizer store (resumes if it has one)")
    train.add_argument("--page-budget", default="64MB", help="host cache of the page store (default 64MB)")
    train.add_argument("--page-elems", type=int, default=1 << 14, help="elements per page (default 16384)")
    train.set_defaults(handler=cmd_train)


def _write_json(path: str, payload: Any) -> None:
    from sgl.fileio import atomic_write

    with atomic_write(path, "w") as fh:
        json.dump(payload, fh, indent=1)


def cmd_trace(args: Any) -> int:
    from sgl._checks import check_int
    from sgl.cli.paths import check_output_path

    out = check_output_path(args.out, "file")
    batch = check_int(args.batch, "--batch", 1)
    import dataclasses

    import torch

    from sgl.systems.memory import live_lower_bound, record_lm_trace
    from sgl.systems.parallel import get_model_config
    from sgl.systems.runtime import TinyLM, lm_loss

    cfg = get_model_config(args.model)
    if args.seq is not None:
        cfg = dataclasses.replace(cfg, seq_length=check_int(args.seq, "--seq", 2))
    torch.manual_seed(args.seed)
    if args.arch == "tiny":
        model = TinyLM(cfg)
    else:
        from sgl.systems.runtime import ExecConfig
        from sgl.systems.runtime.models import build_model

        model = build_model(ExecConfig(model=args.model, arch=args.arch, seed=args.seed))
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_length), generator=torch.Generator().manual_seed(args.seed))
    trace = record_lm_trace(model, tokens, lm_loss, torch.optim.Adam(model.parameters()))
    trace.save(out)
    print(json.dumps({"trace": str(out), "arch": args.arch, "requests": len(trace),
                      "live_peak_bytes": live_lower_bound(trace),
                      "phases": len(trace.spans)}))
    return 0


def cmd_plan(args: Any) -> int:
    from sgl._checks import check_int, check_real
    from sgl.cli.paths import check_output_path

    out = check_output_path(args.out, "file") if args.out else None
    limit = check_real(args.time_limit, "--time-limit", 0.0, open_low=True)
    align = check_int(args.alignment, "--alignment", 1)
    from sgl.systems.memory import (AllocTrace, best_fit, caching_allocator_peak, first_fit, live_lower_bound,
                                    plan_bilevel)

    trace = AllocTrace.load(args.trace)
    plan = plan_bilevel(trace, time_limit=limit, alignment=align)
    ff, bf = first_fit(trace, align).peak, best_fit(trace, align).peak
    cache = caching_allocator_peak(trace)
    report = {"requests": len(trace), "planned_peak": plan.peak, "first_fit_peak": ff, "best_fit_peak": bf,
              "caching_allocator_model_peak": cache, "live_lower_bound": live_lower_bound(trace, align),
              "planned_vs_first_fit": plan.peak / ff if ff else 1.0,
              "planned_vs_caching_model": plan.peak / cache if cache else 1.0,
              # the bound's own ratio: no address plan of this trace can go below it (the 0.8x target's ceiling)
              "bound_vs_caching_model": live_lower_bound(trace, align) / cache if cache else 1.0,
              "method": plan.method, "status": plan.status,
              "level1": plan.levels.get("level1", {}), "level2_status": plan.levels.get("level2_status")}
    if out is not None:
        _write_json(out, {**report, "address": plan.address.tolist()})
    print(json.dumps(report))
    return 0


def cmd_train(args: Any) -> int:
    import os

    from sgl._checks import check_int, check_real, parse_bytes
    from sgl.cli.paths import check_output_path
    from sgl.errors import ConfigError

    steps = check_int(args.steps, "--steps", 1)
    batch = check_int(args.batch, "--batch", 1)
    host_budget = parse_bytes(args.host_budget, "--host-budget")
    page_budget = parse_bytes(args.page_budget, "--page-budget")
    page_elems = check_int(args.page_elems, "--page-elems", 1)
    tsplit_budget = parse_bytes(args.tsplit_budget, "--tsplit-budget") if args.tsplit_budget is not None else None
    ratio = str(args.offload_ratio if args.offload_ratio is not None else
                ("none" if tsplit_budget is not None else "auto")).strip().lower()
    if tsplit_budget is not None and ratio != "none":
        raise ConfigError(f"--tsplit-budget with --offload-ratio {args.offload_ratio}: MEMO's token-wise offload and "
                          "TSPLIT both rewrite every decoder layer and cannot be combined; drop one of them "
                          "(or give --offload-ratio none)")
    alpha = None
    if ratio not in ("auto", "none"):
        try:
            alpha = float(ratio)
        except ValueError:
            raise ConfigError(f"--offload-ratio must be a number in [0, 1], 'auto' or 'none'; got {args.offload_ratio!r}")
        check_real(alpha, "--offload-ratio", 0.0, 1.0)
    if args.ssd:
        check_output_path(args.ssd, "dir", "--ssd")
    import torch

    torch.set_num_threads(1)
    from sgl.systems.memory import (blocks_of, measure_offload_inputs, offload_ratio, plan_tsplit, profile_block_ops,
                                    train_in_memory, train_paged)
    from sgl.systems.runtime import ExecConfig, batch_for_step
    from sgl.systems.runtime.models import build_model, decoder_of

    cfg = ExecConfig(model=args.model, arch=args.arch, steps=steps, global_bsz=batch, lr=args.lr, seed=args.seed)
    report: dict = {"model": args.model, "arch": args.arch, "steps": steps}
    tsplit = None
    if ratio == "auto" or tsplit_budget is not None:
        model = build_model(cfg)
        x = torch.randn(batch, cfg.model_config().seq_length, cfg.model_config().hidden_size)
        # the first layer's swap bytes, copy bandwidth and forward+backward time
        inputs = measure_offload_inputs(blocks_of(model)[0], x, repeat=2,
                                        layer_kwargs=decoder_of(model).layer_kwargs(x))
        if tsplit_budget is not None:
            tsplit = plan_tsplit(profile_block_ops(model, batch_for_step(cfg, 0)), tsplit_budget, inputs["bandwidth"])
            report["tsplit"] = {"budget": tsplit_budget, "modelled_peak": tsplit.peak, "extra_s": tsplit.extra_time,
                                "status": tsplit.status, "choice": tsplit.choice}
        else:
            plan = offload_ratio(host_bytes=host_budget, num_layers=cfg.model_config().num_layers, **inputs)
            alpha = plan.alpha
            report["alpha_plan"] = {"limit": plan.limit, "swap_bound": plan.swap_bound, **plan.inputs}
    report["alpha"] = alpha
    if args.ssd:
        os.makedirs(args.ssd, exist_ok=True)
        run = train_paged(cfg, args.ssd, host_bytes=page_budget, page_elems=page_elems, alpha=alpha, tsplit=tsplit)
        report.update(first_step=run["first_step"], pages=run["pages"], cached_pages=run["cached_pages"],
                      state_bytes=run["state_bytes"], stats=run["stats"])
    else:
        run = train_in_memory(cfg, alpha=alpha, tsplit=tsplit)
    report["losses"] = {str(k): v for k, v in run["losses"].items()}
    report["seconds"] = run["seconds"]
    print(json.dumps(report))
    return 0
