r"""Message operators: combine precomputed hops into one feature matrix per node.

A scalable (SGAP) model precomputes the hops :math:`[X_0 = X, X_1 = \hat A X, \dots,
X_K = \hat A^K X]` once; a *message operator* then combines the rows of those hops for
a batch of nodes — a list of ``[B, d]`` tensors — into a single ``[B, d_out]`` tensor.
Operators without parameters (``learnable = False``) are applied once at precompute
time; learnable ones run on every mini-batch inside ``forward``.

Every operator uses the hops ``hops[start:end]`` (Python slice semantics, ``end=None``
means "to the last hop"); write :math:`\mathcal{K}` for the hop indices in that slice
and :math:`\alpha_{ik}` for per-node weights that sum to one over :math:`k`.

================================  ==============================================================
registry name (class)             output
================================  ==============================================================
``last`` (:class:`LastHop`)       :math:`X_{\max\mathcal{K}}` (SGC)
``mean`` / ``sum``                :math:`\frac{1}{|\mathcal{K}|}\sum_k X_k` (S²GC) / :math:`\sum_k X_k`
``max`` / ``min``                 elementwise max / min over :math:`k`
``concat``                        :math:`[X_{k_1} \| X_{k_2} \| \dots]` (SIGN), width :math:`d|\mathcal{K}|`
``projected_concat``              :math:`[\sigma(X_{k_1}W_{k_1}) \| \dots]`, width ``hidden`` :math:`\cdot|\mathcal{K}|`
``weighted``                      :math:`\sum_k w_k X_k`, fixed ``weights`` or GBP's :math:`w_k=\alpha(1-\alpha)^k`
``learnable_weighted``            :math:`\sum_k \mathrm{softmax}(\theta)_k X_k` (PaSca-V1 "simple")
``gate``                          :math:`\alpha_{ik} = \mathrm{softmax}_k(w^\top X_{ik} + b)` (PaSca-V2/V3)
``jk_attention``                  GAMLP JK attention (reference vector from all hops)
``recursive_attention``           GAMLP recursive attention
``nafs``                          NAFS node-adaptive smoothing weights (parameter-free)
================================  ==============================================================

The per-node operators (``gate``, ``jk_attention``, ``recursive_attention``, ``nafs``)
keep every node's scores in its own row from the first matrix product to the weighted
sum, so nodes are never mixed. (The original SGL reshaped hop-major score stacks with
``view(-1, K)``, which scrambles the JK attention across nodes.) Their ``forward``
takes ``return_weights=True`` to also return the ``[B, |K|]`` weights, and they keep a
detached copy of the latest weights in ``last_attention``.

Example:
    >>> import torch
    >>> from sgl.ops import get_message_op
    >>> hops = [torch.ones(4, 3), 2 * torch.ones(4, 3), 3 * torch.ones(4, 3)]
    >>> get_message_op("mean")(hops)[0]
    tensor([2., 2., 2.])
    >>> op = get_message_op("concat", start=1)
    >>> op(hops).shape, op.out_features(in_features=3, num_hops=3)
    (torch.Size([4, 6]), 6)
    >>> get_message_op(**op.config())
    ConcatHops(start=1, end=None)
"""
from __future__ import annotations

import abc
import math
from numbers import Integral, Real
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sgl.errors import ConfigError, FeatureError, GraphError

__all__ = [
    "MessageOperator",
    "LastHop",
    "MeanHops",
    "SumHops",
    "MaxHops",
    "MinHops",
    "ConcatHops",
    "ProjectedConcat",
    "WeightedHops",
    "LearnableWeightedHops",
    "GatedHops",
    "JKAttention",
    "RecursiveAttention",
    "NodeAdaptiveSmoothing",
    "stationary_features",
    "get_message_op",
    "MESSAGE_OPERATORS",
]

#: SGL's GBP model uses alpha = 0.85 for its alpha * (1 - alpha)^k hop weights.
GBP_DEFAULT_ALPHA = 0.85

