"""The frozen base LobRA fine-tunes, LoRA-wrapped: our TinyLM or a Hugging Face Llama.

``arch="tiny"`` is :class:`~sgl.systems.runtime.tiny_lm.TinyLM`; ``arch="hf-llama"`` a ``transformers``
``LlamaForCausalLM`` with the same shapes (:func:`~sgl.systems.runtime.models.hf_llama_config`,
built in code, nothing downloaded). Both get :func:`~sgl.systems.data.lora.add_multi_lora` on the
same linears: the TinyLM targets (``q``, ``v`` by default) are mapped by name to the Llama layer's
(:data:`TINY_TO_HF`: ``q -> q_proj``, ``w1 -> gate_proj``, ...). The seed fixes the base weights
and then the adapters' initialisation, identically on every rank.

>>> from sgl.systems.parallel.model import TransformerConfig
>>> lora_targets("hf-llama", ("q", "v", "w2"))
('q_proj', 'v_proj', 'down_proj')
>>> model = build_lora_base(TransformerConfig("t", 1, 16, 2, 32, 32, 16), tasks=2, rank=2, arch="hf-llama")
>>> type(model.model.layers[0].self_attn.q_proj).__name__
'MultiLoRALinear'
"""
from __future__ import annotations

from typing import Sequence, Tuple

import torch

from sgl.errors import ConfigError

__all__ = ["LOBRA_ARCHS", "TINY_TO_HF", "lora_targets", "build_lora_base"]

#: the bases LobRA's runtime runs (the varlen executor's archs)
LOBRA_ARCHS = ("tiny", "hf-llama")
#: TinyLM linear -> the Hugging Face Llama linear computing the same thing
TINY_TO_HF = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "w1": "gate_proj", "w3": "up_proj",
              "w2": "down_proj"}


def _check_arch(arch: str) -> str:
    if arch not in LOBRA_ARCHS:
        raise ConfigError(f"LobRA runs arch {list(LOBRA_ARCHS)}, got {arch!r}")
    return arch


def lora_targets(arch: str, targets: Sequence[str] = ("q", "v")) -> Tuple[str, ...]:
    """The linears of ``arch`` that the TinyLM ``targets`` name (unchanged for ``"tiny"``)."""
    if _check_arch(arch) == "tiny":
        return tuple(targets)
    bad = [t for t in targets if t not in TINY_TO_HF]
    if bad:
        raise ConfigError(f"LoRA targets {bad} are not TinyLM linears; use some of {list(TINY_TO_HF)}")
    return tuple(TINY_TO_HF[t] for t in targets)


def build_lora_base(cfg, tasks: int, rank: int, *, arch: str = "tiny", seed: int = 0,
                    targets: Sequence[str] = ("q", "v"), alpha: float = 16.0) -> torch.nn.Module:
    """The seeded frozen base of ``arch`` with shapes ``cfg`` (a ``TransformerConfig``), ``tasks`` LoRA adapters."""
    from sgl.systems.data.lora import add_multi_lora

    names = lora_targets(arch, targets)
    torch.manual_seed(seed)
    if arch == "tiny":
        from sgl.systems.runtime.tiny_lm import TinyLM

        model = TinyLM(cfg)
    else:
        from transformers import LlamaForCausalLM

        from sgl.systems.runtime.models import hf_llama_config

        model = LlamaForCausalLM(hf_llama_config(cfg))
        model.train()
    add_multi_lora(model, tasks, rank, alpha, target_modules=names)
    return model
