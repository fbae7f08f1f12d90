"""Hugging Face Llama decoders on a packed variable-length shard: their own layers, our attention.

:func:`hf_varlen_lm` runs a ``transformers`` ``LlamaForCausalLM`` on this rank's contiguous shard
``[start, start + T_r)`` of a packed micro-batch (documents ``s_1..s_n``, ``cu_seqlens``).  Every
decoder layer is the model's own module (RMSNorm, q/k/v/o projections, rotary embedding, SwiGLU
MLP); only the attention kernel is swapped, through ``transformers``' attention interface (the
mechanism :mod:`sgl.systems.runtime.cp` uses for ring / Ulysses on the Galvatron executor), for a
registered ``"sgl_varlen"`` implementation that calls the executor's per-document attention
(local, Ulysses all-to-all or ring; :mod:`~sgl.systems.seq.doc_attention`).  Two things make the
packed shard equal to running each document alone:

* **positions** -- token ``t`` of document ``i`` gets rotary position ``t - cu[i]``
  (:func:`document_positions`), its position inside its own document, whatever the shard;
* **the mask** -- attention is causal *within* each document and never crosses documents.

Grouped-query attention keeps the config's KV heads: the kernels get ``H`` query heads and
``H_kv`` KV heads; Ulysses moves the ``H_kv`` heads over the all-to-all when the SP degree divides
them (else the repeated ``H``) and repeats them after (:func:`gqa_ulysses_attention`); a query head
``j`` reads KV head ``j // (H / H_kv)``, as in the model's own attention.

>>> import torch
>>> from transformers import LlamaConfig, LlamaForCausalLM
>>> from sgl.systems.seq.varlen import cu_seqlens
>>> _ = torch.manual_seed(0)
>>> model = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
...     num_attention_heads=4, num_key_value_heads=2, vocab_size=50)).double()
>>> docs = [torch.randint(0, 50, (n,)) for n in (5, 3)]
>>> packed = hf_varlen_lm(model, torch.cat(docs), cu_seqlens([5, 3]))
>>> torch.allclose(packed[5:], model(docs[1][None]).logits[0])
True
>>> document_positions(cu_seqlens([5, 3]), 3, 7).tolist()
[3, 4, 0, 1]
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Optional

import torch
import torch.nn as nn

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.seq.doc_attention import document_attention, document_ring_attention
from sgl.systems.seq.ulysses import heads_to_seq, seq_to_heads
from sgl.systems.seq.varlen import _check_cu, shard_bounds

__all__ = ["VARLEN_ATTENTION", "HF_VARLEN_TYPES", "check_hf_varlen", "document_positions", "gqa_ulysses_attention",
           "hf_attend", "hf_varlen_lm", "repeat_kv"]

VARLEN_ATTENTION = "sgl_varlen"
#: ``config.model_type`` values whose decoder layers run here (checked: Llama)
HF_VARLEN_TYPES = ("llama",)


def document_positions(cu: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Position of every packed token ``start..stop-1`` inside its own document (``t - cu[doc(t)]``)."""
    t = torch.arange(start, stop, device=cu.device)
    doc = torch.searchsorted(cu, t, right=True) - 1
    return t - cu[doc]


