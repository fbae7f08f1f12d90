"""Malleus on Hugging Face Llama: the shards of a ``LlamaForCausalLM`` that each rank holds.

The Malleus runtime (:mod:`~sgl.systems.seq.malleus_runtime`, ``MalleusRunConfig(arch="hf-llama")``)
trains the tiny ``transformers`` Llama that :func:`~sgl.systems.runtime.models.hf_llama_config`
describes, seeded as :func:`~sgl.systems.runtime.models.build_model` seeds it (the same weights on
every rank).  Its parameters are listed in the canonical order of
:func:`~sgl.systems.seq.malleus_shard.param_layout` -- unit ``"embed"`` (``embed_tokens``), units
``0 … L-1`` (the decoder layers, under the model's own parameter names) and unit ``"head"`` (final
norm + ``lm_head``) -- so gradient summation and live migration run unchanged.  Inside a TP group of
``t`` devices, member ``k`` holds rows ``[k·n/t, (k+1)·n/t)`` of the column-parallel
``q_proj``, ``k_proj``, ``v_proj``, ``gate_proj``, ``up_proj`` (whole query heads and whole KV heads:
query heads ``[k·H/t, (k+1)·H/t)`` read KV heads ``[k·H_kv/t, (k+1)·H_kv/t)``, as in the full
model's grouped-query attention) and the same columns of the row-parallel ``o_proj`` and
``down_proj``; RMSNorms, the embedding and the head are replicated in the group.  With ``x`` the
layer input, ``f`` the identity forward / all-reduce backward and ``g`` the all-reduce forward /
identity backward (Megatron's pair), a sharded layer computes

    h = x + g(o_k(attn(RoPE(q_k(f(rms_1(x)))), RoPE(k_k(·)), v_k(·))))
    y = h + g(down_k(silu(gate_k(f(rms_2(h)))) · up_k(f(rms_2(h)))))

which is the full layer because attention is per head and ``Σ_k o_k(a_k) = o(a)``.  The layer is
the model's own ``LlamaDecoderLayer`` (built with ``H/t`` heads, ``H_kv/t`` KV heads and
``intermediate/t`` MLP width); ``f`` and ``g`` are forward hooks on its norms and output
projections, and RoPE comes from the model's rotary embedding at positions ``0 … s-1``.

>>> from sgl.systems.parallel.model import TransformerConfig
>>> config = hf_config(TransformerConfig("t", 2, 16, 4, 32, 32, 8), kv_heads=2)
>>> [(p.name, p.shape, p.kind) for p in hf_param_layout(config, [0])][1:3]
[('self_attn.q_proj.weight', (16, 16), 'col'), ('self_attn.k_proj.weight', (8, 16), 'col')]
>>> check_hf_tp(config, 4)  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
sgl.errors.PlanError: HF Llama: num_key_value_heads=2 is not divisible by the TP degree 4 ...
"""
from __future__ import annotations

import copy
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn

from sgl.errors import PlanError
from sgl.systems.parallel.model import TransformerConfig
from sgl.systems.seq.malleus_shard import Holding, ParamSpec, _CopyToGroup, _ReduceFromGroup

__all__ = ["HFStageModule", "hf_config", "build_hf_llama", "check_hf_tp", "hf_param_layout", "hf_full_values",
           "build_hf_stage", "hf_timing_layer"]

Unit = Union[str, int]


def hf_config(mc: TransformerConfig, kv_heads: Optional[int] = None):
    """The ``LlamaConfig`` of ``mc`` (:func:`~sgl.systems.runtime.models.hf_llama_config`), with
    ``kv_heads`` key/value heads when given (grouped-query attention)."""
    from sgl.systems.runtime.models import hf_llama_config

    config = hf_llama_config(mc)
    if kv_heads is not None:
        if kv_heads < 1 or mc.num_heads % kv_heads:
            raise PlanError(f"kv_heads={kv_heads} must divide num_heads={mc.num_heads} (grouped-query attention)")
        config.num_key_value_heads = kv_heads
    return config


