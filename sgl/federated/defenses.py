r"""Perturbing the derivatives the active party sends: none, max-norm, Marvell, ProjPert.

Each defense takes the clean derivatives ``g [B, d]`` of one batch and its labels ``y [B]``
(the active party holds both) and returns perturbed derivatives of the same shape. Privacy is
measured by the symmetric KL divergence (sumKL) between the two classes' derivative
distributions; any detector's mean of false-positive and false-negative rates is at least
:math:`\tfrac12 - \sqrt{\text{sumKL}}/4` (Li et al. 2022).

* **max-norm** (official Marvell repo, ``expectation``): per row, scalar noise
  :math:`g_i(1+\sigma_i\xi_i)`, :math:`\sigma_i^2=\max(\max_j\lVert g_j\rVert^2/\lVert g_i\rVert^2-1,0)`,
  so every expected squared norm equals the batch maximum. No knob, no bound.
* **Marvell** (Li et al. 2022): class-dependent Gaussian noise along :math:`\Delta=\mu_1-\mu_0`
  (variances :math:`\lambda_{1c}`) and isotropic in the other :math:`d-1` directions
  (:math:`\lambda_{2c}`), on the isotropic model (per-coordinate variances ``u``, ``v``):
  :math:`\text{sumKL}=\tfrac12[a_0/a_1+a_1/a_0-2]+\tfrac{d-1}2[b_0/b_1+b_1/b_0-2]+\tfrac{\lVert\Delta\rVert^2}2(1/a_0+1/a_1)`,
  :math:`a_c = \text{var}_c+\lambda_{1c}`, :math:`b_c = \text{var}_c+\lambda_{2c}`. Given a bound it
  solves the least expected noise power :math:`p(\lambda_{11}+(d-1)\lambda_{21})+(1-p)(\lambda_{10}+(d-1)\lambda_{20})`
  with sumKL at most the bound (SLSQP from the feasible point with all the extra noise along
  :math:`\Delta`, which it keeps if SLSQP fails); given ``scale`` it minimises sumKL at power
  ``scale * ||Δ||²`` (the paper's form).
* **ProjPert** (FDL ``proj_pert``): the diagonal model, per coordinate ``j`` class stds
  :math:`s_1, s_0` and mean gap ``m``; the budget ``bound`` is split evenly, :math:`c=\text{bound}/d`, with
  :math:`\text{sumKL}_j=\tfrac12[(t_1/t_0)^2+(t_0/t_1)^2-2+m^2/t_0^2+m^2/t_1^2]`. Noise is zero-mean
  Gaussian per row by its label with variance :math:`t_c^2-s_c^2`, so class means never move.
  ``iso`` (near-zero cost): :math:`t_1=t_0=\max(|m|/\sqrt c, s_1, s_0)`, which gives sumKL_j = ``c``
  in closed form, the budget split evenly. ``opt``: first the least-noise split of the budget,
  :math:`c_j` by water-filling (:func:`projpert_budgets`, binary search over the multiplier;
  never more noise than the even split, about 15-30 % less on Criteo derivatives), then per
  coordinate the Euclidean projection of :math:`(s_1, s_0)` in std space onto
  :math:`\{\text{sumKL}_j\le c_j,\ t\ge s\}`, found by searching the std ratio :math:`r=t_1/t_0`
  (a grid, then golden-section refinement); for each ``r`` the smallest feasible :math:`t_0`
  is closed form. Coordinates already within their budget get no noise. When the class stds
  are far below :math:`|m_j|/\sqrt{c_j}` (as for CTR derivatives) the projection lands at
  :math:`t_1 = t_0`, the iso answer for that budget.

Example:
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> y = (torch.rand(512) < 0.3).float()
    >>> g = torch.randn(512, 8) * 0.1 + y[:, None] * torch.linspace(-1, 1, 8)
    >>> round(diagonal_sumkl(g, y), 1) > 100
    True
    >>> out = perturb("projpert-iso", g, y, bound=1.0, generator=torch.Generator().manual_seed(0))
    >>> diagonal_sumkl(out, y) < 1.5       # ~1.0 up to sampling error
    True
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
import torch

from sgl.errors import ConfigError
from sgl.federated._projpert_numba import host_kernel_applies, projpert_iso_host

__all__ = ["DEFENSES", "perturb", "max_norm", "marvell", "projpert", "projpert_targets", "projpert_budgets",
           "diagonal_sumkl",
           "pair_sumkl", "marvell_solve"]

DEFENSES = ("none", "max-norm", "marvell", "projpert-iso", "projpert-opt")
#: the defenses that add a ``[B, d]`` Gaussian (their noise can be drawn ahead: ``perturb(noise=...)``)
GAUSSIAN_DEFENSES = ("marvell", "projpert-iso", "projpert-opt")


def pair_sumkl(t1: torch.Tensor, t0: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Per-coordinate sumKL of ``N(m, t1^2)`` vs ``N(0, t0^2)`` (stds ``t1``, ``t0``)."""
    t1, t0 = t1.clamp_min(1e-30), t0.clamp_min(1e-30)
    r2 = (t1 / t0) ** 2
    return 0.5 * (r2 + 1 / r2 - 2 + m ** 2 / t0 ** 2 + m ** 2 / t1 ** 2)


