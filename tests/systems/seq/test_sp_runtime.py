"""Ulysses and ring attention on 2 gloo processes equal single-process packed attention (fwd + bwd)."""
import numpy as np
import pytest
import torch

from sgl import comm
from sgl.errors import ConfigError
from sgl.systems.parallel import get_model_config
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock
from sgl.systems.seq.sp_block import sequence_parallel_block, sequence_parallel_lm
from sgl.systems.seq.straggler import measure_rates
from sgl.systems.seq.varlen import (attention_block, cu_seqlens, merge_blocks, shard_bounds, varlen_attention,
                                    varlen_mask)

DOCS = [5, 1, 9, 4]          # 19 packed tokens: uneven shards 9 / 10, a document crosses the boundary


def _inputs():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    block = TransformerBlock(get_model_config("tiny")).double()
    x = torch.randn(sum(DOCS), 64, dtype=torch.float64, generator=g)
    dy = torch.randn(sum(DOCS), 64, dtype=torch.float64, generator=g)
    return block, x, dy


def _run(block, x, dy, mode, rank=0, world=1):
    cu = cu_seqlens(DOCS)
    a, b = shard_bounds(int(cu[-1]), world)[rank]
    xs = x[a:b].clone().requires_grad_(True)
    block.zero_grad()
    out = sequence_parallel_block(block, xs, cu, mode)
    (out * dy[a:b]).sum().backward()
    grads = {n: p.grad.clone() for n, p in block.named_parameters()}
    return out.detach(), xs.grad, grads


def _lm_inputs():
    torch.manual_seed(0)
    model = TinyLM(get_model_config("tiny")).double()
    tokens = torch.randint(0, model.cfg.vocab_size, (sum(DOCS),), generator=torch.Generator().manual_seed(1))
    return model, tokens


def _lm_loss_sum(logits, tokens, a, b):
    """Next-token cross-entropy summed over this shard's positions whose next token is in the same document."""
    cu = cu_seqlens(DOCS)
    pos = torch.arange(a, b)
    last = torch.isin(pos + 1, cu[1:])                       # a document's last token predicts nothing
    keep = ~last & (pos + 1 < sum(DOCS))
    return torch.nn.functional.cross_entropy(logits[keep], tokens[(pos + 1)[keep]], reduction="sum")


def _run_lm(mode, rank=0, world=1):
    model, tokens = _lm_inputs()
    a, b = shard_bounds(sum(DOCS), world)[rank]
    logits = sequence_parallel_lm(model, tokens[a:b], cu_seqlens(DOCS), mode)
    loss = _lm_loss_sum(logits, tokens, a, b)
    loss.backward()
    return float(loss), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _worker(rank, world):
    torch.set_num_threads(1)
    block, x, dy = _inputs()
    res = {}
    for mode in ("ulysses", "ring"):
        out, gx, grads = _run(block, x, dy, mode, rank, world)
        for g in grads.values():
            comm.all_reduce(g)          # data-parallel style sum of the parameter gradients
        res[mode] = (out, gx, grads)
    res["lm"] = {}
    for mode in ("ulysses", "ring"):
        loss, grads = _run_lm(mode, rank, world)
        loss_t = comm.all_reduce(torch.tensor([loss], dtype=torch.float64))
        for g in grads.values():
            comm.all_reduce(g)
        res["lm"][mode] = (float(loss_t), grads)
    res["rates"] = measure_rates(64, 3)      # Malleus' timed GEMM, all-gathered over the same 2 ranks
    return res


@pytest.fixture(scope="module")
def two_ranks():
    return comm.spawn(_worker, 2, timeout=120)


@pytest.fixture(scope="module")
def reference():
    block, x, dy = _inputs()
    return _run(block, x, dy, "local")


def test_packed_reference_equals_documents_one_by_one(reference):
    block, x, dy = _inputs()
    out = reference[0]
    starts = cu_seqlens(DOCS).tolist()
    for a, b in zip(starts[:-1], starts[1:]):
        alone = block(x[None, a:b])[0]          # the small Transformer's own causal forward
        assert torch.allclose(out[a:b], alone, atol=1e-10)


@pytest.mark.parametrize("mode", ["ulysses", "ring"])
def test_two_processes_equal_single_process(two_ranks, reference, mode):
    ref_out, ref_gx, ref_grads = reference
    bounds = shard_bounds(sum(DOCS), 2)
    for rank, (a, b) in enumerate(bounds):
        out, gx, grads = two_ranks[rank][mode]
        assert torch.allclose(out, ref_out[a:b], atol=1e-10)
        assert torch.allclose(gx, ref_gx[a:b], atol=1e-10)
        for name, g in ref_grads.items():
            assert torch.allclose(grads[name], g, atol=1e-10), name
    # the check can fail: a different mask changes the result
    cu_one = cu_seqlens([sum(DOCS)])
    q = torch.randn(sum(DOCS), 4, 16, dtype=torch.float64)
    assert not torch.allclose(varlen_attention(q, q, q, cu_one), varlen_attention(q, q, q, cu_seqlens(DOCS)))


def test_blockwise_merge_equals_full_attention():
    torch.manual_seed(1)
    q, k, v = (torch.randn(12, 2, 8, dtype=torch.float64) for _ in range(3))
    cu = cu_seqlens([3, 6, 3])
    idx = torch.arange(12)
    out, lse = attention_block(q, k[:5], v[:5], varlen_mask(cu, idx, idx[:5]), 8 ** -0.5)
    o2, l2 = attention_block(q, k[5:], v[5:], varlen_mask(cu, idx, idx[5:]), 8 ** -0.5)
    merged, _ = merge_blocks(out, lse, o2, l2)
    assert torch.allclose(merged, varlen_attention(q, k, v, cu), atol=1e-12)


def test_bad_inputs():
    with pytest.raises(ConfigError, match=">= 1"):
        cu_seqlens([3, 0])
    with pytest.raises(ConfigError, match="tokens"):
        varlen_attention(*(torch.randn(5, 2, 4),) * 3, cu_seqlens([2, 2]))
    with pytest.raises(ConfigError, match="at least one token per rank"):
        shard_bounds(1, 2)
    block, x, _ = _inputs()
    with pytest.raises(ConfigError, match="mode"):
        sequence_parallel_block(block, x, cu_seqlens(DOCS), "megatron")


def test_straggling_rates_measured_on_two_ranks(two_ranks):
    a, b = two_ranks[0]["rates"], two_ranks[1]["rates"]
    assert a.shape == (2,) and np.array_equal(a, b) and a.min() == 1.0 and np.all(a >= 1.0)


@pytest.mark.parametrize("mode", ["ulysses", "ring"])
def test_tiny_lm_on_two_ranks_equals_the_model(two_ranks, mode):
    model, tokens = _lm_inputs()
    starts = cu_seqlens(DOCS).tolist()
    total = 0.0
    for a, b in zip(starts[:-1], starts[1:]):                 # the model's own forward, one document at a time
        logits = model(tokens[None, a:b])[0]
        if b - a > 1:
            total = total + torch.nn.functional.cross_entropy(logits[:-1], tokens[a + 1:b], reduction="sum")
    total.backward()
    for rank in range(2):
        loss, grads = two_ranks[rank]["lm"][mode]
        assert loss == pytest.approx(float(total.detach()), rel=1e-10)
        for name, p in model.named_parameters():
            assert torch.allclose(grads[name], p.grad, atol=1e-10), name
