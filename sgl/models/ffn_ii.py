r"""GAMLP's official output network ``FeedForwardNetII`` (zwt233/Official-GAMLP ``layer.py``).

The official GAMLP code (KDD'22) does not use a plain MLP after its attention: every layer
is a bias-free matrix product whose "bias" is a ``BatchNorm1d`` (the logits are normalised
too), the middle layers mix in the first layer's output (GCNII's *initial residual*,
:math:`\alpha = 0.5`), and every square layer adds an identity residual. This file builds
that network from its description, so ``GAMLPConfig(output_net="official")`` can be
measured against our :class:`~sgl.models.MLP`.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from sgl.errors import ConfigError

__all__ = ["Dense", "InitialResidualDense", "FeedForwardNetII"]


class Dense(nn.Module):
    r"""``BatchNorm(x W)`` plus ``x`` when square: GAMLP's ``Dense`` (adapted there from GBP).

    .. math::
        y = \mathrm{BN}(x W) + [d_{in} = d_{out}]\, x, \qquad
        W_{ij} \sim \mathcal{U}(-1/\sqrt{d_{out}}, 1/\sqrt{d_{out}})

    There is no additive bias: the BatchNorm's shift plays that role.

    Args:
        in_features (int): input width :math:`d_{in}`.
        out_features (int): output width :math:`d_{out}`.

    Example:
        >>> Dense(4, 3)(torch.randn(5, 4)).shape
        torch.Size([5, 3])
    """

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise ConfigError(f"Dense needs in_features, out_features >= 1, got {in_features}, {out_features}")
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.norm = nn.BatchNorm1d(out_features)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.out_features)
        nn.init.uniform_(self.weight, -bound, bound)
        self.norm.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.norm(x @ self.weight)
        return out + x if self.in_features == self.out_features else out

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


class InitialResidualDense(Dense):
    r"""A :class:`Dense` layer on ``(1 - α) x + α h₀``: GAMLP's ``GraphConvolution`` (no graph in it).

    .. math::
        y = \mathrm{BN}\big(((1 - \alpha)\, x + \alpha\, h_0) W\big) + [d_{in} = d_{out}]\, x

    ``h₀`` is the output of the network's first layer (GCNII's initial residual); the
    official code fixes :math:`\alpha = 0.5`.

    Example:
        >>> layer = InitialResidualDense(3, 3)
        >>> layer(torch.randn(4, 3), torch.randn(4, 3)).shape
        torch.Size([4, 3])
    """

    def __init__(self, in_features: int, out_features: int, alpha: float = 0.5) -> None:
        super().__init__(in_features, out_features)
        if not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must be in [0, 1], got {alpha}")
        self.alpha = float(alpha)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        out = self.norm(((1.0 - self.alpha) * x + self.alpha * h0) @ self.weight)
        return out + x if self.in_features == self.out_features else out

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, alpha={self.alpha}"


class FeedForwardNetII(nn.Module):
    r"""GAMLP's official output network: ``Dense``, then initial-residual layers, then ``Dense``.

    With :math:`L` = ``num_layers``, :math:`\phi` = one shared PReLU and :math:`D` = dropout:

    .. math::
        h_0 = \mathrm{Dense}_1(x), \qquad
        h_l = \mathrm{IRDense}_l(D(\phi(h_{l-1})), h_0) \ (1 \le l \le L-2), \qquad
        y = \mathrm{Dense}_L(D(\phi(h_{L-2})))

    (``num_layers=1`` is the single ``Dense(in, out)``, BatchNorm on its output included.)
    Every layer ends in a BatchNorm, the logits too; there is no dropout on the input and no
    activation after the last layer — the placement of the official ``forward``.

    Args:
        in_features (int): input width.
        hidden (int): width of the inner layers.
        out_features (int): output width (classes, or the JK reference width).
        num_layers (int): ``>= 1`` layers.
        dropout (float): dropout before every layer but the first, in ``[0, 1)``.
        alpha (float): the initial-residual weight of the middle layers (0.5 in the official code).

    Example:
        >>> net = FeedForwardNetII(8, 16, 3, num_layers=3, dropout=0.5)
        >>> net(torch.randn(6, 8)).shape
        torch.Size([6, 3])
        >>> [type(layer).__name__ for layer in net.layers]
        ['Dense', 'InitialResidualDense', 'Dense']
    """

    def __init__(self, in_features: int, hidden: int, out_features: int, num_layers: int = 2,
                 dropout: float = 0.5, alpha: float = 0.5) -> None:
        super().__init__()
        if num_layers < 1 or hidden < 1 or not 0.0 <= dropout < 1.0:
            raise ConfigError(f"FeedForwardNetII needs num_layers >= 1, hidden >= 1 and dropout in [0, 1); got "
                              f"num_layers={num_layers}, hidden={hidden}, dropout={dropout}")
        self.in_features, self.hidden, self.out_features = in_features, hidden, out_features
        if num_layers == 1:
            layers = [Dense(in_features, out_features)]
        else:
            layers = ([Dense(in_features, hidden)]
                      + [InitialResidualDense(hidden, hidden, alpha) for _ in range(num_layers - 2)]
                      + [Dense(hidden, out_features)])
        self.layers = nn.ModuleList(layers)
        self.act = nn.PReLU()
        self.dropout = nn.Dropout(dropout)

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()
        self.act.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h0 = x = self.layers[0](x)
        for layer in self.layers[1:-1]:
            x = layer(self.dropout(self.act(x)), h0)
        if len(self.layers) > 1:
            x = self.layers[-1](self.dropout(self.act(x)))
        return x
