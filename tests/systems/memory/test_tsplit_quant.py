"""TSPLIT with a quantizer: None changes nothing (bit for bit), TinyScript codes shrink stored bytes ~32/b and
training follows exact training; a bad quantizer is refused."""
import copy

import pytest
import torch

from sgl.comm.compress import TinyScriptQuantizer
from sgl.errors import ConfigError
from sgl.systems.memory import CodedStore, HostStore, OpCost, TSplitBlock, apply_tsplit, plan_tsplit
from sgl.systems.memory.tsplit import TSplitPlan
from sgl.systems.parallel import get_model_config
from sgl.systems.runtime import TinyLM, lm_loss

TOKENS = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(3))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyLM(get_model_config("tiny"))


def _grads(model):
    model.zero_grad(set_to_none=True)
    loss = lm_loss(model(TOKENS), TOKENS)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _wrapped(model, attn, mlp, **kwargs):
    m = copy.deepcopy(model)
    for i in range(len(m.blocks)):
        m.blocks[i] = TSplitBlock(m.blocks[i], attn, mlp, **kwargs)
    return m


def _rel(grads, ref):
    return float(torch.cat([(g - r).flatten() for g, r in zip(grads, ref)]).norm()
                 / torch.cat([r.flatten() for r in ref]).norm())


def _bytes(m):
    return (sum(b.store.raw + b.host_store.raw for b in m.blocks),
            sum(b.store.coded + b.host_store.coded for b in m.blocks))


def test_quantizer_none_is_bit_identical(model):
    plain = _grads(model)
    for attn, mlp in (("keep", "keep"), ("offload", "recompute")):
        m = _wrapped(model, attn, mlp, quantizer=None)
        assert all(isinstance(b.store, HostStore) for b in m.blocks)
        loss, grads = _grads(m)
        assert torch.equal(loss, plain[0]) and all(torch.equal(g, r) for g, r in zip(grads, plain[1]))
    # splitting reorders sums; with quantizer=None it is the very same computation as without the argument
    before = _grads(_wrapped(model, "split:2", "split:4"))
    loss, grads = _grads(_wrapped(model, "split:2", "split:4", quantizer=None))
    assert torch.equal(loss, before[0]) and all(torch.equal(g, r) for g, r in zip(grads, before[1]))


@pytest.mark.parametrize("attn,mlp,widths", [("keep", "split:4", (8, 4, 2)), ("offload", "recompute", (4,))])
def test_codes_shrink_stored_bytes_by_32_over_b(model, attn, mlp, widths):
    ref_loss, ref = _grads(model)
    errs = {}
    for bits in widths:
        m = _wrapped(model, attn, mlp, quantizer=TinyScriptQuantizer(bits, seed=0))
        loss, grads = _grads(m)
        raw, coded = _bytes(m)
        assert raw > 0 and 0.95 * 32 / bits <= raw / coded <= 32 / bits, (bits, raw / coded)
        assert all(b.store.current == 0 and b.host_store.current == 0 for b in m.blocks)  # all given back
        assert torch.equal(loss, ref_loss)   # the forward is untouched; backward sees decoded values
        errs[bits] = _rel(grads, ref)
    assert 0 < errs[4] < 0.3, errs                 # applied, and backward still close
    if len(widths) == 3:
        assert errs[8] < 0.03 and errs[8] < errs[4] < errs[2], errs


def test_training_with_4_bit_codes_follows_exact_training(model):
    plan = TSplitPlan({f"l{i}.{p}": o for i in range(4) for p, o in (("attn", "split:2"), ("mlp", "split:4"))}, 0, 0)
    finals = {}
    for name, q in (("exact", None), ("tinyscript4", TinyScriptQuantizer(4, seed=0))):
        m = apply_tsplit(copy.deepcopy(model), plan, quantizer=q)
        opt = torch.optim.Adam(m.parameters(), lr=3e-3)
        for _ in range(6):
            opt.zero_grad()
            loss = lm_loss(m(TOKENS), TOKENS)
            loss.backward()
            opt.step()
        with torch.no_grad():
            finals[name] = float(lm_loss(m(TOKENS), TOKENS))
        if q is not None:
            assert all(isinstance(b.store, CodedStore) and b.store.coded > 0 for b in m.blocks)
    with torch.no_grad():
        first = float(lm_loss(model(TOKENS), TOKENS))
    assert finals["exact"] < first - 0.05            # it learns
    assert finals["tinyscript4"] != finals["exact"]  # the codes were applied ...
    # ... and training follows: within 5 % of what exact training gained (measured: ~2.5 %)
    assert abs(finals["tinyscript4"] - finals["exact"]) < 0.05 * (first - finals["exact"])


def test_planner_counts_coded_bytes():
    costs = [OpCost(f"l{i}.mlp", saved=100, work=80, time=1.0) for i in range(2)]
    exact = plan_tsplit(costs, budget=200, bandwidth=50)
    coded = plan_tsplit(costs, budget=200, bandwidth=50, stored_fraction=4 / 32)
    assert sorted(exact.choice.values()) == ["keep", "recompute"] and exact.extra_time > 0
    assert set(coded.choice.values()) == {"keep"} and coded.extra_time == 0 and coded.peak == 2 * 100 / 8 + 80
    with pytest.raises(ConfigError, match="stored_fraction"):
        plan_tsplit(costs, budget=200, bandwidth=50, stored_fraction=0)


class _NoDecode:
    def encode(self, t):
        return t.to(torch.uint8)


class _FloatPayload:
    def encode(self, t):
        return t.clone()

    def decode(self, payload, numel):
        return payload


class _Raises(_FloatPayload):
    def encode(self, t):
        raise RuntimeError("boom")


@pytest.mark.parametrize("bad,match", [(_NoDecode(), "no encode/decode"), (_FloatPayload(), "returned Tensor"),
                                       (_Raises(), "failed on 16 values"), ("tinyscript", "no encode/decode")])
def test_bad_quantizer_is_refused(model, bad, match):
    with pytest.raises(ConfigError, match=match):
        TSplitBlock(model.blocks[0], "keep", "split:2", quantizer=bad)
    with pytest.raises(ConfigError, match=match):
        apply_tsplit(copy.deepcopy(model), TSplitPlan({}, 0, 0), quantizer=bad)


def test_bad_options_are_refused(model):
    with pytest.raises(ConfigError, match="min_numel"):
        TSplitBlock(model.blocks[0], quantizer=TinyScriptQuantizer(4), min_numel=0)
    with pytest.raises(ConfigError, match="at least 1"):
        TSplitBlock(model.blocks[0], "split:0")
