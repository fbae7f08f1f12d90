"""LoRA-Inlaid's packed int4 base: exact round trip, same forward as the dequantized path, real bytes."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.lora import (Int4Linear, MultiTaskQuantizer, gptq, gptq_codes, pack_int4, quantized_bytes, rtn,
                                      train_adapters, unpack_int4)


def test_pack_round_trip_and_bad_codes():
    codes = torch.randint(0, 16, (5, 7), generator=torch.Generator().manual_seed(0))
    packed = pack_int4(codes)
    assert packed.dtype == torch.uint8 and packed.shape == (5, 4)
    assert torch.equal(unpack_int4(packed, 7), codes.to(torch.uint8))
    with pytest.raises(ConfigError, match=r"\[0, 15\]"):
        pack_int4(torch.tensor([16]))


def test_fp16_packed_weight_decodes_to_the_gptq_weight_exactly():
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(24, 128, generator=g), torch.randn(128, 300, generator=g)
    h = x @ x.T / 300
    deq, codes, scales, zeros = gptq_codes(w, h, 4, 32, scale_format="fp16")[:4]
    assert scales.dtype == torch.float16
    assert torch.equal(deq, gptq(w, h, 4, 32, scale_format="fp16"))
    lin = Int4Linear.from_codes(codes, scales, zeros, 32, bias=torch.zeros(24), scale_format="fp16")
    assert torch.equal(lin.dequantize(), deq)
    assert torch.equal(lin(x.T), torch.nn.functional.linear(x.T, deq, torch.zeros(24)))
    assert lin.nbytes() == 24 * 64 + 24 * 4 * 2 + 24 * 2     # int4 codes + fp16 scales + int4 zeros
    assert lin.nbytes() == quantized_bytes(w.numel(), 24, 128, 4, 32, "fp16")
    assert 3.4 < 2 * w.numel() / lin.nbytes() < 3.5
    with pytest.raises(ConfigError, match="scales and zeros"):
        Int4Linear.from_codes(codes, scales[:, :2], zeros, 32, scale_format="fp16")
    with pytest.raises(ConfigError, match="log12' only"):
        Int4Linear.from_codes(codes, scales, zeros, 32, scale_format="fp16", scale_base=torch.tensor(0.0),
                              scale_step=torch.tensor(0.01))
    with pytest.raises(ConfigError, match="does not divide"):
        Int4Linear(100, 4, group_size=32)


def test_log12_packed_weight_decodes_exactly_and_is_3_5x_below_bf16():
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(64, 256, generator=g), torch.randn(256, 400, generator=g)
    h = x @ x.T / 400
    r = gptq_codes(w, h, 4, 32)                               # log12 is the default
    assert r.scale_format == "log12" and r.scales.dtype == torch.int16 and r.scale_step <= 1 / 256
    assert torch.equal(r.dequantized, gptq(w, h, 4, 32, scale_format="log12"))
    lin = Int4Linear.from_codes(r.codes, r.scales, r.zeros, 32, bias=torch.ones(64),
                                scale_base=r.scale_base, scale_step=r.scale_step)
    assert lin.qparams.dtype == torch.uint16 and lin.qparams.shape == (64, 8)
    assert lin.scale_base.dtype == lin.scale_step.dtype == torch.float32 and lin.scale_base.dim() == 0
    assert torch.equal(lin.dequantize(), r.dequantized)
    assert torch.equal(lin(x.T), torch.nn.functional.linear(x.T, r.dequantized, torch.ones(64)))
    # codes + one uint16 per group + two fp32 per layer, measured from the storages
    assert lin.nbytes() == 64 * 128 + 64 * 8 * 2 + 8 == quantized_bytes(w.numel(), 64, 256, 4, 32)
    assert 2 * w.numel() / lin.nbytes() >= 3.5
    assert lin.nbytes() < Int4Linear(256, 64, scale_format="fp16").nbytes()
    lin.to(torch.bfloat16)                                    # a dtype cast keeps e0, d in fp32: still exact
    assert lin.scale_base.dtype == torch.float32 and lin.bias.dtype == torch.bfloat16
    assert torch.equal(lin.dequantize(torch.bfloat16), r.dequantized.to(torch.bfloat16))
    # GPTQ's error on the layer's outputs stays within 1 % of the fp16-scale format's
    err = {f: float(((w - gptq(w, h, 4, 32, scale_format=f)) @ x).pow(2).mean()) for f in ("fp16", "log12")}
    assert abs(err["log12"] / err["fp16"] - 1) < 0.01, err


def test_scale_format_errors():
    w = torch.randn(8, 64)
    with pytest.raises(ConfigError, match="scale_format"):
        gptq_codes(w, torch.eye(64), 4, 32, scale_format="fp8")
    with pytest.raises(ConfigError, match="scale_format"):
        Int4Linear(64, 8, scale_format="int8")
    with pytest.raises(ConfigError, match="scale_format"):
        quantized_bytes(512, 8, 64, 4, 32, "bf16")
    with pytest.raises(ConfigError, match="bits must be <= 4"):
        quantized_bytes(512, 8, 64, 8, 32, "log12")
    wide = torch.ones(2, 64)
    wide[0, :32], wide[1, 32:] = 1e-35, 1e35                 # group scales 2^-120 .. 2^112: over 128 octaves
    with pytest.raises(ConfigError, match="use scale_format='fp16'"):
        gptq_codes(wide, torch.eye(64), 4, 32)
    bad = w.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ConfigError, match="inf or NaN"):
        rtn(bad, 4, 32)
    r = gptq_codes(w, torch.eye(64), 4, 32)
    with pytest.raises(ConfigError, match="scale_base and scale_step"):
        Int4Linear.from_codes(r.codes, r.scales, r.zeros, 32)
    with pytest.raises(ConfigError, match="integer scale codes"):
        Int4Linear.from_codes(r.codes, r.scales.half(), r.zeros, 32, scale_base=r.scale_base, scale_step=r.scale_step)
    with pytest.raises(ConfigError, match=r"\[0, 4095\]"):
        Int4Linear.from_codes(r.codes, r.scales + 4096, r.zeros, 32, scale_base=r.scale_base,
                              scale_step=r.scale_step)


def test_packed_model_forward_equals_the_dequantized_path():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    ids = torch.randint(3, 64, (8, 16), generator=torch.Generator().manual_seed(1))
    model = train_adapters(LlamaForCausalLM(cfg), {"up": ids[:4], "dn": ids[4:]}, rank=2, steps=2, batch_size=2)
    with torch.no_grad():
        ref = {}
        for t in ("up", "dn"):
            model.set_adapter(t)
            ref[t] = torch.log_softmax(model(input_ids=ids).logits, -1)
    q = MultiTaskQuantizer(model, bits=4, group_size=32)
    assert q.scale_format == "log12"
    for t, rows in (("up", ids[:4]), ("dn", ids[4:])):
        q.add_task(t, [rows], adapter=t)
    kl, size = {}, {}
    for fmt in ("fp16", "log12"):
        packed = q.packed_model(scale_format=fmt)
        q.quantize(scale_format=fmt)
        with torch.no_grad():
            for t in ("up", "dn"):
                model.set_adapter(t)
                packed.set_adapter(t)
                logits = packed(input_ids=ids).logits
                assert torch.equal(logits, model(input_ids=ids).logits)
                kl[fmt, t] = float(torch.nn.functional.kl_div(torch.log_softmax(logits, -1), ref[t], log_target=True,
                                                              reduction="none").sum(-1).mean())
        lins = [m for m in packed.modules() if isinstance(m, Int4Linear)]
        assert len(lins) == len(q.layers) and all(m.scale_format == fmt for m in lins)
        assert not any(isinstance(m, torch.nn.Linear) and "base_layer" in n for n, m in packed.named_modules())
        size[fmt] = sum(m.nbytes() for m in lins)
        assert size[fmt] == q.memory_bytes(fmt)[0] - q.memory_bytes(fmt)[1] + sum(2 * m.in_features * m.out_features
                                                                                  for m in lins)
    bf16 = sum(2 * m.in_features * m.out_features for m in lins)
    assert bf16 / size["log12"] >= 3.5 > bf16 / size["fp16"]
    for t in ("up", "dn"):                 # today's KL, within a few %
        assert 0 < kl["log12", t] < 1.05 * kl["fp16", t], kl
    q.restore()
    with pytest.raises(ConfigError, match="scale_format"):
        q.packed_model(scale_format="nf4")
    with pytest.raises(ConfigError, match="bits must be <= 4"):
        MultiTaskQuantizer(model, bits=8)
    q.bits = 3
    with pytest.raises(ConfigError, match="bits must be 4"):
        q.packed_model()
