"""Capacity per (group, expert) — the single-process definition of EP's per-rank capacity — and
the k-means oracle of LSH-MoE's centroid compression."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from sgl.errors import ConfigError
from sgl.systems.moe import CrossPolytopeLSH, MoEConfig, MoELayer, lsh_compress
from sgl.systems.moe.oracle import kmeans_compress

CFG = MoEConfig(hidden_size=8, ffn_hidden_size=16, num_experts=4, top_k=2, capacity_factor=0.5)


def _skewed(t=24, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(t, 8, generator=gen) + torch.tensor([3.0] + [0.0] * 7)  # one hot direction: skew


def test_groups_give_every_token_group_its_own_capacity():
    x = _skewed()
    grouped = MoELayer(replace(CFG, capacity_groups=2))
    alone = MoELayer(CFG)  # same seeds: the same router and experts
    y = grouped(x)
    halves = [alone(x[:12]), alone(x[12:])]
    assert torch.allclose(y, torch.cat(halves), atol=1e-6)
    a = grouped.last_assignment
    counts = torch.bincount(a.token // 12 * 4 + a.expert, minlength=8)
    assert int(counts.max()) <= CFG.capacity(12)  # no (group, expert) over its capacity
    one = MoELayer(replace(CFG, capacity_groups=1))
    one(x)
    kept = lambda asg: set(zip(asg.token.tolist(), asg.expert.tolist()))  # noqa: E731
    assert kept(one.last_assignment) != kept(a)  # one global group keeps other pairs


def test_capacity_groups_errors():
    with pytest.raises(ConfigError, match="capacity_groups"):
        MoEConfig(hidden_size=8, ffn_hidden_size=8, capacity_factor=1.0, capacity_groups=0)
    with pytest.raises(ConfigError, match="not a multiple of the 2 ranks"):
        replace(CFG, capacity_groups=3).local_groups(2, 12)
    with pytest.raises(ConfigError, match="equal capacity groups"):
        MoELayer(replace(CFG, capacity_groups=5))(_skewed(24))
    assert replace(CFG, capacity_groups=4).local_groups(2, 12) == 2
    assert replace(CFG, capacity_factor=None, capacity_groups=4).local_groups(2, 12) == 1  # dropless


def test_kmeans_oracle_is_exact_at_full_rate_and_beats_lsh_buckets():
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(6, 16, generator=gen) * 3
    rows = centres[torch.randint(0, 6, (400,), generator=gen)] + 0.3 * torch.randn(400, 16, generator=gen)
    expert = torch.sort(torch.randint(0, 4, (400,), generator=gen)).values
    c, counts, bucket = kmeans_compress(rows, expert, 1.0, 4)
    assert torch.equal(c[bucket], rows) and counts.tolist() == torch.bincount(expert, minlength=4).tolist()
    c, counts, bucket = kmeans_compress(rows, expert, 0.1, 4, seed=1)
    per = torch.bincount(expert, minlength=4)
    assert counts.tolist() == [max(1, round(0.1 * int(n))) for n in per]
    assert torch.equal(torch.repeat_interleave(torch.arange(4), counts)[bucket], expert)  # clusters stay per expert
    km_err = float(((rows - c[bucket]) ** 2).sum())
    lc, lcounts, lb = lsh_compress(rows, expert, CrossPolytopeLSH(16, 2, seed=0, proj_dim=4), 4)
    assert lc.shape[0] >= c.shape[0]  # LSH gets at least as many centroids ...
    assert km_err < float(((rows - lc[lb]) ** 2).sum())  # ... and still a larger input error
    with pytest.raises(ConfigError, match="compression rate"):
        kmeans_compress(rows, expert, 0.0, 4)
