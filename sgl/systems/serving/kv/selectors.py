"""Which cached tokens a decode step attends: PQCache and the baselines, on the same Q/K.

Every selector sees, per layer, the prompt at prefill (queries, keys, attention probabilities)
and at each decode step the query ``q [B, Hq, 1, d]`` and all keys ``K [B, Hkv, T, d]``; it
returns a mask ``[B, Hkv, T]`` of the attended tokens, shared by the ``G = Hq / Hkv`` query
heads of a KV group (GQA). With ``(s, r, k) = KVBudget.split(T)`` the mask always holds the
``s`` sink tokens and the ``r`` most recent ones; the methods differ in how they choose ``k``
of the middle tokens ``[s, T - r)``:

* ``exact``     top-k of ``Σ_g softmax(q_g K^T / √d)`` (the oracle PQCache approximates);
* ``pqcache``   the same with ``<q, k_t>`` replaced by PQ scores ``Σ_j S[j, code_j(t)]``
  (:class:`~sgl.systems.serving.kv.pq.PQIndex`); tokens leaving the recent window are coded;
* ``h2o``       heavy hitters: top-k accumulated attention, evicted tokens never return;
* ``snapkv``    votes of the last ``window`` prompt queries, max-pooled, fixed after prefill;
* ``quest``     pages of ``page_size`` tokens ranked by ``Σ_i max(q_i min_i, q_i max_i)``;
* ``streaming`` no middle tokens: the whole budget goes to the recent window (StreamingLLM);
* ``random``    k uniformly random middle tokens.

>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> q, k = torch.randn(1, 4, 1, 8, generator=g), torch.randn(1, 2, 100, 8, generator=g)
>>> sel = make_selector("exact", budget=0.2, sink=2)
>>> sel.select(0, q, k).sum(-1).tolist()         # 2 sink + 10 recent + 10 retrieved
[[22, 22]]
>>> stream = make_selector("streaming", budget=0.2, sink=2).select(0, q, k)[0, 0]
>>> stream[:2].all().item(), stream[80:].all().item(), stream[2:80].any().item()
(True, True, False)
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError
from sgl.systems.serving.kv.budget import KVBudget
from sgl.systems.serving.kv.pq import PQIndex, check_subvectors
from sgl.systems.serving.kv.tiered import LFUBlockCache, TieredKVStore, gather_kv

__all__ = ["KVSelector", "ExactTopK", "PQCacheSelector", "H2OSelector", "SnapKVSelector", "QuestSelector",
           "StreamingSelector", "RandomSelector", "make_selector", "METHODS"]


def _grouped(query: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """``[B, Hq, 1, d]`` -> ``[B, Hkv, G, d]`` (query heads ``h*G .. h*G+G-1`` share KV head ``h``)."""
    b, hq, _, d = query.shape
    if hq % kv_heads:
        raise ConfigError(f"{hq} query heads cannot be grouped over {kv_heads} KV heads")
    return query.reshape(b, kv_heads, hq // kv_heads, d)


def group_softmax_scores(logits: torch.Tensor) -> torch.Tensor:
    """``Σ_g softmax(logits[:, :, g])`` over a KV group: ``[B, Hkv, G, M]`` -> ``[B, Hkv, M]``."""
    return torch.softmax(logits.float(), dim=-1).sum(2)


class KVSelector:
    """Base class: the sink + recent frame, and top-k of :meth:`middle_scores` in between."""

    name = "base"
    needs_prefill_probs = False

    def __init__(self, budget: Union[KVBudget, float] = 0.1, *, sink: int = 4, recent_ratio: float = 0.5):
        self.budget = budget if isinstance(budget, KVBudget) else KVBudget(budget, sink, recent_ratio)
        self.state: Dict[int, dict] = {}
        self.active = False         # inside kv_selection (set by the hook)
        self.kv_cache = None        # a PQKVCache built for this selector, if any

    def reset(self) -> None:
        """Forget every layer's state (call between prompts)."""
        self.state = {}

    def prefill(self, layer: int, query: torch.Tensor, key: torch.Tensor, probs: Optional[torch.Tensor]) -> None:
        """See the prompt: ``query [B,Hq,T,d]``, ``key [B,Hkv,T,d]``, ``probs [B,Hq,T,T]`` or None."""
        self.state[layer] = {"prompt_len": key.shape[2]}

    def middle_scores(self, layer: int, q: torch.Tensor, key: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        """Scores ``[B, Hkv, hi - lo]`` of the middle tokens (higher = keep); default: the exact
        group-summed softmax attention (the oracle, :class:`ExactTopK`)."""
        logits = torch.einsum("bhgd,bhtd->bhgt", q.float(), key[:, :, lo:hi].float())
        return group_softmax_scores(logits / math.sqrt(q.shape[-1]))

    def observe(self, layer: int, mask: torch.Tensor, probs: torch.Tensor) -> None:
        """Attention ``probs [B, Hkv, T]`` (summed over a group) the step put on its tokens."""

    def gather(self, layer: int, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor):
        """``(k, v, index, valid)`` of the kept tokens (see :func:`~.tiered.gather_kv`)."""
        return gather_kv(key, value, mask)

    def select(self, layer: int, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """The attended-token mask ``[B, Hkv, T]`` of one decode step."""
        b, hkv, t, _ = key.shape
        sink, recent, topk = self.budget.split(t)
        mask = torch.zeros(b, hkv, t, dtype=torch.bool, device=key.device)
        mask[..., :sink] = True
        mask[..., t - recent:] = True
        lo, hi = sink, t - recent
        if topk >= hi - lo:
            mask[..., lo:hi] = True
        elif topk > 0:
            scores = self.middle_scores(layer, _grouped(query, hkv), key, lo, hi)
            mask[..., lo:hi].scatter_(-1, scores.topk(topk, dim=-1).indices, True)
        return mask


class ExactTopK(KVSelector):
    """The oracle: exact top-k of the group-summed softmax attention over the middle tokens."""

    name = "exact"


class PQCacheSelector(KVSelector):
    """PQCache: top-k of softmax-ed PQ scores; keys coded at prefill and as they leave the window.

    Args:
        num_subvectors: ``m`` sub-vectors per key (must divide the head dimension).
        bits: ``b``: ``2^b`` centroids per sub-space (lowered on short prompts).
        offload: keep the middle tokens' K/V in a slow tier (:class:`~.tiered.TieredKVStore` on
            ``slow_device``) and read the retrieved ones from there at each decode step.
        cache_blocks: capacity (blocks) of the fast-tier LFU block cache per (layer, row, KV
            head); 0 for none. A cache implies ``offload``.
        block_size: tokens per cache block.
    """

    name = "pqcache"

    def __init__(self, budget=0.1, *, sink: int = 4, recent_ratio: float = 0.5, num_subvectors: int = 2,
                 bits: int = 6, offload: bool = False, cache_blocks: int = 0, block_size: int = 16,
                 slow_device: str = "cpu"):
        super().__init__(budget, sink=sink, recent_ratio=recent_ratio)
        self.num_subvectors = check_int(num_subvectors, "num_subvectors", minimum=1)
        self.bits = check_int(bits, "bits", 1, 16)
        cache_blocks = check_int(cache_blocks, "cache_blocks", minimum=0)
        cache = LFUBlockCache(cache_blocks, block_size) if cache_blocks else None
        self.store = TieredKVStore(cache, slow_device) if (offload or cache is not None) else None

    @property
    def cache(self) -> Optional[LFUBlockCache]:
        return self.store.cache if self.store is not None else None

    def reset(self) -> None:
        super().reset()
        if self.store is not None:
            self.store.reset()

    def prefill(self, layer, query, key, probs):
        b, hkv, t, d = key.shape
        check_subvectors(self.num_subvectors, d)
        sink = min(self.budget.sink, t - 1)
        st = {"prompt_len": t, "sink": sink, "index": None}
        if t - sink >= 2:
            st["index"] = PQIndex.fit(key[:, :, sink:].reshape(b * hkv, t - sink, d), self.num_subvectors, self.bits)
        self.state[layer] = st

    def middle_scores(self, layer, q, key, lo, hi):
        b, hkv, t, d = key.shape
        st = self.state.get(layer)
        if st is None or st["index"] is None or st["sink"] != lo:
            self.prefill(layer, q, key[:, :, :hi], None)   # no usable prompt index: code what there is
            st = self.state[layer]
        index: PQIndex = st["index"]
        coded = index.codes.shape[1]
        if lo + coded < hi:   # tokens that left the recent window get codes (no retraining)
            index.append(key[:, :, lo + coded:hi].reshape(b * hkv, hi - lo - coded, d))
        return self.pq_scores(layer, q, lo, hi)

    def pq_scores(self, layer: int, q: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        """Softmax-ed PQ scores ``[B, Hkv, hi - lo]`` of the coded middle tokens for grouped ``q [B, Hkv, G, d]``."""
        b, hkv, g, d = q.shape
        approx = self.state[layer]["index"].scores(q.reshape(b * hkv, g, d)).reshape(b, hkv, g, -1)
        return group_softmax_scores(approx[..., : hi - lo] / math.sqrt(d))

    def gather(self, layer, key, value, mask):
        """Sink and recent tokens from the device KV; the retrieved middle ones through the tiers."""
        if self.store is None:
            return gather_kv(key, value, mask)
        b, hkv, t, _ = key.shape
        sink, recent, _ = self.budget.split(t)
        lo, hi = sink, t - recent
        middle = mask[..., lo:hi]
        n = middle.sum(-1)
        if hi <= lo or int(n.max()) == 0 or int(n.min()) != int(n.max()):
            return gather_kv(key, value, mask)   # nothing retrieved (or ragged rows): no slow-tier read
        self.store.offload(layer, key, value, lo, hi)
        count = int(n.max())
        pos = torch.argsort((~middle).to(torch.int8), dim=-1, stable=True)[..., :count] + lo   # ascending
        k_mid, v_mid = self.store.read(layer, pos)
        k = torch.cat([key[:, :, :lo], k_mid, key[:, :, hi:]], 2)
        v = torch.cat([value[:, :, :lo], v_mid, value[:, :, hi:]], 2)
        index = torch.cat([torch.arange(lo, device=key.device).expand(b, hkv, lo), pos.to(key.device),
                           torch.arange(hi, t, device=key.device).expand(b, hkv, t - hi)], -1)
        return k, v, index, torch.ones_like(index, dtype=torch.bool)


class H2OSelector(KVSelector):
    """H2O: keep the heavy hitters by accumulated attention; a token evicted once stays evicted."""

    name = "h2o"
    needs_prefill_probs = True

    def prefill(self, layer, query, key, probs):
        if probs is None:
            raise ConfigError("h2o needs the prefill attention probabilities")
        b, hkv, t, _ = key.shape
        acc = probs.float().sum(2).reshape(b, hkv, -1, t).sum(2)
        self.state[layer] = {"acc": acc, "alive": torch.ones_like(acc, dtype=torch.bool)}

    def _grow(self, layer, key):
        b, hkv, t, _ = key.shape
        st = self.state.setdefault(layer, {"acc": key.new_zeros(b, hkv, 0, dtype=torch.float32),
                                           "alive": torch.zeros(b, hkv, 0, dtype=torch.bool, device=key.device)})
        extra = t - st["acc"].shape[-1]
        if extra > 0:
            st["acc"] = F.pad(st["acc"], (0, extra))
            st["alive"] = F.pad(st["alive"], (0, extra), value=True)
        return st

    def middle_scores(self, layer, q, key, lo, hi):
        st = self._grow(layer, key)
        return st["acc"][..., lo:hi].masked_fill(~st["alive"][..., lo:hi], -math.inf)

    def select(self, layer, query, key):
        mask = super().select(layer, query, key)
        st = self._grow(layer, key)
        sink, recent, _ = self.budget.split(key.shape[2])
        st["alive"][..., sink:key.shape[2] - recent] &= mask[..., sink:key.shape[2] - recent]
        return mask & st["alive"]   # sink and recent tokens are always alive

    def observe(self, layer, mask, probs):
        st = self.state[layer]
        st["acc"] = st["acc"] + probs.float() * mask


class SnapKVSelector(KVSelector):
    """SnapKV: the last ``window`` prompt queries vote (pooled over ``kernel`` neighbours) once."""

    name = "snapkv"
    needs_prefill_probs = True

    def __init__(self, budget=0.1, *, sink: int = 4, recent_ratio: float = 0.5, window: int = 32, kernel: int = 7):
        super().__init__(budget, sink=sink, recent_ratio=recent_ratio)
        self.window = check_int(window, "window", minimum=1)
        self.kernel = check_int(kernel, "kernel", minimum=1)
        if self.kernel % 2 == 0:
            raise ConfigError(f"kernel must be odd (a centred pooling window), got {kernel}")

    def prefill(self, layer, query, key, probs):
        if probs is None:
            raise ConfigError("snapkv needs the prefill attention probabilities")
        b, hkv, t, _ = key.shape
        w = min(self.window, t)
        votes = probs[:, :, t - w:, : t - w].float().sum(2)                       # [B, Hq, T - w]
        if votes.shape[-1]:
            votes = F.max_pool1d(votes, self.kernel, stride=1, padding=self.kernel // 2)
        votes = votes.reshape(b, hkv, -1, t - w).sum(2)
        self.state[layer] = {"votes": votes}

    def middle_scores(self, layer, q, key, lo, hi):
        votes = self.state[layer]["votes"] if layer in self.state else key.new_zeros(*key.shape[:2], 0)
        scores = torch.full(key.shape[:2] + (hi - lo,), math.inf, device=key.device)  # window: always kept
        n = max(0, min(hi, votes.shape[-1]) - lo)
        scores[..., :n] = votes[..., lo:lo + n]
        return scores


class QuestSelector(KVSelector):
    """Quest: pages ranked by the upper bound ``Σ_i max(q_i min_i, q_i max_i)`` of ``q·k`` in the page."""

    name = "quest"

    def __init__(self, budget=0.1, *, sink: int = 4, recent_ratio: float = 0.5, page_size: int = 16):
        super().__init__(budget, sink=sink, recent_ratio=recent_ratio)
        self.page_size = check_int(page_size, "page_size", minimum=1)

    def select(self, layer, query, key):
        b, hkv, t, d = key.shape
        sink, recent, topk = self.budget.split(t)
        mask = torch.zeros(b, hkv, t, dtype=torch.bool, device=key.device)
        mask[..., :sink] = True
        mask[..., t - recent:] = True
        lo, hi = sink, t - recent
        if topk >= hi - lo:
            mask[..., lo:hi] = True
            return mask
        pages = math.ceil((hi - lo) / self.page_size)
        chosen = min(pages, max(1, topk // self.page_size))
        if topk == 0:
            return mask
        mid = key[:, :, lo:hi].float()
        pad = pages * self.page_size - (hi - lo)
        kmax = F.pad(mid, (0, 0, 0, pad), value=-math.inf).reshape(b, hkv, pages, self.page_size, d).amax(3)
        kmin = F.pad(mid, (0, 0, 0, pad), value=math.inf).reshape(b, hkv, pages, self.page_size, d).amin(3)
        q = _grouped(query, hkv).float().unsqueeze(3)                                # [B, Hkv, G, 1, d]
        bound = torch.maximum(q * kmin.unsqueeze(2), q * kmax.unsqueeze(2)).sum(-1).sum(2)  # [B, Hkv, P]
        top = bound.topk(chosen, dim=-1).indices
        page_mask = torch.zeros(b, hkv, pages, dtype=torch.bool, device=key.device).scatter_(-1, top, True)
        mask[..., lo:hi] = page_mask.repeat_interleave(self.page_size, dim=-1)[..., : hi - lo]
        return mask


class StreamingSelector(KVSelector):
    """StreamingLLM: attention sinks plus a recent window holding the whole budget."""

    name = "streaming"

    def select(self, layer, query, key):
        b, hkv, t, _ = key.shape
        sink, recent, topk = self.budget.split(t)
        mask = torch.zeros(b, hkv, t, dtype=torch.bool, device=key.device)
        mask[..., :sink] = True
        mask[..., t - recent - topk:] = True
        return mask


class RandomSelector(KVSelector):
    """``k`` middle tokens drawn uniformly (seeded), the floor every method must beat."""

    name = "random"

    def __init__(self, budget=0.1, *, sink: int = 4, recent_ratio: float = 0.5, seed: int = 0):
        super().__init__(budget, sink=sink, recent_ratio=recent_ratio)
        self.generator = torch.Generator().manual_seed(check_int(seed, "seed", minimum=0))

    def middle_scores(self, layer, q, key, lo, hi):
        return torch.rand(key.shape[:2] + (hi - lo,), generator=self.generator).to(key.device)


_CLASSES = {cls.name: cls for cls in (ExactTopK, PQCacheSelector, H2OSelector, SnapKVSelector, QuestSelector,
                                      StreamingSelector, RandomSelector)}
#: every selection method, in the order the benchmark prints them
METHODS: Tuple[str, ...] = tuple(_CLASSES)


def make_selector(method: str, budget: float = 0.1, **options) -> KVSelector:
    """The selector called ``method`` (one of :data:`METHODS`) with its options."""
    method = check_choice(method, "method", METHODS)
    try:
        return _CLASSES[method](budget, **options)
    except TypeError as exc:
        raise ConfigError(f"{method}: {exc}; options of {method} are those of "
                          f"{_CLASSES[method].__name__}") from None
