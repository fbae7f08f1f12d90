"""TinyScript-style non-uniform stochastic quantisation (Fu et al., ICML 2020; our reconstruction).

A tensor ``x`` is sent as one sign bit and a ``(bits - 1)``-bit level index per value, one
float32 scale ``s = max|x|`` and one float32 knob. The magnitudes ``u = |x| / s`` in ``[0, 1]``
are rounded **stochastically** to the neighbouring levels ``0 = l_0 < ... < l_{L-1} = 1``
(``L = 2**(bits-1)``): up with probability ``(u - l_i) / (l_{i+1} - l_i)``, so
``E[Q(x)] = x``, with variance ``sum_i E[(u - l_i)(l_{i+1} - u) ; l_i <= u < l_{i+1}] * s^2``.

**Knob search.** TinyScript models the values with a Weibull family and searches the
quantisation knobs that minimise that variance. Its code is not public; ours fits a Weibull
``W(k, lambda)`` to the non-zero ``u`` by moments (the shape from ``E[u^2] / E[u]^2 =
Gamma(1 + 2/k) / Gamma(1 + 1/k)^2``) and searches one knob, the power ``gamma`` of the levels
``l_i = (i / (L - 1))^gamma``, on a log grid that contains ``gamma = 1`` (uniform levels),
minimising the variance under the fitted density. Uniform quantisation
(:class:`UniformQuantizer`, QSGD-style with a max-norm scale) is the same code with
``gamma = 1``, so at equal bits the two differ only in their levels.

Wire size of ``n`` values: ``ceil(n * bits / 8) + 8`` bytes.

>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> x = torch.randn(20000, generator=g) ** 3               # heavy-tailed, like gradients
>>> ts, un = TinyScriptQuantizer(4, seed=0), UniformQuantizer(4, seed=0)
>>> err_ts = (ts.decode(ts.encode(x), x.numel()) - x).pow(2).mean()
>>> err_un = (un.decode(un.encode(x), x.numel()) - x).pow(2).mean()
>>> bool(err_ts < 0.5 * err_un), ts.encode(x).numel()
(True, 10008)
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

import torch

from sgl._checks import check_int
from sgl.comm.compress.bitpack import pack_bits, unpack_bits
from sgl.errors import CommError, ConfigError

__all__ = ["TinyScriptQuantizer", "UniformQuantizer", "fit_weibull", "level_variance", "check_bits"]

_K_GRID = torch.logspace(math.log10(0.05), math.log10(50.0), 600, dtype=torch.float64)
_GAMMA_GRID = torch.cat([torch.logspace(math.log10(0.25), math.log10(8.0), 48, dtype=torch.float64),
                         torch.ones(1, dtype=torch.float64)])
_U_GRID = 4096


def check_bits(bits: int, who: str) -> int:
    """``bits`` as an int in ``[2, 8]`` (one sign bit and at least one magnitude bit)."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ConfigError(f"{who}: bits must be an integer in [1, 8] (the width of one code), got {bits!r}")
    if bits < 2:
        raise ConfigError(f"{who}: bits=1 leaves no magnitude bit after the sign; use bits in [2, 8]")
    return bits


def fit_weibull(u: torch.Tensor) -> Tuple[float, float]:
    """Method-of-moments Weibull ``(k, lambda)`` of the positive values of ``u``.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> k, lam = fit_weibull(torch.distributions.Weibull(0.5, 2.0).sample((50000,)))  # scale 0.5, shape 2
    >>> round(k, 1), round(lam, 2)
    (2.0, 0.5)
    """
    pos = u[u > 0].to(torch.float64)
    if pos.numel() < 2:
        return 1.0, float(pos.mean()) if pos.numel() else 1.0
    m1, m2 = float(pos.mean()), float(pos.pow(2).mean())
    ratio = m2 / max(m1 * m1, 1e-300)
    lg1 = torch.lgamma(1 + 1 / _K_GRID)
    curve = torch.exp(torch.lgamma(1 + 2 / _K_GRID) - 2 * lg1)  # decreasing in k
    i = int(torch.searchsorted(-curve, torch.tensor(-ratio, dtype=torch.float64)).clamp(0, _K_GRID.numel() - 1))
    k = float(_K_GRID[i])
    return k, m1 / math.exp(float(torch.lgamma(torch.tensor(1 + 1 / k, dtype=torch.float64))))


def _levels(gamma: float | torch.Tensor, count: int, device=None) -> torch.Tensor:
    base = torch.linspace(0, 1, count, dtype=torch.float64, device=device)
    return base ** gamma


