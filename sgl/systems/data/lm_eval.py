"""Does a packing help a model? Train a causal LM on packed windows; perplexity at long positions.

The packing's windows become ``[W, C]`` token rows (``<pad>`` after the last segment, masked out
of the loss with label ``-100``); documents in a window are concatenated with their ``<eos>``
and attend to each other (standard packing, no cross-document mask), which is what lets a
related neighbour help. :func:`train_packed_lm` trains for a fixed budget of *real* (non-pad)
tokens, so packings with different fill rates see the same text volume; windows are visited in
a seeded random order (epochs when the budget exceeds the corpus).

Evaluation (:func:`long_context_perplexity`, :func:`short_document_perplexity`):

* long positions — held-out articles, each kept whole and cut into ``C``-token blocks; the
  perplexity of the tokens at positions ``>= long_from`` (past 512 by default), i.e. where
  the model can only gain by using distant context;
* short documents — held-out documents of fewer than ``short_max`` tokens, each alone from
  position 0 (packing must not hurt ordinary short-context modelling).

The model is any Hugging Face causal LM (``model(input_ids, attention_mask).logits``);
:func:`tiny_llama` builds a small ``LlamaForCausalLM`` from scratch (no weights can be
downloaded). The same code runs a real model on a GPU (``device="cuda"``).

>>> import torch
>>> from sgl.systems.data.packing import Packing
>>> p = Packing(4, torch.tensor([0, 0, 1]).numpy(), torch.tensor([0, 1, 1]).numpy(),
...             torch.tensor([0, 0, 2]).numpy(), torch.tensor([2, 2, 1]).numpy(), torch.tensor([2, 3]).numpy())
>>> ids, labels = windows_to_rows(p, [torch.tensor([5, 6]), torch.tensor([7, 8, 9])])
>>> ids.tolist(), labels.tolist()
([[5, 6, 7, 8], [9, 0, 0, 0]], [[5, 6, 7, 8], [9, -100, -100, -100]])
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from sgl._checks import check_int, check_real
from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.systems.data.packing import Packing

__all__ = ["LMTrainConfig", "windows_to_rows", "tiny_llama", "train_packed_lm", "long_context_perplexity",
           "short_document_perplexity", "article_blocks"]

PAD, IGNORE = 0, -100


@dataclass
class LMTrainConfig:
    """Model size, optimiser and budget of one packed-LM training run."""

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    intermediate: int = 176
    batch_size: int = 4
    lr: float = 3e-3
    warmup_steps: int = 10
    train_tokens: int = 200_000
    seed: int = 0
    device: Optional[str] = None    # None: sgl.device.get_device() ($SGL_DEVICE, else CUDA when present)

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "heads", "intermediate", "batch_size", "train_tokens"):
            check_int(getattr(self, name), name, minimum=1)
        check_int(self.warmup_steps, "warmup_steps", minimum=0)
        check_real(self.lr, "lr", 0.0, open_low=True)
        if self.hidden % self.heads:
            raise ConfigError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")


def windows_to_rows(packing: Packing, doc_ids: Sequence[torch.Tensor]) -> tuple:
    """``(input_ids, labels)`` ``[W, C]``: each window's segments concatenated, ``<pad>`` (label -100) after."""
    rows = torch.full((packing.num_windows, packing.capacity), PAD, dtype=torch.long)
    labels = torch.full_like(rows, IGNORE)
    fill = np.zeros(packing.num_windows, dtype=np.int64)
    for w, d, s, n in zip(packing.window.tolist(), packing.doc.tolist(), packing.start.tolist(),
                          packing.length.tolist()):
        piece = doc_ids[d][s:s + n]
        if piece.numel() != n:
            raise ConfigError(f"document {d} has {doc_ids[d].numel()} ids but the packing places [{s}, {s + n})")
        rows[w, fill[w]:fill[w] + n] = piece
        labels[w, fill[w]:fill[w] + n] = piece
        fill[w] += n
    return rows, labels


