"""Hugging Face MoE models on SGL's MoE layer (one process): conversion keeps the function, bad
models are refused, and the expert fast paths (grouped GEMM, padded bmm, bf16 autocast) equal the
per-expert loop."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from transformers import (LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM,  # noqa: E402
                          Qwen2MoeConfig, Qwen2MoeForCausalLM)

from sgl.errors import ConfigError  # noqa: E402
from sgl.systems.moe import MoELayer, convert  # noqa: E402
from sgl.systems.moe.experts import grouped_supported, run_experts  # noqa: E402
from sgl.systems.moe.hf import build_hf_model, check_hf_config, load_hf_config  # noqa: E402

MIXTRAL = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)
QWEN = dict(vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
            shared_expert_intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            num_experts=8, num_experts_per_tok=2, mlp_only_layers=[1])


def _same_logits(model: torch.nn.Module, blocks: int) -> None:
    model.eval()
    ids = torch.randint(0, 64, (3, 11), generator=torch.Generator().manual_seed(1))
    before = model(ids).logits
    convert(model)
    assert sum(isinstance(m, MoELayer) for m in model.modules()) == blocks
    after = model(ids).logits
    assert (after - before).abs().max() <= 1e-5
    # training works through the converted layers: every parameter gets a gradient
    model.train()
    model(ids, labels=ids).loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_converted_mixtral_gives_the_same_logits():
    torch.manual_seed(0)
    _same_logits(MixtralForCausalLM(MixtralConfig(**MIXTRAL)), blocks=2)


def test_converted_qwen2_moe_gives_the_same_logits_with_its_shared_expert():
    torch.manual_seed(0)
    model = Qwen2MoeForCausalLM(Qwen2MoeConfig(**QWEN, norm_topk_prob=False))
    _same_logits(model, blocks=2)  # layer 1 is dense (mlp_only_layers) and stays as it is
    layer = model.model.layers[0].mlp
    assert layer.shared_expert is not None and layer.shared_expert_gate is not None
    assert not layer.cfg.normalize_weights


@pytest.mark.parametrize("make,match", [
    (lambda: LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=4)), "model_type='llama'"),
    (lambda: MixtralForCausalLM(MixtralConfig(**{**MIXTRAL, "hidden_act": "gelu"})), "hidden_act='gelu'"),
    (lambda: MixtralForCausalLM(MixtralConfig(**MIXTRAL, router_jitter_noise=0.1)), "router_jitter_noise"),
    (lambda: torch.nn.Linear(2, 2), "has no Hugging Face config"),
])
def test_unknown_models_raise_naming_what_is_supported(make, match):
    with pytest.raises(ConfigError, match=match) as err:
        convert(make())
    assert "MixtralForCausalLM" in str(err.value) and "Qwen2MoeForCausalLM" in str(err.value)


def test_config_files_are_checked(tmp_path):
    path = tmp_path / "mixtral.json"
    MixtralConfig(**MIXTRAL).to_json_file(str(path))
    cfg = load_hf_config(str(path))
    a, b = build_hf_model(cfg, seed=3), build_hf_model(cfg, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))  # seeded: same on every rank
    with pytest.raises(ConfigError, match="model_type='llama'"):
        check_hf_config(LlamaConfig(vocab_size=8).to_dict())
    with pytest.raises(ConfigError, match="no transformers config file"):
        load_hf_config(str(tmp_path / "missing.json"))


def _experts(dtype, h=16, f=32, e=5, seed=0):
    gen = torch.Generator().manual_seed(seed)
    counts = [7, 0, 3, 12, 1][:e]
    x = torch.randn(sum(counts), h, generator=gen).to(dtype).requires_grad_()
    ws = [(torch.randn(e, a, b, generator=gen) / a ** 0.5).to(dtype).requires_grad_()
          for a, b in ((h, f), (h, f), (f, h))]
    return x, counts, ws


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("impl", ["grouped", "padded"])
def test_grouped_and_padded_experts_equal_the_loop_at_equal_dtype(impl, dtype, tol):
    x, counts, (w1, w3, w2) = _experts(dtype)
    assert grouped_supported(x, w1, w3, w2)
    results = []
    for name in ("loop", impl):
        for t in (x, w1, w3, w2):
            t.grad = None
        y = run_experts(x, counts, w1, w3, w2, name)
        y.sum().backward()  # a stride-0 gradient: the grouped path must make it contiguous
        results.append([y.detach().float()] + [t.grad.float() for t in (x, w1, w3, w2)])
    for ref, got in zip(*results):
        assert torch.allclose(ref, got, atol=tol, rtol=tol)
    assert results[0][0].dtype == torch.float32 and y.dtype == dtype


def test_grouped_falls_back_on_shapes_it_cannot_take():
    x, counts, (w1, w3, w2) = _experts(torch.float32, h=6, f=10)
    assert not grouped_supported(x, w1, w3, w2)  # 6 * 4 bytes is not a multiple of 16
    assert torch.allclose(run_experts(x, counts, w1, w3, w2, "grouped"), run_experts(x, counts, w1, w3, w2, "loop"),
                          atol=1e-5)


def test_bf16_autocast_runs_experts_in_bf16_from_fp32_master_weights():
    x, counts, (w1, w3, w2) = _experts(torch.float32)
    ref = run_experts(x, counts, w1, w3, w2, "loop")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = run_experts(x, counts, w1, w3, w2, "grouped")
        low = run_experts(x.bfloat16(), counts, w1.bfloat16(), w3.bfloat16(), w2.bfloat16(), "loop")
    assert y.dtype == torch.float32  # back in the residual stream's dtype
    assert torch.equal(y, low.float())  # computed in bf16 ...
    assert torch.allclose(y, ref, atol=5e-2) and not torch.equal(y, ref)
    y.sum().backward()
    assert w1.grad.dtype == torch.float32  # ... with fp32 gradients for the fp32 master weights
