"""PQKVCache: the middle tokens' KV leave the device, outputs stay those of today's selection."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.kv import KVMetrics, PQKVCache, kv_cache_bytes, kv_selection, make_selector


@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    return LlamaForCausalLM(cfg).eval(), torch.randint(3, 64, (2, 300), generator=torch.Generator().manual_seed(1))


KW = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)


def _generate(model, ids, budget, tiered):
    from transformers import DynamicCache

    sel = make_selector("pqcache", budget, bits=4)
    with kv_selection(model, sel):
        cache = PQKVCache.for_model(model, sel) if tiered else DynamicCache()
        return model.generate(ids, cache=cache, **KW), cache


def test_full_budget_equals_full_attention(llama):
    model, ids = llama
    plain = model.generate(ids[:1], **KW)
    out, cache = _generate(model, ids[:1], 1.0, tiered=True)
    assert torch.equal(out, plain)
    layer = cache.layers[0]
    assert layer.keys is None and layer.sink_k.shape[2] == 4                # the prompt left the device
    assert layer.sink + layer.offloaded + layer.recent_k.shape[2] == cache.get_seq_length() == 305


def test_sparse_budget_equals_todays_selection_with_a_tenth_of_the_bytes(llama):
    model, ids = llama
    old, full = _generate(model, ids, 0.1, tiered=False)
    new, cache = _generate(model, ids, 0.1, tiered=True)
    assert torch.equal(new, old)
    assert cache.device_bytes() <= 0.15 * kv_cache_bytes(full)
    index = cache.selector.state[0]["index"]
    assert index.codes.dtype == torch.uint8 and index.codes.shape[1] >= cache.layers[0].offloaded == cache.layers[0].host_k.shape[2] > 0
    assert cache.host_bytes() + cache.device_bytes() == kv_cache_bytes(cache)


def test_bad_use_is_refused(llama):
    model, ids = llama
    with pytest.raises(ConfigError, match="PQCacheSelector"):
        PQKVCache(make_selector("h2o", 0.1), 2)
    sel = make_selector("pqcache", 0.1, bits=4)
    with pytest.raises(ConfigError, match="inside kv_selection"):
        model.generate(ids[:1], cache=PQKVCache.for_model(model, sel), **KW)
    with kv_selection(model, sel, KVMetrics()), pytest.raises(ConfigError, match="KVMetrics"):
        model.generate(ids[:1], cache=PQKVCache.for_model(model, sel), **KW)
    with kv_selection(model, sel), pytest.raises(ConfigError, match="too short"):
        model.generate(ids[:1, :5], cache=PQKVCache.for_model(model, sel), **KW)
    with kv_selection(model, sel), pytest.raises(ConfigError, match="one token per step"):
        cache = PQKVCache.for_model(model, sel)
        out = model(ids[:1, :50], cache=cache, use_cache=True)
        model(ids[:1, 50:52], cache=out.cache, use_cache=True)
