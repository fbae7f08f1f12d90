r"""SGAP configs whose hops are summed with fixed, closed-form weights (APPNP, GBP).

Such a model is a weighted sum of the propagated hops, :math:`\sum_\ell w_\ell \hat A^\ell X`,
followed by an MLP; the weights depend only on the config, so the sum is precomputed once by
the ``weighted`` message operator.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Dict, List

from sgl.models.base import SGAPConfig

__all__ = ["WeightedHopsConfig"]


@dataclass
class WeightedHopsConfig(SGAPConfig, ABC):
    """An :class:`~sgl.models.SGAPConfig` whose ``message_options["weights"]`` come from :meth:`hop_weights`.

    Subclasses validate their own parameters and return one weight per hop ``0..k``.
    """

    k: int = 10
    message: str = "weighted"
    num_layers: int = 2
    hidden: int = 64
    dropout: float = 0.5
    message_options: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.message_options = {**self.message_options, "weights": self.hop_weights()}

    @abstractmethod
    def hop_weights(self) -> List[float]:
        """One weight per hop ``0..k``, validating the subclass's own parameters."""
