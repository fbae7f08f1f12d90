"""PQCache's two KV tiers: the middle tokens offloaded to a slow tier, read through an LFU block cache.

PQCache keeps the KV of the retrievable (middle) tokens in host memory and copies the
retrieved ones to the device at each decode step. :class:`TieredKVStore` is that slow tier
(one ``[B, Hkv, N, d]`` K and V per layer on ``slow_device``, appended as tokens leave the
recent window); :class:`LFUBlockCache` is the bounded fast tier: per namespace (one layer,
batch row and KV head) at most ``capacity`` blocks of ``block_size`` consecutive middle tokens,
evicted least-frequently-used first (ties: least recently used, as PQCache's ``lfu/`` cache).

A decode step that retrieves tokens ``R`` (block ids ``β(t) = (t - sink) // block_size``):

1. every retrieved block's use count ``f`` grows by one; tokens of resident blocks are *hits*
   (read from the fast tier);
2. the missed complete blocks, most used first, are admitted (each fetched whole from the
   slow tier, ``block_size`` tokens) into a free slot, or in place of the LFU block this step
   does not use when ``f(candidate) > f(victim)``;
3. the remaining missed tokens are fetched one by one from the slow tier.

Bytes fetched from the slow tier = (tokens fetched one by one + ``block_size`` x blocks
admitted) x ``2 d`` x element size (K and V). Without a cache every retrieved token is fetched.
The gathered K/V equal the slow tier's (tested): the cache changes traffic, never results.

>>> import torch
>>> cache = LFUBlockCache(capacity=2, block_size=4)
>>> store = TieredKVStore(cache)
>>> k = torch.arange(2 * 20 * 2, dtype=torch.float32).reshape(1, 1, 40, 2)
>>> store.offload(0, k, k, lo=4, hi=40)                 # positions 4..39 go to the slow tier
>>> got, _ = store.read(0, torch.tensor([[[5, 6, 13]]]))   # blocks 0, 0, 2: both admitted
>>> torch.equal(got, k[:, :, [5, 6, 13]]), cache.resident((0, 0, 0)), store.stats()["hits"]
(True, [0, 2], 0)
>>> _ = store.read(0, torch.tensor([[[7, 30]]]))         # block 0 hit; block 6 (f = 1) not admitted
>>> _ = store.read(0, torch.tensor([[[30]]]))            # f(6) = 2 > f(2) = 1: block 6 replaces 2
>>> cache.resident((0, 0, 0)), store.stats()["hits"], store.stats()["admitted_blocks"]
([0, 6], 1, 3)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Hashable, List, Optional, Sequence, Set, Tuple

import torch

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["LFUBlockCache", "TieredKVStore", "gather_kv"]


def gather_kv(key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor):
    """The kept tokens of ``mask [B, Hkv, T]``, ascending: ``(k, v [B, Hkv, n, d], index, valid [B, Hkv, n])``.

    ``n`` is the largest kept count; rows with fewer kept tokens are padded (``valid`` False).
    """
    b, hkv, t = mask.shape
    counts = mask.sum(-1)
    n = int(counts.max())
    index = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[..., :n]   # kept ids, ascending
    valid = torch.arange(n, device=mask.device) < counts.unsqueeze(-1)
    k = key.gather(2, index.unsqueeze(-1).expand(b, hkv, n, key.shape[-1]))
    v = value.gather(2, index.unsqueeze(-1).expand(b, hkv, n, value.shape[-1]))
    return k, v, index, valid


@dataclass
class _Space:
    """One namespace of the cache: block -> slot, use counts and last use (of every block seen), buffers."""

    slot: Dict[int, int] = field(default_factory=dict)
    freq: Dict[int, int] = field(default_factory=dict)
    last: Dict[int, int] = field(default_factory=dict)
    free: List[int] = field(default_factory=list)
    k: Optional[torch.Tensor] = None        # [capacity, block_size, d] on the fast device
    v: Optional[torch.Tensor] = None


class LFUBlockCache:
    """A bounded fast-tier cache of KV blocks with least-frequently-used eviction.

    Each namespace (e.g. ``(layer, batch row, KV head)``) holds at most ``capacity`` blocks in
    fixed ``[capacity, block_size, d]`` K/V buffers. ``f(b)`` counts the decode steps that
    retrieved block ``b`` (:meth:`record`, resident or not). When the namespace is full the
    victim is ``argmin (f, last use)`` over the resident blocks not pinned by the current step,
    and a candidate is admitted only if ``f(candidate) > f(victim)`` (TinyLFU's admission: a
    block retrieved once does not push out a block retrieved often).

    >>> cache = LFUBlockCache(capacity=2, block_size=16)
    >>> cache.record("h", [7, 3])
    >>> [cache.admit("h", b) for b in (7, 3)]          # free slots: (slot, evicted block)
    [(0, None), (1, None)]
    >>> cache.record("h", [7, 9])                      # f: 7 -> 2, 3 -> 1, 9 -> 1
    >>> cache.admit("h", 9) is None                    # f(9) = f(victim 3) = 1: not admitted
    True
    >>> cache.record("h", [9])
    >>> cache.admit("h", 9), cache.resident("h")       # f(9) = 2 > 1: block 3 is evicted
    ((1, 3), [7, 9])
    """

    def __init__(self, capacity: int, block_size: int = 16) -> None:
        self.capacity = check_int(capacity, "capacity", minimum=1)
        self.block_size = check_int(block_size, "block_size", minimum=1)
        self.reset()

    def reset(self) -> None:
        self._spaces: Dict[Hashable, _Space] = {}
        self._tick = 0
        self.evictions = 0

    def _space(self, ns: Hashable) -> _Space:
        if ns not in self._spaces:
            self._spaces[ns] = _Space(free=list(range(self.capacity - 1, -1, -1)))
        return self._spaces[ns]

    def resident(self, ns: Hashable) -> List[int]:
        """The block ids resident in namespace ``ns``, ascending."""
        return sorted(self._spaces[ns].slot) if ns in self._spaces else []

    def slot(self, ns: Hashable, block: int) -> int:
        """The buffer slot of ``block``, ``-1`` when it is not resident."""
        return self._spaces[ns].slot.get(block, -1) if ns in self._spaces else -1

    def frequency(self, ns: Hashable, block: int) -> int:
        return self._spaces[ns].freq.get(block, 0) if ns in self._spaces else 0

    def record(self, ns: Hashable, blocks: Sequence[int]) -> None:
        """One decode step retrieved ``blocks`` (each distinct block counted once)."""
        sp = self._space(ns)
        self._tick += 1
        for b in set(blocks):
            sp.freq[b] = sp.freq.get(b, 0) + 1
            sp.last[b] = self._tick

    def admit(self, ns: Hashable, block: int, pinned: Set[int] = frozenset()) -> Optional[Tuple[int, Optional[int]]]:
        """Make ``block`` resident: ``(slot, evicted block or None)``, or None when it is not admitted."""
        sp = self._space(ns)
        if block in sp.slot:
            raise ConfigError(f"block {block} is already resident in {ns!r}")
        evicted = None
        if not sp.free:
            candidates = [b for b in sp.slot if b not in pinned]
            if not candidates:
                return None
            victim = min(candidates, key=lambda b: (sp.freq[b], sp.last[b], b))
            if sp.freq.get(block, 0) <= sp.freq[victim]:
                return None
            sp.free.append(sp.slot.pop(victim))
            evicted = victim
            self.evictions += 1
        slot = sp.free.pop()
        sp.slot[block] = slot
        sp.freq.setdefault(block, 0)
        sp.last.setdefault(block, self._tick)
        assert len(sp.slot) <= self.capacity
        return slot, evicted

    def buffers(self, ns: Hashable, dim: int, dtype: torch.dtype, device) -> Tuple[torch.Tensor, torch.Tensor]:
        """The namespace's fixed K/V slot buffers ``[capacity, block_size, dim]`` (allocated once)."""
        sp = self._space(ns)
        if sp.k is None:
            sp.k = torch.zeros(self.capacity, self.block_size, dim, dtype=dtype, device=device)
            sp.v = torch.zeros_like(sp.k)
        return sp.k, sp.v

    def occupancy(self) -> int:
        """The largest number of resident blocks over the namespaces (never above ``capacity``)."""
        return max((len(sp.slot) for sp in self._spaces.values()), default=0)


