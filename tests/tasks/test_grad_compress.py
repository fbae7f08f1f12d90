"""sgl.tasks.grad_compress: torch's PowerSGD hook under Gloo with several DDP buckets.

PowerSGD chains two all-reduces per bucket through future callbacks; under Gloo the ranks could
issue them in different bucket orders and abort (``op.preamble.length <= op.nbytes``). The hook
registered by :func:`register_grad_compress` keeps DDP's bucket order on every rank.
"""
from __future__ import annotations

import os

import pytest
import torch

import sgl.comm as comm
from sgl.tasks.dist_run import rank_start_method
from sgl.tasks.grad_compress import register_grad_compress


def _powersgd_rank(rank: int, world: int, ordered: bool) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
    # ~0.02 MB buckets: one or two layers each, so several buckets are in flight in one backward
    net = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.02)
    if ordered:
        register_grad_compress(net, "powersgd", rank=1, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(6):
        x = torch.randn(32, 64, generator=gen)
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return {"losses": losses, "params": flat}


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"),
                    reason="hung once in the full suite (2026-12-05: the parent blocked reading the results pipe past spawn's timeout; passes alone); set SGL_SLOW_TESTS=1 to run")
def test_powersgd_with_several_buckets_runs_under_gloo_and_keeps_ranks_equal():
    ranks = comm.spawn(_powersgd_rank, 2, True, timeout=120.0, comm_timeout=30.0, start_method=rank_start_method())
    assert all(torch.isfinite(torch.tensor(r["losses"])).all() for r in ranks)
    # DDP semantics: every rank applies the same (compressed) averaged gradient
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])
    # the compressed gradient is not the exact average: PowerSGD rank 1 changed the trajectory
    plain = comm.spawn(_powersgd_rank, 2, False, timeout=120.0, comm_timeout=30.0, start_method=rank_start_method())
    assert not torch.allclose(plain[0]["params"], ranks[0]["params"])
