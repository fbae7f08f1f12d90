"""Spindle's shared LM tower as a tiny Hugging Face Llama: the model's own decoder layers on lifted features.

:class:`LlamaTower` is the ``arch="hf-llama"`` backbone of
:class:`~sgl.systems.data.spindle_model.MultiModalModel`. Each encoder output ``x_m`` (``[rows, H]``)
becomes ``q`` tokens (``Linear(H, q·H)``, as the TinyLM-style backbone does); the ``|M|·q`` tokens are
the tower's input embeddings (a multi-modal LLM's ``inputs_embeds``: no token embedding), then
``layers`` ``transformers`` ``LlamaDecoderLayer`` s (RMSNorm, rotary positions ``0..|M|·q−1``, causal
SDPA attention, SwiGLU MLP), the final RMSNorm and a mean over the tokens → ``[rows, H]``. Rows
never mix, so the tower runs data parallel over any block of rows.

>>> import torch
>>> tower = LlamaTower(hidden=16, inputs=2, query_tokens=3, layers=1)
>>> tower(torch.randn(4, 16), torch.randn(4, 16)).shape
torch.Size([4, 16])
"""
from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["LlamaTower", "tower_config"]


def tower_config(hidden: int, tokens: int, layers: int, heads: int = 2):
    """The ``LlamaConfig`` of the tower: ``heads`` heads (no GQA), MLP ``4·hidden``, no dropout, SDPA."""
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=heads, vocab_size=1,
                       bos_token_id=None, eos_token_id=None, pad_token_id=None,
                       max_position_embeddings=max(tokens, 1), attention_dropout=0.0,
                       attn_implementation="sdpa", use_cache=False)


class LlamaTower(nn.Module):
    """Lift each input to ``query_tokens`` tokens, run Llama decoder layers, norm, mean-pool (module doc)."""

    def __init__(self, hidden: int, inputs: int, query_tokens: int, layers: int, heads: int = 2) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding

        self.q = query_tokens
        self.config = tower_config(hidden, inputs * query_tokens, layers, heads)
        self.lift = nn.ModuleList(nn.Linear(hidden, query_tokens * hidden) for _ in range(inputs))
        self.layers = nn.ModuleList(LlamaDecoderLayer(self.config, i) for i in range(layers))
        self.norm = LlamaRMSNorm(hidden, eps=self.config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(self.config)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        h = torch.cat([lift(x).view(x.shape[0], self.q, -1) for lift, x in zip(self.lift, xs)], 1)
        pos = torch.arange(h.shape[1], device=h.device)[None]
        rope = self.rotary_emb(h, position_ids=pos)
        for layer in self.layers:
            out = layer(h, attention_mask=None, position_ids=pos, position_embeddings=rope)
            h = out[0] if isinstance(out, tuple) else out
        return self.norm(h).mean(1)
