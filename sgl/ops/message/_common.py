"""What several message operators share: argument checks, activations, the weighted hop sum."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from torch import Tensor, nn

from sgl._checks import check_int
from sgl.errors import ConfigError

_SCORE_ACTIVATIONS = ("sigmoid", "relu", "leaky_relu")
_PROJECTION_ACTIVATIONS = ("relu", "leaky_relu", "prelu", "sigmoid", "tanh", None)


def _check_int(value: Any, name: str, minimum: Optional[int] = None) -> int:
    # The bound is worded apart from the type (">= 1", not "an integer >= 1"), as always here.
    number = check_int(value, name)
    if minimum is not None and number < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return number


def _check_choice(value: Any, name: str, choices: Sequence[Any]) -> Any:
    # sgl._checks.check_choice words the choices differently; these messages stay as they were.
    if value not in choices:
        raise ConfigError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def _score_activation(name: str) -> nn.Module:
    # leaky_relu uses GAMLP's slope 0.2
    return {"sigmoid": nn.Sigmoid(), "relu": nn.ReLU(), "leaky_relu": nn.LeakyReLU(0.2)}[name]


def _weighted_sum(hops: Sequence[Tensor], weights: Tensor) -> Tensor:
    """:math:`\\sum_k w_k X_k` with ``weights`` of shape ``[K]`` (shared) or ``[B, K]`` (per node).

    Accumulates hop by hop instead of stacking, so memory is one ``[B, d]`` buffer even
    when this runs once over a whole graph at precompute time. The in-place ``addcmul_``
    is autograd-safe: the running sum is never saved for backward.
    """
    per_node = weights.dim() == 2
    out = hops[0] * (weights[:, :1] if per_node else weights[0])
    for k in range(1, len(hops)):
        out.addcmul_(hops[k], weights[:, k:k + 1] if per_node else weights[k])
    return out


def _init_linear(linear: nn.Linear) -> None:
    # GAMLP's initialisation of its attention and reference layers
    nn.init.xavier_uniform_(linear.weight, gain=nn.init.calculate_gain("relu"))
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)
