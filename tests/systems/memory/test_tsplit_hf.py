"""TSPLIT's micro-tensor splitting and keep / offload / recompute plans on Hugging Face Llama layers."""
import copy

import pytest
import torch

pytest.importorskip("transformers")

from sgl.errors import ConfigError  # noqa: E402
from sgl.systems.memory import TSplitBlock, apply_tsplit, plan_tsplit, profile_block_ops  # noqa: E402
from sgl.systems.runtime import ExecConfig  # noqa: E402
from sgl.systems.runtime.models import build_model  # noqa: E402
from sgl.systems.runtime.tiny_lm import lm_loss  # noqa: E402

TOKENS = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(3))


def _run(model, **kwargs):
    model.zero_grad(set_to_none=True)
    loss = lm_loss(model(TOKENS, **kwargs).logits, TOKENS)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def _close(got, ref):
    loss, grads = got
    assert torch.allclose(loss, ref[0], rtol=1e-6, atol=0)
    for g, r in zip(grads, ref[1]):
        assert torch.allclose(g, r, rtol=1e-5, atol=1e-5 * r.abs().max().item())


@pytest.fixture(scope="module")
def llama():
    return build_model(ExecConfig(arch="hf-llama"))


def test_split_hf_layers_equal_plain_training_with_shared_and_per_sample_positions(llama):
    per_sample = {"position_ids": torch.arange(32)[None] + torch.arange(4)[:, None] * 3}
    for kwargs in ({}, per_sample):
        ref = _run(llama, **kwargs)
        for attn, mlp in (("split:2", "split:4"), ("offload", "recompute"), ("recompute", "split:8")):
            model = copy.deepcopy(llama)
            for i, layer in enumerate(model.model.layers):
                model.model.layers[i] = TSplitBlock(layer, attn, mlp)
            _close(_run(model, **kwargs), ref)


def test_profile_and_plan_on_hf_llama(llama):
    costs = profile_block_ops(llama, TOKENS)
    assert [c.name for c in costs[:2]] == ["l0.attn", "l0.mlp"] and len(costs) == 8
    assert all(c.saved > 0 and c.work > 0 for c in costs)
    total = sum(c.saved for c in costs)
    tight = plan_tsplit(costs, budget=0.3 * total, bandwidth=1e8)
    assert tight.peak <= 0.3 * total and set(tight.choice.values()) != {"keep"}
    model = apply_tsplit(copy.deepcopy(llama), tight)
    assert all(isinstance(b, TSplitBlock) for b in model.model.layers)
    _close(_run(model), _run(llama))


def test_hf_layers_store_tinyscript_codes(llama):
    from sgl.comm.compress import TinyScriptQuantizer

    per_sample = {"position_ids": torch.arange(32)[None] + torch.arange(4)[:, None] * 3}
    ref = _run(llama, **per_sample)
    model = copy.deepcopy(llama)
    for i, layer in enumerate(model.model.layers):
        model.model.layers[i] = TSplitBlock(layer, "split:2", "keep", quantizer=TinyScriptQuantizer(8, seed=0))
    loss, grads = _run(model, **per_sample)
    raw = sum(b.store.raw for b in model.model.layers)
    coded = sum(b.store.coded for b in model.model.layers)
    assert torch.equal(loss, ref[0]) and 0.95 * 4 <= raw / coded <= 4
    err = float(torch.cat([(g - r).flatten() for g, r in zip(grads, ref[1])]).norm()
                / torch.cat([r.flatten() for r in ref[1]]).norm())
    assert 0 < err < 0.03


def test_tsplit_refuses_a_layer_it_does_not_know():
    with pytest.raises(ConfigError, match="TSplitBlock needs a TransformerBlock or a Hugging Face"):
        TSplitBlock(torch.nn.Linear(4, 4), "split:2", "keep")
