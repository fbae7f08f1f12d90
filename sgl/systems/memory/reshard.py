"""Layout-independent checkpoints with ``torch.distributed.checkpoint`` (DCP), restored on fewer devices.

Every rank saves its shards (DDP replicas, FSDP2 ZeRO-3 shards, DTensor TP shards) of the model
and Adam state through DCP, asynchronously (:func:`dcp.async_save`, the step goes on while the
files are written); DCP records each tensor's global shape and the shards' offsets, so a run with
another world size and another DP / ZeRO-3 / TP layout loads the same checkpoint into its own
shards (:func:`dcp.load` reshards on read).  When devices are lost, :func:`replan` searches a new
plan for the devices left with :class:`~sgl.systems.parallel.PlanSearcher`, and the survivors
restore the last checkpoint into it; the steps since that checkpoint are the steps lost.

``sgl-model.json`` next to DCP's files names the model preset and its parameter shapes; loading a
checkpoint of another model is a :class:`~sgl.errors.ConfigError`.

Runs under :func:`sgl.comm.spawn` (see :func:`save_worker`, :func:`restore_worker`); the
single-process check:

>>> r = replan(6, model="llama-7b", memory_gb=80)
>>> r["devices_used"], r["plan"].num_devices
(4, 4)
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from sgl import comm
from sgl._checks import check_int
from sgl.errors import ConfigError
from sgl.fileio import atomic_write
from sgl.systems.runtime.config import ExecConfig, batch_for_step, build_tiny_lm
from sgl.systems.runtime.parallelize import parallelize
from sgl.systems.runtime.plans import check_plan, make_plan
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["replan", "save_worker", "restore_worker", "model_fingerprint", "check_checkpoint"]


def replan(devices: int, model: str = "llama-7b", memory_gb: float = 80.0, **options: Any) -> Dict[str, Any]:
    """The plan search's best plan for the ``devices`` devices left (one node).

    Galvatron's strategy tree splits devices in halves, so the plan uses the largest power of two
    ``<= devices`` (6 left -> a 4-device plan, 2 idle); ``devices_used`` says how many.
    """
    import shutil
    import tempfile

    from sgl.systems.parallel import (BUILTIN_PROFILE_DIR, HardwareProfile, PlanSearchConfig, PlanSearcher,
                                      load_hardware_profile, save_hardware_profile)

    devices = check_int(devices, "devices", 1, 8)
    used = 1 << (devices.bit_length() - 1)
    # The survivors are devices of the profiled 8-device node: keep its bandwidths of groups <= used.
    node = load_hardware_profile(BUILTIN_PROFILE_DIR, 1, 8)
    folder = Path(tempfile.mkdtemp(prefix="sgl-replan-"))
    for f in BUILTIN_PROFILE_DIR.glob("*profiling*.json"):
        shutil.copy(f, folder / f.name)
    save_hardware_profile(HardwareProfile(1, used, {k: v for k, v in node.allreduce_bw.items() if k[0] <= used},
                                          {k: v for k, v in node.p2p_bw.items() if k <= used}, node.overlap_coe),
                          folder)
    options.setdefault("profile_dir", str(folder))
    cfg = PlanSearchConfig(model=model, num_nodes=1, devices_per_node=used, memory_gb=memory_gb,
                           batch_sizes=options.pop("batch_sizes", (16,)), granularity_mb=options.pop("granularity_mb", 64),
                           **options)
    try:
        result = PlanSearcher(cfg).search()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"plan": result.plan, "devices_left": devices, "devices_used": used}


def model_fingerprint(model: torch.nn.Module, preset: str) -> Dict[str, Any]:
    from sgl.systems.runtime.measure import local_tensor

    shapes = {}
    for name, p in model.named_parameters():
        shape = list(p.shape) if hasattr(p, "to_local") else list(local_tensor(p).shape)
        shapes[name.replace("module.", "").replace("_fsdp_wrapped_module.", "")] = shape
    return {"model": preset, "shapes": shapes}


def check_checkpoint(directory: str | Path, fingerprint: Dict[str, Any]) -> Dict[str, Any]:
    """The checkpoint's ``sgl-model.json``; :class:`ConfigError` if absent or of another model."""
    meta_path = Path(directory) / "sgl-model.json"
    if not meta_path.exists():
        raise ConfigError(f"{directory} is not an SGL sharded checkpoint (no sgl-model.json)")
    meta = json.loads(meta_path.read_text())
    if meta.get("shapes") != fingerprint["shapes"]:
        raise ConfigError(f"checkpoint {directory} is of model {meta.get('model')!r} with other parameter shapes; "
                          f"this run builds {fingerprint['model']!r}. Restore it into the model it was saved from")
    return meta


def _setup(rank: int, world: int, kind: str, cfg: ExecConfig, seed: int):
    torch.manual_seed(seed)
    model = build_tiny_lm(ExecConfig(**{**cfg.__dict__, "seed": seed}))
    fingerprint = model_fingerprint(model, cfg.model)
    plan = make_plan(kind, world, cfg)
    check_plan(plan, world, cfg)
    setup = parallelize(model, plan, rank, world, torch.device("cpu"))
    opt = torch.optim.Adam(setup.module.parameters(), lr=cfg.lr)
    return setup, opt, fingerprint


def _train_step(setup: Any, opt: torch.optim.Optimizer, cfg: ExecConfig, step: int) -> float:
    tokens = batch_for_step(cfg, step)
    part = tokens.chunk(setup.dp)[setup.dp_rank]
    loss = lm_loss(setup.module(part), part)
    loss.backward()
    for p in setup.manual_sync:
        if p.grad is not None:
            g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            comm.all_reduce(g, op="mean", group=setup.dp_group)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(comm.all_reduce(loss.detach().clone(), op="mean", group=setup.dp_group).item())


def _eval_loss(setup: Any, cfg: ExecConfig, step: int) -> float:
    tokens = batch_for_step(cfg, step)
    with torch.no_grad():
        return float(lm_loss(setup.module(tokens), tokens).item())


def _full_state(setup: Any, opt: torch.optim.Optimizer) -> Dict[str, torch.Tensor]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    msd, osd = get_state_dict(setup.module, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    out = {f"model.{k}": v.clone() for k, v in msd.items()}
    for pid, st in osd.get("state", {}).items():
        for k, v in st.items():
            if torch.is_tensor(v) and v.dim() > 0:
                out[f"optim.{pid}.{k}"] = v.clone()
    return out


def save_worker(rank: int, world: int, kind: str, directory: str, cfg_dict: Dict[str, Any],
                steps: int = 1) -> Dict[str, Any]:
    """Train ``steps`` steps under layout ``kind`` (dp / sdp / tp), checkpointing asynchronously with DCP
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
            json.dump({**fingerprint, "step": steps, "layout": kind, "world": world, "config": cfg_dict}, fh)
    comm.barrier()
    return {"losses": losses, "next_loss": _eval_loss(setup, cfg, steps), "full": _full_state(setup, opt),
            "save_issue_s": issued, "save_s": saved}


def restore_worker(rank: int, world: int, kind: str, directory: str, cfg_dict: Dict[str, Any],
                   preset: Optional[str] = None, out: Optional[str] = None) -> Dict[str, Any]:
    """Build layout ``kind`` on ``world`` ranks from another seed, load ``directory`` into it (resharded).

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
                json.dump({**meta, "layout": kind, "world": world}, fh)
        comm.barrier()
    return {"next_loss": _eval_loss(setup, cfg, meta["step"]), "full": _full_state(setup, opt),
            "restore_s": restored, "save_s": saved, "step": meta["step"]}
