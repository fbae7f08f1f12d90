"""Layout-independent checkpoints with ``torch.distributed.checkpoint`` (DCP), restored on fewer devices.

Every rank saves its shards (DDP replicas, FSDP2 ZeRO-3 shards, DTensor TP shards) of the model
and Adam state through DCP, asynchronously (:func:`dcp.async_save`, the step goes on while the
files are written); DCP records each tensor's global shape and the shards' offsets, so a run with
another world size and another DP / ZeRO-3 / TP layout loads the same checkpoint into its own
shards (:func:`dcp.load` reshards on read).  When devices are lost,
:func:`~sgl.systems.memory.survivors.replan` searches a plan for exactly the devices left (the
Galvatron search over any device count), and the survivors restore the last checkpoint into it
(``layout`` = that :class:`~sgl.systems.parallel.Plan`); the steps since that checkpoint are the
steps lost (:mod:`sgl.systems.memory.recovery` measures them under SIGKILL).

The model is :attr:`ExecConfig.arch`'s: TinyLM or a Hugging Face ``LlamaForCausalLM``
(``arch="hf-llama"``).  ``sgl-model.json`` next to DCP's files names the model preset, its
architecture (``model_type`` and sizes: the Hugging Face config's, or TinyLM's) and its parameter
shapes; loading a checkpoint of another architecture or model is a :class:`~sgl.errors.ConfigError`
naming both.

Runs under :func:`sgl.comm.spawn` (see :func:`save_worker`, :func:`restore_worker`); the
single-process check:

>>> from sgl.systems.runtime import ExecConfig, build_tiny_lm
>>> fp = model_fingerprint(build_tiny_lm(ExecConfig()), "tiny")
>>> fp["shapes"]["blocks.0.q.weight"], fp["architecture"]["model_type"]
([64, 64], 'sgl-tinylm')
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.fileio import atomic_write
from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.config import ExecConfig, batch_for_step
from sgl.systems.runtime.models import build_model
from sgl.systems.runtime.parallelize import parallelize
from sgl.systems.runtime.plans import check_plan, make_plan
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["architecture", "layout_plan", "layout_name", "save_worker", "restore_worker", "model_fingerprint",
           "check_checkpoint"]


def architecture(model: torch.nn.Module) -> Optional[Dict[str, Any]]:
    """``model_type`` and sizes of a Hugging Face model (its config) or a TinyLM; ``None`` for other modules."""
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "model_type", None):
        keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                "vocab_size", "num_local_experts", "num_experts")
        return {"model_type": cfg.model_type, **{k: getattr(cfg, k) for k in keys if getattr(cfg, k, None) is not None}}
    tiny = getattr(model, "cfg", None)
    if tiny is not None and hasattr(tiny, "num_layers"):
        return {"model_type": "sgl-tinylm", "hidden_size": tiny.hidden_size, "num_hidden_layers": tiny.num_layers,
                "num_attention_heads": tiny.num_heads, "intermediate_size": tiny.ffn_hidden_size,
                "vocab_size": tiny.vocab_size}
    return None


def _describe(arch: Optional[Dict[str, Any]], preset: Any) -> str:
    if not arch:
        return f"model {preset!r}"
    sizes = ", ".join(f"{k}={v}" for k, v in arch.items() if k != "model_type")
    return f"{arch['model_type']} ({sizes})"


def model_fingerprint(model: torch.nn.Module, preset: str) -> Dict[str, Any]:
    """Preset name, architecture (:func:`architecture`) and parameter shapes of ``model``'s whole (unsharded) form."""
    from sgl.systems.runtime.measure import local_tensor

    shapes = {}
    for name, p in model.named_parameters():
        shape = list(p.shape) if hasattr(p, "to_local") else list(local_tensor(p).shape)
        shapes[name.replace("module.", "").replace("_fsdp_wrapped_module.", "")] = shape
    out: Dict[str, Any] = {"model": preset, "shapes": shapes}
    arch = architecture(model)
    if arch is not None:
        out["architecture"] = arch
    return out


