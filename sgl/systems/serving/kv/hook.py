"""Sparse KV attention inside a Hugging Face decoder, so ``model.generate()`` runs with a selector.

The hook is a registered ``transformers`` attention function (``attn_implementation="sgl_kv"``):
the model's own cache (``DynamicCache``) keeps every key and value, and the hook decides what
each decode step reads. At prefill it runs exact (eager) attention and hands the prompt's
queries, keys and attention probabilities to the selector (PQ codebooks, H2O scores, SnapKV
votes); at a decode step (one query) it attends only the tokens the selector's mask keeps:

    o = softmax(q K_S^T / √d + mask_S) V_S,   S = selector(q, K)  (shared by a KV group).

With a full budget ``S`` is every token, the gathered ``K_S = K`` and the output is the eager
output bit for bit. :class:`KVMetrics`, when given, also computes exact attention each step and
records recall@k against exact top-k, the attention mass ``S`` covers and the output error.

>>> import torch
>>> from transformers import LlamaConfig, LlamaForCausalLM
>>> from sgl.systems.serving.kv import make_selector
>>> torch.manual_seed(0) and None
>>> cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
...                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
>>> model = LlamaForCausalLM(cfg).eval()
>>> ids = torch.randint(3, 50, (1, 40))
>>> plain = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
>>> with kv_selection(model, make_selector("pqcache", budget=1.0, bits=3)):
...     same = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
>>> torch.equal(plain, same)
True
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

import torch

from sgl.errors import ConfigError
from sgl.systems.serving.kv.selectors import KVSelector, _grouped, group_softmax_scores
from sgl.systems.serving.kv.tiered import gather_kv

__all__ = ["kv_selection", "sparse_decode_attention", "gather_kv", "attend", "KVMetrics", "ATTN_NAME"]

#: the name the hook is registered under in ``transformers``' attention interfaces
ATTN_NAME = "sgl_kv"


@dataclass
class KVMetrics:
    """Per-step quality of the selection against exact attention on the same q, K, V (means)."""

    recall: List[float] = field(default_factory=list)
    mass: List[float] = field(default_factory=list)
    output_error: List[float] = field(default_factory=list)
    attended: List[float] = field(default_factory=list)

    def summary(self) -> dict:
        mean = lambda xs: float(sum(xs) / len(xs)) if xs else float("nan")  # noqa: E731
        return {"recall": mean(self.recall), "mass": mean(self.mass), "output_error": mean(self.output_error),
                "attended_fraction": mean(self.attended), "steps": len(self.mass)}


def _repeat(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def _eager(query, key, value, attention_mask, scaling, groups):
    k, v = _repeat(key, groups), _repeat(value, groups)
    weights = torch.matmul(query, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask[:, :, :, : k.shape[-2]]
    weights = torch.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, v), weights


def attend(query: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index: torch.Tensor, valid: torch.Tensor,
           scaling: float, attention_mask: Optional[torch.Tensor] = None, length: Optional[int] = None):
    """``softmax(q k^T * scaling + mask) v`` of one decode query over gathered ``k, v [B, Hkv, n, d]``."""
    b, hkv, n = index.shape
    groups = query.shape[1] // hkv
    logits = torch.matmul(query, _repeat(k, groups).transpose(2, 3)) * scaling
    if attention_mask is not None:
        t = length if length is not None else attention_mask.shape[-1]
        cols = attention_mask[:, 0, -1, :t].expand(b, hkv, t).gather(-1, index)
        logits = logits + _repeat(cols, groups).unsqueeze(2)
    if not bool(valid.all()):
        logits = logits.masked_fill(~_repeat(valid, groups).unsqueeze(2), float("-inf"))
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(probs, _repeat(v, groups)), probs


def sparse_decode_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                            scaling: float, attention_mask: Optional[torch.Tensor] = None):
    """Attention of one decode query ``[B, Hq, 1, d]`` over the tokens ``mask [B, Hkv, T]`` keeps.

    Returns ``(output [B, Hq, 1, d], probs [B, Hq, 1, n], index [B, Hkv, n], valid [B, Hkv, n])``
    with ``n`` the largest kept count (rows with fewer kept tokens are padded and masked out).
    """
    k, v, index, valid = gather_kv(key, value, mask)
    out, probs = attend(query, k, v, index, valid, scaling, attention_mask, key.shape[2])
    return out, probs, index, valid


def _record(metrics: KVMetrics, selector: KVSelector, query, key, value, attention_mask, scaling, mask, out):
    groups = query.shape[1] // key.shape[1]
    exact, probs = _eager(query, key, value, attention_mask, scaling, groups)
    keep = _repeat(mask, groups).unsqueeze(2).to(probs.dtype)                  # [B, Hq, 1, T]
    metrics.mass.append(float((probs * keep).sum(-1).mean()))
    err = (out - exact).flatten(2).norm(dim=-1) / exact.flatten(2).norm(dim=-1).clamp_min(1e-12)
    metrics.output_error.append(float(err.mean()))
    metrics.attended.append(float(mask.float().mean()))
    t = key.shape[2]
    sink, recent, topk = selector.budget.split(t)
    if 0 < topk < t - recent - sink:
        b, hkv = key.shape[:2]
        logits = torch.einsum("bhgd,bhtd->bhgt", query.reshape(b, hkv, groups, -1).float(),
                              key[:, :, sink:t - recent].float())
        truth = group_softmax_scores(logits * scaling).topk(topk, dim=-1).indices
        metrics.recall.append(float(mask[..., sink:t - recent].gather(-1, truth).float().mean()))


def _tiered_decode(selector, layer, query, attention_mask, scaling):
    """One decode step over a :class:`~.cache.PQKVCache` layer: PQ scores from the codes, selected
    middle tokens fetched from the host tier, ``sink + selected + recent`` attended."""
    t = layer.length
    sink, recent, topk = selector.budget.split(t)
    lo, hi = sink, t - recent
    b, hkv, _, d = layer.recent_k.shape
    dev = layer.recent_k.device
    if layer.sink != lo or layer.offloaded != hi - lo:
        raise ConfigError(f"PQKVCache tiers out of step with the budget at {t} tokens (a cache reused "
                          f"across prompts? build one per generate() call)")
    if topk >= hi - lo:
        pos = torch.arange(lo, hi, device=dev).expand(b, hkv, hi - lo)
    elif topk > 0:
        scores = selector.pq_scores(layer.layer_idx, _grouped(query, hkv), lo, hi)
        pos = scores.topk(topk, dim=-1).indices.sort(-1).values + lo
    else:
        pos = torch.empty(b, hkv, 0, dtype=torch.long, device=dev)
    k_mid, v_mid = layer.fetch(pos)
    k = torch.cat([layer.sink_k, k_mid, layer.recent_k], 2)
    v = torch.cat([layer.sink_v, v_mid, layer.recent_v], 2)
    index = torch.cat([torch.arange(lo, device=dev).expand(b, hkv, lo), pos,
                       torch.arange(hi, t, device=dev).expand(b, hkv, t - hi)], -1)
    valid = torch.ones_like(index, dtype=torch.bool)
    out, _ = attend(query, k, v, index, valid, scaling, attention_mask, t)
    return out


def _tier(selector, module, key):
    """The :class:`~.cache.PQKVCache` layer that handed the hook ``key``, or None (a full cache)."""
    cache = getattr(selector, "kv_cache", None)
    if cache is None or module.layer_idx >= len(cache.layers):
        return None
    layer = cache.layers[module.layer_idx]
    return layer if key is layer.keys or key is layer.recent_k else None


def _attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    hook = getattr(module, "_sgl_kv_hook", None)
    groups = query.shape[1] // key.shape[1]
    tier = _tier(hook.selector, module, key) if hook is not None else None
    if tier is not None and hook.metrics is not None:
        raise ConfigError("KVMetrics compares with exact attention over the full KV, which a PQKVCache does not "
                          "hold: measure with the model's own cache")
    if hook is None or query.shape[2] > 1:
        out, weights = _eager(query, key, value, attention_mask, scaling, groups)
        if hook is not None and key.shape[2] == query.shape[2]:     # a fresh prompt: the selector sees it
            hook.selector.prefill(module.layer_idx, query, key, weights)
            if tier is not None:
                tier.settle()          # the middle tokens leave the device
        return out.transpose(1, 2).contiguous(), weights
    if tier is not None:
        out = _tiered_decode(hook.selector, tier, query, attention_mask, scaling)
        return out.transpose(1, 2).contiguous(), None
    selector, metrics = hook.selector, hook.metrics
    mask = selector.select(module.layer_idx, query, key)
    k, v, index, valid = selector.gather(module.layer_idx, key, value, mask)   # PQCache: via its KV tiers
    out, probs = attend(query, k, v, index, valid, scaling, attention_mask, key.shape[2])
    b, hkv, n = index.shape
    grouped = probs.reshape(b, hkv, groups, n).float().sum(2) * valid
    seen = torch.zeros(b, hkv, key.shape[2], device=key.device).scatter_add_(-1, index, grouped)
    selector.observe(module.layer_idx, mask, seen)
    if metrics is not None:
        _record(metrics, selector, query, key, value, attention_mask, scaling, mask, out)
    return out.transpose(1, 2).contiguous(), None


@dataclass
class _Hook:
    selector: KVSelector
    metrics: Optional[KVMetrics]


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(ATTN_NAME, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTN_NAME, eager_mask)


def _attention_modules(model) -> list:
    mods = [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "num_key_value_groups")]
    if not mods:
        raise ConfigError(f"{type(model).__name__} has no decoder attention layers (layer_idx, "
                          f"num_key_value_groups): kv_selection supports Llama/Mistral-style decoders")
    return mods


@contextlib.contextmanager
def kv_selection(model, selector: KVSelector, metrics: Optional[KVMetrics] = None) -> Iterator[KVSelector]:
    """Run ``model`` (forward or ``generate()``) with ``selector`` choosing each decode step's KV.

    The selector is reset on entry; the model's attention implementation is restored on exit.
    With ``cache=PQKVCache.for_model(model, selector)`` (passed to ``generate()`` or the forward)
    only the sink, recent and selected tokens' KV are on the device (:mod:`~.cache`).
    """
    if not isinstance(selector, KVSelector):
        raise ConfigError(f"selector must be a KVSelector (see make_selector), got {type(selector).__name__}")
    _register()
    modules = _attention_modules(model)
    previous = model.config._attn_implementation
    selector.reset()
    for m in modules:
        m._sgl_kv_hook = _Hook(selector, metrics)
    model.set_attn_implementation(ATTN_NAME)
    selector.active = True
    try:
        yield selector
    finally:
        selector.active = False
        model.set_attn_implementation(previous)
        for m in modules:
            del m._sgl_kv_hook