def build_hf_llama(mc: TransformerConfig, seed: int = 0, kv_heads: Optional[int] = None) -> nn.Module:
    """The seeded ``LlamaForCausalLM`` of ``mc`` (as ``build_model(ExecConfig(arch="hf-llama"))`` seeds it)."""
    from transformers import LlamaForCausalLM

    config = hf_config(mc, kv_heads)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.train()
    return model


def _dims(config) -> Tuple[int, int, int, int, int]:
    h, heads = int(config.hidden_size), int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    hd = int(getattr(config, "head_dim", None) or h // heads)
    return h, heads, kv, hd, int(config.intermediate_size)


def check_hf_tp(config, t: int) -> None:
    """:class:`PlanError` unless ``t`` divides the heads, the KV heads and the MLP width (and no biases)."""
    _, heads, kv, _, inter = _dims(config)
    for name, n, what in (("num_attention_heads", heads, "attention heads"), ("num_key_value_heads", kv, "KV heads"),
                          ("intermediate_size", inter, "MLP width")):
        if n % t:
            raise PlanError(f"HF Llama: {name}={n} is not divisible by the TP degree {t} of a Malleus stage; "
                            f"use a TP degree that divides the {what}")
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        raise PlanError("HF Llama with attention_bias / mlp_bias is not sharded by the Malleus runtime; "
                        "set both to False")


def _unit_params(config, unit: Unit) -> List[Tuple[str, Tuple[int, ...], str]]:
    h, heads, kv, hd, inter = _dims(config)
    v = int(config.vocab_size)
    if unit == "embed":
        return [("weight", (v, h), "rep")]
    if unit == "head":
        return [("norm.weight", (h,), "rep"), ("lm_head.weight", (v, h), "rep")]
    return [("input_layernorm.weight", (h,), "rep"), ("self_attn.q_proj.weight", (heads * hd, h), "col"),
            ("self_attn.k_proj.weight", (kv * hd, h), "col"), ("self_attn.v_proj.weight", (kv * hd, h), "col"),
            ("self_attn.o_proj.weight", (h, heads * hd), "row"), ("post_attention_layernorm.weight", (h,), "rep"),
            ("mlp.gate_proj.weight", (inter, h), "col"), ("mlp.up_proj.weight", (inter, h), "col"),
            ("mlp.down_proj.weight", (h, inter), "row")]


def hf_param_layout(config, units: Optional[Sequence[Unit]] = None) -> List[ParamSpec]:
    """Every parameter of ``units`` (default: the whole model) in canonical order with flat offsets."""
    units = ["embed", *range(int(config.num_hidden_layers)), "head"] if units is None else list(units)
    out, offset = [], 0
    for u in units:
        for name, shape, kind in _unit_params(config, u):
            spec = ParamSpec(u, name, shape, kind, offset)
            out.append(spec)
            offset += spec.numel
    return out


def hf_full_values(model: nn.Module) -> Dict[Tuple[Unit, str], torch.Tensor]:
    """``(unit, name) -> tensor`` of a whole ``LlamaForCausalLM``, canonical naming."""
    base = model.model
    out: Dict[Tuple[Unit, str], torch.Tensor] = {("embed", "weight"): base.embed_tokens.weight.detach()}
    for i, layer in enumerate(base.layers):
        for name, p in layer.named_parameters():
            out[(i, name)] = p.detach()
    out[("head", "norm.weight")] = base.norm.weight.detach()
    out[("head", "lm_head.weight")] = model.lm_head.weight.detach()
    return out


def _tp_hooks(layer: nn.Module, group) -> None:
    """Megatron's ``f`` after both norms (the column-parallel inputs), ``g`` after both output projections."""
    def copy_out(module, inputs, output):
        return _CopyToGroup.apply(output, group)

    def reduce_out(module, inputs, output):
        return _ReduceFromGroup.apply(output, group)

    layer.input_layernorm.register_forward_hook(copy_out)
    layer.post_attention_layernorm.register_forward_hook(copy_out)
    layer.self_attn.o_proj.register_forward_hook(reduce_out)
    layer.mlp.down_proj.register_forward_hook(reduce_out)


class HFStageModule(nn.Module):
    """This rank's stage of an HF Llama: ``embed_tokens`` (first stage), its decoder-layer shards with
    the model's rotary embedding, final norm + ``lm_head`` (last stage); returns hidden states or logits.

    >>> from sgl.systems.parallel.model import TransformerConfig
    >>> mc = TransformerConfig("t", 2, 16, 2, 32, 32, 8)
    >>> model = build_hf_llama(mc).double()
    >>> h = Holding(0, 0, 1, [0, 1], True, True)
    >>> stage = build_hf_stage(model.config, h, hf_full_values(model), None, torch.device("cpu"), torch.float64)
    >>> tokens = torch.randint(0, 32, (2, 8))
    >>> torch.allclose(stage(tokens), model(tokens).logits)
    True
    """

    def __init__(self, embed: Optional[nn.Embedding], layers: Dict[int, nn.Module], rotary: nn.Module,
                 norm: Optional[nn.Module], lm_head: Optional[nn.Linear]) -> None:
        super().__init__()
        self.embed, self.norm, self.lm_head, self.rotary = embed, norm, lm_head, rotary
        self.layer_ids = sorted(layers)
        self.layers = nn.ModuleList(layers[i] for i in self.layer_ids)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) if self.embed is not None else x
        pos = torch.arange(h.shape[1], device=h.device)[None]
        rope = self.rotary(h, position_ids=pos)
        for layer in self.layers:
            out = layer(h, attention_mask=None, position_ids=pos, position_embeddings=rope)
            h = out[0] if isinstance(out, tuple) else out
        if self.lm_head is not None:
            h = self.lm_head(self.norm(h))
        return h

    def param_map(self) -> Dict[Tuple[Unit, str], nn.Parameter]:
        """``(unit, name) -> parameter`` in the canonical naming of :func:`hf_param_layout`."""
        out: Dict[Tuple[Unit, str], nn.Parameter] = {}
        if self.embed is not None:
            out[("embed", "weight")] = self.embed.weight
        for i, layer in zip(self.layer_ids, self.layers):
            for name, p in layer.named_parameters():
                out[(i, name)] = p
        if self.lm_head is not None:
            out[("head", "norm.weight")] = self.norm.weight
            out[("head", "lm_head.weight")] = self.lm_head.weight
        return out