def level_variance(levels: torch.Tensor, u: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Stochastic-rounding variance ``sum w(u) (u - l_i)(l_{i+1} - u)`` of points ``u`` with weights."""
    i = (torch.searchsorted(levels, u, right=True) - 1).clamp(0, levels.numel() - 2)
    return ((u - levels[i]) * (levels[i + 1] - u) * weight).sum()


def _search_gamma(k: float, lam: float, count: int) -> float:
    """The level power minimising the variance under ``W(k, lam)`` truncated to ``[0, 1]``."""
    u = (torch.arange(_U_GRID, dtype=torch.float64) + 0.5) / _U_GRID
    z = u / lam
    pdf = (k / lam) * z ** (k - 1) * torch.exp(-z ** k)
    if not torch.isfinite(pdf).all() or float(pdf.sum()) <= 0:
        return 1.0
    scores = torch.stack([level_variance(_levels(g, count), u, pdf) for g in _GAMMA_GRID.tolist()])
    return float(_GAMMA_GRID[int(torch.argmin(scores))])


class _PowerQuantizer:
    """Sign + stochastic rounding of ``|x| / max|x|`` to the levels ``(i / (L-1))^gamma``."""

    name = "power"

    def __init__(self, bits: int, seed: int = 0) -> None:
        self.bits = check_bits(bits, type(self).__name__)
        self.count = 1 << (self.bits - 1)
        self.seed = int(seed)
        self._generators: Dict[str, torch.Generator] = {}

    def _generator(self, device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[key]

    def knob(self, u: torch.Tensor) -> float:
        return 1.0

    def payload_bytes(self, numel: int) -> int:
        """Bytes :meth:`encode` returns for ``numel`` values."""
        return (numel * self.bits + 7) // 8 + 8

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as a ``uint8`` payload (scale, knob, then packed sign+index codes), on ``x``'s device."""
        if not x.is_floating_point():
            raise ConfigError(f"{type(self).__name__}.encode: x must be a float tensor, got {x.dtype}")
        flat = x.detach().reshape(-1).to(torch.float32)
        scale = flat.abs().max() if flat.numel() else flat.new_zeros(())
        u = (flat.abs() / torch.where(scale > 0, scale, torch.ones_like(scale))).to(torch.float64)
        gamma = self.knob(u)
        levels = _levels(gamma, self.count, flat.device)
        i = (torch.searchsorted(levels, u, right=True) - 1).clamp(0, self.count - 2)
        width = levels[i + 1] - levels[i]
        p = ((u - levels[i]) / torch.where(width > 0, width, torch.ones_like(width))).clamp(0, 1)
        up = torch.rand(u.shape, device=flat.device, generator=self._generator(flat.device), dtype=torch.float64) < p
        index = i + up.long()
        code = index * 2 + (flat < 0).long()
        head = torch.stack([scale.reshape(()), torch.tensor(gamma, dtype=torch.float32, device=flat.device)])
        return torch.cat([head.view(torch.uint8), pack_bits(code, self.bits)])

    def decode(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        """The float32 values (flat, ``numel`` of them) of a payload."""
        if payload.dtype != torch.uint8 or payload.numel() != self.payload_bytes(numel):
            raise CommError(f"{type(self).__name__}.decode: expected {self.payload_bytes(numel)} uint8 bytes for "
                            f"{numel} values at {self.bits} bits, got {payload.numel()} {payload.dtype}")
        scale, gamma = payload[:8].clone().view(torch.float32).tolist()
        code = unpack_bits(payload[8:], self.bits, numel)
        levels = _levels(gamma, self.count, payload.device).to(torch.float32)
        sign = 1 - 2 * (code & 1)
        return sign * levels[code >> 1] * scale

    def roundtrip(self, x: torch.Tensor) -> torch.Tensor:
        """``decode(encode(x))`` shaped like ``x``."""
        return self.decode(self.encode(x), x.numel()).reshape(x.shape).to(x.dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bits={self.bits})"


class UniformQuantizer(_PowerQuantizer):
    """QSGD-style stochastic uniform quantisation: levels ``i / (L-1)`` of ``max|x|``, sign apart.

    Args:
        bits: code width in ``[2, 8]`` (1 sign bit + ``bits - 1`` magnitude bits).
        seed: seeds the stochastic rounding.
    """

    name = "uniform"


class TinyScriptQuantizer(_PowerQuantizer):
    """TinyScript's non-uniform quantiser: Weibull fit + variance-minimising level power (module docstring).

    Args:
        bits: code width in ``[2, 8]``.
        seed: seeds the stochastic rounding.
        fit_sample: values the Weibull fit looks at (a strided subsample of larger tensors).
    """

    name = "tinyscript"

    def __init__(self, bits: int, seed: int = 0, fit_sample: int = 65536) -> None:
        super().__init__(bits, seed)
        self.fit_sample = check_int(fit_sample, "TinyScriptQuantizer fit_sample", 16)
        self._cache: Dict[Tuple[float, float], float] = {}

    def knob(self, u: torch.Tensor) -> float:
        step = max(1, u.numel() // self.fit_sample)
        k, lam = fit_weibull(u[::step].cpu())  # two moments on host: a scalar fit, not device data
        key = (round(math.log(k), 2), round(math.log(max(lam, 1e-30)), 2))  # fits this close share a knob
        if key not in self._cache:
            self._cache[key] = _search_gamma(math.exp(key[0]), math.exp(key[1]), self.count)
        return self._cache[key]


def build_quantizer(name: str, bits: int, seed: int = 0) -> Optional[_PowerQuantizer]:
    """``tinyscript`` / ``uniform`` quantiser of ``bits`` bits (``none``: ``None``)."""
    table = {"tinyscript": TinyScriptQuantizer, "uniform": UniformQuantizer}
    if name == "none":
        return None
    if name not in table:
        raise ConfigError(f"unknown quantiser {name!r}; choose tinyscript, uniform or none")
    return table[name](bits, seed=seed)
