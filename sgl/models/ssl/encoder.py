r"""The GNN encoder shared by GCMAE and its ablations, and GAT pieces that skip zero rows.

:class:`GNNEncoder` stacks GCN or GAT layers (each followed by PReLU). Its GAT path splits
torch_geometric's :class:`~torch_geometric.nn.GATConv` into the projection
(:func:`_project`: dense, sparse COO, or only the non-zero rows, plus a mask token) and the
attention propagation (:func:`_gat_propagate`), with the layer's own parameters, so sparse
bag-of-words inputs and GraphMAE's re-masked decoder inputs are never densified.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCNConv
from torch_geometric.utils import add_self_loops, remove_self_loops
from torch_geometric.utils import softmax as segment_softmax

from sgl.errors import FeatureError

__all__ = ["GNNEncoder"]


def _project(conv: GATConv, x: torch.Tensor, token: Optional[torch.Tensor] = None,
             token_rows: Optional[torch.Tensor] = None, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x W^T`` of a GAT layer; ``x`` dense or sparse COO; ``token`` added to ``token_rows``'s input;
    ``rows``: the only non-zero rows of a dense ``x`` (the others project to zero)."""
    weight = conv.lin.weight
    if x.is_sparse:
        out = torch.sparse.mm(x, weight.t())
    elif rows is not None:
        out = x.new_zeros(x.size(0), weight.size(0)).index_copy(0, rows, x[rows] @ weight.t())
    else:
        out = x @ weight.t()
    if token is not None and token_rows is not None and token_rows.numel():
        out = out.index_add(0, token_rows, (token @ weight.t()).expand(token_rows.numel(), -1))
    return out


def _gat_propagate(conv: GATConv, proj: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """The rest of :class:`torch_geometric.nn.GATConv`'s forward on projected features ``proj``.

    Same parameters and semantics as ``conv(x, edge_index)`` (self-loops replaced, softmax over
    each node's incoming edges, attention dropout, heads concatenated or averaged, bias); lets
    the projection skip zero rows or use a sparse input.
    """
    n, heads, channels = proj.size(0), conv.heads, conv.out_channels
    xs = proj.view(n, heads, channels)
    edge_index, _ = remove_self_loops(edge_index)
    edge_index, _ = add_self_loops(edge_index, num_nodes=n)
    src, dst = edge_index
    a_src, a_dst = (xs * conv.att_src).sum(-1), (xs * conv.att_dst).sum(-1)
    alpha = F.leaky_relu(a_src[src] + a_dst[dst], conv.negative_slope)
    alpha = segment_softmax(alpha, dst, num_nodes=n)
    alpha = F.dropout(alpha, p=conv.dropout, training=conv.training)
    out = xs.new_zeros(n, heads, channels).index_add(0, dst, xs[src] * alpha.unsqueeze(-1))
    out = out.reshape(n, heads * channels) if conv.concat else out.mean(1)
    return out + conv.bias if conv.bias is not None else out


def _sparse_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not p or not training:
        return x
    x = x.coalesce()
    values = F.dropout(x.values(), p=p, training=True)
    return torch.sparse_coo_tensor(x.indices(), values, x.shape, check_invariants=False)


class GNNEncoder(nn.Module):
    """``num_layers`` GCN or GAT layers of width ``hidden``, each followed by PReLU.

    A GAT layer has ``heads`` heads of ``hidden // heads`` channels, concatenated (also on the
    last layer, as GraphMAE's encoder), attention dropout ``attn_drop`` and LeakyReLU slope
    ``negative_slope``. ``in_drop`` is dropout on every layer's input, ``dropout`` on the
    input of every layer but the first.

    Example:
        >>> import torch
        >>> enc = GNNEncoder(3, 8, num_layers=2)
        >>> enc(torch.ones(4, 3), torch.tensor([[0, 1], [1, 0]])).shape
        torch.Size([4, 8])
    """

    def __init__(self, in_features: int, hidden: int, num_layers: int = 2, kind: str = "gcn", heads: int = 4,
                 dropout: float = 0.0, in_drop: float = 0.0, attn_drop: float = 0.0,
                 negative_slope: float = 0.2) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        self.acts = nn.ModuleList()
        width = in_features
        for _ in range(num_layers):
            if kind == "gat":
                self.convs.append(GATConv(width, hidden // heads, heads=heads, concat=True, dropout=attn_drop,
                                          negative_slope=negative_slope))
            else:
                self.convs.append(GCNConv(width, hidden))
            self.acts.append(nn.PReLU())
            width = hidden
        self.dropout = dropout
        self.in_drop = in_drop

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, token: Optional[torch.Tensor] = None,
                token_rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Encode ``x`` (dense, or sparse COO with a GAT encoder).

        ``token`` (``[1, in_features]``) is added to the input rows ``token_rows`` after the input
        dropout (used with sparse inputs; dense inputs carry the token already).
        """
        for i, (conv, act) in enumerate(zip(self.convs, self.acts)):
            if i > 0 and self.dropout:
                x = F.dropout(x, p=self.dropout, training=self.training)
            if self.in_drop:
                x = _sparse_dropout(x, self.in_drop, self.training) if x.is_sparse else \
                    F.dropout(x, p=self.in_drop, training=self.training)
            if isinstance(conv, GATConv):
                proj = _project(conv, x, token, token_rows) if i == 0 else _project(conv, x)
                x = act(_gat_propagate(conv, proj, edge_index))
            else:
                if x.is_sparse:
                    raise FeatureError("the GCN encoder takes dense features; use encoder='gat' for sparse inputs")
                x = act(conv(x, edge_index))
        return x

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()
        for act in self.acts:
            nn.init.constant_(act.weight, 0.25)
