"""``sgl ckpt save | reshard``: sharded DCP checkpoints of the small LM, restored on another device count.

    sgl ckpt save --devices 4 --layout tp --steps 2 --out ckpt4          # TP=4 shards, async DCP save
    sgl ckpt reshard --from ckpt4 --devices 3 [--layout auto] [--out ckpt3]

``reshard`` spawns ``--devices`` local gloo processes, builds the layout (``dp``, ``sdp`` = ZeRO-3,
``tp``; ``auto``: ``tp`` when the device count divides the heads, else ``sdp``), loads the
checkpoint into it (DCP reshards on read), optionally saves it again in that layout, and prints
(JSON) restore/save seconds, the next-step loss and the plan the plan search picks for that many
GPUs of the profiled A100 node (``--plan-model``).  Library side: :mod:`sgl.systems.memory.reshard`.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["register", "cmd_save", "cmd_reshard"]

_LAYOUTS = ("auto", "dp", "sdp", "tp")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("ckpt", help="sharded, layout-independent checkpoints (save, reshard)")
    sub = parser.add_subparsers(dest="ckpt_command", required=True)
    save = sub.add_parser("save", help="train a few steps on N processes and save a sharded checkpoint")
    save.add_argument("--devices", type=int, default=4, help="processes (default 4)")
    save.add_argument("--layout", choices=_LAYOUTS[1:], default="tp")
    save.add_argument("--model", default="tiny")
    save.add_argument("--steps", type=int, default=1)
    save.add_argument("--batch", type=int, default=12, help="global batch (divisible by the DP degree)")
    save.add_argument("--out", required=True, help="checkpoint folder")
    save.add_argument("--timeout", type=float, default=300.0)
    save.set_defaults(handler=cmd_save)
    reshard = sub.add_parser("reshard", help="restore a checkpoint on another number of devices")
    reshard.add_argument("--from", dest="source", required=True, help="checkpoint folder (from `sgl ckpt save`)")
    reshard.add_argument("--devices", type=int, required=True, help="devices (processes) left")
    reshard.add_argument("--layout", choices=_LAYOUTS, default="auto")
    reshard.add_argument("--out", help="save the restored state here in the new layout")
    reshard.add_argument("--plan-model", default="llama-7b", help="model the plan search re-plans (default llama-7b)")
    reshard.add_argument("--timeout", type=float, default=300.0)
    reshard.set_defaults(handler=cmd_reshard)


def cmd_save(args: Any) -> int:
    from sgl._checks import check_int
    from sgl.cli.paths import check_output_path

    out = check_output_path(args.out, "dir")
    devices = check_int(args.devices, "--devices", 1, 16)
    steps = check_int(args.steps, "--steps", 1)
    from sgl import comm
    from sgl.systems.memory import save_worker
    from sgl.systems.runtime import ExecConfig

    cfg = ExecConfig(model=args.model, global_bsz=check_int(args.batch, "--batch", 1)).__dict__
    res = comm.spawn(save_worker, devices, args.layout, str(out), cfg, steps, timeout=args.timeout)
    print(json.dumps({"out": str(out), "devices": devices, "layout": args.layout, "losses": res[0]["losses"],
                      "next_loss": res[0]["next_loss"], "save_issue_s": res[0]["save_issue_s"],
                      "save_s": max(r["save_s"] for r in res)}))
    return 0


def cmd_reshard(args: Any) -> int:
    from pathlib import Path

    from sgl._checks import check_int
    from sgl.cli.paths import check_output_path
    from sgl.errors import ConfigError

    source = Path(args.source).expanduser()
    if not source.is_dir():
        raise ConfigError(f"--from {args.source} is not a folder; give the checkpoint folder written by `sgl ckpt save`")
    devices = check_int(args.devices, "--devices", 1, 16)
    out = check_output_path(args.out, "dir") if args.out else None
    meta_path = Path(source) / "sgl-model.json"
    if not meta_path.exists():
        raise ConfigError(f"--from {source} is not an SGL sharded checkpoint (no sgl-model.json); "
                          "write one with `sgl ckpt save`")
    meta = json.loads(meta_path.read_text())
    from sgl import comm
    from sgl.systems.memory import replan, restore_worker
    from sgl.systems.parallel import get_model_config

    heads = get_model_config(meta["model"]).num_heads
    layout = args.layout if args.layout != "auto" else ("tp" if heads % devices == 0 and devices > 1 else "sdp")
    cfg = dict(meta["config"])
    cfg["global_bsz"] = max(devices, cfg["global_bsz"] - cfg["global_bsz"] % devices)
    plan = replan(min(devices, 8), model=args.plan_model)
    res = comm.spawn(restore_worker, devices, layout, str(source), cfg, None, str(out) if out else None,
                     timeout=args.timeout)
    print(json.dumps({"from": str(source), "saved_on": meta["world"], "saved_layout": meta["layout"],
                      "devices": devices, "layout": layout, "step": res[0]["step"], "next_loss": res[0]["next_loss"],
                      "restore_s": max(r["restore_s"] for r in res),
                      "save_s": max(r["save_s"] for r in res) if out else None, "out": str(out) if out else None,
                      "replanned": {"model": args.plan_model, "devices_used": plan["devices_used"],
                                    "pp": plan["plan"].pp, "tp": plan["plan"].strategies[0].tp}}))
    return 0
