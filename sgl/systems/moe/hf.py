"""Hugging Face MoE models on SGL's MoE layer: :func:`convert` swaps ``transformers``' sparse-MoE
blocks for :class:`~sgl.systems.moe.MoELayer`, keeping every weight, so that EP, NetMoE, LSH-MoE
and FSEP apply to ``MixtralForCausalLM`` and ``Qwen2MoeForCausalLM``.

Weight mapping (per layer): the router's ``gate.weight`` ``[E, h]`` is the router weight; the
experts' ``gate_up_proj`` ``[E, 2f, h]`` splits into ``w1 = gate^T`` and ``w3 = up^T`` ``[E, h, f]``
and ``down_proj`` ``[E, h, f]`` becomes ``w2 = down^T`` ``[E, f, h]``; Qwen2-MoE's
``shared_expert`` and ``shared_expert_gate`` modules are kept as they are (same names).  Each
converted decoder layer hands its residual stream to the MoE layer (``mlp(h, residual=r)``,
which returns ``r + mlp(h)``), so a dispatcher that moves samples between ranks (NetMoE) moves
the residual with them; the layer keeps its class (a subclass), its submodules and their names.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn

from sgl._checks import check_choice
from sgl.errors import ConfigError
from sgl.systems.moe.config import MoEConfig
from sgl.systems.moe.experts import EXPERT_IMPLS
from sgl.systems.moe.layer import MoELayer

__all__ = ["convert", "SUPPORTED_MODEL_TYPES", "build_hf_model", "check_hf_config", "load_hf_config"]

#: model_type -> (CausalLM class, sparse block class) names in ``transformers``
SUPPORTED_MODEL_TYPES = {
    "mixtral": ("MixtralForCausalLM", "MixtralSparseMoeBlock"),
    "qwen2_moe": ("Qwen2MoeForCausalLM", "Qwen2MoeSparseMoeBlock"),
}
_SUPPORTED = "; ".join(f"{m} ({c} / {b})" for m, (c, b) in SUPPORTED_MODEL_TYPES.items())


def _unsupported(what: str) -> ConfigError:
    return ConfigError(f"sgl.systems.moe.convert: {what}. Supported Hugging Face MoE models (model_type, "
                       f"class / sparse block): {_SUPPORTED}")


def _check_config(config: Any) -> str:
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise _unsupported(f"model_type={model_type!r} ({type(config).__name__}) is not supported")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise _unsupported(f"hidden_act={config.hidden_act!r} is not supported (SwiGLU experts need 'silu')")
    if float(getattr(config, "router_jitter_noise", 0.0) or 0.0) > 0:
        raise _unsupported(f"router_jitter_noise={config.router_jitter_noise} is not supported; set it to 0")
    return model_type


def _moe_config(config: Any, model_type: str, impl: str, aux_loss_coef: float | None) -> MoEConfig:
    if model_type == "mixtral":
        experts, ffn, normalize = config.num_local_experts, config.intermediate_size, True
    else:
        experts, ffn, normalize = config.num_experts, config.moe_intermediate_size, bool(config.norm_topk_prob)
    if aux_loss_coef is None:  # HF adds its balance loss only when output_router_logits is on
        aux_loss_coef = float(config.router_aux_loss_coef) if getattr(config, "output_router_logits", False) else 0.0
    return MoEConfig(config.hidden_size, ffn, experts, config.num_experts_per_tok, gate="softmax", activation="swiglu",
                     aux_loss_coef=aux_loss_coef, normalize_weights=normalize, expert_impl=impl)


@torch.no_grad()
def _convert_block(block: nn.Module, cfg: MoEConfig) -> MoELayer:
    ref = block.gate.weight
    shared = getattr(block, "shared_expert", None)
    gate = getattr(block, "shared_expert_gate", None)
    layer = MoELayer(cfg, shared_expert=shared, shared_expert_gate=gate)
    layer.router.to(device=ref.device, dtype=ref.dtype)
    layer.router.weight.copy_(ref)
    if not hasattr(block.experts, "gate_up_proj"):
        raise _unsupported(f"{type(block).__name__}.experts has no stacked gate_up_proj / down_proj (the "
                           "transformers >= 5 layout); upgrade transformers to 5.x")
    gate_up, down = block.experts.gate_up_proj, block.experts.down_proj
    f = cfg.ffn_hidden_size
    if tuple(gate_up.shape) != (cfg.num_experts, 2 * f, cfg.hidden_size):
        raise _unsupported(f"experts.gate_up_proj has shape {tuple(gate_up.shape)}, expected "
                           f"{(cfg.num_experts, 2 * f, cfg.hidden_size)} ([E, 2*ffn, hidden])")
    bank = layer.experts
    bank.w1 = nn.Parameter(gate_up[:, :f].transpose(1, 2).contiguous())
    bank.w3 = nn.Parameter(gate_up[:, f:].transpose(1, 2).contiguous())
    bank.w2 = nn.Parameter(down.transpose(1, 2).contiguous())
    for p in bank.parameters():
        p.requires_grad_(gate_up.requires_grad)
        p.sgl_expert = True  # type: ignore[attr-defined]
    return layer


def _fused_forward(self: nn.Module, hidden_states: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """The decoder layer of Mixtral / Qwen2-MoE, with the residual handed to the MoE layer."""
    if "past_key_values" in kwargs:
        kwargs["cache"] = kwargs.pop("past_key_values")
    residual = hidden_states
    h, _ = self.self_attn(hidden_states=self.input_layernorm(hidden_states), **kwargs)
    h = residual + h
    return self.mlp(self.post_attention_layernorm(h), residual=h)


_FUSED: dict[type, type] = {}


def _fused_class(cls: type) -> type:
    if cls not in _FUSED:
        _FUSED[cls] = type(f"SGL{cls.__name__}", (cls,), {"forward": _fused_forward, "__module__": __name__})
    return _FUSED[cls]


def convert(model: nn.Module, expert_impl: str = "auto", aux_loss_coef: float | None = None) -> nn.Module:
    """Replace every sparse-MoE block of a Hugging Face Mixtral / Qwen2-MoE model by a
    :class:`MoELayer` holding the same weights (in place; returns ``model``).

    The converted model computes the same function (logits equal up to rounding).  Its MoE
    layers take every SGL dispatcher: :class:`~sgl.systems.moe.ExpertParallel`, NetMoE, LSH,
    FSEP.  ``aux_loss_coef`` defaults to ``config.router_aux_loss_coef`` when
    ``config.output_router_logits`` is on, else 0 (the balance loss is then
    :func:`~sgl.systems.moe.moe_aux_loss`, not HF's ``outputs.aux_loss``).

    >>> from transformers import MixtralConfig, MixtralForCausalLM
    >>> torch.manual_seed(0) and None
    >>> hf = MixtralForCausalLM(MixtralConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
    ...     num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, num_local_experts=4))
    >>> ids = torch.randint(0, 64, (2, 5))
    >>> before = hf(ids).logits
    >>> after = convert(hf)(ids).logits
    >>> bool(torch.allclose(before, after, atol=1e-5)), type(hf.model.layers[0].mlp).__name__
    (True, 'MoELayer')
    """
    check_choice(expert_impl, "expert_impl", EXPERT_IMPLS)
    config = getattr(model, "config", None)
    if config is None:
        raise _unsupported(f"{type(model).__name__} has no Hugging Face config (convert takes a transformers model)")
    model_type = _check_config(config)
    _, block_name = SUPPORTED_MODEL_TYPES[model_type]
    cfg = _moe_config(config, model_type, expert_impl, aux_loss_coef)
    converted = 0
    for module in list(model.modules()):
        mlp = getattr(module, "mlp", None)
        if mlp is None or isinstance(mlp, MoELayer) or not hasattr(module, "post_attention_layernorm"):
            continue
        if type(mlp).__name__ == block_name:
            module.mlp = _convert_block(mlp, cfg)
            module.__class__ = _fused_class(type(module))
            converted += 1
        elif hasattr(mlp, "experts") or hasattr(mlp, "gate") and not hasattr(mlp, "gate_proj"):
            raise _unsupported(f"the sparse block {type(mlp).__name__} of a {model_type!r} model is not known "
                               f"(expected {block_name})")
    if not converted and not any(isinstance(m, MoELayer) for m in model.modules()):
        raise _unsupported(f"{type(model).__name__} has no {block_name} to convert")
    return model


def check_hf_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a ``transformers`` config as a dict) names a supported MoE model; returns it."""
    if not isinstance(config, dict):
        raise _unsupported(f"a config dict was expected, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise _unsupported(f"model_type={model_type!r} is not supported")
    import transformers

    try:
        _check_config(transformers.AutoConfig.for_model(**config))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"sgl.systems.moe: the {model_type} config is invalid: {exc}") from exc
    return config


def load_hf_config(path: str) -> dict[str, Any]:
    """Read a ``transformers`` ``config.json`` (a local file; nothing is downloaded) and check it."""
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no transformers config file at {path!r}; pass hf:<path to config.json>")
    try:
        config = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); write it with config.to_json_file()") from exc
    return check_hf_config(config)


def build_hf_model(config: dict[str, Any] | Any, seed: int = 0, expert_impl: str = "auto") -> nn.Module:
    """A freshly initialised (seeded) Mixtral / Qwen2-MoE causal LM from a ``transformers`` config
    (object or ``to_dict()`` dict; nothing is downloaded), converted with :func:`convert`."""
    import transformers

    if isinstance(config, dict):
        config = transformers.AutoConfig.for_model(**check_hf_config(config))
    model_type = _check_config(config)
    cls = getattr(transformers, SUPPORTED_MODEL_TYPES[model_type][0])
    torch.manual_seed(seed)
    return convert(cls(config), expert_impl=expert_impl)
