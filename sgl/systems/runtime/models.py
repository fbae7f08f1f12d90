"""The models the executor runs, seen through one small interface (:class:`Decoder`).

The executor needs five things from a decoder-only language model: its embedding, its list of
decoder layers, how to run one layer on a hidden state, the final norm + LM head, and the
tensor-parallel layout of one layer.  :func:`decoder_of` finds them generically:

* our :class:`~sgl.systems.runtime.tiny_lm.TinyLM` (``embed``, ``blocks``, ``norm``, ``head``) --
  the fast test model, with the Megatron layout (q/k/v and the MLP's first matrices column-wise,
  the output projections row-wise);
* a Hugging Face ``*ForCausalLM`` decoder (``model.model.embed_tokens``, ``model.model.layers``,
  ``model.model.norm``, ``model.lm_head`` and, for rotary models, ``model.model.rotary_emb``) --
  its TP layout is the model's own ``config.base_model_tp_plan``.

:func:`build_model` builds the seeded initial model of an :class:`~sgl.systems.runtime.ExecConfig`:
``arch="tiny"`` is :class:`TinyLM`, ``arch="hf-llama"`` a ``transformers`` ``LlamaForCausalLM``
with the same shapes (tiny configs built in code; nothing is downloaded).

>>> import torch
>>> from sgl.systems.runtime.config import ExecConfig
>>> model = build_model(ExecConfig(arch="hf-llama"))
>>> dec = decoder_of(model)
>>> tokens = torch.randint(0, 256, (2, 8))
>>> h = dec.embed(tokens)
>>> for layer in dec.layers:
...     h = dec.run_layer(layer, h)
>>> torch.allclose(dec.head(h), dec.logits(tokens), atol=1e-6), sorted(dec.tp_layout())[:2]
(True, ['mlp.down_proj', 'mlp.gate_proj'])
"""
from __future__ import annotations

import functools
from typing import Dict

import torch
import torch.nn as nn

from sgl.errors import ConfigError, PlanError
from sgl.systems.parallel.model import TransformerConfig
from sgl.systems.runtime.tiny_lm import TinyLM

__all__ = ["ARCHS", "Decoder", "build_model", "decoder_of", "hf_llama_config", "hf_mixtral_config", "hf_qwen2_moe_config",
           "set_checkpoint"]

ARCHS = ("tiny", "hf-llama", "hf-mixtral", "hf-qwen2-moe")
#: experts of the ``hf-mixtral`` arch (top-2 routing, converted to SGL's MoELayer)
MIXTRAL_EXPERTS = 4


def hf_llama_config(mc: TransformerConfig):
    """A ``transformers`` ``LlamaConfig`` with ``mc``'s shapes (SDPA attention, untied head)."""
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=mc.hidden_size, intermediate_size=mc.ffn_hidden_size,
                       num_hidden_layers=mc.num_layers, num_attention_heads=mc.num_heads,
                       num_key_value_heads=mc.num_heads, vocab_size=mc.vocab_size,
                       max_position_embeddings=mc.seq_length, tie_word_embeddings=False,
                       attn_implementation="sdpa", use_cache=False)


def hf_mixtral_config(mc: TransformerConfig):
    """A ``transformers`` ``MixtralConfig`` with ``mc``'s shapes (each expert ``mc.ffn_hidden_size`` wide)."""
    from transformers import MixtralConfig

    return MixtralConfig(hidden_size=mc.hidden_size, intermediate_size=mc.ffn_hidden_size,
                         num_hidden_layers=mc.num_layers, num_attention_heads=mc.num_heads,
                         num_key_value_heads=mc.num_heads, vocab_size=mc.vocab_size,
                         max_position_embeddings=mc.seq_length, tie_word_embeddings=False,
                         num_local_experts=MIXTRAL_EXPERTS, num_experts_per_tok=2,
                         attn_implementation="sdpa", use_cache=False)


def hf_qwen2_moe_config(mc: TransformerConfig):
    """A ``transformers`` ``Qwen2MoeConfig`` with ``mc``'s shapes: :data:`MIXTRAL_EXPERTS` routed experts
    (top-2) and Qwen2-MoE's gated shared expert, every layer sparse."""
    from transformers import Qwen2MoeConfig

    return Qwen2MoeConfig(hidden_size=mc.hidden_size, intermediate_size=mc.ffn_hidden_size,
                          moe_intermediate_size=mc.ffn_hidden_size, shared_expert_intermediate_size=mc.ffn_hidden_size,
                          num_hidden_layers=mc.num_layers, num_attention_heads=mc.num_heads,
                          num_key_value_heads=mc.num_heads, vocab_size=mc.vocab_size,
                          max_position_embeddings=mc.seq_length, tie_word_embeddings=False,
                          num_experts=MIXTRAL_EXPERTS, num_experts_per_tok=2, decoder_sparse_step=1,
                          attn_implementation="sdpa", use_cache=False)


