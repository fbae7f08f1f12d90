"""Joint multi-LoRA fine-tuning, end to end: one frozen base, ``T`` adapters, mixed-task batches.

Every step draws ``per_task`` sequences from each task (seeded), right-pads them into one batch
(``<pad>`` = 0, label -100, attention mask 0), routes each row to its task's adapter and takes one
AdamW step on :func:`~sgl.systems.data.lora.joint_lora_loss` (Σ of per-task mean losses). Because
the base is frozen, adapter ``t`` only sees task ``t``'s rows, every task is in every step and
AdamW is element-wise, the joint run moves each adapter exactly as fine-tuning it alone on its
own rows would (:func:`train_lora_alone` is that reference; the test compares the two).

>>> import torch
>>> from sgl.systems.data.lm_eval import LMTrainConfig, tiny_llama
>>> base = tiny_llama(64, 16, LMTrainConfig(hidden=16, layers=1, heads=2, intermediate=32))
>>> tasks = [[torch.randint(3, 64, (9,)) for _ in range(4)], [torch.randint(3, 64, (5,)) for _ in range(4)]]
>>> log = train_joint_lora(base, tasks, steps=3, per_task=2, rank=2, eval_tasks=tasks)
>>> len(log["loss"]), log["after"][0] < log["before"][0]
(3, True)
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence

import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.data.lora import add_multi_lora, joint_lora_loss

__all__ = ["pad_rows", "task_batches", "task_losses", "train_joint_lora", "train_lora_alone"]


def pad_rows(seqs: Sequence[torch.Tensor]) -> tuple:
    """``(ids, labels, mask)`` ``[B, max len]``, right-padded."""
    width = max(int(s.numel()) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    labels = torch.full_like(ids, -100)
    mask = torch.zeros_like(ids)
    for r, s in enumerate(seqs):
        ids[r, :s.numel()] = s
        labels[r, :s.numel()] = s
        mask[r, :s.numel()] = 1
    return ids, labels, mask


def task_batches(tasks: Sequence[Sequence[torch.Tensor]], steps: int, per_task: int, seed: int = 0) -> List[list]:
    """Per step, per task: the indices of the ``per_task`` sequences drawn (seeded, without replacement per step)."""
    check_int(steps, "steps", minimum=1)
    check_int(per_task, "per_task", minimum=1)
    if not tasks or any(len(t) == 0 for t in tasks):
        raise ConfigError("every task needs at least one sequence")
    g = torch.Generator().manual_seed(seed)
    return [[torch.randperm(len(t), generator=g)[:per_task].tolist() for t in tasks] for _ in range(steps)]


def _optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=check_real(lr, "lr", 0.0, open_low=True), weight_decay=0.0)


@torch.no_grad()
def task_losses(model: torch.nn.Module, tasks: Sequence[Sequence[torch.Tensor]], batch: int = 16) -> List[float]:
    """Mean next-token loss of each task's sequences through its own adapter."""
    out = []
    model.eval()
    for t, seqs in enumerate(tasks):
        total, n = 0.0, 0
        for b in range(0, len(seqs), batch):
            part = list(seqs[b:b + batch])
            ids, labels, mask = pad_rows(part)
            tokens = float((labels[:, 1:] != -100).sum())
            loss = joint_lora_loss(model, ids, labels, torch.full((len(part),), t), attention_mask=mask)
            total += float(loss) * tokens
            n += tokens
        out.append(total / max(n, 1.0))
    model.train()
    return out


def train_joint_lora(base: torch.nn.Module, tasks: Sequence[Sequence[torch.Tensor]], *, steps: int = 20,
                     per_task: int = 4, rank: int = 8, alpha: float = 16.0, lr: float = 3e-3, seed: int = 0,
                     target_modules: Sequence[str] = ("q_proj", "v_proj"), eval_tasks: Any = None,
                     progress: bool = False) -> Dict[str, Any]:
    """Fine-tune ``len(tasks)`` adapters jointly on ``base`` (modified in place).

    Returns the joint loss per step and, when ``eval_tasks`` (held-out sequences per task) is
    given, each task's loss through its adapter before and after training.
    """
    picks = task_batches(tasks, steps, per_task, seed)
    torch.manual_seed(seed)
    add_multi_lora(base, len(tasks), rank, alpha, target_modules)
    opt = _optimizer(base, lr)
    before = task_losses(base, eval_tasks) if eval_tasks is not None else None
    base.train()
    losses, started = [], time.perf_counter()
    it = range(steps)
    if progress:
        from tqdm.auto import tqdm
        it = tqdm(it, desc="joint LoRA steps", leave=False)
    for step in it:
        seqs, owner = [], []
        for t, idx in enumerate(picks[step]):
            seqs += [tasks[t][i] for i in idx]
            owner += [t] * len(idx)
        ids, labels, mask = pad_rows(seqs)
        loss = joint_lora_loss(base, ids, labels, torch.tensor(owner), attention_mask=mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    out = {"loss": losses, "seconds": time.perf_counter() - started, "model": base}
    if eval_tasks is not None:
        out["before"], out["after"] = before, task_losses(base, eval_tasks)
    return out


def train_lora_alone(base: torch.nn.Module, tasks: Sequence[Sequence[torch.Tensor]], task: int, *, steps: int = 20,
                     per_task: int = 4, rank: int = 8, alpha: float = 16.0, lr: float = 3e-3, seed: int = 0,
                     target_modules: Sequence[str] = ("q_proj", "v_proj")) -> torch.nn.Module:
    """The reference: the same adapters (same init), only adapter ``task`` trained, only on task ``task``'s rows."""
    picks = task_batches(tasks, steps, per_task, seed)
    torch.manual_seed(seed)
    layers = add_multi_lora(base, len(tasks), rank, alpha, target_modules)
    opt = _optimizer(base, lr)
    base.train()
    for step in range(steps):
        seqs = [tasks[task][i] for i in picks[step][task]]
        ids, labels, mask = pad_rows(seqs)
        loss = joint_lora_loss(base, ids, labels, torch.full((len(seqs),), task), attention_mask=mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for layer in layers:  # the other adapters are not being fine-tuned here
            keep = torch.zeros(layer.num_adapters, 1, 1)
            keep[task] = 1.0
            layer.lora_A.grad.mul_(keep)
            layer.lora_B.grad.mul_(keep)
        opt.step()
    return base
