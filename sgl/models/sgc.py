"""SGC: Simplifying Graph Convolutional Networks (Wu et al., ICML 2019)."""
from __future__ import annotations

from dataclasses import dataclass

from sgl.models.base import SGAPConfig, SGAPModel

__all__ = ["SGC", "SGCConfig"]


@dataclass
class SGCConfig(SGAPConfig):
    """SGC: last hop of the symmetric normalised adjacency, logistic regression (paper: k=2)."""

    k: int = 2
    message: str = "last"
    num_layers: int = 1


class SGC(SGAPModel):
    r"""Simple graph convolution: :math:`\mathrm{softmax}(\hat A^K X W)`.

    Precompute is :math:`\hat A^K X` with :math:`\hat A = \tilde D^{-1/2}\tilde A\tilde D^{-1/2}`
    (the *last* hop only); the base model is logistic regression.

    Example:
        >>> import torch, sgl
        >>> from sgl.models import SGC
        >>> graph = sgl.datasets.load("karate")
        >>> model = SGC(graph.num_features, graph.num_classes)
        >>> features = model.precompute(graph)      # no parameters involved
        >>> model(features[torch.arange(34)]).shape
        torch.Size([34, 2])
    """

    config_class = SGCConfig
    default_train_config = {"lr": 0.2, "weight_decay": 1.3e-5, "epochs": 100}
