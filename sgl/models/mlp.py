"""Base networks for the trainable stage of scalable models."""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from sgl.errors import ConfigError

__all__ = ["MLP", "ResMLP", "build_base_model"]


class MLP(nn.Module):
    r"""Multi-layer perceptron: ``num_layers`` Linear layers with PReLU, dropout and optional BatchNorm.

    ``num_layers=1`` is logistic regression (one Linear layer, no hidden units).

    Example:
        >>> MLP(16, 32, 3, num_layers=2)(torch.randn(5, 16)).shape
        torch.Size([5, 3])
    """

    def __init__(self, in_features: int, hidden: int, out_features: int, num_layers: int = 2,
                 dropout: float = 0.5, input_dropout: float = 0.0, batch_norm: bool = False) -> None:
        super().__init__()
        if num_layers < 1 or hidden < 1 or not 0.0 <= dropout < 1.0 or not 0.0 <= input_dropout < 1.0:
            raise ConfigError(f"MLP needs num_layers >= 1, hidden >= 1 and dropouts in [0, 1); got "
                              f"num_layers={num_layers}, hidden={hidden}, dropout={dropout}, "
                              f"input_dropout={input_dropout}")
        sizes = [in_features] + [hidden] * (num_layers - 1) + [out_features]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm1d(h) if batch_norm else nn.Identity() for h in sizes[1:-1])
        self.act = nn.PReLU()
        self.dropout = nn.Dropout(dropout)
        self.input_dropout = nn.Dropout(input_dropout)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        gain = nn.init.calculate_gain("relu")
        for layer in self.layers:
            nn.init.xavier_uniform_(layer.weight, gain=gain)
            nn.init.zeros_(layer.bias)
        for norm in self.norms:
            if hasattr(norm, "reset_parameters"):
                norm.reset_parameters()
        self.act.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_dropout(x)
        for layer, norm in zip(self.layers[:-1], self.norms):
            x = self.dropout(self.act(norm(layer(x))))
        return self.layers[-1](x)


class ResMLP(MLP):
    """MLP with residual connections between equal-width hidden layers (PaSca's base model)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.input_dropout(x)
        previous = None
        for layer, norm in zip(self.layers[:-1], self.norms):
            h = self.act(norm(layer(x)))
            if previous is not None:
                h = h + previous
            previous = h
            x = self.dropout(h)
        return self.layers[-1](x)


def build_base_model(kind: str, in_features: int, hidden: int, out_features: int, num_layers: int,
                     dropout: float, input_dropout: float = 0.0, batch_norm: bool = False) -> nn.Module:
    """``"mlp"`` or ``"resmlp"`` by name (``num_layers=1`` gives logistic regression)."""
    classes = {"mlp": MLP, "resmlp": ResMLP}
    if kind not in classes:
        raise ConfigError(f"unknown base model {kind!r}; choose one of {sorted(classes)}")
    return classes[kind](in_features, hidden, out_features, num_layers, dropout, input_dropout, batch_norm)
