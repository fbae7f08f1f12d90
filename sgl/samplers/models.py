r"""GNNs that run on sampled blocks: GraphSAGE (mean) and GCN on torch_geometric layers.

Layer ``l`` reads block ``l``: ``h_dst = conv((h_src, h_src[:num_dst]), edge_index)``.

* ``conv="sage"`` — :class:`torch_geometric.nn.SAGEConv` (mean aggregator, root weight):
  :math:`h_v' = W_1 h_v + W_2 \operatorname{mean}_{u \in S(v)} h_u` over the sampled
  neighbours :math:`S(v)`.
* ``conv="gcn"`` — :class:`torch_geometric.nn.GCNConv` without its own normalisation, fed
  a self-loop per destination and weights :math:`1/(|S(v)| + 1)`: the "GCN aggregator" of
  the GraphSAGE paper, :math:`h_v' = W \operatorname{mean}_{u \in S(v) \cup \{v\}} h_u`
  (the symmetric :math:`\tilde D^{-1/2}` form needs full-graph degrees a block does not have).
  A block that carries ``edge_weight`` (GraphSAINT) uses those weights instead.

A historical-embedding cache (OUTRE) can supply the last layer's inputs for pruned nodes:
``forward(x, blocks, history=rows)`` appends ``rows`` after the computed inputs of the last
layer, and ``model.last_input`` keeps (detached) the inputs it computed.

Example:
    >>> import sgl, torch
    >>> from sgl.samplers import NeighborSampler, SampledGNN
    >>> g = sgl.datasets.load("karate")
    >>> model = SampledGNN(g.num_features, g.num_classes, hidden=8)
    >>> batch = NeighborSampler(g, [3, 3]).sample(torch.tensor([0, 1]), seed=0)
    >>> model(g.x[batch.n_id], batch.blocks).shape
    torch.Size([2, 2])
"""
from __future__ import annotations

from numbers import Integral
from typing import Any, Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv, SAGEConv
from torch_geometric.utils import scatter

from sgl.errors import ConfigError, FeatureError
# sparse-aware dropout of the raw features (equal in distribution to F.dropout), shared with
# the full-batch baselines so both families pay the same cost on bag-of-words inputs
from sgl.models.message_passing import _input_dropout
from sgl.samplers.block import Block

__all__ = ["SampledGNN"]


