"""LoRA-Inlaid's packed int4 base: exact round trip, same forward as the dequantized path, real bytes."""
import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.serving.lora import (Int4Linear, MultiTaskQuantizer, gptq, gptq_codes, pack_int4, train_adapters,
                                      unpack_int4)


def test_pack_round_trip_and_bad_codes():
    codes = torch.randint(0, 16, (5, 7), generator=torch.Generator().manual_seed(0))
    packed = pack_int4(codes)
    assert packed.dtype == torch.uint8 and packed.shape == (5, 4)
    assert torch.equal(unpack_int4(packed, 7), codes.to(torch.uint8))
    with pytest.raises(ConfigError, match=r"\[0, 15\]"):
        pack_int4(torch.tensor([16]))


def test_packed_weight_decodes_to_the_gptq_weight_exactly():
    g = torch.Generator().manual_seed(0)
    w, x = torch.randn(24, 128, generator=g), torch.randn(128, 300, generator=g)
    h = x @ x.T / 300
    deq, codes, scales, zeros = gptq_codes(w, h, 4, 32)
    assert torch.equal(deq, gptq(w, h, 4, 32))
    lin = Int4Linear.from_codes(codes, scales, zeros, 32, bias=torch.zeros(24))
    assert torch.equal(lin.dequantize(), deq)
    assert torch.equal(lin(x.T), torch.nn.functional.linear(x.T, deq, torch.zeros(24)))
    assert lin.nbytes() == 24 * 64 + 24 * 4 * 2 + 24 * 2     # int4 codes + fp16 scales + int4 zeros
    assert 2 * w.numel() / lin.nbytes() > 3.4
    with pytest.raises(ConfigError, match="scales and zeros"):
        Int4Linear.from_codes(codes, scales[:, :2], zeros, 32)
    with pytest.raises(ConfigError, match="does not divide"):
        Int4Linear(100, 4, group_size=32)


def test_packed_model_forward_equals_the_dequantized_path():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    ids = torch.randint(3, 64, (8, 16), generator=torch.Generator().manual_seed(1))
    model = train_adapters(LlamaForCausalLM(cfg), {"up": ids[:4], "dn": ids[4:]}, rank=2, steps=2, batch_size=2)
    q = MultiTaskQuantizer(model, bits=4, group_size=32)
    for t, rows in (("up", ids[:4]), ("dn", ids[4:])):
        q.add_task(t, [rows], adapter=t)
    packed = q.packed_model()
    q.quantize()
    with torch.no_grad():
        for t in ("up", "dn"):
            model.set_adapter(t)
            packed.set_adapter(t)
            assert torch.equal(packed(input_ids=ids).logits, model(input_ids=ids).logits)
    lins = [m for m in packed.modules() if isinstance(m, Int4Linear)]
    assert len(lins) == len(q.layers) and not any(isinstance(m, torch.nn.Linear) and "base_layer" in n
                                                  for n, m in packed.named_modules())
    q.bits = 3
    with pytest.raises(ConfigError, match="bits must be 4"):
        q.packed_model()
