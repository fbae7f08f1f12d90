"""The MoE layer on its own: routing, capacity, balance losses, dispatchers in one process, LSH."""
from __future__ import annotations

import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.moe import LocalDispatcher, MoEConfig, MoELayer, moe_aux_loss, update_expert_bias
from sgl.systems.moe.ep import ExpertParallel
from sgl.systems.moe.lsh import CrossPolytopeLSH, LSHDispatcher, lsh_compress
from sgl.systems.moe.router import balance_loss, route
from sgl.systems.moe.train import build_moe_lm
from sgl.systems.runtime.tiny_lm import TinyLM, lm_loss
from tests.systems.moe.helpers import CFG, MOE


@pytest.mark.parametrize("kw,match", [
    (dict(top_k=5), "top_k=5 exceeds num_experts=4"),
    (dict(capacity_factor=0.0), "capacity_factor"),
    (dict(capacity_factor=-1.0), "capacity_factor"),
    (dict(gate="relu"), "gate"),
    (dict(activation="tanh"), "activation"),
    (dict(num_experts=0), "num_experts"),
])
def test_bad_configs_raise(kw, match):
    base = dict(hidden_size=8, ffn_hidden_size=8, num_experts=4, top_k=2)
    with pytest.raises(ConfigError, match=match):
        MoEConfig(**{**base, **kw})


def test_every_pair_routed_once_and_capacity_respected():
    gen = torch.Generator().manual_seed(1)
    idx = torch.stack([torch.randperm(4, generator=gen)[:2] for _ in range(50)])
    w = torch.rand(50, 2, generator=gen)
    full = route(idx, w, 4, None)
    pairs = sorted(zip(full.token.tolist(), full.expert.tolist()))
    assert pairs == sorted((t, int(e)) for t in range(50) for e in idx[t])  # each (token, choice) once
    assert torch.all(full.expert[1:] >= full.expert[:-1])  # grouped by expert
    capped = route(idx, w, 4, 10)
    assert capped.counts.max() <= 10 and capped.dropped == 100 - int(capped.counts.sum())
    # first choices win: every kept second choice's expert has spare room after all first choices
    firsts = torch.bincount(idx[:, 0], minlength=4)
    assert torch.equal(torch.minimum(firsts, torch.tensor(10)), torch.bincount(
        capped.expert[torch.isin(capped.token * 4 + capped.expert, torch.arange(50) * 4 + idx[:, 0])], minlength=4))


def test_layer_variants_forward_backward():
    x = torch.randn(2, 6, 8, requires_grad=True)
    for gate in ("softmax", "sigmoid"):
        for act in ("swiglu", "gelu"):
            layer = MoELayer(MoEConfig(8, 16, 4, 2, gate=gate, activation=act, capacity_factor=1.0, aux_loss_coef=0.1))
            y = layer(x)
            (y.sum() + layer.aux_loss).backward()
            assert y.shape == x.shape and layer.router.weight.grad.abs().sum() > 0
            assert (layer.experts.w3 is None) == (act == "gelu")


def test_dropped_tokens_get_no_expert_output():
    layer = MoELayer(MoEConfig(8, 16, 4, 1, capacity_factor=0.25))  # 1 slot per expert for 16 tokens
    x = torch.randn(16, 8)
    y = layer(x)
    kept = set(layer.last_assignment.token.tolist())
    assert layer.last_assignment.dropped == 16 - len(kept) > 0
    for t in range(16):
        assert (y[t].abs().sum() > 0) == (t in kept)


def test_balance_loss_is_one_when_uniform_and_larger_when_skewed():
    uniform = torch.full((8, 4), 0.25)
    assert balance_loss(uniform, torch.tensor([4, 4, 4, 4]), 2).item() == pytest.approx(1.0)
    skew = torch.tensor([[0.7, 0.1, 0.1, 0.1]] * 8)
    assert balance_loss(skew, torch.tensor([8, 4, 2, 2]), 2).item() > 1.0


def test_aux_loss_free_bias_moves_load_towards_the_mean():
    torch.manual_seed(0)
    layer = MoELayer(MoEConfig(8, 16, 4, 1, bias_update_rate=0.05))
    x = torch.randn(256, 8) + torch.tensor([2.0] + [0.0] * 7)  # a skewed input
    spread = []
    for _ in range(40):
        layer(x)
        spread.append(int(layer.last_counts.max() - layer.last_counts.min()))
        update_expert_bias(layer)
    assert spread[-1] < spread[0]
    assert layer.router.expert_bias.abs().sum() > 0


def test_moe_is_a_drop_in_ffn_of_tinylm():
    model = build_moe_lm(CFG, MOE)
    tokens = torch.randint(0, CFG.vocab_size, (2, CFG.seq_length))
    loss = lm_loss(model(tokens), tokens) + moe_aux_loss(model)
    loss.backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if "w" in n or "router" in n)
    dense = TinyLM(CFG)
    assert hasattr(dense.blocks[0], "w1") and dense.blocks[0].ffn is None  # the dense model is unchanged
    with pytest.raises(ConfigError, match="hidden_size"):
        build_moe_lm(CFG, MoEConfig(16, 16, 4, 2))


def test_padded_dispatch_equals_local_with_and_without_drops():
    for cf in (None, 0.5):
        cfg = MoEConfig(8, 16, 4, 2, capacity_factor=cf)
        ref, pad = MoELayer(cfg), MoELayer(cfg)
        pad.dispatcher = ExpertParallel().make_dispatcher("padded")
        x = torch.randn(3, 5, 8)
        assert torch.allclose(ref(x), pad(x), atol=1e-6)
        assert pad.dispatcher.padded_rows >= 0 and pad.dispatcher.sent_rows >= ref.dispatcher.sent_rows


def test_lsh_one_bucket_per_token_is_exact():
    layer = MoELayer(MoEConfig(16, 16, 4, 2))
    x = torch.randn(2, 12, 16)
    ref = layer(x)
    lsh = LSHDispatcher(LocalDispatcher(), 16, num_hashes=8, seed=0)
    layer.dispatcher = lsh
    assert torch.equal(layer(x), ref)
    assert lsh.sent_rows == lsh.routed_rows == 48  # every token its own bucket


def test_lsh_compression_grows_with_hashes_and_compensation_is_exact_in_the_residual():
    gen = torch.Generator().manual_seed(0)
    centers = torch.randn(6, 16, generator=gen)
    rows = centers[torch.randint(0, 6, (200,), generator=gen)] + 0.05 * torch.randn(200, 16, generator=gen)
    expert = torch.zeros(200, dtype=torch.long)
    rates = []
    for n in (1, 2, 4, 8):
        c, counts, bucket = lsh_compress(rows, expert, CrossPolytopeLSH(16, n, seed=0), 1)
        rates.append(c.shape[0] / 200)
        assert int(counts.sum()) == c.shape[0] and bucket.max() < c.shape[0]
        assert torch.allclose(c[bucket] + (rows - c[bucket]), rows, atol=1e-6)
    assert rates == sorted(rates) and rates[0] < 0.5  # clustered tokens share buckets
    with pytest.raises(ConfigError):
        CrossPolytopeLSH(16, 0)
