"""Training the small Transformer with :class:`~sgl.systems.memory.PagedAdam`, resumable after a kill.

:func:`train_paged` runs steps ``resume() .. steps`` of the seeded model of ``cfg.arch``
(:func:`~sgl.systems.runtime.models.build_model`: :class:`~sgl.systems.runtime.TinyLM` or a tiny
Hugging Face Llama / Mixtral / Qwen2-MoE; batches from :func:`~sgl.systems.runtime.batch_for_step`,
so a resumed run sees the same data); :func:`train_in_memory` is the same loop with
``torch.optim.Adam(foreach=False)``.  Either wraps the decoder layers in MEMO's token-wise offload
(``alpha``) or runs them by a TSPLIT plan (``tsplit``), not both.

>>> import tempfile
>>> from sgl.systems.runtime import ExecConfig
>>> cfg = ExecConfig(steps=2, global_bsz=2)
>>> paged = train_paged(cfg, tempfile.mkdtemp(), host_bytes=1 << 20, page_elems=4096)
>>> paged["losses"] == train_in_memory(cfg)["losses"]
True
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

import torch

from sgl.errors import ConfigError
from sgl.systems.memory.pages import PagedAdam
from sgl.systems.runtime.config import ExecConfig, batch_for_step
from sgl.systems.runtime.models import build_model
from sgl.systems.runtime.tiny_lm import lm_loss

__all__ = ["train_paged", "train_in_memory"]


def _build(cfg: ExecConfig, alpha: Optional[float], tsplit: Any) -> torch.nn.Module:
    """The seeded model of ``cfg.arch`` with MEMO (``alpha``) or TSPLIT (``tsplit``, a TSplitPlan) on its layers."""
    if alpha is not None and tsplit is not None:
        raise ConfigError("MEMO's token-wise offload and TSPLIT both rewrite every decoder layer and cannot be "
                          "combined on one model; choose an offload ratio or a TSPLIT plan, not both")
    torch.manual_seed(cfg.seed)
    model = build_model(cfg)
    if alpha is not None:
        from sgl.systems.memory.offload import wrap_blocks

        wrap_blocks(model, alpha)
    if tsplit is not None:
        from sgl.systems.memory.tsplit import apply_tsplit

        apply_tsplit(model, tsplit)
    return model


def _loss(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    out = model(tokens)
    return lm_loss(out.logits if hasattr(out, "logits") else out, tokens)


def train_paged(cfg: ExecConfig, directory: str | os.PathLike, host_bytes: float, page_elems: int = 1 << 14,
                crash_at: Optional[tuple] = None, alpha: Optional[float] = None, tsplit: Any = None) -> Dict[str, Any]:
    """Train to ``cfg.steps`` from the last committed step in ``directory``.

    ``alpha`` (optional) also wraps every block in MEMO's
    :class:`~sgl.systems.memory.TokenOffloadBlock`; ``tsplit`` (optional, a
    :class:`~sgl.systems.memory.TSplitPlan`) runs the blocks by that plan instead.
    ``crash_at = (step, pages)`` SIGKILLs the process after ``pages`` page writes of ``step``.
    Returns the losses of the steps run here (by step number), the stats and the seconds.
    """
    model = _build(cfg, alpha, tsplit)
    opt = PagedAdam(model, directory, page_elems=page_elems, host_bytes=host_bytes, lr=cfg.lr)
    first = opt.resume()
    losses = {}
    t0 = time.perf_counter()
    for step in range(first, cfg.steps + 1):
        tokens = batch_for_step(cfg, step - 1)
        loss = _loss(model, tokens)
        loss.backward()
        crash = crash_at[1] if crash_at is not None and crash_at[0] == step else None
        opt.step_update(loss.item(), crash_after_pages=crash)
        losses[step] = loss.item()
    return {"losses": losses, "first_step": first, "seconds": time.perf_counter() - t0, "stats": dict(opt.stats),
            "pages": opt.num_pages, "cached_pages": opt.capacity, "state_bytes": opt.state_bytes,
            "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()])}


def train_in_memory(cfg: ExecConfig, alpha: Optional[float] = None, tsplit: Any = None) -> Dict[str, Any]:
    """The same steps with ``torch.optim.Adam(foreach=False)`` and every state in memory."""
    model = _build(cfg, alpha, tsplit)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, foreach=False)
    losses = {}
    t0 = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        tokens = batch_for_step(cfg, step - 1)
        loss = _loss(model, tokens)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses[step] = loss.item()
    return {"losses": losses, "seconds": time.perf_counter() - t0,
            "params": torch.cat([p.detach().reshape(-1) for p in model.parameters()])}
