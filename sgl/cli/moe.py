"""``sgl moe train|plan``: the WikiText-2 MoE LM on gloo processes, and modelled plans on a trace.

    sgl moe train --root ../shared/datasets --procs 2 --dispatch ep --steps 100 --out run.json
    sgl moe train --root ../shared/datasets --dispatch fsep --balance laer --trace-out trace.npz
    sgl moe train --root ../shared/datasets --dispatch ep --placement netmoe --nodes 2
    sgl moe train --root ../shared/datasets --model hf:mixtral_tiny.json --precision bf16
    torchrun --nproc-per-node 2 -m sgl.cli moe train --launcher torchrun --root ../shared/datasets
    sgl moe plan --trace trace.npz --topology 2x4 --out plan.json
    sgl moe plan --laer-csv ../shared/datasets/moe_traces/token_analysis_backup.csv \\
                 --model mixtral-8x7b-e8k2 --topology 4x8 --slots 2

``train`` writes a JSON summary (losses, validation loss, step time, rows sent); ``--trace-out``
records the routing trace (``sgl-moe-trace`` .npz, see :mod:`sgl.systems.moe.traces`). ``plan``
prints and writes the modelled all-to-all bytes/time of the original vs NetMoE placement and
the modelled iteration time of static EP, FlexMoE and LAER. Library side: :mod:`sgl.systems.moe`.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "cmd_train", "cmd_plan"]

_DISPATCH = ("ep", "padded", "lsh", "fsep")
_TRAIN_FIELDS = ("steps", "batch_size", "seq_len", "vocab_size", "hidden_size", "num_layers", "num_heads",
                 "num_experts", "top_k", "ffn_hidden_size", "capacity_factor", "aux_loss_coef", "bias_update_rate",
                 "gate", "activation", "lr", "val_batches", "max_documents", "seed", "capacity_groups")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("moe", help="Mixture-of-Experts training (EP, NetMoE, LSH-MoE, FSEP) and plans")
    sub = parser.add_subparsers(dest="moe_command", required=True)

    train = sub.add_parser("train", help="train the small MoE LM on WikiText-2 with gloo processes")
    train.add_argument("--root", required=True, help="folder with wikitext2/ (or the wikitext2 folder itself)")
    train.add_argument("--procs", type=int, default=2, help="gloo processes on this machine (default 2)")
    train.add_argument("--launcher", choices=("spawn", "torchrun"), default="spawn",
                       help="spawn --procs local processes, or run as one rank of `torchrun ... -m sgl.cli moe train`")
    train.add_argument("--start-method", choices=("spawn", "fork", "forkserver"), default="spawn",
                       help="how --launcher spawn starts the processes (fork: faster start, POSIX only)")
    train.add_argument("--model", default="tiny",
                       help="tiny (the small MoE LM, shaped by the flags below) or hf:<config.json>: a transformers "
                            "Mixtral / Qwen2-MoE config file (built from scratch, converted to SGL's MoE layer; "
                            "its shapes and vocabulary replace the model flags)")
    train.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                       help="bf16: autocast (experts and attention in bf16, fp32 master weights)")
    train.add_argument("--dispatch", choices=_DISPATCH, default="ep",
                       help="ep (uneven all-to-all), padded (GShard capacity), lsh (LSH-MoE), fsep (LAER)")
    train.add_argument("--placement", choices=("none", "netmoe"), default="none", help="NetMoE sample placement")
    train.add_argument("--balance", choices=("none", "flexmoe", "laer"), default="none",
                       help="expert re-layout each step (needs --dispatch fsep)")
    train.add_argument("--lsh-hashes", type=int, default=6, help="cross-polytope hash functions (--dispatch lsh)")
    train.add_argument("--lsh-proj-dim", type=int, default=None,
                       help="rotated coordinates each hash keeps (default: all; fewer = fewer buckets)")
    train.add_argument("--nodes", type=int, default=1, help="nodes the ranks are split into (NetMoE)")
    train.add_argument("--steps", type=int, default=100)
    train.add_argument("--batch-size", type=int, default=16, help="global batch (sequences)")
    train.add_argument("--seq-len", type=int, default=64)
    train.add_argument("--vocab-size", type=int, default=4096, help="BPE vocabulary trained on the train split")
    train.add_argument("--hidden-size", type=int, default=64)
    train.add_argument("--num-layers", type=int, default=2)
    train.add_argument("--num-heads", type=int, default=4)
    train.add_argument("--num-experts", type=int, default=8)
    train.add_argument("--top-k", type=int, default=2)
    train.add_argument("--ffn-hidden-size", type=int, default=128)
    train.add_argument("--capacity-factor", type=float, default=None, help="token dropping (default dropless)")
    train.add_argument("--capacity-groups", type=int, default=None,
                       help="token groups the capacity applies to (default: one per process, as EP does; "
                            "--procs 1 --capacity-groups 2 drops what --procs 2 drops)")
    train.add_argument("--aux-loss-coef", type=float, default=0.01)
    train.add_argument("--bias-update-rate", type=float, default=0.0, help="aux-loss-free balancing step")
    train.add_argument("--gate", choices=("softmax", "sigmoid"), default="softmax")
    train.add_argument("--activation", choices=("swiglu", "gelu"), default="swiglu")
    train.add_argument("--lr", type=float, default=3e-3)
    train.add_argument("--val-batches", type=int, default=4)
    train.add_argument("--max-documents", type=int, default=None, help="only the first N articles (quick runs)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--cache-dir", help="tokenizer cache folder")
    train.add_argument("--trace-out", help="write the routing trace here (.npz)")
    train.add_argument("--out", help="write the JSON summary here")
    train.add_argument("--timeout", type=float, default=3600.0, help="seconds before the run is killed")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(handler=cmd_train)

    plan = sub.add_parser("plan", help="modelled all-to-all bytes/time and iteration time per method on a trace")
    src = plan.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", help="an sgl-moe-trace .npz (per-sample expert counts)")
    src.add_argument("--laer-csv", help="LAER-MoE token_analysis_backup.csv (per-device loads)")
    plan.add_argument("--model", default="mixtral-8x7b-e8k2", help="model_name rows of --laer-csv")
    plan.add_argument("--experts-per-device", type=int, default=None,
                      help="--laer-csv: local experts per rank (default E/4: the artifact's static loads repeat "
                           "every 4 ranks, i.e. EP groups of 4)")
    plan.add_argument("--topology", required=True, help="NODESxDEVICES, e.g. 4x8")
    plan.add_argument("--slots", type=int, default=None, help="expert slots per device (default 2*E/D, at least 2)")
    plan.add_argument("--intra-gbps", type=float, default=216.27)
    plan.add_argument("--inter-gbps", type=float, default=88.95)
    plan.add_argument("--bytes-per-token", type=float, default=None, help="default 2*hidden of the trace or 8192")
    plan.add_argument("--ceiling", action="store_true",
                      help="--trace: also the lowest combine time any sample placement can reach (an LP bound)")
    plan.add_argument("--seed", type=int, default=0)
    plan.add_argument("--out", help="write the JSON report here")
    plan.set_defaults(handler=cmd_plan)


def _write(path: str | None, payload: dict[str, Any]) -> None:
    if path:
        from sgl.fileio import atomic_write

        with atomic_write(path, "w") as f:
            json.dump(payload, f, indent=2, default=float)
        print(f"wrote {path}")


def cmd_train(args: argparse.Namespace) -> int:
    from sgl.cli.paths import check_input_folder, check_output_path

    for flag, value in (("--out", args.out), ("--trace-out", args.trace_out)):
        if value:
            check_output_path(value, "file", flag)
    check_input_folder(args.root, "--root")
    from sgl.systems.moe.workload import WikiTextMoEConfig, run_wikitext_moe

    hf_config = None
    if args.model != "tiny":
        if not args.model.startswith("hf:"):
            from sgl.errors import ConfigError

            raise ConfigError(f"--model {args.model!r}: use 'tiny' or 'hf:<path to a transformers config.json>'")
        from sgl.systems.moe.hf import load_hf_config

        hf_config = load_hf_config(args.model[3:])

    cfg = WikiTextMoEConfig(**{name: getattr(args, name) for name in _TRAIN_FIELDS})
    summary = run_wikitext_moe(args.root, cfg, procs=args.procs, dispatch=args.dispatch, placement=args.placement,
                               balance=args.balance, lsh_hashes=args.lsh_hashes,
                               lsh_proj_dim=args.lsh_proj_dim, nodes=args.nodes,
                               trace_out=args.trace_out, cache_dir=args.cache_dir,
                               progress=not args.no_progress, timeout=args.timeout, launcher=args.launcher,
                               start_method=args.start_method, hf_config=hf_config, precision=args.precision)
    from sgl import comm

    if comm.get_rank() != 0:
        return 0
    print(f"moe train: {args.procs} procs, dispatch {summary['dispatch']}, placement {args.placement}, "
          f"balance {args.balance}, model {args.model}, {args.precision}")
    print(f"loss: {summary['first_loss']:.4f} -> {summary['final_loss']:.4f}; validation loss: "
          f"{summary['val_loss'] if summary['val_loss'] is None else round(summary['val_loss'], 4)}")
    print(f"mean step: {summary['mean_step_s'] * 1e3:.1f} ms; rows dispatched {summary['sent_rows']:,} of "
          f"{summary['routed_rows']:,} routed; {summary['dropped_pairs']:,} pairs dropped by capacity")
    _write(args.out, summary)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from sgl.cli.paths import check_output_path

    if args.out:
        check_output_path(args.out, "file")
    import numpy as np

    from sgl.systems.moe.balance import CostParams
    from sgl.systems.moe.plan import balance_report, netmoe_report, trace_balance_report
    from sgl.systems.moe.topology import Topology

    topo = Topology.parse(args.topology, intra_gbps=args.intra_gbps, inter_gbps=args.inter_gbps)
    report: dict[str, Any] = {"topology": args.topology}
    if args.trace:
        from sgl.systems.moe.traces import load_trace

        trace = load_trace(args.trace)
        bpt = args.bytes_per_token or 8192.0
        slots = args.slots or max(2, 2 * trace.num_experts // topo.num_devices)
        cost = CostParams(bytes_per_token=bpt)
        report["netmoe"] = netmoe_report(trace, topo, bpt, bounds=args.ceiling)
        report["balance"] = trace_balance_report(trace, topo, slots, cost, args.seed)
        n = report["netmoe"]
        print(f"trace {args.trace}: {trace.shape[0]} steps x {trace.shape[1]} layers x {trace.shape[2]} samples x "
              f"{trace.num_experts} experts on {args.topology}")
        print(f"NetMoE combine all-to-all: time x{n['time_ratio']:.3f}, inter-node bytes x{n['inter_bytes_ratio']:.3f}"
              f" (solver {n['solver_ms_per_layer']:.2f} ms/layer)")
        if args.ceiling:
            print(f"ceiling of any placement: time x{n['bound_time_ratio']:.3f} "
                  f"(x{n['bound_nores_time_ratio']:.3f} ignoring the residual rows)")
    else:
        from sgl.systems.moe.traces import load_laer_loads

        loads = load_laer_loads(args.laer_csv, args.model, "FSDP")  # [iters, layers, ranks]
        if loads.shape[2] != topo.num_devices:
            from sgl.errors import ConfigError

            raise ConfigError(f"--laer-csv has {loads.shape[2]} ranks, --topology {args.topology} has "
                              f"{topo.num_devices} devices; use a topology with {loads.shape[2]} devices")
        experts = int(args.model.split("-e")[-1].split("k")[0])
        k = args.experts_per_device or max(1, experts // 4)
        slots = args.slots or max(2, 2 * experts // topo.num_devices)
        cost = CostParams(bytes_per_token=args.bytes_per_token or 8192.0)
        per_expert = _laer_expert_loads(loads.mean(0), experts, k)
        acc: dict[str, dict[str, float]] = {}
        for layer in per_expert:
            for m, vals in balance_report(layer, topo, slots, cost, args.seed).items():
                for key, v in vals.items():
                    acc.setdefault(m, {}).setdefault(key, 0.0)
                    acc[m][key] += v / len(per_expert)
        report["balance"] = acc
        measured = {}
        for method in ("FSDP", "FLEX", "LAER"):
            m = load_laer_loads(args.laer_csv, args.model, method).astype(float)
            measured[method] = float((m.max(-1) / m.mean(-1)).mean())
        report["measured_imbalance"] = measured
        print("artifact (measured) max/mean rank load: " + ", ".join(f"{k} {v:.3f}" for k, v in measured.items()))
        report["assumption"] = ("per-expert loads = each static-EP rank's measured load (FSDP rows, mean over "
                                "iterations) split evenly over its local experts, sent evenly by the ranks of "
                                "its EP group; the trace has per-device loads only")
    for m, vals in report["balance"].items():
        print(f"{m:8s} max/mean load {vals['imbalance']:.3f}  modelled time {vals['time_s'] * 1e3:.2f} ms")
    _write(args.out, report)
    return 0


def _laer_expert_loads(rank_loads: Any, experts: int, per_device: int) -> Any:
    """``[layers, ranks]`` static-EP rank loads -> ``[layers, D, E]`` source-device x expert loads.

    Static EP groups of ``E / per_device`` consecutive ranks; rank ``r`` hosts experts
    ``(r % G) * per_device + c``; its load is split evenly over those experts and comes evenly
    from the ranks of its own EP group (see ``report["assumption"]``).
    """
    import numpy as np

    from sgl.errors import ConfigError

    layers, ranks = rank_loads.shape
    if experts % per_device or ranks % (experts // per_device):
        raise ConfigError(f"--experts-per-device {per_device} does not split {experts} experts into EP groups "
                          f"that divide {ranks} ranks")
    group = experts // per_device
    out = np.zeros((layers, ranks, experts))
    for r in range(ranks):
        g0 = (r // group) * group
        for c in range(per_device):
            e = (r % group) * per_device + c
            out[:, g0:g0 + group, e] += (rank_loads[:, r] / per_device / group)[:, None]
    return out
