"""MEMO's token-wise offload / recompute on Hugging Face ``LlamaForCausalLM`` decoder layers."""
import copy

import pytest
import torch

pytest.importorskip("transformers")

from sgl.errors import ConfigError  # noqa: E402
from sgl.systems.memory import TokenOffloadBlock, wrap_blocks  # noqa: E402
from sgl.systems.memory.block_parts import attention_part, blocks_of, tokenwise_part  # noqa: E402
from sgl.systems.runtime import ExecConfig, SavedTensorBytes  # noqa: E402
from sgl.systems.runtime.models import build_model, decoder_of  # noqa: E402
from sgl.systems.runtime.tiny_lm import lm_loss  # noqa: E402

TOKENS = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))


def _run(model):
    logits = model(TOKENS).logits
    loss = lm_loss(logits, TOKENS)
    loss.backward()
    return logits.detach(), loss.detach(), {n: p.grad for n, p in model.named_parameters()}


@pytest.fixture(scope="module")
def llama():
    return build_model(ExecConfig(arch="hf-llama"))


def test_split_parts_of_an_hf_layer_equal_the_layer(llama):
    dec = decoder_of(llama)
    h = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))
    ctx = dec.layer_kwargs(h)
    layer = dec.layers[0]
    assert torch.equal(tokenwise_part(layer, h, attention_part(layer, h, ctx)), layer(h, **ctx))
    assert blocks_of(llama) is llama.model.layers


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_memo_on_hf_llama_is_bit_identical_and_keeps_nothing_on_the_device(llama, alpha):
    ref_logits, ref_loss, ref = _run(copy.deepcopy(llama))
    model = wrap_blocks(copy.deepcopy(llama), alpha, last_plain=1)
    layers = model.model.layers
    assert [isinstance(b, TokenOffloadBlock) for b in layers] == [True, True, True, False]
    logits, loss, grads = _run(model)
    assert torch.equal(logits, ref_logits) and torch.equal(loss, ref_loss)
    for name, g in ref.items():
        key = name.replace("layers.0.", "layers.0.block.").replace("layers.1.", "layers.1.block.") \
            .replace("layers.2.", "layers.2.block.")
        assert torch.allclose(grads[key], g, rtol=1e-5, atol=1e-7), name
    assert all(b.store.peak > 0 and b.store.current == 0 for b in layers[:3])
    # what one wrapped layer saves for backward on the device: nothing but its inputs' references
    h = torch.randn(2, 32, 64, requires_grad=True)
    counter = SavedTensorBytes(list(model.parameters()))
    ctx = decoder_of(model).layer_kwargs(h)
    with counter.hooks():
        out = layers[0](h, **ctx)
    assert counter.peak == 0
    out.sum().backward()
    assert h.grad is not None and layers[0].store.current == 0


def test_memo_refuses_a_layer_it_does_not_know():
    with pytest.raises(ConfigError, match="Hugging Face Llama-style decoder layer.*GRU has no"):
        TokenOffloadBlock(torch.nn.GRU(4, 4), 0.5)
    with pytest.raises(ConfigError, match="neither `blocks`"):
        wrap_blocks(torch.nn.Sequential(torch.nn.Linear(2, 2)), 0.5)
