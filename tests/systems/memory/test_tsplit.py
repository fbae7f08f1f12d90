"""TSPLIT: micro-tensor execution equals the plain op; the planner fits its budget or names the minimum."""
import copy

import pytest
import torch

from sgl.errors import ConfigError, PlanError
from sgl.systems.memory import (OpCost, TSplitBlock, apply_tsplit, live_lower_bound, plan_tsplit,
                                profile_block_ops, record_trace)
from sgl.systems.memory.offload import tokenwise_part
from sgl.systems.parallel import get_model_config
from sgl.systems.runtime import TinyLM, TransformerBlock, lm_loss


def _grads(model, tokens):
    model.zero_grad(set_to_none=True)
    loss = lm_loss(model(tokens), tokens)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("attn,mlp", [("split:2", "split:4"), ("offload", "recompute"), ("recompute", "offload"),
                                      ("keep", "split:8")])
def test_split_blocks_equal_plain_training(attn, mlp):
    torch.manual_seed(0)
    model = TinyLM(get_model_config("tiny"))
    tokens = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(3))
    ref_loss, ref = _grads(model, tokens)
    split = copy.deepcopy(model)
    for i in range(len(split.blocks)):
        split.blocks[i] = TSplitBlock(split.blocks[i], attn, mlp)
    loss, grads = _grads(split, tokens)
    assert torch.allclose(loss, ref_loss, rtol=1e-6, atol=0)
    for g, r in zip(grads, ref):
        assert torch.allclose(g, r, rtol=1e-5, atol=1e-5 * r.abs().max().item())


def test_split_mlp_lowers_its_peak():
    torch.manual_seed(0)
    block = TransformerBlock(get_model_config("tiny"))
    x = torch.randn(4, 32, 64, requires_grad=True)
    a = torch.randn(4, 32, 64, requires_grad=True)
    xa = torch.cat([x, a], -1).detach().requires_grad_(True)

    def peak(opt):
        b = TSplitBlock(block, "keep", opt)
        fn = lambda t: tokenwise_part(block, t[..., :64], t[..., 64:])  # noqa: E731
        return live_lower_bound(record_trace(lambda _: torch.autograd.grad(b._run(opt, fn, xa, 1).sum(), xa)))

    assert peak("split:4") < peak("keep")


def test_planner_uses_profiles_and_budget_errors():
    torch.manual_seed(0)
    model = TinyLM(get_model_config("tiny"))
    tokens = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(4))
    costs = profile_block_ops(model, tokens)
    assert len(costs) == 8 and all(c.saved > 0 and c.work > 0 for c in costs)
    total = sum(c.saved for c in costs)
    roomy = plan_tsplit(costs, budget=10 * total, bandwidth=1e9)
    assert set(roomy.choice.values()) == {"keep"} and roomy.extra_time == 0
    tight = plan_tsplit(costs, budget=total / 3, bandwidth=1e9)
    assert tight.peak <= total / 3 and tight.extra_time > 0
    ref_loss, ref = _grads(model, tokens)
    loss, grads = _grads(apply_tsplit(copy.deepcopy(model), tight), tokens)
    assert torch.allclose(loss, ref_loss, rtol=1e-6, atol=0)
    with pytest.raises(PlanError, match="minimum working set"):
        plan_tsplit(costs, budget=max(c.work for c in costs) / 100, bandwidth=1e9)
    with pytest.raises(ConfigError):
        TSplitBlock(model.blocks[0], "split:x")
    with pytest.raises(ConfigError):
        plan_tsplit([OpCost("a", 1, 1, 1)], budget=0, bandwidth=1)
