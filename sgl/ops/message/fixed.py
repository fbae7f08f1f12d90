"""Parameter-free message operators: last hop, sum, mean, max, min, concatenation, fixed weights.

They are applied once at precompute time (``learnable = False``).
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from sgl.errors import ConfigError, FeatureError
from sgl.ops.message._common import _weighted_sum
from sgl.ops.message.base import MessageOperator

__all__ = ["LastHop", "SumHops", "MeanHops", "MaxHops", "MinHops", "ConcatHops", "WeightedHops",
           "GBP_DEFAULT_ALPHA"]


#: SGL's GBP model uses alpha = 0.85 for its alpha * (1 - alpha)^k hop weights.
GBP_DEFAULT_ALPHA = 0.85


class LastHop(MessageOperator):
    r"""The last selected hop, :math:`X_{\max\mathcal{K}}` (SGC: :math:`\hat A^K X`).

    The tensor is returned as is (no copy).
    """

    name = "last"

    def combine(self, hops: List[Tensor]) -> Tensor:
        return hops[-1]


def _sum(hops: List[Tensor]) -> Tensor:
    out = hops[0].clone()  # one [B, d] buffer, never a stacked [K, B, d] copy
    for hop in hops[1:]:
        out.add_(hop)
    return out


def _fold(hops: List[Tensor], reduce: Callable[..., Tensor]) -> Tensor:
    """Elementwise ``reduce`` (``torch.maximum`` / ``torch.minimum``) of the hops, in one buffer."""
    out = hops[0].clone()
    for hop in hops[1:]:
        reduce(out, hop, out=out)
    return out


class SumHops(MessageOperator):
    r""":math:`\sum_{k\in\mathcal{K}} X_k`."""

    name = "sum"

    def combine(self, hops: List[Tensor]) -> Tensor:
        return _sum(hops)


class MeanHops(MessageOperator):
    r""":math:`\frac{1}{|\mathcal{K}|}\sum_{k\in\mathcal{K}} X_k` (S²GC / SSGC)."""

    name = "mean"

    def combine(self, hops: List[Tensor]) -> Tensor:
        return _sum(hops).div_(len(hops))


class MaxHops(MessageOperator):
    r"""Elementwise :math:`\max_{k\in\mathcal{K}} X_k` (NaN propagates, as in ``torch.maximum``)."""

    name = "max"

    def combine(self, hops: List[Tensor]) -> Tensor:
        return _fold(hops, torch.maximum)


class MinHops(MessageOperator):
    r"""Elementwise :math:`\min_{k\in\mathcal{K}} X_k` (NaN propagates, as in ``torch.minimum``)."""

    name = "min"

    def combine(self, hops: List[Tensor]) -> Tensor:
        return _fold(hops, torch.minimum)


class ConcatHops(MessageOperator):
    r""":math:`[X_{k_1} \| X_{k_2} \| \dots]` along features (SIGN); ``d_out = d * |K|``."""

    name = "concat"

    def combine(self, hops: List[Tensor]) -> Tensor:
        return torch.cat(hops, dim=1)

    def out_features(self, in_features: int, num_hops: int) -> int:
        return int(in_features) * len(self.hop_range(num_hops))


class WeightedHops(MessageOperator):
    r"""Fixed weighted sum :math:`\sum_{k\in\mathcal{K}} w_k X_k`.

    Either ``weights`` (one number per used hop) or GBP's geometric weights
    :math:`w_k = \alpha(1-\alpha)^k`, where :math:`k` is the hop's index in the full list
    (so ``start=1`` begins at :math:`\alpha(1-\alpha)`, as in SGL). Without either, SGL's
    GBP default :math:`\alpha = 0.85` is used.

    Args:
        weights (list of float, optional): explicit weights, one per used hop.
        alpha (float, optional): GBP decay in ``(0, 1]``.
        start, end: hop slice (see :class:`MessageOperator`).
    """

    name = "weighted"

    def __init__(self, weights: Optional[Sequence[float]] = None, alpha: Optional[float] = None,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(start, end)
        if weights is not None and alpha is not None:
            raise ConfigError("give either weights=[...] or alpha=..., not both")
        self.weights: Optional[List[float]] = None
        self.alpha: Optional[float] = None
        if weights is not None:
            if hasattr(weights, "tolist"):  # a tensor or numpy array
                weights = weights.tolist()
            if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or len(weights) == 0:
                raise ConfigError(f"weights must be a non-empty list of numbers, got {weights!r}")
            if not all(isinstance(w, Real) and not isinstance(w, bool) and math.isfinite(w) for w in weights):
                raise ConfigError(f"weights must be finite numbers, got {list(weights)!r}")
            self.weights = [float(w) for w in weights]
            if self.end is not None and self.start >= 0 and self.end >= 0 \
                    and len(self.weights) != self.end - self.start:
                raise ConfigError(
                    f"weights has {len(self.weights)} entries but hops[{self.start}:{self.end}] uses "
                    f"{self.end - self.start}; give one weight per used hop"
                )
        else:
            alpha = GBP_DEFAULT_ALPHA if alpha is None else alpha
            if isinstance(alpha, bool) or not isinstance(alpha, Real) or not 0.0 < float(alpha) <= 1.0:
                raise ConfigError(f"alpha must be in (0, 1], got {alpha!r}")
            self.alpha = float(alpha)

    def _weights_for(self, indices: Sequence[int]) -> List[float]:
        if self.weights is not None:
            if len(self.weights) != len(indices):
                raise FeatureError(
                    f"weights has {len(self.weights)} entries but hops[{self.start}:{self.end}] selects "
                    f"{len(indices)} hop(s); give one weight per used hop"
                )
            return list(self.weights)
        return [self.alpha * (1.0 - self.alpha) ** k for k in indices]

    def resolved_weights(self, num_hops: int) -> List[float]:
        """The weights of the used hops when ``num_hops`` hops are given."""
        return self._weights_for(self.hop_range(num_hops, FeatureError))

    def forward(self, hops: Sequence[Tensor]) -> Tensor:
        """:math:`\\sum_k w_k X_k` over ``hops[start:end]``."""
        return self.combine(self._select(hops), self.hop_range(len(hops)))

    def combine(self, hops: List[Tensor], indices: Optional[Sequence[int]] = None) -> Tensor:
        """Weighted sum of the selected ``hops``, whose positions in the full list are ``indices``
        (GBP's weights depend on them; default ``0, 1, ...``)."""
        indices = range(len(hops)) if indices is None else indices
        weights = torch.tensor(self._weights_for(indices), dtype=hops[0].dtype, device=hops[0].device)
        return _weighted_sum(hops, weights)

    def hparams(self) -> Dict[str, Any]:
        return {"weights": self.weights} if self.weights is not None else {"alpha": self.alpha}
