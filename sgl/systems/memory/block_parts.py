"""A decoder layer seen as MEMO / TSPLIT see it: an attention part and a token-wise part.

A pre-norm layer computes ``a = Attn(Norm1(x))`` (everything up to, not including, the output
projection ``O``) and then, token by token, ``y = h + MLP(Norm2(h))`` with ``h = x + O(a)``.
Two layer kinds are known:

* ``"tiny"`` -- :class:`~sgl.systems.runtime.TransformerBlock` (``ln1``, ``q``/``k``/``v``/``o``,
  ``ln2``, ``w1``/``w2``/``w3``), called as ``block(x)``;
* ``"hf"`` -- a Hugging Face Llama-style decoder layer (``input_layernorm``, ``self_attn`` with
  ``q_proj``/``k_proj``/``v_proj``/``o_proj``, ``post_attention_layernorm``, ``mlp``), called as
  ``layer(hidden_states, attention_mask=..., position_ids=..., position_embeddings=(cos, sin), ...)``.
  Its attention part repeats ``LlamaAttention.forward`` op for op (projections, the rotary
  embedding of its own module, the model's ``attn_implementation``), so the split layer computes
  bit-for-bit what the layer does.

Anything else is refused with a :class:`~sgl.errors.ConfigError` naming what is missing.

>>> import torch
>>> from sgl.systems.parallel import get_model_config
>>> from sgl.systems.runtime import TransformerBlock
>>> torch.manual_seed(0); block = TransformerBlock(get_model_config("tiny"))  # doctest: +ELLIPSIS
<...>
>>> x = torch.randn(2, 8, 64)
>>> layer_kind(block), bool(torch.equal(tokenwise_part(block, x, attention_part(block, x)), block(x)))
('tiny', True)
"""
from __future__ import annotations

import sys
from typing import Any, Dict

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl.errors import ConfigError

__all__ = ["attention_part", "blocks_of", "layer_kind", "tokenwise_part"]

_TINY = ("ln1", "q", "k", "v", "o", "ln2", "w1", "w2")
_HF = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
_HF_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")


def layer_kind(block: nn.Module, who: str = "MEMO/TSPLIT") -> str:
    """``"tiny"`` or ``"hf"``; :class:`ConfigError` for a layer of another structure."""
    if all(hasattr(block, n) for n in _TINY):
        return "tiny"
    if all(hasattr(block, n) for n in _HF) and all(hasattr(block.self_attn, n) for n in _HF_ATTN):
        return "hf"
    missing = [n for n in _HF if not hasattr(block, n)]
    raise ConfigError(f"{who} needs a TransformerBlock or a Hugging Face Llama-style decoder layer (pre-norm "
                      f"attention + MLP); {type(block).__name__} has no {missing or list(_HF_ATTN)}")


def blocks_of(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of a TinyLM (``model.blocks``) or a Hugging Face causal LM (``model.model.layers``)."""
    blocks = getattr(model, "blocks", None)
    if isinstance(blocks, nn.ModuleList):
        return blocks
    layers = getattr(getattr(model, "model", None), "layers", None)
    if isinstance(layers, nn.ModuleList):
        return layers
    raise ConfigError(f"{type(model).__name__} has neither `blocks` (TinyLM) nor `model.layers` (a Hugging Face "
                      "causal LM) as an nn.ModuleList")


def _hf_attention(block: nn.Module, x: torch.Tensor, ctx: Dict[str, Any]) -> torch.Tensor:
    attn = block.self_attn
    module = sys.modules[type(attn).__module__]
    y = block.input_layernorm(x)
    input_shape = y.shape[:-1]
    hidden_shape = (*input_shape, -1, attn.head_dim)
    q = attn.q_proj(y).view(hidden_shape).transpose(1, 2)
    k = attn.k_proj(y).view(hidden_shape).transpose(1, 2)
    v = attn.v_proj(y).view(hidden_shape).transpose(1, 2)
    cos, sin = ctx["position_embeddings"]
    q, k = module.apply_rotary_pos_emb(q, k, cos, sin)
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    fn = ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, module.eager_attention_forward)
    extra = {key: val for key, val in ctx.items() if key not in ("position_embeddings", "attention_mask", "cache",
                                                                  "past_key_values", "use_cache")}
    out, _ = fn(attn, q, k, v, ctx.get("attention_mask"), dropout=0.0 if not attn.training else attn.attention_dropout,
                scaling=attn.scaling, **extra)
    return out.reshape(*input_shape, -1).contiguous()


def attention_part(block: nn.Module, x: torch.Tensor, ctx: Dict[str, Any] | None = None) -> torch.Tensor:
    """``Attn(Norm1(x))`` ``[b, s, heads*head_dim]``, before the output projection.

    ``ctx``: a Hugging Face layer's keyword arguments (``position_embeddings``, ``attention_mask``, ...).
    """
    if layer_kind(block) == "hf":
        if not ctx or ctx.get("position_embeddings") is None:
            raise ConfigError("a Hugging Face decoder layer needs position_embeddings=(cos, sin) from its model's "
                              "rotary embedding")
        return _hf_attention(block, x, ctx)
    b, s, _ = x.shape
    y = block.ln1(x)
    q = block.q(y).view(b, s, -1, block.head_dim).transpose(1, 2)
    k = block.k(y).view(b, s, -1, block.head_dim).transpose(1, 2)
    v = block.v(y).view(b, s, -1, block.head_dim).transpose(1, 2)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)


def tokenwise_part(block: nn.Module, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``h + MLP(Norm2(h))`` with ``h = x + O(a)``, row by row (any leading shape)."""
    if layer_kind(block) == "hf":
        h = x + block.self_attn.o_proj(a)
        return h + block.mlp(block.post_attention_layernorm(h))
    h = x + block.o(a)
    y = block.ln2(h)
    hidden = F.silu(block.w1(y)) * block.w3(y) if block.w3 is not None else F.gelu(block.w1(y))
    return h + block.w2(hidden)


def layer_context(args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """A Hugging Face layer call's keyword context (positional ``attention_mask``, ``position_ids`` folded in)."""
    ctx = dict(kwargs)
    for name, value in zip(("attention_mask", "position_ids"), args):
        ctx[name] = value
    return ctx