def check_checkpoint(directory: str | Path, fingerprint: Dict[str, Any], name: str = "sgl-model.json") -> Dict[str, Any]:
    """The checkpoint's ``name`` (model, shapes, step); :class:`ConfigError` if absent or of another model.

    The message names both architectures (``model_type`` and sizes) when both are known.
    """
    meta_path = Path(directory) / name
    if not meta_path.exists():
        raise ConfigError(f"{directory} is not an SGL sharded checkpoint (no {name})")
    meta = json.loads(meta_path.read_text())
    saved, this = meta.get("architecture"), fingerprint.get("architecture")
    if saved and this and saved != this:
        raise ConfigError(f"checkpoint {directory} is of {_describe(saved, meta.get('model'))}; this run builds "
                          f"{_describe(this, fingerprint['model'])}. Restore it into the architecture it was saved from")
    if meta.get("shapes") != fingerprint["shapes"]:
        raise ConfigError(f"checkpoint {directory} is of model {meta.get('model')!r} with other parameter shapes; "
                          f"this run builds {fingerprint['model']!r}. Restore it into the model it was saved from")
    return meta


def layout_plan(layout: Union[str, Plan], world: int, cfg: ExecConfig) -> Plan:
    """``layout``: a uniform kind (``dp`` / ``sdp`` / ``tp``) or a searched :class:`Plan`; checked for ``world``."""
    plan = make_plan(layout, world, cfg) if isinstance(layout, str) else layout
    if plan.global_bsz != cfg.global_bsz:
        raise ConfigError(f"the plan is for global batch {plan.global_bsz}, the run uses {cfg.global_bsz}; "
                          "re-plan with the checkpoint's global batch")
    check_plan(plan, world, cfg)
    if plan.pp > 1:
        raise ConfigError("restoring into a pipeline plan (pp > 1) is not supported; re-plan with executable=True")
    return plan


def _setup(rank: int, world: int, layout: Union[str, Plan], cfg: ExecConfig, seed: int):
    torch.manual_seed(seed)
    device = comm.wire_device()         # the backend's device: the rank's GPU under NCCL, the CPU under gloo
    model = build_model(ExecConfig(**{**cfg.__dict__, "seed": seed})).to(device)
    fingerprint = model_fingerprint(model, cfg.model)
    plan = layout_plan(layout, world, cfg)
    setup = parallelize(model, plan, rank, world, device)
    opt = torch.optim.Adam(setup.module.parameters(), lr=cfg.lr)
    return setup, opt, fingerprint


