"""The small LLaMA-style Transformer the executor runs and the profiler measures.

:class:`TransformerBlock` is a pre-norm decoder layer (causal self-attention, then a gated
SwiGLU or GELU MLP); :class:`TinyLM` stacks ``num_layers`` of them between an embedding and
an LM head.  Shapes come from a :class:`~sgl.systems.parallel.model.TransformerConfig`, so the
model the executor trains is the model the cost model describes.

>>> import torch
>>> from sgl.systems.parallel import get_model_config
>>> model = TinyLM(get_model_config("tiny"))
>>> tokens = torch.zeros(2, 8, dtype=torch.long)
>>> model(tokens).shape[:2], lm_loss(model(tokens), tokens).dim()
(torch.Size([2, 8]), 0)
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl.systems.parallel.model import TransformerConfig

__all__ = ["TransformerBlock", "TinyLM", "lm_loss"]


class TransformerBlock(nn.Module):
    """Pre-norm decoder layer: causal self-attention and a gated (SwiGLU) or GELU MLP.

    ``ffn`` replaces the dense MLP (e.g. a :class:`sgl.systems.moe.MoELayer`): the block computes
    ``x + ffn(ln2(x))``, or ``ffn(ln2(x), x)`` when the module sets ``fuses_residual = True``
    (a layer that moves samples between ranks carries the residual stream with them).
    """

    def __init__(self, cfg: TransformerConfig, ffn: nn.Module | None = None) -> None:
        super().__init__()
        h, f = cfg.hidden_size, cfg.ffn_hidden_size
        self.head_dim = cfg.head_dim
        self.ln1 = nn.LayerNorm(h)
        self.q = nn.Linear(h, h, bias=False)
        self.k = nn.Linear(h, h, bias=False)
        self.v = nn.Linear(h, h, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.ln2 = nn.LayerNorm(h)
        self.ffn = ffn
        if ffn is None:
            self.w1 = nn.Linear(h, f, bias=False)
            self.w3 = nn.Linear(h, f, bias=False) if cfg.gated_mlp else None
            self.w2 = nn.Linear(f, h, bias=False)
        self.checkpoint = False

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        y = self.ln1(x)
        # Under tensor parallelism q/k/v hold heads/tp heads locally: infer the count.
        q = self.q(y).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k(y).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v(y).view(b, s, -1, self.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        y = self.ln2(x)
        if self.ffn is not None:
            return self.ffn(y, x) if getattr(self.ffn, "fuses_residual", False) else x + self.ffn(y)
        hidden = F.silu(self.w1(y)) * self.w3(y) if self.w3 is not None else F.gelu(self.w1(y))
        return x + self.w2(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)


class TinyLM(nn.Module):
    """Embedding, ``num_layers`` :class:`TransformerBlock`, final norm and LM head.

    ``ffn_factory(layer_index)`` builds each block's FFN (``None`` keeps the dense MLP); e.g.
    ``TinyLM(cfg, lambda i: MoELayer(moe_cfg))`` is the MoE model.
    """

    def __init__(self, cfg: TransformerConfig,
                 ffn_factory: Callable[[int], nn.Module | None] | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.blocks = nn.ModuleList(
            TransformerBlock(cfg, None if ffn_factory is None else ffn_factory(i)) for i in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def __repr__(self) -> str:
        c = self.cfg
        return f"TinyLM(layers={c.num_layers}, hidden={c.hidden_size}, heads={c.num_heads}, vocab={c.vocab_size})"


def lm_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy: position ``i`` predicts token ``i + 1``."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
