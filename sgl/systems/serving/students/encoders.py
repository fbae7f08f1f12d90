"""Tiny BERT-style classifiers trained here on SST-2: the teacher and its inputs.

Sentences are encoded with a BPE tokenizer trained on the train split, with ``<eos>`` (id 2)
as the leading ``[CLS]`` token BERT's pooler reads, ``<pad>`` (0) as padding, cut at
``max_len``. :func:`train_classifier` fits a ``BertForSequenceClassification`` with AdamW and
cross-entropy; :func:`accuracy` scores any logits function on a labelled set.
"""
from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple

import numpy as np
import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.serving.lm import warmup_linear

__all__ = ["encode_sentences", "bert_config", "train_classifier", "accuracy", "batched_logits"]

CLS_ID, PAD_ID = 2, 0


def encode_sentences(tokenizer: Any, sentences: Sequence[str], max_len: int = 64) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` ``[n, L]`` with ``L`` the longest (capped) sentence."""
    max_len = check_int(max_len, "max_len", minimum=2)
    if not len(sentences):
        raise ConfigError("encode_sentences: no sentences given")
    rows: List[List[int]] = [[CLS_ID] + e.ids[: max_len - 1] for e in tokenizer.encode_batch(list(sentences))]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids, (ids != PAD_ID).long()


def bert_config(vocab_size: int, layers: int, hidden: int = 128, heads: int = 4, max_len: int = 64) -> Any:
    """A tiny ``BertConfig`` with two labels and eager attention (``vmap``-friendly)."""
    from transformers import BertConfig

    cfg = BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=2 * hidden, max_position_embeddings=max_len, num_labels=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=PAD_ID)
    cfg._attn_implementation = "eager"
    return cfg


def _batches(n: int, batch_size: int, steps: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        yield torch.randint(0, n, (batch_size,), generator=gen)


def train_classifier(config: Any, ids: torch.Tensor, mask: torch.Tensor, labels: np.ndarray, *, steps: int = 300,
                     batch_size: int = 32, lr: float = 1e-3, seed: int = 0) -> Any:
    """A ``BertForSequenceClassification`` trained with cross-entropy; returned in ``eval()`` mode."""
    from transformers import BertForSequenceClassification

    steps = check_int(steps, "steps", minimum=1)
    lr = check_real(lr, "lr", 0.0, 1.0, open_low=True)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = warmup_linear(opt, steps)
    model.train()
    for rows in _batches(len(y), batch_size, steps, seed):
        width = int(mask[rows].sum(1).max())
        loss = model(input_ids=ids[rows, :width], attention_mask=mask[rows, :width], labels=y[rows]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model.eval()


@torch.no_grad()
def batched_logits(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ids: torch.Tensor, mask: torch.Tensor,
                   batch_size: int = 256) -> torch.Tensor:
    """``fn(ids, mask)`` over ``batch_size`` rows at a time (each batch cut to its longest row)."""
    out = []
    for s in range(0, len(ids), batch_size):
        m = mask[s:s + batch_size]
        width = int(m.sum(1).max())
        out.append(fn(ids[s:s + batch_size, :width], m[:, :width]))
    return torch.cat(out)


def accuracy(logits: torch.Tensor, labels: np.ndarray) -> float:
    """Share of rows whose arg-max logit is the label."""
    return float((logits.argmax(-1).cpu().numpy() == np.asarray(labels)).mean())