def _logits(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


def _train_step(setup: Any, opt: torch.optim.Optimizer, cfg: ExecConfig, step: int) -> float:
    tokens = batch_for_step(cfg, step).to(comm.wire_device())
    part = tokens.chunk(setup.dp)[setup.dp_rank]
    loss = lm_loss(_logits(setup.module(part)), part)
    loss.backward()
    for p in setup.manual_sync:
        if p.grad is not None:
            g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            comm.all_reduce(g, op="mean", group=setup.dp_group)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(comm.all_reduce(loss.detach().clone(), op="mean", group=setup.dp_group).item())


def _eval_loss(setup: Any, cfg: ExecConfig, step: int) -> float:
    tokens = batch_for_step(cfg, step).to(comm.wire_device())
    with torch.no_grad():
        return float(lm_loss(_logits(setup.module(tokens)), tokens).item())


def _full_state(setup: Any, opt: torch.optim.Optimizer) -> Dict[str, torch.Tensor]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    msd, osd = get_state_dict(setup.module, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    out = {f"model.{k}": v.clone() for k, v in msd.items()}
    for pid, st in osd.get("state", {}).items():
        for k, v in st.items():
            if torch.is_tensor(v) and v.dim() > 0:
                out[f"optim.{pid}.{k}"] = v.clone()
    return out


def layout_name(layout: Union[str, Plan]) -> str:
    """``dp`` / ``sdp`` / ``tp``, or a searched plan's layer labels (``1-2-3 x4``)."""
    if isinstance(layout, str):
        return layout
    labels = [s.label for s in layout.strategies]
    runs = []
    for label in labels:
        if runs and runs[-1][0] == label:
            runs[-1][1] += 1
        else:
            runs.append([label, 1])
    return ",".join(f"{label} x{n}" for label, n in runs) + (" embed-zero3" if layout.embed_sdp else "")


def save_worker(rank: int, world: int, kind: Union[str, Plan], directory: str, cfg_dict: Dict[str, Any],
                steps: int = 1) -> Dict[str, Any]:
    """Train ``steps`` steps under layout ``kind`` (dp / sdp / tp or a :class:`Plan`), checkpointing asynchronously with DCP
    after each; ``save_issue_s`` / ``save_s`` are the last save's blocking and total seconds."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    cfg = ExecConfig(**cfg_dict)
    setup, opt, fingerprint = _setup(rank, world, kind, cfg, cfg.seed)
    # The async save's background collectives get their own group, apart from training's.
    ckpt_group = comm.new_group(list(range(world)), backend="gloo")
    losses, future = [], None
    for s in range(steps):  # checkpoint after every step; the next step runs while it is written
        losses.append(_train_step(setup, opt, cfg, s))
        if future is not None:
            future.result()
        msd, osd = get_state_dict(setup.module, opt)
        t0 = time.perf_counter()
        future = dcp.async_save({"model": msd, "optim": osd}, checkpoint_id=directory, process_group=ckpt_group)
        issued = time.perf_counter() - t0
    future.result()
    comm.barrier()
    saved = time.perf_counter() - t0
    if rank == 0:
        with atomic_write(Path(directory) / "sgl-model.json", "w") as fh:
            json.dump({**fingerprint, "step": steps, "layout": layout_name(kind), "world": world, "config": cfg_dict}, fh)
    comm.barrier()
    return {"losses": losses, "next_loss": _eval_loss(setup, cfg, steps), "full": _full_state(setup, opt),
            "save_issue_s": issued, "save_s": saved}


def restore_worker(rank: int, world: int, kind: Union[str, Plan], directory: str, cfg_dict: Dict[str, Any],
                   preset: Optional[str] = None, out: Optional[str] = None) -> Dict[str, Any]:
    """Build layout ``kind`` (dp / sdp / tp or a searched :class:`Plan`) on ``world`` ranks from another seed, load ``directory`` into it (resharded).

    ``out``: save the restored state there again (DCP, this layout's shards).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    cfg = ExecConfig(**cfg_dict)
    if preset is not None:
        cfg = ExecConfig(**{**cfg_dict, "model": preset})
    setup, opt, fingerprint = _setup(rank, world, kind, cfg, cfg.seed + 1)
    meta = check_checkpoint(directory, fingerprint)
    # One dummy step creates Adam's state tensors, which DCP then overwrites in place.
    for p in setup.module.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    msd, osd = get_state_dict(setup.module, opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=directory)
    set_state_dict(setup.module, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    comm.barrier()
    restored = time.perf_counter() - t0
    saved = None
    if out is not None:
        t1 = time.perf_counter()
        msd, osd = get_state_dict(setup.module, opt)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=out)
        comm.barrier()
        saved = time.perf_counter() - t1
        if rank == 0:
            with atomic_write(Path(out) / "sgl-model.json", "w") as fh:
                json.dump({**meta, "layout": layout_name(kind), "world": world}, fh)
        comm.barrier()
    return {"next_loss": _eval_loss(setup, cfg, meta["step"]), "full": _full_state(setup, opt),
            "restore_s": restored, "save_s": saved, "step": meta["step"]}