def _moments(g: torch.Tensor, y: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """``pos, mu1, mu0, s1, s0``: per-class means and population stds of ``g [B, d]`` (``g``'s dtype).

    Two ``[2, B] @ [B, d]`` products (class means, then centred squares: two-pass, so no
    cancellation) and one rank-1 update instead of column reductions of indexed copies; a few
    passes over ``g``, about the cost of one ``randn`` of its shape.
    """
    pos = y.reshape(-1) > 0.5
    posf = pos.to(g.dtype)
    member = torch.stack([posf, 1 - posf])                          # [2, B]
    member = member / member.sum(1, keepdim=True).clamp_min(1)
    mu = member @ g                                                 # [2, d]
    centred = torch.addr(g - mu[1], posf, mu[1] - mu[0])            # g minus its own class's mean
    var = member @ centred.square_()
    return pos, mu[0], mu[1], var[0].sqrt(), var[1].sqrt()


def diagonal_sumkl(g: torch.Tensor, y: torch.Tensor) -> float:
    """Sum over coordinates of the per-coordinate sumKL of the two classes of ``g`` (diagonal
    Gaussian model, population stds); ``nan`` for a one-class batch."""
    pos = y.reshape(-1) > 0.5
    if pos.all() or not pos.any():
        return float("nan")
    _, mu1, mu0, s1, s0 = _moments(g.flatten(1).double(), y)
    return float(pair_sumkl(s1, s0, mu1 - mu0).sum())


def max_norm(g: torch.Tensor, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """max-norm perturbation of ``g [B, d]`` (see the module docstring)."""
    sq = g.flatten(1).pow(2).sum(1)
    sigma = (sq.max() / sq.clamp_min(1e-30) - 1).clamp_min(0).sqrt()
    xi = _randn(sq.shape, generator, g)
    return g * (1 + sigma * xi).view(-1, *([1] * (g.dim() - 1)))


def _randn(shape, generator: Optional[torch.Generator], like: torch.Tensor) -> torch.Tensor:
    if generator is None or generator.device == like.device:
        return torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)
    return torch.randn(shape, generator=generator).to(like.device, like.dtype)


def _noise(noise: Optional[torch.Tensor], flat: torch.Tensor, generator: Optional[torch.Generator]) -> torch.Tensor:
    if noise is None:
        return _randn(flat.shape, generator, flat)
    if tuple(noise.shape) != tuple(flat.shape):
        raise ConfigError(f"pre-drawn noise has shape {tuple(noise.shape)}, the derivatives {tuple(flat.shape)}")
    return noise.to(flat.device, flat.dtype)


def projpert_budgets(s1: torch.Tensor, s0: torch.Tensor, m: torch.Tensor, bound: float,
                     iters: int = 60) -> torch.Tensor:
    r"""Per-coordinate sumKL budgets ``c_j`` (summing to at most ``bound``) that need the least total
    noise (float64): with equal class targets :math:`t_j \ge a_j = \max(s_{1j}, s_{0j})`, coordinate
    ``j`` costs :math:`t_j^2` and carries :math:`m_j^2/t_j^2`; minimising :math:`\sum_j t_j^2` subject
    to :math:`\sum_j m_j^2/t_j^2 \le` ``bound`` gives :math:`t_j^2=\max(a_j^2, k|m_j|)` (water-filling),
    the level ``k`` found by bisection. The even split :math:`c_j=\text{bound}/d` costs
    :math:`d\lVert m\rVert^2/\text{bound}` when the stds are small; this costs
    :math:`(\sum_j|m_j|)^2/\text{bound}`, never more (Cauchy-Schwarz).
    """
    s1, s0, m = s1.double(), s0.double(), m.double().abs()
    a2 = torch.maximum(s1, s0).square()
    m2 = m.square()
    kl = lambda k: (m2 / torch.maximum(a2, k * m).clamp_min(1e-300)).sum()  # noqa: E731
    if float(kl(torch.zeros((), dtype=m.dtype, device=m.device))) <= bound:  # no coordinate needs more than a_j
        return m2 / a2.clamp_min(1e-300)
    # kl(k) <= sum m / k, so k = sum|m| / bound is feasible; bisect in log k below it
    hi = torch.log(m.sum() / bound)
    lo = hi - 80.0
    for _ in range(iters):
        mid = (lo + hi) / 2
        feasible = kl(mid.exp()) <= bound
        hi, lo = torch.where(feasible, mid, hi), torch.where(feasible, lo, mid)
    return m2 / torch.maximum(a2, hi.exp() * m).clamp_min(1e-300)


def projpert_targets(s1: torch.Tensor, s0: torch.Tensor, m: torch.Tensor, c, mode: str = "iso",
                     grid: int = 64, refine: int = 40) -> Tuple[torch.Tensor, torch.Tensor]:
    """Target class stds ``(t1, t0) >= (s1, s0)`` with per-coordinate sumKL <= ``c`` (float64);
    ``c`` is one budget for every coordinate or a tensor of per-coordinate budgets."""
    s1, s0, m = s1.double(), s0.double(), m.double().abs()
    if mode == "iso":
        t = torch.maximum(m / (c.sqrt() if torch.is_tensor(c) else math.sqrt(c)), torch.maximum(s1, s0))
        return t, t.clone()
    if mode != "opt":
        raise ConfigError(f"ProjPert mode must be 'iso' or 'opt', got {mode!r}")
    c = torch.as_tensor(c, dtype=torch.float64, device=s1.device).expand_as(s1).clamp_min(1e-300)
    done = pair_sumkl(s1, s0, m) <= c
    # feasible ratios r = t1/t0: A(r) = (r^2 + r^-2 - 2)/2 < c
    a = (c + 1) - ((c + 1) ** 2 - 1).sqrt()
    lo, hi = (0.5 * a.log() * (1 - 1e-9))[:, None], (-0.5 * a.log() * (1 - 1e-9))[:, None]
    c = c[:, None]

    def cost(log_r: torch.Tensor):
        r = log_r.exp()
        slack = (c - 0.5 * (r ** 2 + r ** -2 - 2)).clamp_min(1e-300)
        t0 = torch.maximum(torch.maximum(s0[:, None], s1[:, None] / r),
                           (m[:, None] ** 2 * (1 + r ** -2) / (2 * slack)).sqrt())
        return (r * t0 - s1[:, None]) ** 2 + (t0 - s0[:, None]) ** 2, r * t0, t0

    grid_r = lo + (hi - lo) * torch.linspace(0, 1, grid, dtype=torch.float64, device=s1.device)
    best = cost(grid_r)[0].argmin(1, keepdim=True)
    step = (hi - lo) / (grid - 1)
    left = torch.minimum(torch.maximum(grid_r.gather(1, best) - step, lo), hi)
    right = torch.minimum(torch.maximum(grid_r.gather(1, best) + step, lo), hi)
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(refine):  # golden-section search of the cost in log r inside the best grid cell
        x1, x2 = right - golden * (right - left), left + golden * (right - left)
        better = cost(x1)[0] < cost(x2)[0]
        right = torch.where(better, x2, right)
        left = torch.where(better, left, x1)
    _, t1, t0 = cost((left + right) / 2)
    t1, t0 = t1[:, 0], t0[:, 0]
    return torch.where(done, s1, t1), torch.where(done, s0, t0)


def projpert(g: torch.Tensor, y: torch.Tensor, bound: float, mode: str = "iso",
             generator: Optional[torch.Generator] = None, noise: Optional[torch.Tensor] = None) -> torch.Tensor:
    """ProjPert perturbation of ``g [B, d]`` to total diagonal sumKL <= ``bound``.

    ``noise``: a standard normal of ``g.flatten(1)``'s shape drawn beforehand (e.g. by
    :class:`~sgl.federated.noise.NoiseAhead`); otherwise it is drawn here from ``generator``.
    ``iso`` on CPU tensors runs as one numba kernel (:mod:`sgl.federated._projpert_numba`), the
    same perturbation up to float rounding; other devices (and ``opt``) run torch ops.
    """
    pos = y.reshape(-1) > 0.5
    if pos.all() or not pos.any():  # one class only: nothing to separate (FDL would give NaN moments)
        return g
    flat = g.flatten(1)
    z = _noise(noise, flat, generator)
    if mode == "iso" and host_kernel_applies(flat, z, pos):  # one numba call instead of ~30 small torch ops
        return projpert_iso_host(flat, pos, z, float(bound) / flat.shape[1]).view_as(g)
    return _projpert_torch(flat, pos, z, bound, mode).view_as(g)


def _projpert_torch(flat: torch.Tensor, pos: torch.Tensor, z: torch.Tensor, bound: float, mode: str) -> torch.Tensor:
    """ProjPert of ``flat [B, d]`` (both classes present) with noise ``z`` in torch ops, any device."""
    _, mu1, mu0, s1, s0 = _moments(flat, pos)
    # iso: the even split bound/d (closed form); opt: the least-noise split, then each coordinate's projection
    c = projpert_budgets(s1, s0, mu1 - mu0, float(bound)) if mode == "opt" else float(bound) / flat.shape[1]
    t1, t0 = projpert_targets(s1, s0, mu1 - mu0, c, mode)
    std1, std0 = (t1 ** 2 - s1 ** 2).clamp_min(0).sqrt(), (t0 ** 2 - s0 ** 2).clamp_min(0).sqrt()
    std1, std0 = std1.to(flat.dtype), std0.to(flat.dtype)
    scale = torch.addr(std0.expand_as(flat), pos.to(flat.dtype), std1 - std0)  # each row: its class's stds
    return torch.addcmul(flat, z, scale)


def _marvell_sumkl(lam: np.ndarray, u: float, v: float, delta2: float, d: int) -> float:
    a0, a1, b0, b1 = u + lam[0], v + lam[1], u + lam[2], v + lam[3]
    return float(0.5 * (a0 / a1 + a1 / a0 - 2) + 0.5 * (d - 1) * (b0 / b1 + b1 / b0 - 2)
                 + 0.5 * delta2 * (1 / a0 + 1 / a1))


def marvell_solve(u: float, v: float, delta2: float, p: float, d: int, bound: Optional[float] = None,
                  scale: Optional[float] = None) -> Tuple[np.ndarray, float]:
    """Marvell's variances ``(λ10, λ11, λ20, λ21)`` and their sumKL (isotropic model).

    With ``bound``: least expected power subject to sumKL <= bound. With ``scale``: least sumKL at
    power ``scale * delta2``. Variables are solved in units of ``u + v`` for conditioning.
    """
    from scipy.optimize import minimize

    unit = max(u + v, 1e-30)
    un, vn, dn = u / unit, v / unit, delta2 / unit
    weights = np.array([1 - p, p, (1 - p) * (d - 1), p * (d - 1)])
    kl = lambda lam: _marvell_sumkl(lam, un, vn, dn, d)  # noqa: E731
    if bound is not None:
        if kl(np.zeros(4)) <= bound:
            return np.zeros(4), kl(np.zeros(4))
        # feasible start: equal variances across the classes in the d-1 isotropic directions (that term
        # vanishes) and along delta a variance A with delta2 / A = bound; the old isotropic start (every
        # direction raised to max(u, v) + 4 delta2 / bound) cost ~d times more power, and SLSQP, which
        # fails on some batches, fell back to it
        big, top = max(un, vn), max(un, vn, dn / bound)
        start = np.array([top - un, top - vn, big - un, big - vn])
        res = minimize(lambda lam: float(weights @ lam), start, method="SLSQP", bounds=[(0, None)] * 4,
                       constraints=[{"type": "ineq", "fun": lambda lam: bound - kl(lam)}],
                       options={"maxiter": 200, "ftol": 1e-12})
        lam = res.x if res.success and kl(res.x) <= bound * (1 + 1e-6) else start
    else:
        if scale is None or scale < 0:
            raise ConfigError(f"Marvell needs a sumKL bound or a power scale >= 0, got bound={bound}, scale={scale}")
        power = scale * dn
        res = minimize(kl, np.full(4, power / max(weights.sum(), 1e-30)), method="SLSQP", bounds=[(0, None)] * 4,
                       constraints=[{"type": "ineq", "fun": lambda lam: power - float(weights @ lam)}],
                       options={"maxiter": 200, "ftol": 1e-12})
        lam = np.clip(res.x, 0, None)
    lam = np.clip(lam, 0, None)
    return lam * unit, kl(lam)


def marvell(g: torch.Tensor, y: torch.Tensor, bound: Optional[float] = None, scale: Optional[float] = None,
            generator: Optional[torch.Generator] = None, noise: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Marvell perturbation of ``g [B, d]`` (see the module docstring); ``noise`` as in :func:`projpert`."""
    pos = y.reshape(-1) > 0.5
    if pos.all() or not pos.any():
        return g
    flat = g.flatten(1)
    d = flat.shape[1]
    _, mu1, mu0, s1, s0 = _moments(flat, y)
    delta = (mu1 - mu0)
    delta2 = float(delta.pow(2).sum())
    u, v = float(s0.pow(2).mean()), float(s1.pow(2).mean())
    lam, _ = marvell_solve(u, v, delta2, float(pos.double().mean()), d, bound=bound, scale=scale)
    direction = (delta / max(math.sqrt(delta2), 1e-30)).to(flat.dtype)
    lam1 = torch.where(pos, torch.tensor(lam[1], dtype=flat.dtype, device=flat.device),
                       torch.tensor(lam[0], dtype=flat.dtype, device=flat.device)).sqrt()
    lam2 = torch.where(pos, torch.tensor(lam[3], dtype=flat.dtype, device=flat.device),
                       torch.tensor(lam[2], dtype=flat.dtype, device=flat.device)).sqrt()
    iso = _noise(noise, flat, generator)
    iso = iso - (iso @ direction)[:, None] * direction[None, :]
    along = _randn((flat.shape[0],), generator, flat)
    return (flat + lam1[:, None] * along[:, None] * direction[None, :] + lam2[:, None] * iso).view_as(g)


def perturb(defense: str, g: torch.Tensor, y: torch.Tensor, bound: Optional[float] = None,
            scale: Optional[float] = None, generator: Optional[torch.Generator] = None,
            noise: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Apply ``defense`` (one of :data:`DEFENSES`) to one batch's derivatives.

    ``noise``: the ``[B, d]`` standard normal of a Gaussian defense (Marvell, ProjPert) drawn
    beforehand; ``None`` draws it here from ``generator``.
    """
    key = str(defense).lower().replace("_", "-")
    if key == "none":
        return g
    if key == "max-norm":
        return max_norm(g, generator)
    if key == "marvell":
        return marvell(g, y, bound=bound, scale=scale, generator=generator, noise=noise)
    if key in ("projpert-iso", "projpert-opt"):
        if bound is None or not bound > 0:
            raise ConfigError(f"ProjPert needs a sumKL bound > 0, got {bound!r}")
        return projpert(g, y, bound, key.split("-")[1], generator, noise=noise)
    raise ConfigError(f"unknown defense {defense!r}; available: {', '.join(DEFENSES)}")
