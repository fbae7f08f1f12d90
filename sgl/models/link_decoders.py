r"""Link decoders: score a node pair from the two endpoints' embeddings.

An encoder (any zoo model whose output width is the embedding size) gives every node an
embedding :math:`h_v`; a decoder turns a pair into one logit, and
:func:`sgl.tasks.link_supervised.fit_link_predictor` trains both with binary cross-entropy
on the logits. Decoders are parameter-light modules and never train themselves.

* ``"dot"`` -- :class:`InnerProductDecoder`, :math:`s(u, v) = h_u^\top h_v` (PyG's
  ``link_pred`` example, the GAE decoder).
* ``"mlp"`` -- :class:`HadamardMLPDecoder`, :math:`s(u, v) = \mathrm{MLP}(h_u \odot h_v)`
  (the ``LinkPredictor`` of OGB's ogbl-collab / ogbl-ppa GCN and GraphSAGE baselines).

Example:
    >>> import torch
    >>> from sgl.models import build_link_decoder
    >>> h_src, h_dst = torch.randn(5, 16), torch.randn(5, 16)
    >>> build_link_decoder("dot", 16)(h_src, h_dst).shape
    torch.Size([5])
    >>> build_link_decoder("mlp", 16, num_layers=3)
    HadamardMLPDecoder(in_features=16, hidden=16, num_layers=3, dropout=0.0)
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from sgl._checks import check_int, check_probability
from sgl.errors import ConfigError, FeatureError

__all__ = ["InnerProductDecoder", "HadamardMLPDecoder", "LINK_DECODERS", "build_link_decoder"]


def _check_pair(h_src: torch.Tensor, h_dst: torch.Tensor, width: int, who: str) -> None:
    if h_src.shape != h_dst.shape or h_src.dim() != 2 or h_src.size(1) != width:
        raise FeatureError(f"{who} takes two [num_pairs, {width}] embedding tensors, got {tuple(h_src.shape)} "
                           f"and {tuple(h_dst.shape)}")


class InnerProductDecoder(nn.Module):
    r"""The dot product of the endpoints' embeddings, :math:`s(u, v) = h_u^\top h_v` (a logit).

    Args:
        in_features (int): embedding width :math:`d`.

    Shapes: ``h_src``, ``h_dst`` ``[k, d]`` -> ``[k]``.

    Example:
        >>> import torch
        >>> InnerProductDecoder(2)(torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, -1.0]]))
        tensor([1.])
    """

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.in_features = check_int(in_features, "the decoder's in_features (embedding width)", minimum=1)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        _check_pair(h_src, h_dst, self.in_features, type(self).__name__)
        return (h_src * h_dst).sum(dim=-1)

    def reset_parameters(self) -> None:
        """Nothing to reset: the inner product has no parameters."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(in_features={self.in_features})"


class HadamardMLPDecoder(nn.Module):
    r"""An MLP on the element-wise product of the endpoints' embeddings (OGB's ``LinkPredictor``):

    .. math::
        z^{(0)} = h_u \odot h_v,\qquad
        z^{(l+1)} = \mathrm{dropout}\big(\mathrm{ReLU}(W^{(l)} z^{(l)} + b^{(l)})\big),\qquad
        s(u, v) = w^\top z^{(L-1)} + b,

    ``num_layers`` linear layers in all (``hidden`` units each but the last, which has one).
    The product makes the score symmetric, :math:`s(u, v) = s(v, u)`. Unlike OGB's module it
    returns the logit; the loss applies the sigmoid.

    Args:
        in_features (int): embedding width :math:`d`.
        hidden (int, optional): hidden width (default :math:`d`).
        num_layers (int): linear layers, at least 1 (1 = a weighted inner product).
        dropout (float): dropout after every hidden layer.

    Example:
        >>> import torch
        >>> decoder = HadamardMLPDecoder(8, hidden=4)
        >>> h_u, h_v = torch.randn(3, 8), torch.randn(3, 8)
        >>> torch.allclose(decoder(h_u, h_v), decoder(h_v, h_u))
        True
    """

    def __init__(self, in_features: int, hidden: Optional[int] = None, num_layers: int = 2,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.in_features = check_int(in_features, "the decoder's in_features (embedding width)", minimum=1)
        self.hidden = self.in_features if hidden is None else check_int(hidden, "the decoder's hidden width", minimum=1)
        self.num_layers = check_int(num_layers, "the decoder's num_layers", minimum=1)
        self.dropout = check_probability(dropout, "the decoder's dropout")
        sizes = [self.in_features] + [self.hidden] * (self.num_layers - 1) + [1]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        _check_pair(h_src, h_dst, self.in_features, type(self).__name__)
        z = h_src * h_dst
        for layer in self.layers[:-1]:
            z = F.dropout(F.relu(layer(z)), p=self.dropout, training=self.training)
        return self.layers[-1](z).squeeze(-1)

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(in_features={self.in_features}, hidden={self.hidden}, "
                f"num_layers={self.num_layers}, dropout={self.dropout})")


#: name -> decoder class
LINK_DECODERS: Dict[str, type] = {"dot": InnerProductDecoder, "mlp": HadamardMLPDecoder}


def build_link_decoder(name: str, in_features: int, **options: Any) -> nn.Module:
    """Decoder ``name`` (``"dot"`` or ``"mlp"``) for ``in_features``-wide embeddings; ``options``
    are the class's own arguments (``hidden``, ``num_layers``, ``dropout`` for ``"mlp"``)."""
    key = str(name).lower()
    if key not in LINK_DECODERS:
        raise ConfigError(f"unknown link decoder {name!r}; choose one of {', '.join(LINK_DECODERS)}")
    if key == "dot" and options:
        raise ConfigError(f"the dot decoder has no options; {sorted(options)} apply to the mlp decoder")
    try:
        return LINK_DECODERS[key](in_features, **options)
    except TypeError as exc:
        raise ConfigError(f"bad option for the {key} link decoder: {exc}") from None
