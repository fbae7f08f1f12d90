"""Packed varlen attention that costs ``Σ s_i²``, not ``T²``: documents bucketed by length, then SDPA.

FlashAttention's varlen kernel computes only the diagonal (per-document) blocks of a packed
micro-batch, so its cost is ``Σ_i s_i²``; a dense ``[T, T]`` mask
(:func:`~sgl.systems.seq.varlen.varlen_attention`, the reference) costs ``T²`` whatever the
documents.  :func:`document_attention` gets the varlen cost on any device: documents are sorted
by length and cut into buckets whose padding stays within the documents' own work
(:func:`length_buckets`); each bucket is gathered into
a padded ``[n, H, L_max, d]`` batch (padding at the end) and runs causal SDPA.  A real query never
sees a padding key (padding comes after it), so the result is exact.  :func:`document_ring_attention`
is ring attention (:func:`~sgl.systems.seq.ring.ring_attention`'s shifts and online-softmax merge)
whose blocks also cost only what the documents need: the local block is per-document (SDPA), and a
block from another rank meets only the document that spans into this shard, so only that
document's rows carry a log-sum-exp and are merged.  :func:`document_ulysses_attention`
is the Ulysses all-to-all around :func:`document_attention`.

>>> import torch
>>> from sgl.systems.seq.varlen import cu_seqlens, varlen_attention
>>> q, k, v = (torch.randn(11, 2, 4, dtype=torch.float64) for _ in range(3))
>>> cu = cu_seqlens([3, 1, 7])
>>> torch.allclose(document_attention(q, k, v, cu), varlen_attention(q, k, v, cu))
True
>>> torch.allclose(document_ring_attention(q, k, v, cu), varlen_attention(q, k, v, cu))
True
"""
from __future__ import annotations

from typing import List, Tuple

import torch
import torch.nn.functional as F

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.seq.ring import ring_shift
from sgl.systems.seq.ulysses import heads_to_seq, seq_to_heads
from sgl.systems.seq.varlen import _check_cu, merge_blocks, shard_bounds

__all__ = ["document_attention", "document_ulysses_attention", "document_ring_attention", "length_buckets"]

_MASKED = -1e30


def length_buckets(lengths: torch.Tensor, slack: float = 1.0, floor: int = 2 ** 15) -> List[torch.Tensor]:
    """Document indices in length order, cut into buckets whose padded attention work stays small.

    A bucket of ``n`` documents padded to its longest ``L`` costs ``n·L²``; a document joins the
    current bucket while the padding ``n·L² - Σ s²`` is at most ``max(slack·Σ s², floor)``
    (``floor`` in tokens²: below it another SDPA call costs more than the padding).
    """
    order = torch.argsort(lengths.cpu(), stable=True)
    sorted_len = lengths.cpu()[order].tolist()
    out, start, squares = [], 0, 0
    for i, s in enumerate(sorted_len):
        n = i - start + 1
        if i > start and n * s * s - (squares + s * s) > max(slack * (squares + s * s), floor):
            out.append(order[start:i])
            start, squares = i, 0
        squares += s * s
    out.append(order[start:])
    return out


def _bucketed(q, k, v, cu, with_lse: bool, scale: float):
    cu = _check_cu(cu, q.shape[0]).to(q.device)
    lengths = cu[1:] - cu[:-1]
    out = q.new_zeros(q.shape)
    lse = q.new_full((q.shape[0], q.shape[1]), _MASKED) if with_lse else None      # [T, H] here
    for docs in length_buckets(lengths):
        docs = docs.to(q.device)
        top = int(lengths[docs].max())
        offs = torch.arange(top, device=q.device)
        idx = cu[docs][:, None] + offs[None, :]                        # [n, L]
        real = offs[None, :] < lengths[docs][:, None]
        idx = torch.where(real, idx, cu[docs][:, None])                 # padding reads a real row, masked below
        qb, kb, vb = (t[idx].permute(0, 2, 1, 3) for t in (q, k, v))    # [n, H, L, d]
        if with_lse:
            scores = torch.einsum("nhqd,nhkd->nhqk", qb, kb) * scale
            causal = torch.ones(top, top, dtype=torch.bool, device=q.device).tril()
            scores = scores.masked_fill(~causal, _MASKED)
            l = torch.logsumexp(scores, dim=-1)                          # [n, H, L]
            o = torch.einsum("nhqk,nhkd->nhqd", torch.exp(scores - l[..., None]), vb)
        else:
            o = F.scaled_dot_product_attention(qb, kb, vb, is_causal=True, scale=scale)
        flat = idx[real]
        out = out.index_put((flat,), o.permute(0, 2, 1, 3)[real])
        if with_lse:
            lse = lse.index_put((flat,), l.permute(0, 2, 1)[real])
    return out, (lse.t() if with_lse else None)


