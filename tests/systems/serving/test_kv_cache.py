"""PQCache's slow KV tier and its LFU block cache: same results, LFU order, bounded capacity, traffic."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.kv import LFUBlockCache, TieredKVStore, kv_selection, make_selector


def test_lfu_eviction_order_on_a_hand_case():
    cache = LFUBlockCache(capacity=3, block_size=8)
    cache.record("h", [10, 11, 12])
    assert [cache.admit("h", b) for b in (10, 11, 12)] == [(0, None), (1, None), (2, None)]
    cache.record("h", [10])
    cache.record("h", [10, 12, 13])      # uses: 10 -> 3, 11 -> 1, 12 -> 2, 13 -> 1 (not resident)
    assert cache.admit("h", 13) is None          # 1 use is not more than the victim's (11: 1 use)
    cache.record("h", [13])
    assert cache.admit("h", 13) == (1, 11)       # least frequently used (11) goes, its slot is reused
    cache.record("h", [14, 14, 14])      # one step: counted once
    cache.record("h", [14])
    cache.record("h", [14])              # 12 and 13 both at 2 uses; 13 used last; 14 at 3
    assert cache.admit("h", 14) == (2, 12)       # tie on frequency: least recently used (12) goes
    assert cache.resident("h") == [10, 13, 14]
    for _ in range(4):
        cache.record("h", [15])
    assert cache.admit("h", 15, pinned={10, 14}) == (1, 13)   # pinned blocks are never victims
    assert cache.admit("h", 16, pinned={10, 14, 15}) is None   # every slot pinned: not admitted
    assert cache.resident("h") == [10, 14, 15] and cache.occupancy() == 3 and cache.evictions == 3
    assert cache.resident("other") == [] and cache.slot("h", 11) == -1 and cache.frequency("h", 11) == 1
    with pytest.raises(ConfigError, match="already resident"):
        cache.admit("h", 10)
    with pytest.raises(ConfigError, match="capacity"):
        LFUBlockCache(0)


def test_store_reads_equal_the_slow_tier_and_capacity_is_never_exceeded():
    g = torch.Generator().manual_seed(3)
    key, value = torch.randn(2, 2, 300, 8, generator=g), torch.randn(2, 2, 300, 8, generator=g)
    cache = LFUBlockCache(capacity=5, block_size=8)
    store, plain = TieredKVStore(cache), TieredKVStore(None)
    hot = torch.arange(40, 80)           # a frequently retrieved region and a random tail
    for step in range(40):
        hi = 200 + 2 * step
        for s in (store, plain):
            s.offload(0, key, value, 4, hi)
        pos = torch.stack([torch.cat([hot[torch.randperm(40, generator=g)[:10]],
                                      torch.randint(4, hi, (10,), generator=g)]).sort().values
                           for _ in range(4)]).reshape(2, 2, 20)
        k, v = store.read(0, pos)
        idx = pos.unsqueeze(-1).expand(2, 2, 20, 8)
        assert torch.equal(k, key.gather(2, idx)) and torch.equal(v, value.gather(2, idx))
        assert torch.equal(plain.read(0, pos)[0], k)
        assert cache.occupancy() <= 5
    s, p = store.stats(), plain.stats()
    bpt = 2 * 8 * 4
    assert p["hits"] == 0 and p["bytes_fetched"] == p["requested"] * bpt == s["requested"] * bpt
    assert s["bytes_fetched"] == (s["fetched_tokens"] + 8 * s["admitted_blocks"]) * bpt
    assert s["hit_rate"] > 0.3 and cache.evictions > 0   # the hot blocks stay, the tail churns
    assert s["bytes_per_step_no_cache"] == p["bytes_per_step"] == 20 * 4 * bpt
    with pytest.raises(ConfigError, match="offloaded range"):
        store.read(0, torch.full((2, 2, 1), 3))
    with pytest.raises(ConfigError, match="call offload"):
        store.read(1, pos)
    with pytest.raises(ConfigError, match="LFUBlockCache"):
        TieredKVStore(cache=5)


@torch.no_grad()
def _decode_logits(model, ids, prompt, selector, steps=10):
    with kv_selection(model, selector):
        out = model(input_ids=ids[None, :prompt], use_cache=True)
        logits = [out.logits[0, -1]]
        for i in range(steps):
            out = model(input_ids=ids[None, prompt + i: prompt + i + 1], cache=out.cache, use_cache=True)
            logits.append(out.logits[0, -1])
    return torch.stack(logits)


def test_pqcache_results_identical_with_and_without_the_cache(tiny_llama):
    model, _, ids = tiny_llama
    opts = dict(num_subvectors=2, bits=5)
    direct = _decode_logits(model, ids, 500, make_selector("pqcache", 0.1, **opts))
    slow = make_selector("pqcache", 0.1, offload=True, **opts)
    cached = make_selector("pqcache", 0.1, cache_blocks=2, block_size=8, **opts)
    assert torch.equal(_decode_logits(model, ids, 500, slow), direct)
    assert torch.equal(_decode_logits(model, ids, 500, cached), direct)
    st = cached.store.stats()
    assert st["steps"] == 10 and st["requested"] == slow.store.stats()["requested"] > 0
    assert st["hits"] > 0 and cached.cache.evictions > 0 and cached.cache.occupancy() == 2
    assert slow.store.stats()["hits"] == 0 and slow.cache is None
    assert st["misses"] == st["requested"] - st["hits"]
    with pytest.raises(ConfigError, match="cache_blocks"):
        make_selector("pqcache", 0.1, cache_blocks=-1)


def test_train_attention_is_validated(tmp_path):
    from sgl.systems.serving.lm import train_tiny_llama

    with pytest.raises(ConfigError, match="train_attention must be one of"):
        train_tiny_llama(tmp_path, train_attention="flash")