def build_model(cfg) -> nn.Module:
    """The seeded initial model of ``cfg`` (an :class:`ExecConfig`), identical on every rank."""
    if cfg.arch not in ARCHS:
        raise ConfigError(f"unknown executor arch {cfg.arch!r}; choose one of {list(ARCHS)}")
    mc = cfg.model_config()
    torch.manual_seed(cfg.seed)
    if cfg.arch == "tiny":
        return TinyLM(mc)
    if cfg.arch in ("hf-mixtral", "hf-qwen2-moe"):
        from transformers import MixtralForCausalLM, Qwen2MoeForCausalLM

        from sgl.systems.moe import convert

        cls, config = ((MixtralForCausalLM, hf_mixtral_config(mc)) if cfg.arch == "hf-mixtral"
                       else (Qwen2MoeForCausalLM, hf_qwen2_moe_config(mc)))
        model = convert(cls(config))   # experts as SGL's MoELayer
    else:
        from transformers import LlamaForCausalLM

        model = LlamaForCausalLM(hf_llama_config(mc))
    model.train()
    return model


class Decoder:
    """Embedding, decoder layers, layer call, norm + head and TP layout of one model (see module doc)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        if isinstance(model, TinyLM):
            self.kind = "tiny"
            self.embed_module, self.layers, self.norm, self.lm_head = model.embed, model.blocks, model.norm, model.head
            self.rotary = None
            self.config = None
            return
        base = getattr(model, "model", None)
        layers = getattr(base, "layers", None)
        if not isinstance(layers, nn.ModuleList) or not hasattr(model, "lm_head"):
            raise ConfigError(f"{type(model).__name__} is not a decoder the executor knows: it needs "
                              "model.model.layers (an nn.ModuleList) and model.lm_head, as Hugging Face "
                              "*ForCausalLM models have, or to be a TinyLM")
        self.kind = "hf"
        self.embed_module, self.layers, self.norm, self.lm_head = base.embed_tokens, layers, base.norm, model.lm_head
        self.rotary = getattr(base, "rotary_emb", None)
        self.config = model.config

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embed_module(tokens)

    def run_layer(self, layer: nn.Module, h: torch.Tensor) -> torch.Tensor:
        """One decoder layer on ``h`` (``[batch, seq, hidden]``), causal, positions ``0..seq-1``."""
        if self.kind == "tiny":
            return layer(h)
        out = layer(h, **self.layer_kwargs(h))
        return out[0] if isinstance(out, tuple) else out

    def layer_kwargs(self, h: torch.Tensor) -> Dict[str, object]:
        """Keyword arguments a Hugging Face layer gets for ``h`` (causal, positions ``0..seq-1``); ``{}`` for TinyLM."""
        if self.kind == "tiny":
            return {}
        pos = torch.arange(h.shape[1], device=h.device)[None]
        kwargs: Dict[str, object] = {"attention_mask": None, "position_ids": pos}
        if self.rotary is not None:
            kwargs["position_embeddings"] = self.rotary(h, position_ids=pos)
        return kwargs

    def head(self, h: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(h))

    def logits(self, tokens: torch.Tensor, module: nn.Module | None = None) -> torch.Tensor:
        """Logits of the whole model (``module``: a wrapper of it, e.g. DDP, to call instead)."""
        out = (module or self.model)(tokens)
        return out.logits if hasattr(out, "logits") else out

    def dims(self) -> Dict[str, int]:
        """Sizes a TP degree must divide: heads, KV heads and MLP width."""
        if self.kind == "tiny":
            c = self.model.cfg
            return {"num_heads": c.num_heads, "num_key_value_heads": c.num_heads, "ffn_hidden_size": c.ffn_hidden_size}
        c = self.config
        return {"num_heads": c.num_attention_heads,
                "num_key_value_heads": getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
                "ffn_hidden_size": getattr(c, "intermediate_size", c.hidden_size)}

    def tp_layout(self) -> Dict[str, str]:
        """Per-layer TP layout: submodule name -> ``"colwise"`` / ``"rowwise"``."""
        if self.kind == "tiny":
            layout = {"q": "colwise", "k": "colwise", "v": "colwise", "o": "rowwise", "w1": "colwise", "w2": "rowwise"}
            if self.layers[0].w3 is not None:
                layout["w3"] = "colwise"
            return layout
        plan = getattr(self.config, "base_model_tp_plan", None) or {}
        layout = {key[len("layers.*."):]: style for key, style in plan.items() if key.startswith("layers.*.")}
        if not layout:
            raise PlanError(f"{type(self.model).__name__} ships no base_model_tp_plan for its layers; "
                            "the executor cannot tensor-parallelise it (use tp=1)")
        return layout


def decoder_of(model: nn.Module) -> Decoder:
    """The :class:`Decoder` view of ``model`` (TinyLM or a Hugging Face causal LM)."""
    return Decoder(model)


def _checkpointed(forward, *args, **kwargs):
    from torch.utils.checkpoint import checkpoint

    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)
    return checkpoint(forward, *args, use_reentrant=False, **kwargs)


def set_checkpoint(layer: nn.Module, on: bool) -> None:
    """Recompute ``layer``'s activations in backward (activation checkpointing) when ``on``."""
    if hasattr(layer, "checkpoint") and isinstance(getattr(layer, "checkpoint"), bool):
        layer.checkpoint = on
    elif on:
        layer.forward = functools.partial(_checkpointed, layer.forward)