def document_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
    """Causal packed attention ``[T, H, d]`` with the per-document mask, at ``Σ s_i²`` cost."""
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise ConfigError(f"document_attention wants q, k, v of one shape [tokens, heads, head_dim], got "
                          f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    return _bucketed(q, k, v, cu, False, q.shape[-1] ** -0.5)[0]


def document_ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor,
                               group=None) -> torch.Tensor:
    """Ulysses SP (:mod:`~sgl.systems.seq.ulysses`) with :func:`document_attention` on the gathered heads."""
    world = comm.get_world_size(group)
    cu = _check_cu(cu)
    sizes = [b - a for a, b in shard_bounds(int(cu[-1]), world)]
    if q.shape[0] != sizes[comm.get_rank(group)]:
        raise ConfigError(f"this rank holds {q.shape[0]} tokens; shard_bounds gives it {sizes[comm.get_rank(group)]}")
    full = [seq_to_heads(t, sizes, group) for t in (q, k, v)]
    return heads_to_seq(document_attention(*full, cu), sizes, group)


def _cross_block(q, k, v, cu, q_range: Tuple[int, int], k_range: Tuple[int, int], scale: float):
    """Rows of queries ``q_range`` against keys ``k_range`` (an earlier shard): only a spanning document."""
    # the received block always joins the graph (with weight 0 if unused), so every rank runs the
    # ring shift's backward, the same collectives in the same order
    out = q.new_zeros(q.shape) + 0.0 * (k[:1].sum() + v[:1].sum())
    lse = q.new_full((q.shape[1], q.shape[0]), _MASKED)
    (qa, qb), (ka, kb) = q_range, k_range
    if ka >= qa:                                  # a later shard: causally invisible
        return out, lse
    cu_l = cu.tolist()
    doc = max(i for i in range(len(cu_l) - 1) if cu_l[i] <= qa)
    start, stop = cu_l[doc], cu_l[doc + 1]
    if start >= kb:                               # the document at the start of this shard began after k's shard
        return out, lse
    rows = slice(0, min(stop, qb) - qa)
    cols = slice(max(start, ka) - ka, kb - ka)
    scores = torch.einsum("qhd,khd->hqk", q[rows], k[cols]) * scale
    l = torch.logsumexp(scores, dim=-1)
    o = torch.einsum("hqk,khd->qhd", torch.exp(scores - l[..., None]), v[cols])
    out = torch.cat([o, out[rows.stop:]], dim=0)
    lse = torch.cat([l, lse[:, rows.stop:]], dim=1)
    return out, lse


def document_ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor,
                            group=None) -> torch.Tensor:
    """Ring attention of this rank's contiguous shard; each block costs only its documents (module doc)."""
    world, rank = comm.get_world_size(group), comm.get_rank(group)
    cu = _check_cu(cu)
    bounds = shard_bounds(int(cu[-1]), world)
    start, stop = bounds[rank]
    if q.shape[0] != stop - start:
        raise ConfigError(f"this rank holds {q.shape[0]} tokens; shard_bounds gives it {stop - start}")
    scale = q.shape[-1] ** -0.5
    local_cu = torch.unique(torch.clamp(cu, start, stop)) - start
    out = _bucketed(q, k, v, local_cu, False, scale)[0]
    cu_l = cu.tolist()
    spans = start > 0 and max(c for c in cu_l if c <= start) < start      # the first document began earlier
    head = int(local_cu[1])
    if spans:                      # only its rows meet other shards' keys: they need the log-sum-exp
        h_out, h_lse = _bucketed(q[:head], k[:head], v[:head], local_cu[:2], True, scale)
    kv = torch.stack([k, v], dim=1)
    for step in range(1, world):
        src = (rank - step) % world
        kv = ring_shift(kv, bounds[src][1] - bounds[src][0], group)
        o, l = _cross_block(q, kv[:, 0], kv[:, 1], cu, (start, stop), bounds[src], scale)
        if spans:
            h_out, h_lse = merge_blocks(h_out, h_lse, o[:head], l[:, :head])
        else:
            out = out + 0.0 * o[:1].sum()
    return torch.cat([h_out, out[head:]], dim=0) if spans else out
