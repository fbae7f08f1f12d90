"""Mixed-adapter batches (gathered LoRA) equal serving each request alone with its adapter."""
import copy

import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.lora import TARGETS, MixedLoRABatch, Request, simulate


@pytest.fixture(scope="module")
def three_adapters(tiny_llama):
    from peft import LoraConfig, get_peft_model

    model, _, ids = tiny_llama
    torch.manual_seed(5)
    cfg = lambda r: LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(TARGETS),  # noqa: E731
                               init_lora_weights=False)
    peft_model = get_peft_model(copy.deepcopy(model), cfg(4), adapter_name="wiki")
    peft_model.add_adapter("positive", cfg(8))        # ranks differ: the stacks are zero-padded
    peft_model.add_adapter("negative", cfg(2))
    peft_model.eval()
    return peft_model, ids[:6 * 40].reshape(6, 40)


@torch.no_grad()
def _alone(model, adapter, row, **kw):
    model.set_adapter(adapter)
    return model(input_ids=row[None], **kw).logits[0]


@pytest.mark.parametrize("dense", [False, True])
def test_mixed_batch_equals_each_request_alone(three_adapters, dense):
    model, rows = three_adapters
    names = ["wiki", "positive", "negative", "positive", "wiki", "negative"]
    server = MixedLoRABatch(model, dense=dense)
    assert all(layer.dense == dense for layer in server.layers)
    mixed = server.logits(rows, names)
    for i, name in enumerate(names):
        alone = _alone(model, name, rows[i])
        torch.testing.assert_close(mixed[i], alone, rtol=1e-4, atol=1e-4)
        other = _alone(model, names[(i + 1) % 3 if names[(i + 1) % 3] != name else 0], rows[i])
        assert (other - alone).abs().max() > 1e-2          # the adapters really differ
    # greedy generation: one mixed batch gives every request's own continuation
    prompts = rows[:, :24]
    out = server.generate(prompts, names, max_new_tokens=6)
    for i, name in enumerate(names):
        model.set_adapter(name)
        own = model.generate(input_ids=prompts[i:i + 1], max_new_tokens=6, do_sample=False, pad_token_id=0)
        assert torch.equal(out[i], own[0]), (i, name)
    # the layers' own (peft) forward is back after the batch
    torch.testing.assert_close(_alone(model, "wiki", rows[0]), mixed[0], rtol=1e-4, atol=1e-4)
    assert not any("forward" in vars(layer.module) for layer in server.layers)


def test_mixed_batch_errors(three_adapters):
    model, rows = three_adapters
    server = MixedLoRABatch(model, ["wiki", "negative"])
    with pytest.raises(ConfigError, match=r"unknown adapter 'positive'; loaded adapters: \['wiki', 'negative'\]"):
        server.logits(rows[:2], ["wiki", "positive"])
    with pytest.raises(ConfigError, match="2 adapter names for a batch of 3 rows"):
        server.logits(rows[:3], ["wiki", "wiki"])
    with pytest.raises(ConfigError, match="unknown adapter 'sports'"):
        MixedLoRABatch(model, ["sports"])
    with pytest.raises(ConfigError, match="peft.PeftModel"):
        MixedLoRABatch(torch.nn.Linear(2, 2))
    model.set_adapter("wiki")
    model.merge_adapter()
    try:
        with pytest.raises(ConfigError, match="unmerge_adapter"):
            MixedLoRABatch(model)
    finally:
        model.unmerge_adapter()


def test_mixed_policy_needs_no_switches():
    reqs = [Request(i, "abc"[i % 3], 0.01 * i, 20, 10 + i % 4) for i in range(60)]
    inlaid = simulate(reqs, "inlaid", switch_s=0.05)
    mixed = simulate(reqs, "mixed", switch_s=0.05)
    assert mixed["switches"] == 0 and inlaid["switches"] > 0
    assert mixed["makespan_s"] < inlaid["makespan_s"]
    # a mixed batch that costs much more per step than a one-adapter batch loses its advantage
    slow = simulate(reqs, "mixed", switch_s=0.05, step_s=0.1)
    assert slow["makespan_s"] > inlaid["makespan_s"]
