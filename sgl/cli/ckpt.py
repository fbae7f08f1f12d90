"""``sgl ckpt save | reshard``: sharded DCP checkpoints of the small LM, restored on another device count.

    sgl ckpt save --devices 4 --layout tp --steps 2 --out ckpt4          # TP=4 shards, async DCP save
    sgl ckpt reshard --from ckpt4 --devices 6 [--layout auto] [--out ckpt6]
    sgl ckpt save --arch hf-llama --devices 2 --layout dp --batch 4 --out llama2   # a tiny HF Llama
    sgl ckpt reshard --from llama2 --devices 2 --layout sdp              # its arch read from the checkpoint

``--arch`` (``save``) picks the implementation: ``tiny`` (TinyLM, the default) or a tiny Hugging
Face ``hf-llama`` / ``hf-mixtral`` / ``hf-qwen2-moe`` with the ``--model`` preset's shapes (built
in code, nothing downloaded).  ``reshard`` reads the architecture from the checkpoint's
``sgl-model.json`` (its ``model_type`` fingerprint); an explicit ``--arch`` must name the same one.
``reshard`` re-plans with the plan search for exactly ``--devices`` devices of the profiled A100
node (``--layout auto``, the default: the checkpoint's model and global batch, any device count,
e.g. 6 -> DP3 x TP2; degrees the model cannot take are listed with why under ``plan.excluded``,
and when no plan fits on all of them the best plan on fewer is used and ``plan.reason`` says
why), or takes a fixed layout (``dp``, ``sdp`` = ZeRO-3, ``tp``); spawns that many local gloo
processes, loads the checkpoint into the layout (DCP reshards on read), optionally saves it again
in it, and prints (JSON) the plan, restore/save seconds and the next-step loss.  Library side:
:mod:`sgl.systems.memory.reshard`, :mod:`sgl.systems.memory.survivors`.
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["register", "cmd_save", "cmd_reshard", "saved_arch"]

_LAYOUTS = ("auto", "dp", "sdp", "tp")
_START = ("spawn", "fork", "forkserver")
_START_HELP = "how the worker processes start (default spawn; fork starts faster where the platform has it)"
_ARCHS = ("tiny", "hf-llama", "hf-mixtral", "hf-qwen2-moe")   # sgl.systems.runtime.models.ARCHS (kept torch-free here)
#: the fingerprint's ``architecture.model_type`` of each arch (sgl.systems.memory.architecture)
_MODEL_TYPES = {"sgl-tinylm": "tiny", "llama": "hf-llama", "mixtral": "hf-mixtral", "qwen2_moe": "hf-qwen2-moe"}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("ckpt", help="sharded, layout-independent checkpoints (save, reshard)")
    sub = parser.add_subparsers(dest="ckpt_command", required=True)
    save = sub.add_parser("save", help="train a few steps on N processes and save a sharded checkpoint")
    save.add_argument("--devices", type=int, default=4, help="processes (default 4)")
    save.add_argument("--layout", choices=_LAYOUTS[1:], default="tp")
    save.add_argument("--model", default="tiny", help="Transformer preset (default tiny)")
    save.add_argument("--arch", choices=_ARCHS, default="tiny",
                      help="model implementation: tiny (TinyLM, default) or a tiny HF hf-llama / hf-mixtral / "
                      "hf-qwen2-moe")
    save.add_argument("--steps", type=int, default=1)
    save.add_argument("--batch", type=int, default=12, help="global batch (divisible by the DP degree)")
    save.add_argument("--out", required=True, help="checkpoint folder")
    save.add_argument("--timeout", type=float, default=300.0)
    save.add_argument("--start-method", choices=_START, default="spawn", help=_START_HELP)
    save.set_defaults(handler=cmd_save)
    reshard = sub.add_parser("reshard", help="restore a checkpoint on another number of devices")
    reshard.add_argument("--from", dest="source", required=True, help="checkpoint folder (from `sgl ckpt save`)")
    reshard.add_argument("--devices", type=int, required=True, help="devices (processes) left")
    reshard.add_argument("--layout", choices=_LAYOUTS, default="auto")
    reshard.add_argument("--arch", choices=_ARCHS, help="check the checkpoint is of this arch (default: read from it)")
    reshard.add_argument("--out", help="save the restored state here in the new layout")
    reshard.add_argument("--memory", default="80GiB", help="per-device budget of the plan search (default 80GiB)")
    reshard.add_argument("--timeout", type=float, default=300.0)
    reshard.add_argument("--start-method", choices=_START, default="spawn", help=_START_HELP)
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

    cfg = ExecConfig(model=args.model, arch=args.arch, global_bsz=check_int(args.batch, "--batch", 1)).__dict__
    res = comm.spawn(save_worker, devices, args.layout, str(out), cfg, steps, timeout=args.timeout,
                     start_method=args.start_method)
    print(json.dumps({"out": str(out), "arch": args.arch, "devices": devices, "layout": args.layout,
                      "losses": res[0]["losses"],
                      "next_loss": res[0]["next_loss"], "save_issue_s": res[0]["save_issue_s"],
                      "save_s": max(r["save_s"] for r in res)}))
    return 0


def cmd_reshard(args: Any) -> int:
    from pathlib import Path

    from sgl._checks import check_int
    from sgl.cli.paths import check_output_path
    from sgl.cli.plan import parse_memory_gb
    from sgl.errors import ConfigError

    source = Path(args.source).expanduser()
    if not source.is_dir():
        raise ConfigError(f"--from {args.source} is not a folder; give the checkpoint folder written by `sgl ckpt save`")
    devices = check_int(args.devices, "--devices", 1, 8 if args.layout == "auto" else 16)
    memory_gb = parse_memory_gb(args.memory)
    out = check_output_path(args.out, "dir") if args.out else None
    meta_path = Path(source) / "sgl-model.json"
    if not meta_path.exists():
        raise ConfigError(f"--from {source} is not an SGL sharded checkpoint (no sgl-model.json); "
                          "write one with `sgl ckpt save`")
    meta = json.loads(meta_path.read_text())
    cfg = dict(meta["config"])
    cfg["arch"] = saved_arch(meta, source)
    if args.arch is not None and args.arch != cfg["arch"]:
        raise ConfigError(f"--arch {args.arch}: checkpoint {source} holds a {cfg['arch']} model "
                          f"({(meta.get('architecture') or {}).get('model_type', cfg['arch'])}); a checkpoint restores "
                          f"only into the architecture it was saved from: give --arch {cfg['arch']} or leave --arch out")
    from sgl import comm
    from sgl.systems.memory import layout_name, plan_layout, replan, restore_worker

    replanned = None
    if args.layout == "auto":
        # The plan search on exactly the devices left, for this model and the checkpoint's global batch.
        replanned = replan(devices, model=meta["model"], memory_gb=memory_gb, batch_sizes=(cfg["global_bsz"],),
                           executable=True)
        layout, world = replanned["plan"], replanned["devices_used"]
    else:
        layout, world = args.layout, devices
        if cfg["global_bsz"] % devices and args.layout != "tp":
            raise ConfigError(f"the checkpoint's global batch {cfg['global_bsz']} does not split over {devices} "
                              f"data-parallel ranks; use --layout auto (the plan search) or another device count")
    res = comm.spawn(restore_worker, world, layout, str(source), cfg, None, str(out) if out else None,
                     timeout=args.timeout, start_method=args.start_method)
    record = {"from": str(source), "arch": cfg["arch"], "saved_on": meta["world"], "saved_layout": meta["layout"],
              "devices": devices, "devices_used": world, "layout": layout_name(layout), "step": res[0]["step"],
              "next_loss": res[0]["next_loss"], "restore_s": max(r["restore_s"] for r in res),
              "save_s": max(r["save_s"] for r in res) if out else None, "out": str(out) if out else None}
    if replanned is not None:
        record["plan"] = {**plan_layout(replanned["plan"]), "excluded": replanned["excluded"],
                          "search_s": replanned["seconds"]}
        if "reason" in replanned:
            record["plan"]["reason"] = replanned["reason"]
    print(json.dumps(record))
    return 0


def saved_arch(meta: dict, source: Any) -> str:
    """The ``--arch`` name of a checkpoint: its fingerprint's ``model_type``, cross-checked with its run config.

    Checkpoints written before ``--arch`` existed name neither and are TinyLM's (``"tiny"``).
    """
    from sgl.errors import ConfigError

    config_arch = meta.get("config", {}).get("arch")
    model_type = (meta.get("architecture") or {}).get("model_type")
    if model_type is not None and model_type not in _MODEL_TYPES:
        raise ConfigError(f"checkpoint {source} holds a {model_type!r} model, which `sgl ckpt` cannot build; "
                          f"it restores {sorted(_MODEL_TYPES)} (--arch {' / '.join(_ARCHS)})")
    if config_arch is not None and config_arch not in _ARCHS:
        raise ConfigError(f"checkpoint {source} names arch {config_arch!r}, which `sgl ckpt` cannot build; "
                          f"it restores {' / '.join(_ARCHS)}")
    fingerprint_arch = _MODEL_TYPES.get(model_type) if model_type else None
    if config_arch is not None and fingerprint_arch is not None and config_arch != fingerprint_arch:
        raise ConfigError(f"checkpoint {source} is inconsistent: its sgl-model.json fingerprint is {model_type!r} "
                          f"({fingerprint_arch}) but its run config says arch {config_arch!r}; it was edited or mixed")
    return fingerprint_arch or config_arch or "tiny"
