"""PQCache and the KV-selection baselines on a WikiText-trained tiny Llama's real queries and keys."""
import math

import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.kv import (METHODS, KVBudget, KVMetrics, PQIndex, kv_selection, make_selector,
                                    sparse_decode_attention)
from sgl.systems.serving.kv.evaluate import evaluate_selection, full_logits


@pytest.fixture(scope="module")
def qkv(tiny_llama):
    """Real decode-step q and prompt K, V of layer 1 (captured with the hook's prefill)."""
    model, _, ids = tiny_llama
    seen = {}

    class Capture(type(make_selector("exact"))):
        def prefill(self, layer, query, key, probs):
            seen[layer] = (query, key)

    with torch.no_grad(), kv_selection(model, Capture(1.0)):
        model(input_ids=ids[None, :600])
    query, key = seen[1]
    value = torch.randn_like(key)
    return query[:, :, -1:], key, value


def test_budget_split_and_bad_budgets():
    assert KVBudget(0.1, sink=4).split(2000) == (4, 100, 100)
    assert KVBudget(0.1, sink=4, recent_ratio=0.0).split(2000) == (4, 1, 199)
    for bad in (0, -0.5, 1.5, float("nan"), True):
        with pytest.raises(ConfigError, match="budget"):
            make_selector("pqcache", budget=bad)


def test_full_budget_equals_exact_attention_for_every_method(qkv):
    query, key, value = qkv
    scale = query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    exact = torch.softmax(query @ k.transpose(2, 3) * scale, -1) @ v
    for method in METHODS:
        sel = make_selector(method, 1.0)
        sel.prefill(1, query.expand(-1, -1, key.shape[2], -1), key,
                    torch.full((1, query.shape[1], key.shape[2], key.shape[2]), 1.0 / key.shape[2]))
        mask = sel.select(1, query, key)
        assert mask.all(), method
        out = sparse_decode_attention(query, key, value, mask, scale)[0]
        torch.testing.assert_close(out, exact, rtol=0, atol=0)


def test_pq_recall_against_exact_topk_beats_random(qkv):
    query, key, _ = qkv
    sink, recent, topk = KVBudget(0.1).split(key.shape[2])
    hkv = key.shape[1]
    q = query.reshape(1, hkv, -1, query.shape[-1])
    logits = torch.einsum("bhgd,bhtd->bhgt", q, key[:, :, sink:key.shape[2] - recent])
    truth = torch.softmax(logits / math.sqrt(q.shape[-1]), -1).sum(2).topk(topk, -1).indices

    def recall(method, **kw):
        sel = make_selector(method, 0.1, **kw)
        sel.prefill(1, query, key, None)
        mask = sel.select(1, query, key)[..., sink:key.shape[2] - recent]
        return float(mask.gather(-1, truth).float().mean())

    assert recall("exact") == 1.0
    pq, rnd = recall("pqcache", num_subvectors=4, bits=6), recall("random")
    assert pq > rnd + 0.2, (pq, rnd)
    assert rnd < 0.3


def test_gqa_scores_are_summed_over_the_group():
    g = torch.Generator().manual_seed(1)
    key = 0.1 * torch.randn(1, 2, 64, 8, generator=g)
    eye = 6 * torch.eye(8)
    key[0, 0, 30], key[0, 0, 40], key[0, 1, 20] = eye[0], eye[1], eye[2]
    query = torch.zeros(1, 4, 1, 8)
    # query heads 0, 1 (KV head 0) point at tokens 30 and 40; heads 2, 3 (KV head 1) at token 20
    query[0, 0, 0], query[0, 1, 0], query[0, 2, 0], query[0, 3, 0] = eye[0], eye[1], eye[2], eye[2]
    budget = KVBudget(4 / 64, sink=0, recent_ratio=0.25)   # 1 recent + 3 retrieved
    for method in ("exact", "pqcache"):
        sel = make_selector(method, budget, **({"num_subvectors": 8, "bits": 5} if method == "pqcache" else {}))
        sel.prefill(0, query, key, None)
        mask = sel.select(0, query, key)
        assert mask[0, 0, 30] and mask[0, 0, 40] and not mask[0, 0, 20], method
        assert mask[0, 1, 20] and not mask[0, 1, 30] and not mask[0, 1, 40], method
    index = PQIndex.fit(key[0], num_subvectors=8, bits=5)
    approx = index.scores(query[0].reshape(2, 2, 8))
    assert approx.shape == (2, 2, 64)
    assert approx[0].argmax(-1).tolist() == [30, 40] and approx[1].argmax(-1).tolist() == [20, 20]


