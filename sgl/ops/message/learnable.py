"""Learnable message operators that run per mini-batch: per-hop projections, learnable hop
weights (PaSca-V1 "simple") and the per-node gate (PaSca-V2/V3)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
from torch import Tensor, nn

from sgl._checks import check_bool
from sgl.ops.message._common import (
    _PROJECTION_ACTIVATIONS, _check_choice, _check_int, _init_linear, _weighted_sum,
)
from sgl.ops.message.base import _LearnableOperator, _PerNodeWeighted

__all__ = ["ProjectedConcat", "LearnableWeightedHops", "GatedHops"]


class ProjectedConcat(_LearnableOperator):
    r"""Project each used hop, then concatenate: :math:`[\sigma(X_{k_1}W_{k_1} + b_{k_1}) \| \dots]`.

    Each hop has its own ``Linear(in_features, hidden)`` (NARS-SIGN style); the output has
    ``hidden * |K|`` columns.

    Args:
        in_features (int): hop width ``d``.
        hidden (int): width of each projection.
        num_hops (int): number of hops passed to ``forward`` (before slicing).
        act (str, optional): ``relu`` (default), ``leaky_relu``, ``prelu``, ``sigmoid``, ``tanh``
            or ``None`` for a purely linear projection.
        start, end: hop slice.
    """

    name = "projected_concat"

    def __init__(self, in_features: int, hidden: int, num_hops: int, act: Optional[str] = "relu",
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(num_hops, in_features, start, end)
        self.hidden = _check_int(hidden, "hidden", 1)
        self.act = _check_choice(act, "act", _PROJECTION_ACTIVATIONS)
        self.projections = nn.ModuleList(nn.Linear(self.in_features, self.hidden) for _ in range(self.num_used))
        activations = {"relu": nn.ReLU, "leaky_relu": nn.LeakyReLU, "prelu": nn.PReLU,
                       "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, None: nn.Identity}
        # one module per hop so a PReLU slope is not shared across hops
        self.activations = nn.ModuleList(activations[self.act]() for _ in range(self.num_used))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for projection in self.projections:
            projection.reset_parameters()
        for activation in self.activations:
            if hasattr(activation, "reset_parameters"):
                activation.reset_parameters()

    def combine(self, hops: List[Tensor]) -> Tensor:
        return torch.cat([act(proj(hop)) for hop, proj, act in zip(hops, self.projections, self.activations)], 1)

    def out_features(self, in_features: int, num_hops: int) -> int:
        super().out_features(in_features, num_hops)
        return self.hidden * self.num_used

    def hparams(self) -> Dict[str, Any]:
        return {"in_features": self.in_features, "hidden": self.hidden, "num_hops": self.num_hops, "act": self.act}


class LearnableWeightedHops(_LearnableOperator):
    r"""One learnable scalar per used hop: :math:`\sum_k \beta_k X_k` (PaSca-V1 "simple").

    By default :math:`\beta = \mathrm{softmax}(\theta)`, starting from :math:`\theta = 0`
    (the mean of the hops). SGL squashed :math:`\theta` through a sigmoid before the
    softmax, which caps the ratio of two weights at :math:`e`; we do not. With
    ``allow_negative=True`` the weights are the raw :math:`\theta` (no normalisation,
    SGL's "simple_allow_neg"), starting at :math:`1/|\mathcal{K}|`.

    Args:
        num_hops (int): number of hops passed to ``forward`` (before slicing).
        allow_negative (bool): use unnormalised, possibly negative weights.
        start, end: hop slice.
    """

    name = "learnable_weighted"

    def __init__(self, num_hops: int, allow_negative: bool = False,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(num_hops, None, start, end)
        self.allow_negative = check_bool(allow_negative, "allow_negative")
        self.theta = nn.Parameter(torch.empty(self.num_used))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.theta.fill_(1.0 / self.num_used if self.allow_negative else 0.0)

    def current_weights(self) -> Tensor:
        """The current ``[|K|]`` hop weights (differentiable)."""
        return self.theta if self.allow_negative else torch.softmax(self.theta, dim=0)

    def combine(self, hops: List[Tensor]) -> Tensor:
        return _weighted_sum(hops, self.current_weights().to(hops[0].dtype))

    def hparams(self) -> Dict[str, Any]:
        return {"num_hops": self.num_hops, "allow_negative": self.allow_negative}


class GatedHops(_PerNodeWeighted, _LearnableOperator):
    r"""Per-node gate (PaSca-V2/V3 "gate"): :math:`\alpha_{ik} = \mathrm{softmax}_k(w^\top X_{ik} + b)`.

    One ``Linear(in_features, 1)`` is shared by all hops; the softmax runs over the hops
    of each node separately. (SGL passed the score through a sigmoid first, which caps the
    ratio of two weights at :math:`e`; the plain softmax does not.)

    Args:
        in_features (int): hop width ``d``.
        num_hops (int): number of hops passed to ``forward`` (before slicing).
        start, end: hop slice.
    """

    name = "gate"

    def __init__(self, in_features: int, num_hops: int, start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(num_hops, in_features, start, end)
        self.gate = nn.Linear(self.in_features, 1)
        self.last_attention = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _init_linear(self.gate)

    def hop_weights(self, hops: List[Tensor]) -> Tensor:
        scores = torch.cat([self.gate(hop) for hop in hops], dim=1)  # [B, K]: row i is node i
        return torch.softmax(scores, dim=1)

    def hparams(self) -> Dict[str, Any]:
        return {"in_features": self.in_features, "num_hops": self.num_hops}
