"""sgl.federated.noise.NoiseAhead and the Gaussian defenses' pre-drawn noise."""
from __future__ import annotations

import pytest
import torch

from sgl.errors import ConfigError
from sgl.federated.defenses import marvell, perturb, projpert
from sgl.federated.noise import NoiseAhead


def test_prefetched_draws_follow_one_deterministic_sequence():
    ahead = NoiseAhead(seed=3)
    ref = torch.Generator().manual_seed(3)
    ahead.prefetch((8, 5))
    assert torch.equal(ahead.take((8, 5)), torch.randn(8, 5, generator=ref))
    ahead.prefetch((8, 5))
    # a shorter batch of the same width (an epoch's last batch) takes the first rows of the draw in flight
    assert torch.equal(ahead.take((3, 5)), torch.randn(8, 5, generator=ref)[:3])
    ahead.prefetch((8, 5))
    # another width: the draw in flight is consumed (and dropped), then a fresh one is drawn
    wide = ahead.take((3, 6))
    torch.randn(8, 5, generator=ref)
    assert torch.equal(wide, torch.randn(3, 6, generator=ref))
    assert (ahead.hits, ahead.misses) == (2, 1)
    ahead.close()


def test_defenses_use_the_given_noise_exactly():
    torch.manual_seed(0)
    g, y = torch.randn(64, 6), (torch.rand(64) < 0.3).float()
    z = torch.randn(64, 6)
    gen = torch.Generator().manual_seed(1)
    drawn = projpert(g, y, 1.0, "iso", generator=torch.Generator().manual_seed(1))
    given = projpert(g, y, 1.0, "iso", noise=torch.randn(64, 6, generator=gen))
    assert torch.equal(drawn, given)          # the same numbers whether drawn inside or passed in
    a = perturb("projpert-opt", g, y, bound=1.0, noise=z)
    b = perturb("projpert-opt", g, y, bound=1.0, noise=z)
    assert torch.equal(a, b) and not torch.equal(a, g)
    m = marvell(g, y, bound=1.0, noise=z, generator=torch.Generator().manual_seed(0))
    assert m.shape == g.shape
    with pytest.raises(ConfigError, match="pre-drawn noise"):
        projpert(g, y, 1.0, noise=torch.randn(63, 6))