def _shard_config(config, t: int):
    """``config`` with ``1/t`` of the heads, KV heads and MLP width (same head size)."""
    _, heads, kv, hd, inter = _dims(config)
    small = copy.deepcopy(config)
    small.num_attention_heads, small.num_key_value_heads = heads // t, kv // t
    small.intermediate_size, small.head_dim = inter // t, hd
    return small


def build_hf_stage(config, holding: Holding, values: Dict[Tuple[Unit, str], torch.Tensor], group,
                   device: torch.device, dtype: torch.dtype) -> HFStageModule:
    """An :class:`HFStageModule` whose parameters are ``values`` (already this holding's shards)."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

    check_hf_tp(config, holding.t)
    small = _shard_config(config, holding.t)
    layers = {}
    for i in holding.layers:
        layer = LlamaDecoderLayer(small, layer_idx=i)
        if holding.t > 1:
            _tp_hooks(layer, group)
        layers[i] = layer
    h, v = int(config.hidden_size), int(config.vocab_size)
    embed = nn.Embedding(v, h) if holding.first else None
    norm = LlamaRMSNorm(h, eps=config.rms_norm_eps) if holding.last else None
    head = nn.Linear(h, v, bias=False) if holding.last else None
    stage = HFStageModule(embed, layers, LlamaRotaryEmbedding(config), norm, head).to(device=device, dtype=dtype)
    for key, p in stage.param_map().items():
        p.data = values[key].detach().to(device=device, dtype=dtype).clone()
    return stage


def hf_timing_layer(mc: TransformerConfig, kv_heads: Optional[int], device: torch.device, dtype: torch.dtype):
    """``fn(x [b, s, h]) -> [b, s, h]``: one full HF Llama decoder layer with RoPE (for per-layer timings)."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    config = hf_config(mc, kv_heads)
    layer = LlamaDecoderLayer(config, layer_idx=0).to(device=device, dtype=dtype)
    rotary = LlamaRotaryEmbedding(config).to(device=device)

    def run(x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(x.shape[1], device=x.device)[None]
        out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=rotary(x, position_ids=pos))
        return out[0] if isinstance(out, tuple) else out

    return run
