"""Derivative perturbations: ProjPert's privacy bound and optimality, Marvell, max-norm."""
import math

import numpy as np
import pytest
import torch

from sgl.errors import ConfigError
from sgl.federated import (
    diagonal_sumkl, direction_scores, leak_auc, marvell, marvell_solve, max_norm, norm_scores, pair_sumkl, perturb,
    projpert_targets,
)


def _batch(n=4096, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) < 0.25).float()
    scale = torch.linspace(0.02, 0.1, d)
    grad = torch.randn(n, d, generator=g) * scale * (1 + y[:, None]) + y[:, None] * torch.linspace(-0.5, 0.5, d)
    return grad, y


@pytest.mark.parametrize("mode", ["iso", "opt"])
def test_projpert_targets_meet_the_bound(mode):
    g = torch.Generator().manual_seed(1)
    s1, s0, m = torch.rand(50, generator=g) + 0.05, torch.rand(50, generator=g) + 0.05, torch.randn(50, generator=g)
    c = 0.1
    t1, t0 = projpert_targets(s1, s0, m, c, mode)
    kl = pair_sumkl(t1, t0, m.double())
    assert (kl <= c * (1 + 1e-6)).all()
    assert (t1 >= s1.double() - 1e-12).all() and (t0 >= s0.double() - 1e-12).all()
    if mode == "iso":  # the closed form lands exactly on the level set where the stds are not binding
        free = (m.abs() / math.sqrt(c)) >= torch.maximum(s1, s0)
        assert torch.allclose(kl[free], torch.full_like(kl[free], c))


def test_projpert_opt_is_the_projection():
    g = torch.Generator().manual_seed(2)
    s1, s0, m = torch.rand(6, generator=g) * 0.5 + 0.05, torch.rand(6, generator=g) * 0.5 + 0.05, \
        torch.randn(6, generator=g)
    c = 0.2
    t1, t0 = projpert_targets(s1, s0, m, c, "opt")
    i1, i0 = projpert_targets(s1, s0, m, c, "iso")
    cost = (t1 - s1.double()) ** 2 + (t0 - s0.double()) ** 2
    assert (cost <= (i1 - s1.double()) ** 2 + (i0 - s0.double()) ** 2 + 1e-12).all()
    for j in range(6):  # brute force: a fine grid of feasible (t1, t0) >= (s1, s0)
        a = torch.linspace(float(s1[j]), float(s1[j]) + 6, 1200, dtype=torch.float64)
        b = torch.linspace(float(s0[j]), float(s0[j]) + 6, 1200, dtype=torch.float64)
        A, B = torch.meshgrid(a, b, indexing="ij")
        ok = pair_sumkl(A, B, m[j].double()) <= c
        brute = ((A - s1[j]) ** 2 + (B - s0[j]) ** 2)[ok].min()
        assert float(cost[j]) <= float(brute) + 1e-2 * float(brute) + 1e-6


def test_projpert_monte_carlo_sumkl_within_bound_and_attacks_blunted():
    grad, y = _batch()
    assert diagonal_sumkl(grad, y) > 100
    for defense in ("projpert-iso", "projpert-opt"):
        out = perturb(defense, grad, y, bound=0.5, generator=torch.Generator().manual_seed(3))
        assert diagonal_sumkl(out, y) <= 0.5 * 1.15  # sampling error of the moments only
        # class means do not move (up to the noise std ~2 over ~1000 rows)
        pos = y > 0.5
        assert torch.allclose(out[pos].mean(0), grad[pos].mean(0), atol=0.3)
        assert leak_auc(norm_scores(out), y) < 0.7


def test_max_norm_equalises_expected_norms():
    grad, y = _batch(n=20000)
    out = max_norm(grad, torch.Generator().manual_seed(0))
    sq = grad.pow(2).sum(1)
    # E|g(1+s xi)|^2 = |g|^2 (1 + s^2) = max |g|^2 for every row
    expected = sq * (1 + (sq.max() / sq - 1).clamp_min(0))
    assert torch.allclose(expected, torch.full_like(expected, float(sq.max())), rtol=1e-4)
    assert leak_auc(norm_scores(out), y) < leak_auc(norm_scores(grad), y)


