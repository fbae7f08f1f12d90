"""GAMLP's attention over hops: JK attention and recursive attention (per-node weights)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sgl._checks import check_probability
from sgl.errors import ConfigError
from sgl.ops.message._common import (
    _SCORE_ACTIVATIONS, _check_choice, _check_int, _init_linear, _score_activation, _weighted_sum,
)
from sgl.ops.message.base import _LearnableOperator, _PerNodeWeighted

__all__ = ["JKAttention", "RecursiveAttention"]


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
            GAMLP's command-line default is ``relu``; its OGB presets use ``leaky_relu``
            (products, mag) and ``sigmoid`` (papers100M). The default here is ``leaky_relu``
            because with ``relu`` a node whose scores are all negative gets uniform weights
            and no gradient.
        att_dropout (float): dropout on the attention weights while training.
        dropout (float): dropout inside the reference MLP.
        start, end: hop slice.
        reference_net (nn.Module, optional): replaces the reference MLP, as in the official
            ``JK_GAMLP``: :math:`r_i = \mathrm{Dropout}(\mathrm{ReLU}(\mathrm{net}([X_{i k_1} \| \dots])))`
            with ``dropout``, and the score layer becomes ``Linear(d + reference_dim, 1)`` with
            torch's default initialisation (``JK_GAMLP`` never re-initialises it). The net maps
            ``num_used * d`` features to ``reference_dim``; ``hidden``/``num_layers`` are then
            unused. GAMLP passes a :class:`~sgl.models.ffn_ii.FeedForwardNetII` here
            (``GAMLPConfig(output_net="official")``). :meth:`config` cannot rebuild a module, so
            ``get_message_op(**op.config())`` refuses such an operator instead of building another.
        reference_dim (int, optional): output width of ``reference_net`` (required with it).

    Example:
        >>> op = JKAttention(4, num_hops=3, hidden=8)
        >>> op([torch.randn(5, 4) for _ in range(3)]).shape
        torch.Size([5, 4])
        >>> custom = JKAttention(4, num_hops=3, reference_net=nn.Linear(12, 6), reference_dim=6)
        >>> custom.attention
        Linear(in_features=10, out_features=1, bias=True)
    """

    name = "jk_attention"

    def __init__(self, in_features: int, num_hops: int, hidden: int = 128, num_layers: int = 2,
                 act: str = "leaky_relu", att_dropout: float = 0.0, dropout: float = 0.0,
                 start: int = 0, end: Optional[int] = None, reference_net: Optional[nn.Module] = None,
                 reference_dim: Optional[int] = None) -> None:
        super().__init__(num_hops, in_features, start, end)
        self.hidden = _check_int(hidden, "hidden", 1)
        self.num_layers = _check_int(num_layers, "num_layers", 1)
        self.act = _check_choice(act, "act", _SCORE_ACTIVATIONS)
        self.att_dropout = check_probability(att_dropout, "att_dropout")
        self.dropout = check_probability(dropout, "dropout")
        if (reference_net is None) != (reference_dim is None):
            raise ConfigError("reference_net and reference_dim go together: pass both (a custom reference "
                              "network and its output width) or neither")
        if reference_net is not None and not isinstance(reference_net, nn.Module):
            raise ConfigError(f"reference_net must be a torch.nn.Module, got {type(reference_net).__name__}")
        d = self.in_features
        self.reference_net = reference_net
        self.reference_dim = d if reference_dim is None else _check_int(reference_dim, "reference_dim", 1)
        if reference_net is None:
            widths = [d * self.num_used] + [self.hidden] * (self.num_layers - 1) + [d]
            self.ref_layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
            self.ref_acts = nn.ModuleList(nn.PReLU() for _ in self.ref_layers)
        else:
            self.ref_layers, self.ref_acts = nn.ModuleList(), nn.ModuleList()
        self.attention = nn.Linear(d + self.reference_dim, 1)  # acts on [X_k || r]
        self.score_act = _score_activation(self.act)
        self.last_attention = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for layer in self.ref_layers:
            _init_linear(layer)
        for prelu in self.ref_acts:
            prelu.reset_parameters()
        if self.reference_net is None:
            _init_linear(self.attention)
        else:
            if hasattr(self.reference_net, "reset_parameters"):
                self.reference_net.reset_parameters()
            self.attention.reset_parameters()  # torch's default, as JK_GAMLP leaves it

    def reference(self, hops: List[Tensor]) -> Tensor:
        """The ``[B, reference_dim]`` reference vectors :math:`r_i` from the concatenated hops."""
        h = torch.cat(hops, dim=1)
        if self.reference_net is not None:
            return F.dropout(F.relu(self.reference_net(h)), self.dropout, self.training)
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
        params = {"in_features": self.in_features, "num_hops": self.num_hops, "hidden": self.hidden,
                  "num_layers": self.num_layers, "act": self.act, "att_dropout": self.att_dropout,
                  "dropout": self.dropout}
        if self.reference_net is not None:  # the module itself is not serialisable (see the class docstring)
            params["reference_dim"] = self.reference_dim
        return params


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
        self.att_dropout = check_probability(att_dropout, "att_dropout")
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