class TieredKVStore:
    """The slow tier of the middle tokens' K/V, read through an optional :class:`LFUBlockCache`.

    Bytes fetched per read: ``2 d x element size`` per token fetched one by one, ``block_size``
    times that per block admitted into the cache; without a cache every requested token.

    Args:
        cache: the fast-tier block cache, or None to fetch every retrieved token.
        slow_device: where the offloaded K/V live (host memory: ``"cpu"``).

    >>> import torch
    >>> key = torch.randn(1, 2, 64, 4)
    >>> store = TieredKVStore(None)
    >>> store.offload(0, key, key, lo=4, hi=60)
    >>> k, _ = store.read(0, torch.tensor([[[4, 9], [30, 59]]]))
    >>> torch.equal(k[0, 1], key[0, 1, [30, 59]]), store.stats()["bytes_fetched"]   # 4 tokens x 2 x 4 x 4 B
    (True, 128)
    """

    def __init__(self, cache: Optional[LFUBlockCache] = None, slow_device="cpu") -> None:
        if cache is not None and not isinstance(cache, LFUBlockCache):
            raise ConfigError(f"cache must be an LFUBlockCache or None, got {type(cache).__name__}")
        self.cache = cache
        self.slow_device = torch.device(slow_device)
        self.reset()

    def reset(self) -> None:
        self.layers: Dict[int, dict] = {}
        self.requested = self.hits = self.fetched_tokens = self.admitted_blocks = self.bytes_fetched = 0
        self.reads: Dict[int, int] = {}
        self.step_bytes: Dict[int, int] = {}        # decode step -> bytes fetched (all layers, heads)
        if self.cache is not None:
            self.cache.reset()

    def offload(self, layer: int, key: torch.Tensor, value: torch.Tensor, lo: int, hi: int) -> None:
        """Make the slow tier of ``layer`` hold positions ``[lo, hi)`` of ``key/value [B, Hkv, T, d]``."""
        st = self.layers.get(layer)
        if st is None or st["start"] != lo or st["k"].shape[:2] != key.shape[:2]:
            st = self.layers[layer] = {"start": lo, "k": key[:, :, lo:lo].to(self.slow_device),
                                       "v": value[:, :, lo:lo].to(self.slow_device), "device": key.device}
        have = lo + st["k"].shape[2]
        if have < hi:   # tokens that left the recent window move to the slow tier
            st["k"] = torch.cat([st["k"], key[:, :, have:hi].to(self.slow_device)], 2)
            st["v"] = torch.cat([st["v"], value[:, :, have:hi].to(self.slow_device)], 2)

    def _bytes_per_token(self, st) -> int:
        return 2 * st["k"].shape[-1] * st["k"].element_size()

    def read(self, layer: int, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """K, V ``[B, Hkv, n, d]`` (on the compute device) of the middle ``positions [B, Hkv, n]``."""
        st = self.layers.get(layer)
        if st is None:
            raise ConfigError(f"layer {layer} has nothing offloaded: call offload() before read()")
        b, hkv, n = positions.shape
        rel = positions.to(self.slow_device) - st["start"]
        stored = st["k"].shape[2]
        if n and (int(rel.min()) < 0 or int(rel.max()) >= stored):
            raise ConfigError(f"positions outside the offloaded range [{st['start']}, {st['start'] + stored})")
        step = self.reads.get(layer, 0)
        self.reads[layer] = step + 1
        self.requested += b * hkv * n
        bpt, before = self._bytes_per_token(st), self.bytes_fetched
        if self.cache is None:
            idx = rel.unsqueeze(-1).expand(b, hkv, n, st["k"].shape[-1])
            self.fetched_tokens += b * hkv * n
            self.bytes_fetched += b * hkv * n * bpt
            out_k, out_v = st["k"].gather(2, idx).to(st["device"]), st["v"].gather(2, idx).to(st["device"])
        else:
            out_k = torch.empty(b, hkv, n, st["k"].shape[-1], dtype=st["k"].dtype, device=st["device"])
            out_v = torch.empty_like(out_k)
            for i in range(b):
                for h in range(hkv):
                    out_k[i, h], out_v[i, h] = self._read_one((layer, i, h), st, i, h, rel[i, h], bpt)
        self.step_bytes[step] = self.step_bytes.get(step, 0) + self.bytes_fetched - before
        return out_k, out_v

    def _read_one(self, ns, st, i: int, h: int, rel: torch.Tensor, bpt: int):
        cache, bs = self.cache, self.cache.block_size
        blocks = (rel // bs).tolist()
        hit_blocks = {blk for blk in set(blocks) if cache.slot(ns, blk) >= 0}
        self.hits += sum(blk in hit_blocks for blk in blocks)
        cache.record(ns, blocks)
        counts: Dict[int, int] = {}
        for blk in blocks:
            if blk not in hit_blocks:
                counts[blk] = counts.get(blk, 0) + 1
        stored = st["k"].shape[2]
        buf_k, buf_v = cache.buffers(ns, st["k"].shape[-1], st["k"].dtype, st["device"])
        pinned = set(hit_blocks)
        # admit the missed complete blocks, most frequent first (then most tokens retrieved now)
        ranked = sorted((c for c in counts if (c + 1) * bs <= stored),
                        key=lambda c: (-cache.frequency(ns, c), -counts[c], c))
        for blk in ranked:
            got = cache.admit(ns, blk, pinned)
            if got is None:
                break
            slot = got[0]
            buf_k[slot] = st["k"][i, h, blk * bs:(blk + 1) * bs].to(st["device"])
            buf_v[slot] = st["v"][i, h, blk * bs:(blk + 1) * bs].to(st["device"])
            pinned.add(blk)
            self.admitted_blocks += 1
            self.bytes_fetched += bs * bpt
        slots = torch.tensor([cache.slot(ns, blk) for blk in blocks], dtype=torch.long)
        offset = (rel % bs).cpu()
        k = torch.empty(len(blocks), st["k"].shape[-1], dtype=st["k"].dtype, device=st["device"])
        v = torch.empty_like(k)
        on = slots >= 0
        k[on.to(k.device)] = buf_k[slots[on].to(k.device), offset[on].to(k.device)]
        v[on.to(k.device)] = buf_v[slots[on].to(k.device), offset[on].to(k.device)]
        off = ~on
        miss = int(off.sum())
        if miss:   # tokens of blocks that stay out of the cache: fetched one by one
            rows = rel.cpu()[off].to(self.slow_device)
            k[off.to(k.device)] = st["k"][i, h, rows].to(st["device"])
            v[off.to(k.device)] = st["v"][i, h, rows].to(st["device"])
            self.fetched_tokens += miss
            self.bytes_fetched += miss * bpt
        return k, v

    def stats(self) -> Dict[str, float]:
        """Hits, misses (tokens), hit rate, bytes fetched in all and per decode step, bytes without a cache.

        ``bytes_per_step_late``: the mean over the second half of the decode steps (the cache warm).
        """
        steps = min(self.reads.values()) if self.reads else 0
        late = [self.step_bytes[s] for s in range(steps // 2, steps)]
        bpt = self._bytes_per_token(next(iter(self.layers.values()))) if self.layers else 0
        return {"requested": self.requested, "hits": self.hits, "misses": self.requested - self.hits,
                "hit_rate": self.hits / self.requested if self.requested else 0.0,
                "fetched_tokens": self.fetched_tokens, "admitted_blocks": self.admitted_blocks,
                "bytes_fetched": self.bytes_fetched, "steps": steps,
                "bytes_per_step": self.bytes_fetched / steps if steps else 0.0,
                "bytes_per_step_late": sum(late) / len(late) if late else 0.0,
                "bytes_per_step_no_cache": self.requested * bpt / steps if steps else 0.0}
