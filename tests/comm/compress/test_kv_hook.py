"""sgl.comm.compress.sparse_kv_hook: sparse embedding gradients of DDP through key-value codecs.

2 Gloo processes train an ``nn.Embedding(sparse=True)`` model. With the lossless FP32 codec the
hook gives DDP's own averaged gradients; with SketchML every rank applies the same decoded
gradient, the touched rows are exact, and fewer bytes cross the wire.
"""
from __future__ import annotations

import pytest
import torch

import sgl.comm as comm
from sgl.comm.compress import FP32Codec, KVHookState, SketchMLCodec, sparse_kv_hook
from sgl.errors import ConfigError
from sgl.tasks.dist_run import rank_start_method
from sgl.tasks.grad_compress import register_grad_compress


def _train(rank: int, how: str) -> dict:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(5000, 16, sparse=True), torch.nn.Linear(16, 1))
    net = torch.nn.parallel.DistributedDataParallel(model)
    state = None
    if how == "fp32":
        state = KVHookState(FP32Codec())
        net.register_comm_hook(state, sparse_kv_hook)
    elif how == "sketchml":
        state = register_grad_compress(net, "sketchml", seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(3):
        ids = torch.randint(0, 5000, (400,), generator=gen)
        opt.zero_grad()
        net(ids).pow(2).mean().backward()
        opt.step()
    return {"emb": model[0].weight.detach().clone(), "lin": model[1].weight.detach().clone(),
            "sent": getattr(state, "bytes_sent", 0), "fp32": getattr(state, "bytes_fp32", 0)}


def _rank(rank: int, world: int) -> dict:
    torch.set_num_threads(1)
    return {how: _train(rank, how) for how in ("plain", "fp32", "sketchml")}


def test_sparse_gradients_through_codecs_match_ddp_and_compress():
    ranks = comm.spawn(_rank, 2, timeout=120.0, comm_timeout=30.0, start_method=rank_start_method())
    plain, fp32, sk = (ranks[0][k] for k in ("plain", "fp32", "sketchml"))
    # lossless codec: DDP's average, up to the order of the float sums
    assert torch.allclose(fp32["emb"], plain["emb"], atol=1e-6) and torch.allclose(fp32["lin"], plain["lin"], atol=1e-6)
    # SketchML: both ranks apply the same gradient; rows nobody touched stay equal to the start
    assert torch.equal(ranks[0]["sketchml"]["emb"], ranks[1]["sketchml"]["emb"])
    start = _initial()
    moved_plain, moved_sk = (plain["emb"] != start).any(1), (sk["emb"] != start).any(1)
    assert moved_sk.sum() > 1000 and not (moved_sk & ~moved_plain).any()   # no key outside the touched rows
    # a touched row may decode to exactly zero only where its true update is negligible
    assert float((plain["emb"] - start)[moved_plain & ~moved_sk].abs().sum()) < 1e-4
    # lossy values (quantile buckets in a min-max sketch), the right direction: measured cosine 0.96
    ours, ref = (sk["emb"] - start).flatten(), (plain["emb"] - start).flatten()
    assert float(ours @ ref / ours.norm() / ref.norm()) > 0.9
    assert sk["fp32"] > 3 * sk["sent"] > 0               # SketchML sends several times fewer bytes
    assert fp32["sent"] == fp32["fp32"]                  # the lossless baseline is what it claims


def _initial() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(5000, 16, sparse=True), torch.nn.Linear(16, 1))[0].weight.detach()


def test_hook_state_needs_a_codec_and_a_process_group():
    with pytest.raises(ConfigError, match="key-value codec"):
        KVHookState("sketchml")
    with pytest.raises(Exception, match="process group"):
        sparse_kv_hook(KVHookState(SketchMLCodec()), None)
