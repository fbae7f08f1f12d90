r"""The base class of message operators, and the two shared shapes of learnable and per-node ones.

:class:`MessageOperator` selects and validates ``hops[start:end]``; ``_LearnableOperator``
ties parameters to a fixed number of hops; ``_PerNodeWeighted`` mixes hops with per-node
weights :math:`\sum_k \alpha_{ik} X_{ik}` and keeps the latest weights in ``last_attention``.
"""
from __future__ import annotations

import abc
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type, Union

import torch.nn.functional as F
from torch import Tensor, nn

from sgl.errors import ConfigError, FeatureError
from sgl.ops.message._common import _check_int, _weighted_sum


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
