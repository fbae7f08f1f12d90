"""Run the small Transformer's layer on a sequence shard with Ulysses or ring attention.

:func:`sequence_parallel_block` computes :class:`sgl.systems.runtime.tiny_lm.TransformerBlock`'s
forward (pre-norm causal attention + MLP, the same weights) on this rank's contiguous slice
``x_r`` (``[T_r, hidden]``) of a packed micro-batch described by ``cu_seqlens``.  Everything but
attention is token-wise, so only attention communicates: ``mode="ulysses"``
(:func:`~sgl.systems.seq.ulysses.ulysses_attention`), ``"ring"``
(:func:`~sgl.systems.seq.ring.ring_attention`) or ``"local"`` (single-process varlen attention,
the reference).  Packed documents never attend to each other, so the packed result equals
running each document through the block alone.

>>> import torch
>>> from sgl.systems.parallel import get_model_config
>>> from sgl.systems.runtime.tiny_lm import TransformerBlock
>>> from sgl.systems.seq.varlen import cu_seqlens
>>> block = TransformerBlock(get_model_config("tiny")).double()
>>> x = torch.randn(7, 64, dtype=torch.float64)
>>> packed = sequence_parallel_block(block, x, cu_seqlens([4, 3]), "local")
>>> torch.allclose(packed[4:], block(x[None, 4:])[0])
True
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from sgl._checks import check_choice
from sgl.errors import ConfigError
from sgl.systems.seq.ring import ring_attention
from sgl.systems.seq.ulysses import ulysses_attention
from sgl.systems.seq.varlen import varlen_attention

__all__ = ["sequence_parallel_block", "sequence_parallel_lm", "packed_block"]

MODES = ("local", "ulysses", "ring")


def sequence_parallel_block(block, x: torch.Tensor, cu: torch.Tensor, mode: str = "ulysses", group=None
                            ) -> torch.Tensor:
    """``block`` applied to this rank's packed shard ``x`` (``[T_r, hidden]``); see the module doc."""
    check_choice(mode, "mode", MODES, error=ConfigError)
    if getattr(block, "ffn", None) is not None:
        raise ConfigError("sequence_parallel_block runs dense-MLP blocks; this block has a custom ffn")
    if x.dim() != 2:
        raise ConfigError(f"x must be a packed shard [tokens, hidden], got shape {tuple(x.shape)}")
    attend = {"local": lambda q, k, v: varlen_attention(q, k, v, cu),
              "ulysses": lambda q, k, v: ulysses_attention(q, k, v, cu, group),
              "ring": lambda q, k, v: ring_attention(q, k, v, cu, group)}[mode]
    return packed_block(block, x, attend)


def packed_block(block, x: torch.Tensor, attend) -> torch.Tensor:
    """A dense-MLP TinyLM block on a packed shard ``x [T, hidden]``; ``attend(q, k, v)`` (each
    ``[T, heads, head_dim]``) is the attention, whichever way it is split over ranks."""
    t = x.shape[0]
    y = block.ln1(x)
    q, k, v = (lin(y).view(t, -1, block.head_dim) for lin in (block.q, block.k, block.v))
    x = x + block.o(attend(q, k, v).reshape(t, -1))
    y = block.ln2(x)
    hidden = F.silu(block.w1(y)) * block.w3(y) if block.w3 is not None else F.gelu(block.w1(y))
    return x + block.w2(hidden)


def sequence_parallel_lm(model, tokens: torch.Tensor, cu: torch.Tensor, mode: str = "ulysses", group=None
                         ) -> torch.Tensor:
    """:class:`~sgl.systems.runtime.tiny_lm.TinyLM` logits ``[T_r, vocab]`` of this rank's packed token shard.

    Embedding, every block (:func:`sequence_parallel_block`), final norm and LM head; packed documents
    stay independent, so the logits equal the model's own forward on each document alone.
    """
    if tokens.dim() != 1:
        raise ConfigError(f"tokens must be this rank's packed shard [tokens], got shape {tuple(tokens.shape)}")
    x = model.embed(tokens)
    for block in model.blocks:
        x = sequence_parallel_block(block, x, cu, mode, group)
    return model.head(model.norm(x))