def test_pq_codes_new_tokens_leaving_the_window(qkv):
    query, key, _ = qkv
    sel = make_selector("pqcache", 0.1, bits=4)
    sel.prefill(0, query, key[:, :, :400], None)
    index = sel.state[0]["index"]
    assert index.codes.shape[1] == 400 - sel.budget.sink
    before = index.codes.clone()
    sel.select(0, query, key)                      # 600 tokens now: those that left the window get codes
    sink, recent, _ = sel.budget.split(600)
    assert index.codes.shape[1] == 600 - recent - sink
    assert torch.equal(index.codes[:, :396], before)                     # no retraining
    new = key[0, :, 400:600 - recent]
    assert index.codes.dtype == torch.uint8 and torch.equal(index.codes[:, 396:].long(), index.encode(new))
    # nearest centroid: no other code is closer in any sub-space
    cents = index.centroids                                              # [H, m, 2^b, d/m]
    sub = new.reshape(2, new.shape[1], cents.shape[1], -1)
    chosen = cents[torch.arange(2)[:, None, None], torch.arange(cents.shape[1]), index.codes[:, 396:].long()]
    best = (sub.unsqueeze(3) - cents.unsqueeze(1)).pow(2).sum(-1).min(-1).values
    torch.testing.assert_close((sub - chosen).pow(2).sum(-1), best)


def test_subvectors_must_divide_head_dim(qkv):
    query, key, _ = qkv
    with pytest.raises(ConfigError, match="does not divide the head dimension 16"):
        make_selector("pqcache", 0.1, num_subvectors=3).prefill(0, query, key, None)
    with pytest.raises(ConfigError, match="method must be one of"):
        make_selector("sparq")
    with pytest.raises(ConfigError, match="options of quest"):
        make_selector("quest", 0.1, bits=3)


def test_generate_identical_at_full_budget_and_differs_when_sparse(tiny_llama):
    model, _, ids = tiny_llama
    prompt = ids[None, :300]
    kwargs = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    plain = model.generate(prompt, **kwargs)
    for method in ("pqcache", "h2o", "snapkv"):
        with kv_selection(model, make_selector(method, 1.0)):
            assert torch.equal(model.generate(prompt, **kwargs), plain), method
    assert model.config._attn_implementation == "eager"   # restored on exit
    metrics = KVMetrics()
    with kv_selection(model, make_selector("streaming", 0.02, sink=0), metrics):
        model.generate(prompt, **kwargs)
    s = metrics.summary()
    assert s["steps"] == 11 * 2 and s["attended_fraction"] < 0.05 and s["output_error"] > 0.01


def test_teacher_forced_evaluation(tiny_llama):
    model, _, ids = tiny_llama
    ids = ids[:560]
    ref = full_logits(model, ids)
    full = evaluate_selection(model, ids, 520, make_selector("pqcache", 1.0), 20, ref)
    assert full["agreement"] == 1.0 and full["output_error"] < 1e-5
    assert full["ppl"] == pytest.approx(full["ppl_full"], rel=1e-4)
    res = {m: evaluate_selection(model, ids, 520, make_selector(m, 0.1), 20, ref) for m in ("exact", "pqcache",
                                                                                            "random")}
    assert res["exact"]["recall"] == 1.0
    assert res["exact"]["mass"] > res["random"]["mass"]
    assert res["pqcache"]["recall"] > res["random"]["recall"]
    with pytest.raises(ConfigError, match="prompt_len"):
        evaluate_selection(model, ids, 550, make_selector("exact", 0.1), 20, ref)
