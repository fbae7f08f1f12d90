"""SIGN: Scalable Inception Graph Neural Networks (Frasca et al., 2020)."""
from __future__ import annotations

from dataclasses import dataclass

from sgl.models.base import SGAPConfig, SGAPModel

__all__ = ["SIGN", "SIGNConfig"]


@dataclass
class SIGNConfig(SGAPConfig):
    """SIGN: all hops 0..k concatenated, then an MLP."""

    k: int = 3
    message: str = "concat"
    num_layers: int = 2
    hidden: int = 64
    dropout: float = 0.5
    input_dropout: float = 0.2


class SIGN(SGAPModel):
    r"""SIGN: :math:`\mathrm{MLP}([X \| \hat A X \| \dots \| \hat A^K X])`.

    Example:
        >>> import sgl
        >>> graph = sgl.datasets.load("karate")
        >>> SIGN(graph.num_features, graph.num_classes).precompute(graph).data.shape
        torch.Size([34, 136])
    """

    config_class = SIGNConfig
    default_train_config = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200}