def test_marvell_meets_its_bound_with_least_power():
    lam, kl = marvell_solve(u=0.01, v=0.02, delta2=1.0, p=0.25, d=8, bound=0.5)
    assert kl <= 0.5 * (1 + 1e-5) and (lam >= 0).all()
    lam_loose, _ = marvell_solve(u=0.01, v=0.02, delta2=1.0, p=0.25, d=8, bound=2.0)
    power = lambda x: 0.75 * (x[0] + 7 * x[2]) + 0.25 * (x[1] + 7 * x[3])  # noqa: E731
    assert power(lam_loose) < power(lam)
    grad, y = _batch()
    out = marvell(grad, y, bound=0.5, generator=torch.Generator().manual_seed(0))
    assert leak_auc(direction_scores(out), y) < leak_auc(direction_scores(grad), y)
    _, kl_scale = marvell_solve(0.01, 0.02, 1.0, 0.25, 8, scale=4.0)
    assert np.isfinite(kl_scale)


def test_bad_defense_options():
    grad, y = _batch(n=64)
    with pytest.raises(ConfigError, match="unknown defense"):
        perturb("laplace", grad, y)
    with pytest.raises(ConfigError, match="bound > 0"):
        perturb("projpert-iso", grad, y)
    assert perturb("projpert-opt", grad, torch.zeros(64), bound=1.0) is grad  # one class: nothing to hide


def test_projpert_budgets_meet_the_bound_with_less_noise_than_the_even_split():
    from sgl.federated.defenses import projpert_budgets

    g = torch.Generator().manual_seed(3)
    d, bound = 40, 1.0
    m = torch.randn(d, generator=g).double() * torch.linspace(0.1, 3, d).double()  # uneven mean gaps
    s1, s0 = torch.full((d,), 1e-3).double(), torch.full((d,), 2e-3).double()
    c = projpert_budgets(s1, s0, m, bound)
    assert abs(float(c.sum()) - bound) < 1e-9 and (c >= 0).all()
    power = lambda c: float(projpert_targets(s1, s0, m, c, "iso")[0].square().sum())  # noqa: E731
    assert power(c) < 0.9 * power(bound / d)
    # the optimum: no other split of the same budget (random ones here) needs less noise
    for _ in range(20):
        w = torch.rand(d, generator=g).double()
        assert power(c) <= power(bound * w / w.sum()) + 1e-12
    # equal gaps and negligible stds: the even split is already optimal
    flat = projpert_budgets(s1 * 0, s0 * 0, torch.ones(d).double(), bound)
    assert torch.allclose(flat, torch.full_like(flat, bound / d))


def test_projpert_opt_meets_the_total_bound_with_less_noise_than_iso():
    g, y = _batch(d=16)
    g = g * torch.linspace(0.2, 2.0, 16)  # uneven class gaps across coordinates
    z = torch.randn(g.shape, generator=torch.Generator().manual_seed(5))
    out = {mode: perturb(f"projpert-{mode}", g, y, bound=1.0, noise=z) for mode in ("iso", "opt")}
    noise = {mode: float((out[mode] - g).square().sum()) for mode in out}
    assert noise["opt"] < 0.8 * noise["iso"]
    assert diagonal_sumkl(out["opt"], y) < 1.3  # ~1 up to sampling error


@pytest.mark.parametrize("u, v, delta2", [(1e-11, 3e-11, 3e-7), (2e-9, 1e-9, 2.4e-6), (1.0, 2.0, 0.5)])
def test_marvell_noise_mostly_along_delta_when_the_classes_are_tight(u, v, delta2):
    # derivative batches whose class spread is tiny against the mean gap (as on Criteo): the least power
    # is about delta2 / bound along delta, not the isotropic d * 4 delta2 / bound SLSQP used to fall back to
    p, d, bound = 0.25, 208, 1.0
    lam, kl = marvell_solve(u, v, delta2, p, d, bound=bound)
    power = p * (lam[1] + (d - 1) * lam[3]) + (1 - p) * (lam[0] + (d - 1) * lam[2])
    assert kl <= bound * (1 + 1e-6)
    assert power <= 1.05 * (delta2 / bound + (d - 1) * (1 - p) * max(v - u, 0) + (d - 1) * p * max(u - v, 0)) + 1e-15