def tiny_llama(vocab_size: int, context: int, config: LMTrainConfig) -> Any:
    """A ``transformers.LlamaForCausalLM`` of the configured size, randomly initialised under ``seed``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=config.hidden, intermediate_size=config.intermediate,
                      num_hidden_layers=config.layers, num_attention_heads=config.heads,
                      num_key_value_heads=config.heads, max_position_embeddings=context, pad_token_id=PAD,
                      bos_token_id=2, eos_token_id=2, tie_word_embeddings=True)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(config.seed)
    return LlamaForCausalLM(cfg)


def _token_losses(model: Any, ids: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Next-token loss of every position ``[B, C-1]`` (position ``t`` predicts ``ids[t+1]``)."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")


def train_packed_lm(model: Any, rows: torch.Tensor, labels: torch.Tensor, config: LMTrainConfig,
                    progress: bool = False) -> Dict[str, float]:
    """Train on windows until ``train_tokens`` real tokens are consumed; returns the step log summary."""
    if rows.shape[0] == 0:
        raise ConfigError("no windows to train on")
    device = get_device(config.device)
    model.to(device).train()
    generator = torch.Generator().manual_seed(config.seed)
    real = (labels[:, 1:] != IGNORE).sum(1)  # scored targets per row
    tokens_per_step = float(real.float().mean()) * config.batch_size
    steps = max(1, math.ceil(config.train_tokens / tokens_per_step))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01, betas=(0.9, 0.95))

    def lr_at(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress = min(1.0, (step - config.warmup_steps) / max(1, steps - config.warmup_steps))
        return 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    order = torch.randperm(rows.shape[0], generator=generator)
    cursor, seen, losses = 0, 0, []
    started = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=config.train_tokens, desc="train tokens", leave=False)
    while seen < config.train_tokens:
        if cursor + config.batch_size > order.numel():
            order, cursor = torch.randperm(rows.shape[0], generator=generator), 0
        pick = order[cursor:cursor + config.batch_size]
        cursor += config.batch_size
        ids, lab = rows[pick].to(device), labels[pick].to(device)
        logits = model(input_ids=ids).logits[:, :-1].float()
        loss = F.cross_entropy(logits.transpose(1, 2), lab[:, 1:], ignore_index=IGNORE)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step_tokens = int((lab[:, 1:] != IGNORE).sum())
        seen += step_tokens
        losses.append(float(loss.detach()))
        if bar is not None:
            bar.update(step_tokens)
    if bar is not None:
        bar.close()
    return {"steps": len(losses), "train_tokens": seen, "final_loss": float(np.mean(losses[-10:])),
            "seconds": time.perf_counter() - started}


def article_blocks(doc_ids: Sequence[torch.Tensor], context: int) -> torch.Tensor:
    """Every held-out article (kept whole) cut into full ``context``-token blocks ``[n, context]``."""
    blocks = [ids[: (ids.numel() // context) * context].view(-1, context) for ids in doc_ids
              if ids.numel() >= context]
    if not blocks:
        raise ConfigError(f"no held-out document has {context} tokens; use a smaller context")
    return torch.cat(blocks)


@torch.no_grad()
def long_context_perplexity(model: Any, blocks: torch.Tensor, long_from: int = 512, batch_size: int = 4,
                            device: Optional[str] = None) -> Dict[str, float]:
    """Perplexity of the tokens at positions ``>= long_from`` (and ``< long_from``) of ``blocks``."""
    check_int(long_from, "long_from", minimum=1, maximum=blocks.shape[1] - 1)
    device = get_device(device)
    model.to(device).eval()
    total = torch.zeros(blocks.shape[1] - 1, dtype=torch.float64)
    for begin in range(0, blocks.shape[0], batch_size):
        total += _token_losses(model, blocks[begin:begin + batch_size].to(device)).sum(0).double().cpu()
    per_position = total / blocks.shape[0]
    # the loss at index t scores token t+1, so "positions >= long_from" start at index long_from - 1
    late, early = per_position[long_from - 1:], per_position[: long_from - 1]
    return {"ppl_long": float(torch.exp(late.mean())), "ppl_early": float(torch.exp(early.mean())),
            "eval_blocks": int(blocks.shape[0])}


@torch.no_grad()
def short_document_perplexity(model: Any, doc_ids: Sequence[torch.Tensor], batch_size: int = 16,
                              device: Optional[str] = None) -> float:
    """Token-level perplexity of documents, each scored alone from position 0 (right-padded batches)."""
    docs = [d for d in doc_ids if d.numel() >= 2]
    if not docs:
        raise ConfigError("no short document with at least 2 tokens to score")
    device = get_device(device)
    model.to(device).eval()
    nll, count = 0.0, 0
    for begin in range(0, len(docs), batch_size):
        part = docs[begin:begin + batch_size]
        width = max(d.numel() for d in part)
        ids = torch.full((len(part), width), PAD, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, d in enumerate(part):
            ids[r, : d.numel()] = d
            mask[r, : d.numel()] = 1
        losses = _token_losses(model, ids.to(device), mask.to(device)).cpu()
        valid = mask[:, 1:].bool()
        nll += float(losses[valid].sum())
        count += int(valid.sum())
    return math.exp(nll / count)
