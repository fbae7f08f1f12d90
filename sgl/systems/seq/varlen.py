"""Packed variable-length attention: ``cu_seqlens`` offsets and per-document causal masks.

A packed micro-batch concatenates documents of lengths ``s_1..s_n`` into one row of
``T = Σ s_i`` tokens; ``cu_seqlens = [0, s_1, s_1+s_2, ..., T]`` (FlashAttention's varlen layout).
Token ``t`` belongs to document ``doc(t) = max{i : cu[i] <= t}`` and sits at position
``pos(t) = t - cu[doc(t)]``.  Query ``t`` may attend key ``u`` iff

.. math:: \\mathrm{doc}(u) = \\mathrm{doc}(t) \\;\\wedge\\; u \\le t \\quad(\\text{causal}),

so a packed batch computes exactly what the documents would compute one by one.
Tensors use the packed layout ``[T, heads, head_dim]``.  :func:`attention_block` is one
block of a blockwise attention (scores of queries ``q_idx`` against keys ``k_idx``, global token
indices) returning the output and the log-sum-exp per row, which :func:`merge_blocks` combines
(the online-softmax rule ring attention uses).

>>> import torch
>>> cu = cu_seqlens([3, 2])
>>> cu.tolist(), document_ids(cu).tolist()
([0, 3, 5], [0, 0, 0, 1, 1])
>>> varlen_mask(cu, torch.arange(5), torch.arange(5)).int().tolist()[3]
[0, 0, 0, 1, 0]
>>> q = k = v = torch.randn(5, 2, 4, dtype=torch.float64)
>>> packed = varlen_attention(q, k, v, cu)
>>> alone = varlen_attention(q[3:], k[3:], v[3:], cu_seqlens([2]))
>>> torch.allclose(packed[3:], alone)
True
"""
from __future__ import annotations

from typing import Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from sgl.errors import ConfigError

__all__ = ["cu_seqlens", "document_ids", "varlen_mask", "varlen_attention", "attention_block", "merge_blocks",
           "shard_bounds"]

_MASKED = -1e30          # finite "minus infinity": a fully masked block row gets weight exp(-1e30) = 0


def cu_seqlens(lengths: Union[Sequence[int], torch.Tensor]) -> torch.Tensor:
    """``[0, s_1, s_1+s_2, ..., T]`` as int64 from document lengths (each >= 1)."""
    s = torch.as_tensor(lengths, dtype=torch.int64).reshape(-1)
    if s.numel() == 0:
        raise ConfigError("cu_seqlens needs at least one document length")
    if bool((s < 1).any()):
        raise ConfigError(f"document lengths must be >= 1, got {s.tolist()}")
    return torch.cat([torch.zeros(1, dtype=torch.int64, device=s.device), torch.cumsum(s, 0)])


def _check_cu(cu: torch.Tensor, total: int = -1) -> torch.Tensor:
    cu = torch.as_tensor(cu, dtype=torch.int64).reshape(-1)
    if cu.numel() < 2 or int(cu[0]) != 0 or bool((cu[1:] <= cu[:-1]).any()):
        raise ConfigError(f"cu_seqlens must start at 0 and increase strictly, got {cu.tolist()}")
    if total >= 0 and int(cu[-1]) != total:
        raise ConfigError(f"cu_seqlens ends at {int(cu[-1])} but the packed tensor has {total} tokens")
    return cu


def document_ids(cu: torch.Tensor) -> torch.Tensor:
    """Document index of every packed token."""
    cu = _check_cu(cu)
    return torch.repeat_interleave(torch.arange(cu.numel() - 1, device=cu.device), cu[1:] - cu[:-1])


def varlen_mask(cu: torch.Tensor, q_idx: torch.Tensor, k_idx: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Boolean ``[len(q_idx), len(k_idx)]`` on ``q_idx``'s device: may query token ``q_idx[i]`` see key token ``k_idx[j]``."""
    doc = document_ids(cu).to(q_idx.device)
    allowed = doc[q_idx][:, None] == doc[k_idx][None, :]
    if causal:
        allowed &= k_idx[None, :] <= q_idx[:, None]
    return allowed


def attention_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                    scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(out [Tq, H, d], lse [H, Tq])`` of queries against one key block under ``allowed``."""
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    scores = scores.masked_fill(~allowed[None], _MASKED)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.einsum("hqk,khd->qhd", torch.exp(scores - lse[..., None]), v)
    return out, lse


def merge_blocks(out: torch.Tensor, lse: torch.Tensor, out2: torch.Tensor, lse2: torch.Tensor
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Online-softmax merge: ``lse = log(e^lse + e^lse2)``, ``out = e^(lse-L)·out + e^(lse2-L)·out2``."""
    new = torch.logaddexp(lse, lse2)
    w1 = torch.exp(lse - new).transpose(0, 1)[..., None]
    w2 = torch.exp(lse2 - new).transpose(0, 1)[..., None]
    return w1 * out + w2 * out2, new


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor,
                     causal: bool = True) -> torch.Tensor:
    """Single-process packed attention ``[T, H, d]`` with the per-document mask (the reference)."""
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise ConfigError(f"varlen_attention wants q, k, v of one shape [tokens, heads, head_dim], got "
                          f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    cu = _check_cu(cu, q.shape[0])
    idx = torch.arange(q.shape[0], device=q.device)
    mask = varlen_mask(cu, idx, idx, causal)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                         attn_mask=mask)
    return out.transpose(0, 1)


def shard_bounds(total: int, world: int) -> list:
    """Contiguous near-equal token ranges ``[(start, stop)]`` of ``world`` sequence shards."""
    if world < 1 or total < world:
        raise ConfigError(f"cannot split {total} packed tokens over {world} ranks: give at least one token per rank")
    edges = [total * r // world for r in range(world + 1)]
    return list(zip(edges[:-1], edges[1:]))