_SCORE_ACTIVATIONS = ("sigmoid", "relu", "leaky_relu")
_PROJECTION_ACTIVATIONS = ("relu", "leaky_relu", "prelu", "sigmoid", "tanh", None)


# ---------------------------------------------------------------------------------------- checks
def _check_int(value: Any, name: str, minimum: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and int(value) < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_rate(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) < 1.0:
        raise ConfigError(f"{name} must be a probability in [0, 1), got {value!r}")
    return float(value)


def _check_choice(value: Any, name: str, choices: Sequence[Any]) -> Any:
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


# ------------------------------------------------------------------------------------ base class
class MessageOperator(nn.Module, abc.ABC):
    r"""Base class: combine ``hops[start:end]`` (each ``[B, d]``) into one ``[B, d_out]`` tensor.

    Subclasses implement :meth:`combine` on the selected, validated hops. :meth:`forward`
    checks that ``hops`` is a non-empty list of 2-D floating tensors of one shape and that
    the slice ``[start:end]`` is non-empty and inside the list, raising
    :class:`sgl.errors.FeatureError` otherwise.

    Args:
        start (int): first hop used (Python slice semantics, negatives count from the end).
        end (int, optional): one past the last hop used; ``None`` uses every hop from ``start``.

    Example:
        >>> import torch
        >>> from sgl.ops import MessageOperator
        >>> class FirstAndLast(MessageOperator):
        ...     name = "first_and_last"
        ...     def combine(self, hops):
        ...         return hops[0] + hops[-1]
        >>> FirstAndLast()([torch.zeros(2, 2), torch.ones(2, 2), torch.ones(2, 2)])
        tensor([[1., 1.],
                [1., 1.]])
    """

    #: whether the operator has trainable parameters (then it runs per mini-batch)
    learnable: ClassVar[bool] = False
    #: registry name used by :func:`get_message_op` and :meth:`config`
    name: ClassVar[str] = "base"

    def __init__(self, start: int = 0, end: Optional[int] = None) -> None:
        super().__init__()
        self.start = _check_int(start, "start")
        self.end = None if end is None else _check_int(end, "end")
        if self.end is not None and (self.start >= 0) == (self.end >= 0) and self.end <= self.start:
            raise ConfigError(
                f"start={self.start}, end={self.end} selects no hop; need end > start (hops[start:end])"
            )

    # ------------------------------------------------------------------ hop selection
    def hop_range(self, num_hops: int, error: Type[Exception] = ConfigError) -> range:
        """Indices of the hops used when ``num_hops`` hops are given (``range(num_hops)[start:end]``)."""
        n = int(num_hops)
        start_ok = -n <= self.start < n
        end_ok = self.end is None or -n <= self.end <= n
        used = range(n)[self.start:self.end]
        if not (start_ok and end_ok and len(used) > 0):
            raise error(
                f"{type(self).__name__} uses hops[{self.start}:{self.end}] but {n} hop(s) are given "
                f"(indices 0..{n - 1}); pass more hops or change start/end"
            )
        return used

    def _select(self, hops: Sequence[Tensor]) -> List[Tensor]:
        """Validate the whole list (every hop, used or not) and return the used hops."""
        if isinstance(hops, Tensor) or not isinstance(hops, (list, tuple)):
            raise FeatureError(
                f"hops must be a list of [num_nodes, d] tensors, got {type(hops).__name__} "
                f"(for a stacked [K, B, d] tensor pass list(t.unbind(0)))"
            )
        if len(hops) == 0:
            raise FeatureError("hops is empty; pass [X_0, X_1, ..., X_K] (at least one [B, d] tensor)")
        first = hops[0]
        for k, hop in enumerate(hops):
            if not isinstance(hop, Tensor):
                raise FeatureError(f"hops[{k}] is a {type(hop).__name__}, expected a torch.Tensor")
            if hop.dim() != 2 or not hop.is_floating_point():
                raise FeatureError(
                    f"hops[{k}] has shape {tuple(hop.shape)} and dtype {hop.dtype}; every hop must be "
                    f"a 2-D floating tensor [num_nodes, d]"
                )
            if hop.shape != first.shape:
                raise FeatureError(
                    f"hops[{k}] has shape {tuple(hop.shape)} but hops[0] has {tuple(first.shape)}; "
                    f"all hops must be rows of the same nodes with the same feature width"
                )
        return [hops[k] for k in self.hop_range(len(hops), FeatureError)]

    # ------------------------------------------------------------------ public API
    def forward(self, hops: Sequence[Tensor]) -> Tensor:
        """Combine ``hops[start:end]`` (each ``[B, d]``) into one ``[B, d_out]`` tensor."""
        return self.combine(self._select(hops))

    @abc.abstractmethod
    def combine(self, hops: List[Tensor]) -> Tensor:
        """The operator itself, on the already selected and validated hops."""

    def out_features(self, in_features: int, num_hops: int) -> int:
        """Width ``d_out`` of the output for ``num_hops`` hops (before slicing) of width ``in_features``."""
        self.hop_range(num_hops)
        return int(in_features)

    def reset_parameters(self) -> None:
        """Re-initialise the parameters (nothing to do for parameter-free operators)."""

    def hparams(self) -> Dict[str, Any]:
        """Constructor arguments other than ``start``/``end`` (JSON-serialisable)."""
        return {}

    def config(self) -> Dict[str, Any]:
        """JSON-serialisable description; ``get_message_op(**op.config())`` rebuilds the operator."""
        return {"name": self.name, "start": self.start, "end": self.end, **self.hparams()}

    def __repr__(self) -> str:
        args = {"start": self.start, "end": self.end, **self.hparams()}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


class _LearnableOperator(MessageOperator):
    """Shared checks for operators whose parameters are tied to a fixed number of hops.

    ``num_hops`` is the length of the list passed to :meth:`forward` (before slicing), the
    same number :meth:`out_features` takes, so a model passes one value everywhere.
    """

    learnable = True

    def __init__(self, num_hops: int, in_features: Optional[int] = None,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(start, end)
        self.num_hops = _check_int(num_hops, "num_hops", 1)
        self.in_features = None if in_features is None else _check_int(in_features, "in_features", 1)
        self.num_used = len(self.hop_range(self.num_hops))

    def _select(self, hops: Sequence[Tensor]) -> List[Tensor]:
        used = super()._select(hops)
        if len(hops) != self.num_hops:
            raise FeatureError(
                f"{type(self).__name__} was built for num_hops={self.num_hops} hops but got {len(hops)}; "
                f"rebuild it with num_hops={len(hops)}"
            )
        if self.in_features is not None and used[0].size(1) != self.in_features:
            raise FeatureError(
                f"{type(self).__name__} was built for in_features={self.in_features} but the hops have "
                f"{used[0].size(1)} features"
            )
        return used

    def out_features(self, in_features: int, num_hops: int) -> int:
        if int(num_hops) != self.num_hops:
            raise ConfigError(f"this operator was built for num_hops={self.num_hops}, got {num_hops}")
        if self.in_features is not None and int(in_features) != self.in_features:
            raise ConfigError(f"this operator was built for in_features={self.in_features}, got {in_features}")
        return super().out_features(in_features, num_hops)


class _PerNodeWeighted(MessageOperator):
    r"""Operators of the form :math:`\sum_k \alpha_{ik} X_{ik}` with per-node weights.

    Subclasses implement :meth:`hop_weights`, returning ``[B, |K|]`` weights whose rows
    sum to one. Attention dropout (``att_dropout``), as in GAMLP, is applied to the
    weights used for mixing during training only; the returned / stored weights are the
    undropped ones.
    """

    att_dropout: float = 0.0

    @abc.abstractmethod
    def hop_weights(self, hops: List[Tensor]) -> Tensor:
        """``[B, len(hops)]`` weights for the selected hops; every row sums to one."""

    def _mix(self, hops: List[Tensor], weights: Tensor) -> Tensor:
        self.last_attention: Optional[Tensor] = weights.detach()
        mixing = F.dropout(weights, self.att_dropout, self.training) if self.att_dropout > 0 else weights
        return _weighted_sum(hops, mixing)

    def combine(self, hops: List[Tensor]) -> Tensor:
        return self._mix(hops, self.hop_weights(hops))

    def forward(self, hops: Sequence[Tensor], return_weights: bool = False
                ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Weighted sum of the selected hops; with ``return_weights`` also the ``[B, |K|]`` weights."""
        used = self._select(hops)
        weights = self.hop_weights(used)
        out = self._mix(used, weights)
        return (out, weights) if return_weights else out


# ------------------------------------------------------------------------ parameter-free reducers
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
        out = hops[0].clone()
        for hop in hops[1:]:
            torch.maximum(out, hop, out=out)
        return out


class MinHops(MessageOperator):
    r"""Elementwise :math:`\min_{k\in\mathcal{K}} X_k` (NaN propagates, as in ``torch.minimum``)."""

    name = "min"

    def combine(self, hops: List[Tensor]) -> Tensor:
        out = hops[0].clone()
        for hop in hops[1:]:
            torch.minimum(out, hop, out=out)
        return out


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


# ----------------------------------------------------------------------------- learnable operators
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
        if not isinstance(allow_negative, bool):
            raise ConfigError(f"allow_negative must be True or False, got {allow_negative!r}")
        self.allow_negative = allow_negative
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


class JKAttention(_PerNodeWeighted, _LearnableOperator):
    r"""GAMLP's JK attention over hops (Zhang et al., KDD 2022; PKU-DAIR/GAMLP ``JK_GAMLP``).

    .. math::
        r_i = \mathrm{MLP}([X_{i k_1} \| \dots \| X_{i k_m}]) \in \mathbb{R}^d, \quad
        s_{ik} = \sigma(w^\top [X_{ik} \| r_i] + b), \quad
        \alpha_{ik} = \mathrm{softmax}_k(s_{ik}), \quad
        Z_i = \textstyle\sum_k \alpha_{ik} X_{ik}

    The reference MLP has ``num_layers`` linear layers (``hidden`` wide inside, ``d`` at the
    output), each followed by PReLU and dropout (GAMLP applies PReLU and dropout to the
    reference vector too). :math:`\sigma` is ``act``. GAMLP uses ``dropout=0.5`` and
    ``att_dropout`` in 0–0.5; the defaults here are 0 so the operator is deterministic
    unless asked otherwise.

    Args:
        in_features (int): hop width ``d``.
        num_hops (int): number of hops passed to ``forward`` (before slicing).
        hidden (int): width of the reference MLP's hidden layers.
        num_layers (int): linear layers in the reference MLP (``>= 1``).
        act (str): score activation ``sigmoid``, ``relu`` or ``leaky_relu`` (slope 0.2).
            GAMLP's argparse default is ``relu``; its OGB presets use ``leaky_relu``
            (products, mag) and ``sigmoid`` (papers100M). The default here is ``leaky_relu``
            because with ``relu`` a node whose scores are all negative gets uniform weights
            and no gradient.
        att_dropout (float): dropout on the attention weights while training.
        dropout (float): dropout inside the reference MLP.
        start, end: hop slice.
    """

    name = "jk_attention"

    def __init__(self, in_features: int, num_hops: int, hidden: int = 128, num_layers: int = 2,
                 act: str = "leaky_relu", att_dropout: float = 0.0, dropout: float = 0.0,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(num_hops, in_features, start, end)
        self.hidden = _check_int(hidden, "hidden", 1)
        self.num_layers = _check_int(num_layers, "num_layers", 1)
        self.act = _check_choice(act, "act", _SCORE_ACTIVATIONS)
        self.att_dropout = _check_rate(att_dropout, "att_dropout")
        self.dropout = _check_rate(dropout, "dropout")
        d = self.in_features
        widths = [d * self.num_used] + [self.hidden] * (self.num_layers - 1) + [d]
        self.ref_layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.ref_acts = nn.ModuleList(nn.PReLU() for _ in self.ref_layers)
        self.attention = nn.Linear(2 * d, 1)  # acts on [X_k || r]
        self.score_act = _score_activation(self.act)
        self.last_attention = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for layer in self.ref_layers:
            _init_linear(layer)
        for prelu in self.ref_acts:
            prelu.reset_parameters()
        _init_linear(self.attention)

    def reference(self, hops: List[Tensor]) -> Tensor:
        """The ``[B, d]`` reference vectors :math:`r_i` from the concatenated hops."""
        h = torch.cat(hops, dim=1)
        for layer, prelu in zip(self.ref_layers, self.ref_acts):
            h = F.dropout(prelu(layer(h)), self.dropout, self.training)
        return h

    def hop_weights(self, hops: List[Tensor]) -> Tensor:
        d = self.in_features
        w, b = self.attention.weight[0], self.attention.bias
        # w^T [X_k || r] = X_k w[:d] + r w[d:]: the reference term is shared by all hops, so it
        # is computed once instead of concatenating r to every hop (SGL built a [K*B, (K+1)d]
        # copy for this).
        ref_term = self.reference(hops) @ w[d:] + b  # [B]
        scores = torch.stack([hop @ w[:d] + ref_term for hop in hops], dim=1)  # [B, K], row = node
        return torch.softmax(self.score_act(scores), dim=1)

    def hparams(self) -> Dict[str, Any]:
        return {"in_features": self.in_features, "num_hops": self.num_hops, "hidden": self.hidden,
                "num_layers": self.num_layers, "act": self.act, "att_dropout": self.att_dropout,
                "dropout": self.dropout}


class RecursiveAttention(_PerNodeWeighted, _LearnableOperator):
    r"""GAMLP's recursive attention over hops (PKU-DAIR/GAMLP ``R_GAMLP``).

    With the used hops renumbered :math:`X_0, \dots, X_m` and one shared
    ``Linear(2d, 1)`` :math:`(w, b)`:

    .. math::
        s_{i0} = \sigma(w^\top [X_{i0} \| X_{i0}] + b), \qquad
        h_{il} = \sum_{j<l} \mathrm{softmax}(s_{i0}, \dots, s_{i,l-1})_j X_{ij}, \qquad
        s_{il} = \sigma(w^\top [h_{il} \| X_{il}] + b),

    then :math:`\alpha_i = \mathrm{softmax}(s_{i0}, \dots, s_{im})` and
    :math:`Z_i = \sum_l \alpha_{il} X_{il}`. The history softmax always runs over the
    *raw* scores :math:`s`, as in R_GAMLP; the original SGL re-applied softmax to
    already-normalised weights at every step. As in R_GAMLP, ``att_dropout`` also drops
    history weights while training. The loop runs over hops (vectorised over nodes).

    Args:
        in_features (int): hop width ``d``.
        num_hops (int): number of hops passed to ``forward`` (before slicing).
        act (str): score activation ``sigmoid``, ``relu`` or ``leaky_relu`` (see :class:`JKAttention`).
        att_dropout (float): dropout on the attention weights while training.
        start, end: hop slice.
    """

    name = "recursive_attention"

    def __init__(self, in_features: int, num_hops: int, act: str = "leaky_relu", att_dropout: float = 0.0,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(num_hops, in_features, start, end)
        self.act = _check_choice(act, "act", _SCORE_ACTIVATIONS)
        self.att_dropout = _check_rate(att_dropout, "att_dropout")
        self.attention = nn.Linear(2 * self.in_features, 1)  # acts on [history || X_l]
        self.score_act = _score_activation(self.act)
        self.last_attention = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _init_linear(self.attention)

    def hop_weights(self, hops: List[Tensor]) -> Tensor:
        d = self.in_features
        w, b = self.attention.weight[0], self.attention.bias
        w_hist, w_hop = w[:d], w[d:]
        scores = [self.score_act(hops[0] @ w_hist + hops[0] @ w_hop + b)]  # each [B]
        for l in range(1, len(hops)):
            history_weights = torch.softmax(torch.stack(scores, dim=1), dim=1)  # raw scores -> [B, l]
            if self.att_dropout > 0:
                history_weights = F.dropout(history_weights, self.att_dropout, self.training)
            history = _weighted_sum(hops[:l], history_weights)
            scores.append(self.score_act(history @ w_hist + hops[l] @ w_hop + b))
        return torch.softmax(torch.stack(scores, dim=1), dim=1)

    def hparams(self) -> Dict[str, Any]:
        return {"in_features": self.in_features, "num_hops": self.num_hops, "act": self.act,
                "att_dropout": self.att_dropout}


# ---------------------------------------------------------------------------------------- NAFS
class NodeAdaptiveSmoothing(_PerNodeWeighted):
    r"""NAFS node-adaptive feature smoothing (Zhang et al., ICML 2022), parameter-free.

    Each node weights its hops by how far each hop still is from over-smoothing:
    :math:`\alpha_{ik} = \mathrm{softmax}_k(c_{ik} / T)` and
    :math:`Z_i = \sum_k \alpha_{ik} X_{ik}`, with one of two scores :math:`c_{ik}`:

    * ``mode="cosine"`` (default) — :math:`c_{ik} = \cos(X_{ik}, X_{i0})`, the similarity
      to the node's un-smoothed features. This is what the released NAFS scripts compute
      (node clustering / link prediction: ``softmax(cat(cos(features, fea_k)))`` per node)
      and what SGL's ``OverSmoothDistanceWeightedOp`` copies. It needs nothing beyond the
      hops, so it is the default. By default the reference is ``hops[0]`` of the full list
      (even when ``start > 0``); pass ``reference`` to use other rows.
    * ``mode="stationary"`` — the paper's *over-smoothing distance*
      :math:`c_{ik} = \lVert X_{ik} - X_{i}^{(\infty)} \rVert_2` to the stationary state
      :math:`X^{(\infty)} = \lim_k \hat A^k X` that infinite smoothing converges to. A larger
      distance means the hop is less over-smoothed and gets a larger weight, the same
      direction as the cosine score. ``reference`` must hold the rows of
      :math:`X^{(\infty)}`; compute them once at precompute time with
      :func:`stationary_features`. We could not retrieve the paper's equation text, so
      this mode follows its stated definition (distance to the stationary state, softmax
      over hops) and has not been checked line by line against it. Distances depend on the
      feature scale; use ``temperature`` to sharpen or flatten the weights.

    Fully vectorised: one pass over the hops, and no Python loop over nodes (SGL looped
    over every node and hop in Python).

    Args:
        mode (str): ``"cosine"`` or ``"stationary"``.
        temperature (float): :math:`T > 0` (1 in NAFS).
        start, end: hop slice.

    Example:
        >>> import torch
        >>> from sgl.ops import NodeAdaptiveSmoothing
        >>> x0 = torch.tensor([[1.0, 0.0]]); x1 = torch.tensor([[0.0, 1.0]])
        >>> out, w = NodeAdaptiveSmoothing()([x0, x1], return_weights=True)
        >>> w  # softmax of cosines (1, 0)
        tensor([[0.7311, 0.2689]])
    """

    name = "nafs"

    def __init__(self, mode: str = "cosine", temperature: float = 1.0,
                 start: int = 0, end: Optional[int] = None) -> None:
        super().__init__(start, end)
        self.mode = _check_choice(mode, "mode", ("cosine", "stationary"))
        if isinstance(temperature, bool) or not isinstance(temperature, Real) or not float(temperature) > 0 \
                or not math.isfinite(float(temperature)):
            raise ConfigError(f"temperature must be a positive number, got {temperature!r}")
        self.temperature = float(temperature)
        self.last_attention = None

    def hop_weights(self, hops: List[Tensor], reference: Optional[Tensor] = None) -> Tensor:
        if reference is None:
            raise FeatureError(
                "NodeAdaptiveSmoothing(mode='stationary') needs reference=X_inf rows "
                "(compute them with sgl.ops.stationary_features(graph, x))"
            )
        if self.mode == "cosine":
            # NAFS adds 1e-10 to the norms so all-zero rows score 0 instead of NaN
            ref_norm = reference.norm(dim=1).add_(1e-10)
            scores = torch.stack([(hop * reference).sum(1) / (hop.norm(dim=1).add_(1e-10) * ref_norm)
                                  for hop in hops], dim=1)
        else:
            scores = torch.stack([(hop - reference).norm(dim=1) for hop in hops], dim=1)
        return torch.softmax(scores / self.temperature, dim=1)

    def forward(self, hops: Sequence[Tensor], reference: Optional[Tensor] = None,
                return_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Weighted sum of the selected hops.

        Args:
            hops: ``[X_0, ..., X_K]`` rows, each ``[B, d]``.
            reference: ``[B, d]``; the un-smoothed rows for ``"cosine"`` (default ``hops[0]``)
                or the stationary rows :math:`X^{(\\infty)}` for ``"stationary"`` (required).
            return_weights: also return the ``[B, |K|]`` weights.
        """
        used = self._select(hops)
        if reference is None and self.mode == "cosine":
            reference = hops[0]
        if reference is not None and (not isinstance(reference, Tensor) or reference.shape != used[0].shape):
            shape = tuple(reference.shape) if isinstance(reference, Tensor) else type(reference).__name__
            raise FeatureError(f"reference must be a tensor of the hops' shape {tuple(used[0].shape)}, got {shape}")
        weights = self.hop_weights(used, reference)
        out = self._mix(used, weights)
        return (out, weights) if return_weights else out

    def combine(self, hops: List[Tensor]) -> Tensor:
        return self._mix(hops, self.hop_weights(hops, hops[0] if self.mode == "cosine" else None))

    def hparams(self) -> Dict[str, Any]:
        return {"mode": self.mode, "temperature": self.temperature}


@torch.no_grad()
def stationary_features(graph: Any, x: Optional[Tensor] = None, r: float = 0.5,
                        self_loops: bool = True) -> Tensor:
    r"""The over-smoothed limit :math:`X^{(\infty)} = \lim_{k\to\infty} \hat A_r^k X` in closed form.

    For an undirected graph and :math:`\hat A_r = \tilde D^{r-1}\tilde A\tilde D^{-r}`
    (:class:`sgl.ops.NormalizedAdjacency`), :math:`\hat A_r` is similar to the symmetric
    :math:`\tilde D^{-1/2}\tilde A\tilde D^{-1/2}`, whose powers converge on every connected
    component :math:`C` to the projection onto :math:`\tilde D^{1/2}\mathbf 1_C`. Hence

    .. math::
        X^{(\infty)}_i = \frac{\tilde d_i^{\,r}}{\sum_{j \in C(i)} \tilde d_j}
                         \sum_{j\in C(i)} \tilde d_j^{\,1-r} X_j

    with :math:`\tilde d` the (weighted) degree including the self-loop. That is NDLS's /
    NAFS's :math:`\hat A^{\infty}_{ij} = \tilde d_i^{\,r}\tilde d_j^{\,1-r}/(2m+n)`, taken
    per component so disconnected graphs are handled. Cost: :math:`O(E + nd)`, no
    iteration. Without self-loops a bipartite component oscillates and has no limit; the
    formula then gives the average of the even and odd powers' limits.

    Args:
        graph: an undirected :class:`sgl.data.Graph`.
        x (Tensor, optional): ``[num_nodes, d]`` features (default ``graph.x``).
        r (float): normalisation exponent of the operator, in ``[0, 1]``.
        self_loops (bool): whether the operator adds self-loops.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> from sgl.ops import stationary_features
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]))
        >>> stationary_features(g, torch.tensor([[1.0], [3.0]])).round(decimals=4)
        tensor([[2.],
                [2.]])
    """
    from scipy.sparse.csgraph import connected_components

    from sgl.data.validation import check_features

    if not 0.0 <= float(r) <= 1.0:
        raise ConfigError(f"r must be in [0, 1], got {r}")
    x = graph.x if x is None else x
    if x is None:
        raise FeatureError("the graph has no features; pass x=[num_nodes, d]")
    x = check_features(x, graph.num_nodes)
    if not x.is_floating_point():
        x = x.float()
    if not graph.is_symmetric():
        raise GraphError(
            "stationary_features needs an undirected graph (the limit formula assumes a symmetric "
            "adjacency); call graph.symmetrize() first"
        )
    num_components, labels = connected_components(graph.to_scipy("csr"), directed=False)
    labels = torch.from_numpy(labels).long()
    deg = graph.degree("in", weighted=True).to(torch.float64) + (1.0 if self_loops else 0.0)
    has_edges = deg > 0
    left = torch.where(has_edges, deg.clamp_min(1e-300).pow(float(r)), torch.zeros_like(deg))
    right = torch.where(has_edges, deg.clamp_min(1e-300).pow(1.0 - float(r)), torch.zeros_like(deg))
    volume = torch.zeros(num_components, dtype=torch.float64).index_add_(0, labels, deg)
    # nodes of zero degree (only possible without self-loops) have A^k X = 0 for k >= 1
    scale = torch.where(has_edges, left / volume[labels].clamp_min(1e-300), torch.zeros_like(deg))
    pooled = torch.zeros(num_components, x.size(1), dtype=x.dtype)
    pooled.index_add_(0, labels, x * right.to(x.dtype).unsqueeze(1))
    return pooled[labels].mul_(scale.to(x.dtype).unsqueeze(1))


# ---------------------------------------------------------------------------------------- registry
MESSAGE_OPERATORS: Dict[str, Type[MessageOperator]] = {
    cls.name: cls
    for cls in (LastHop, MeanHops, SumHops, MaxHops, MinHops, ConcatHops, ProjectedConcat, WeightedHops,
                LearnableWeightedHops, GatedHops, JKAttention, RecursiveAttention, NodeAdaptiveSmoothing)
}


def get_message_op(name: Union[str, MessageOperator], **kwargs: Any) -> MessageOperator:
    """Build a message operator by registry name; keyword arguments are its constructor's.

    ``get_message_op(**op.config())`` rebuilds ``op`` (with freshly initialised parameters).

        >>> get_message_op("weighted", alpha=0.1, end=3)
        WeightedHops(start=0, end=3, alpha=0.1)
        >>> get_message_op("jk_attention", in_features=16, num_hops=4).learnable
        True
        >>> sorted(MESSAGE_OPERATORS)[:4]
        ['concat', 'gate', 'jk_attention', 'last']
    """
    if isinstance(name, MessageOperator):
        if kwargs:
            raise ConfigError("pass either a message operator instance or a name with keyword arguments, not both")
        return name
    key = str(name).lower()
    if key not in MESSAGE_OPERATORS:
        raise ConfigError(f"unknown message operator {name!r}; choose one of {sorted(MESSAGE_OPERATORS)}")
    try:
        return MESSAGE_OPERATORS[key](**kwargs)
    except TypeError as exc:
        raise ConfigError(f"bad arguments for message operator {key!r}: {exc}") from exc