def repeat_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``x [T, H_kv, d]`` with each KV head repeated for the ``heads / H_kv`` query heads it serves."""
    rep = heads // x.shape[1]
    return x if rep == 1 else x.repeat_interleave(rep, dim=1)


def gqa_ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor,
                          group=None) -> torch.Tensor:
    """Ulysses SP of per-document attention with ``H`` query and ``H_kv`` KV heads (module doc)."""
    world = comm.get_world_size(group)
    heads = q.shape[1]
    if k.shape[1] % world:                 # the KV heads cannot be split: send them repeated
        k, v = repeat_kv(k, heads), repeat_kv(v, heads)
    cu = _check_cu(cu)
    sizes = [b - a for a, b in shard_bounds(int(cu[-1]), world)]
    fq, fk, fv = (seq_to_heads(t, sizes, group) for t in (q, k, v))
    out = document_attention(fq, repeat_kv(fk, fq.shape[1]), repeat_kv(fv, fq.shape[1]), cu)
    return heads_to_seq(out, sizes, group)


def hf_attend(cu: torch.Tensor, strategy: str = "local", group=None) -> Callable:
    """``attend(q [T_r, H, d], k [T_r, H_kv, d], v) -> [T_r, H, d]``: per-document attention with ``strategy``."""
    if strategy == "local":
        return lambda q, k, v: document_attention(q, repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1]), cu)
    if strategy == "ulysses":
        return lambda q, k, v: gqa_ulysses_attention(q, k, v, cu, group)
    if strategy == "ring":
        return lambda q, k, v: document_ring_attention(q, repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1]),
                                                       cu, group)
    raise PlanError(f"unknown attention strategy {strategy!r}; use local, ulysses or ring")


def _varlen_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None, dropout: float = 0.0,
                      sgl_attend: Optional[Callable] = None, **kwargs):
    if sgl_attend is None:
        raise PlanError(f"the {VARLEN_ATTENTION!r} attention runs only inside hf_varlen_lm (it needs the packed "
                        "documents' cu_seqlens)")
    if dropout:
        raise PlanError(f"the varlen executor runs without attention dropout; the model asks for {dropout} "
                        "(set attention_dropout=0 in its config)")
    d = query.shape[-1]
    if scaling is not None and abs(scaling - d ** -0.5) > 1e-12:
        raise PlanError(f"the varlen executor's attention uses scale 1/sqrt(head_dim); the model uses {scaling}")
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))      # [1, H, T, d] -> [T, H, d]
    return sgl_attend(q, k, v)[None], None                             # [1, T, H, d], as SDPA returns


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(VARLEN_ATTENTION, _varlen_attention)


@contextmanager
def _varlen_attention_on(model: nn.Module):
    _register()
    config = model.config
    old = config._attn_implementation
    config._attn_implementation = VARLEN_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = old


def check_hf_varlen(model: nn.Module) -> int:
    """Refuse a Hugging Face model whose layers this module has not been checked on; its query head count."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    base = getattr(model, "model", None)
    if kind not in HF_VARLEN_TYPES or not hasattr(base, "layers") or not hasattr(model, "lm_head"):
        raise PlanError(f"the varlen executor runs TinyLM or a Hugging Face causal LM of type {list(HF_VARLEN_TYPES)} "
                        f"(e.g. LlamaForCausalLM), got {type(model).__name__} (model_type {kind!r})")
    if getattr(config, "attention_dropout", 0.0):
        raise PlanError(f"the varlen executor runs without attention dropout; the config asks for "
                        f"{config.attention_dropout} (set attention_dropout=0)")
    return int(config.num_attention_heads)


def hf_varlen_lm(model: nn.Module, tokens: torch.Tensor, cu: torch.Tensor, start: int = 0,
                 attend: Optional[Callable] = None) -> torch.Tensor:
    """Logits ``[T_r, vocab]`` of the packed shard ``tokens`` (global offset ``start``) of ``model``.

    ``attend`` is :func:`hf_attend`'s callable (default: local per-document attention).
    """
    cu = cu.to(tokens.device)
    attend = attend or hf_attend(cu)
    base = model.model
    h = base.embed_tokens(tokens)[None]                                 # [1, T_r, hidden]
    pos = document_positions(cu, start, start + tokens.numel())[None]
    rope = base.rotary_emb(h, position_ids=pos)
    with _varlen_attention_on(model):
        for layer in base.layers:
            out = layer(h, attention_mask=None, position_ids=pos, position_embeddings=rope, sgl_attend=attend)
            h = out[0] if isinstance(out, tuple) else out
    return model.lm_head(base.norm(h))[0]
