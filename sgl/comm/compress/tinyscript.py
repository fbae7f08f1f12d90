"""TinyScript-style non-uniform stochastic quantisation (Fu et al., ICML 2020; our reconstruction).

A tensor ``x`` is sent as one ``bits``-bit code per value, one float32 scale ``s = max|x|`` and
one float32 knob. The values ``v = x / s`` in ``[-1, 1]`` are rounded **stochastically** to the
neighbouring levels of a sorted, sign-symmetric level set ``l_0 < ... < l_{n-1}`` (``l_0 = -1``,
``l_{n-1} = 1``): up with probability ``(v - l_i) / (l_{i+1} - l_i)``, so ``E[Q(x)] = x``, with
variance ``sum_i E[(v - l_i)(l_{i+1} - v) ; l_i <= v < l_{i+1}] * s^2``. Two layouts of the
``L = 2**(bits-1)`` magnitudes, under a level power ``gamma``:

* **with zero** (``knob = gamma > 0``): magnitudes ``(i / (L-1))^gamma``, ``i = 0 .. L-1``, so
  ``2L - 1`` levels ``{-1, ..., 0, ..., 1}`` (one code unused; at 2 bits the ternary ``{-1, 0, 1}``);
* **zero-free** (``knob = -gamma < 0``): magnitudes ``((2j+1) / (2L-1))^gamma``, ``j = 0 .. L-1``,
  so all ``2L`` codes are distinct levels ``{-1, ..., -a, +a, ..., 1}`` (``a = (2L-1)^-gamma``; at
  2 bits the four levels ``{-1, -a, +a, 1}``). Values in ``(-a, a)`` round between ``-a`` and
  ``+a``, still unbiased; an exact zero costs variance ``a^2``.

**Knob search.** TinyScript models the values with a Weibull family and searches the
quantisation knobs that minimise that variance. Its code is not public; ours fits a Weibull
``W(k, lambda)`` to the non-zero ``|v|`` by moments (the shape from ``E[u^2] / E[u]^2 =
Gamma(1 + 2/k) / Gamma(1 + 1/k)^2``), notes the fraction ``z`` of exact zeros, and searches the
layout and ``gamma`` (a log grid that contains ``gamma = 1``) minimising the variance under
``z * delta_0 + (1 - z) * W(k, lambda)`` truncated to ``[0, 1]``. Uniform quantisation
(:class:`UniformQuantizer`, QSGD-style with a max-norm scale) is the same code with the
with-zero layout and ``gamma = 1``, which is one of the candidates, so at equal bits the two
differ only in their levels and TinyScript's modelled variance is never above uniform's.

Wire size of ``n`` values: ``ceil(n * bits / 8) + 8`` bytes.

>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> x = torch.randn(20000, generator=g) ** 3               # heavy-tailed, like gradients
>>> ts, un = TinyScriptQuantizer(4, seed=0), UniformQuantizer(4, seed=0)
>>> err_ts = (ts.decode(ts.encode(x), x.numel()) - x).pow(2).mean()
>>> err_un = (un.decode(un.encode(x), x.numel()) - x).pow(2).mean()
>>> bool(err_ts < 0.5 * err_un), ts.encode(x).numel()
(True, 10008)
>>> TinyScriptQuantizer(2).levels(-2.0).tolist()           # 2 bits, zero-free: {-1, -1/9, 1/9, 1}
[-1.0, -0.1111111111111111, 0.1111111111111111, 1.0]
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
_GAMMA_GRID = torch.cat([torch.logspace(math.log10(0.25), math.log10(16.0), 48, dtype=torch.float64),
                         torch.ones(1, dtype=torch.float64)])
# cells of the modelled density: log-spaced edges resolve Weibull shapes piled up near zero
_U_EDGES = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(-9, 0, 2048, dtype=torch.float64)])


def check_bits(bits: int, who: str) -> int:
    """``bits`` as an int in ``[2, 8]`` (at least four codes)."""
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


def _signed_levels(knob: float | torch.Tensor, count: int, device=None) -> torch.Tensor:
    """The sorted level set of a knob (module docstring): ``[..., n]`` for a tensor of knobs."""
    knob = torch.as_tensor(knob, dtype=torch.float64, device=device)
    gamma = knob.abs().unsqueeze(-1)
    if bool((knob > 0).all()):
        mags = torch.linspace(0, 1, count, dtype=torch.float64, device=device) ** gamma
        return torch.cat([-mags[..., 1:].flip(-1), mags], -1)
    if not bool((knob < 0).all()):
        raise ConfigError("a batch of knobs must share one layout (all > 0 or all < 0)")
    mags = (torch.arange(1, 2 * count, 2, dtype=torch.float64, device=device) / (2 * count - 1)) ** gamma
    return torch.cat([-mags.flip(-1), mags], -1)


def level_variance(levels: torch.Tensor, u: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Stochastic-rounding variance ``sum w(u) (u - l_i)(l_{i+1} - u)`` of points ``u`` with weights.

    ``levels``: sorted ``[n]``, or ``[c, n]`` for ``c`` level sets at once (then the result is ``[c]``).
    """
    batch = levels.dim() == 2
    lv = levels if batch else levels.unsqueeze(0)
    uu = u.unsqueeze(0).expand(lv.shape[0], -1).contiguous()
    i = (torch.searchsorted(lv, uu, right=True) - 1).clamp(0, lv.shape[1] - 2)
    var = ((uu - lv.gather(1, i)) * (lv.gather(1, i + 1) - uu) * weight).sum(1)
    return var if batch else var[0]