class SampledGNN(nn.Module):
    """Mini-batch GraphSAGE / GCN over :class:`~sgl.samplers.Block` s.

    Args:
        in_features, num_classes: input width and number of classes.
        hidden: hidden width.
        num_layers: layers (must equal the number of sampled hops).
        dropout: dropout on every layer's input.
        conv: ``"sage"`` or ``"gcn"``.
        normalize_features: row-normalise raw features in :meth:`precompute`.
    """

    #: GraphSAGE-style mini-batch defaults on Cora (Adam, 0.01, 5e-4 as the GCN paper)
    default_train_config: Dict[str, Any] = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 100, "batch_size": 64,
                                            "patience": 50}
    #: the :class:`~sgl.models.base.ScalableModel` protocol: mini-batches of sampled blocks
    full_batch = False

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64, num_layers: int = 2,
                 dropout: float = 0.5, conv: str = "sage", normalize_features: bool = True) -> None:
        super().__init__()
        for name, value, low in (("in_features", in_features, 1), ("num_classes", num_classes, 2),
                                 ("hidden", hidden, 1), ("num_layers", num_layers, 1)):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
                raise ConfigError(f"SampledGNN {name} must be an integer >= {low}, got {value!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ConfigError(f"SampledGNN dropout must be in [0, 1), got {dropout!r}")
        if conv not in ("sage", "gcn"):
            raise ConfigError(f"SampledGNN conv must be 'sage' or 'gcn', got {conv!r}")
        self.in_features, self.num_classes, self.hidden = int(in_features), int(num_classes), int(hidden)
        self.num_layers, self.dropout, self.conv = int(num_layers), float(dropout), conv
        self.normalize_features = bool(normalize_features)
        sizes = [self.in_features] + [self.hidden] * (self.num_layers - 1) + [self.num_classes]
        if conv == "sage":
            layers = [SAGEConv(a, b, aggr="mean") for a, b in zip(sizes[:-1], sizes[1:])]
        else:
            layers = [GCNConv(a, b, normalize=False, add_self_loops=False) for a, b in zip(sizes[:-1], sizes[1:])]
        self.convs = nn.ModuleList(layers)
        self.last_input: Optional[torch.Tensor] = None

    @property
    def last_input_width(self) -> int:
        """Width of the last layer's input (what a historical-embedding cache stores)."""
        return self.in_features if self.num_layers == 1 else self.hidden

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, **kwargs: Any) -> torch.Tensor:
        """Row-normalised float features (no propagation: sampling happens per batch)."""
        x = graph.x if x is None else x
        if x is None or x.dim() != 2 or x.size(0) != graph.num_nodes or x.size(1) != self.in_features:
            shape = None if x is None else tuple(x.shape)
            raise FeatureError(f"SampledGNN needs features [{graph.num_nodes}, {self.in_features}], got {shape}")
        return self.transform_features(x)

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        """Identity: sampled GNNs have no post-propagation stage."""
        return logits

    def transform_features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.normalize_features:
            x = x / x.sum(dim=1, keepdim=True).clamp_min(1e-12) if bool((x >= 0).all()) else x
        return x

    def _layer(self, i: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        conv = self.convs[i]
        if self.conv == "sage":
            project = x.size(1) > conv.out_channels
            if not project and block.edge_weight is None:
                return conv((x, x[:block.num_dst]), block.edge_index, size=block.size)
            # mean(W x_j) = W mean(x_j): projecting before gathering moves the per-edge work from
            # in_features to out_channels columns (1433 -> 64 on Cora); same parameters and result
            # as SAGEConv's forward. With edge weights (GraphSAINT) the mean becomes sum_j w_j x_j.
            h = F.linear(x, conv.lin_l.weight) if project else x
            src, dst = block.edge_index
            msg = h[src] if block.edge_weight is None else h[src] * block.edge_weight.view(-1, 1).to(h.dtype)
            agg = scatter(msg, dst, dim=0, dim_size=block.num_dst, reduce="mean" if block.edge_weight is None else "sum")
            if not project:
                agg = F.linear(agg, conv.lin_l.weight)
            out = agg + conv.lin_r(x[:block.num_dst])
            return out if conv.lin_l.bias is None else out + conv.lin_l.bias
        edge_index, weight = block.edge_index, block.edge_weight
        if weight is None:
            dst = edge_index[1]
            counts = torch.bincount(dst, minlength=block.num_dst).to(x.dtype) + 1.0
            loops = torch.arange(block.num_dst, device=x.device)
            edge_index = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
            weight = (1.0 / counts)[edge_index[1]]
        return conv(x, edge_index, weight)[:block.num_dst]

    def forward(self, x: torch.Tensor, blocks: List[Block], history: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits of the last block's destination nodes.

        ``history`` (optional) holds last-layer inputs of pruned nodes, appended after the
        computed ones (their count must make up ``blocks[-1].num_src``).
        """
        if len(blocks) != self.num_layers:
            raise ConfigError(f"the model has {self.num_layers} layers but the batch has {len(blocks)} blocks; "
                              f"sample as many hops as layers")
        last = self.num_layers - 1
        for i, block in enumerate(blocks):
            if i == last:
                if history is not None and history.numel():
                    x = torch.cat([x, history.to(x.dtype)], dim=0)
                self.last_input = x.detach()
            x = _input_dropout(x, self.dropout, self.training) if i == 0 else \
                F.dropout(x, p=self.dropout, training=self.training)
            x = self._layer(i, x, block)
            if i < last:
                x = F.relu(x)
        return x

    def __repr__(self) -> str:
        return (f"SampledGNN(conv={self.conv}, in_features={self.in_features}, num_classes={self.num_classes}, "
                f"hidden={self.hidden}, num_layers={self.num_layers}, dropout={self.dropout})")