def _search_knob(k: float, lam: float, zeros: float, count: int) -> float:
    """The layout and level power minimising the variance under ``zeros * delta_0 + (1 - zeros) * W(k, lam)``."""
    cdf = -torch.expm1(-(_U_EDGES / lam) ** k)
    mass = cdf[1:] - cdf[:-1]
    if not torch.isfinite(mass).all() or float(mass.sum()) <= 0:
        return 1.0
    u = torch.cat([torch.zeros(1, dtype=torch.float64), (_U_EDGES[1:] * _U_EDGES[:-1].clamp_min(1e-10)).sqrt()])
    weight = torch.cat([torch.tensor([zeros], dtype=torch.float64), mass / mass.sum() * (1 - zeros)])
    best, knob = math.inf, 1.0
    for sign in (1.0, -1.0):
        knobs = sign * _GAMMA_GRID
        scores = level_variance(_signed_levels(knobs, count), u, weight)
        i = int(torch.argmin(scores))
        if float(scores[i]) < best:
            best, knob = float(scores[i]), float(knobs[i])
    return knob


class _LevelQuantizer:
    """Stochastic rounding of ``x / max|x|`` to a sign-symmetric level set chosen by :meth:`knob`."""

    name = "levels"

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
        """The knob for magnitudes ``u = |x| / max|x|`` (uniform: the with-zero layout, ``gamma = 1``)."""
        return 1.0

    def levels(self, knob: float, device=None) -> torch.Tensor:
        """The sorted float64 level set in ``[-1, 1]`` a knob stands for (module docstring)."""
        return _signed_levels(float(knob), self.count, device)

    def payload_bytes(self, numel: int) -> int:
        """Bytes :meth:`encode` returns for ``numel`` values."""
        return (numel * self.bits + 7) // 8 + 8

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as a ``uint8`` payload (scale, knob, then packed level indices), on ``x``'s device."""
        if not x.is_floating_point():
            raise ConfigError(f"{type(self).__name__}.encode: x must be a float tensor, got {x.dtype}")
        flat = x.detach().reshape(-1).to(torch.float32)
        scale = flat.abs().max() if flat.numel() else flat.new_zeros(())
        v = (flat / torch.where(scale > 0, scale, torch.ones_like(scale))).to(torch.float64)
        knob = torch.tensor(self.knob(v.abs()), dtype=torch.float32, device=flat.device)
        levels = self.levels(float(knob), flat.device)  # from the float32 knob: what decode will see
        i = (torch.searchsorted(levels, v, right=True) - 1).clamp(0, levels.numel() - 2)
        width = levels[i + 1] - levels[i]
        p = ((v - levels[i]) / width).clamp(0, 1)
        up = torch.rand(v.shape, device=flat.device, generator=self._generator(flat.device), dtype=torch.float64) < p
        head = torch.stack([scale.reshape(()), knob])
        return torch.cat([head.view(torch.uint8), pack_bits(i + up.long(), self.bits)])

    def decode(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        """The float32 values (flat, ``numel`` of them) of a payload."""
        if payload.dtype != torch.uint8 or payload.numel() != self.payload_bytes(numel):
            raise CommError(f"{type(self).__name__}.decode: expected {self.payload_bytes(numel)} uint8 bytes for "
                            f"{numel} values at {self.bits} bits, got {payload.numel()} {payload.dtype}")
        scale, knob = payload[:8].clone().view(torch.float32).tolist()
        if not math.isfinite(knob) or knob == 0:
            raise CommError(f"{type(self).__name__}.decode: the payload's knob is {knob}; not a payload of this codec")
        levels = self.levels(knob, payload.device).to(torch.float32)
        code = unpack_bits(payload[8:], self.bits, numel).clamp_max(levels.numel() - 1)
        return levels[code] * scale

    def roundtrip(self, x: torch.Tensor) -> torch.Tensor:
        """``decode(encode(x))`` shaped like ``x``."""
        return self.decode(self.encode(x), x.numel()).reshape(x.shape).to(x.dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bits={self.bits})"


class UniformQuantizer(_LevelQuantizer):
    """QSGD-style stochastic uniform quantisation: levels ``±i / (L-1)`` of ``max|x|`` (with zero).

    Args:
        bits: code width in ``[2, 8]`` (the ``2**bits - 1`` levels of sign + ``bits - 1`` magnitude bits).
        seed: seeds the stochastic rounding.
    """

    name = "uniform"


class TinyScriptQuantizer(_LevelQuantizer):
    """TinyScript's non-uniform quantiser: Weibull fit + variance-minimising layout and level power.

    Args:
        bits: code width in ``[2, 8]``.
        seed: seeds the stochastic rounding.
        fit_sample: values the Weibull fit looks at (a strided subsample of larger tensors).
    """

    name = "tinyscript"

    def __init__(self, bits: int, seed: int = 0, fit_sample: int = 65536) -> None:
        super().__init__(bits, seed)
        self.fit_sample = check_int(fit_sample, "TinyScriptQuantizer fit_sample", 16)
        self._cache: Dict[Tuple[float, float, float], float] = {}

    def knob(self, u: torch.Tensor) -> float:
        step = max(1, u.numel() // self.fit_sample)
        sample = u[::step].cpu()  # a moment fit and a zero count on host: scalars, not device data
        k, lam = fit_weibull(sample)
        zeros = float((sample == 0).double().mean()) if sample.numel() else 0.0
        # fits within ~5 % (and zero fractions within 0.02) share a knob: the variance is flat near its minimum
        key = (round(math.log(k) * 20) / 20, round(math.log(max(lam, 1e-30)) * 20) / 20, round(zeros * 50) / 50)
        if key not in self._cache:
            self._cache[key] = _search_knob(math.exp(key[0]), math.exp(key[1]), key[2], self.count)
        return self._cache[key]


def build_quantizer(name: str, bits: int, seed: int = 0) -> Optional[_LevelQuantizer]:
    """``tinyscript`` / ``uniform`` quantiser of ``bits`` bits (``none``: ``None``)."""
    table = {"tinyscript": TinyScriptQuantizer, "uniform": UniformQuantizer}
    if name == "none":
        return None
    if name not in table:
        raise ConfigError(f"unknown quantiser {name!r}; choose tinyscript, uniform or none")
    return table[name](bits, seed=seed)
