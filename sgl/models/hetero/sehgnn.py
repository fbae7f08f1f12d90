r"""SeHGNN: simple and efficient heterogeneous GNN (Yang et al., AAAI 2023), metapath-based.

Precompute (:func:`sgl.ops.metapath_features`): mean aggregation along every metapath of
length ``<= k`` from the target (raw target features included), plus, with
``label_hops > 0``, the training labels propagated along every target-to-target metapath
of length ``<= label_hops`` (own label removed). Train:

.. math::
    h_P &= \mathrm{FFN}_P(W_P X_P) \quad \text{(per metapath, } P = 1..M) \\
    \alpha &= \mathrm{softmax}\big((H W_Q)(H W_K)^\top\big), \quad
    H' = \gamma\, \alpha (H W_V) + H \quad \text{(semantic fusion over metapaths)} \\
    \hat y &= \mathrm{MLP}\big(W_c\,[h'_1 \Vert \dots \Vert h'_M] + W_r X_{target}\big)
             + \mathrm{MLP}_{label}(\mathrm{mean}_P\, Y_P)

(the official code's ``Transformer`` with ``gamma`` initialised to 0, ``fc_after_concat``,
``res_fc`` and ``label_fc``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from sgl._checks import check_bool, check_int, check_probability
from sgl.models.features import NodeFeatures
from sgl.models.hetero.common import check_hetero_common, prepare_x_dict, require_hetero, train_label_matrix
from sgl.models.mlp import MLP
from sgl.ops import enumerate_metapaths, metapath_features, metapath_label_features, metapath_name

__all__ = ["SeHGNN", "SeHGNNConfig", "SemanticFusion"]


@dataclass
class SeHGNNConfig:
    """``k``: longest feature metapath; ``label_hops``: longest label metapath (0 = no label
    input); ``hidden``; ``proj_layers``: per-metapath FFN depth; ``num_layers``: output MLP."""

    k: int = 2
    label_hops: int = 2
    hidden: int = 256
    proj_layers: int = 2
    num_layers: int = 2
    label_layers: int = 2
    dropout: float = 0.5
    input_dropout: float = 0.1
    att_dropout: float = 0.0
    residual: bool = True
    batch_norm: bool = True
    featureless: str = "mean"
    normalize_features: bool = False

    def __post_init__(self) -> None:
        check_int(self.k, "SeHGNN k", 0)
        check_int(self.label_hops, "SeHGNN label_hops", 0)
        for name in ("proj_layers", "num_layers", "label_layers"):
            check_int(getattr(self, name), f"SeHGNN {name}", 1)
        check_probability(self.att_dropout, "SeHGNN att_dropout")
        check_bool(self.residual, "SeHGNN residual")
        check_hetero_common(self, "SeHGNN")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class SemanticFusion(nn.Module):
    r"""Self-attention across metapaths per node: ``[B, M, h] -> [B, M, h]``,
    :math:`H' = \gamma\,\mathrm{softmax}(QK^\top)V + H` with :math:`\gamma` learned from 0.

    Example:
        >>> SemanticFusion(8)(torch.randn(5, 3, 8)).shape
        torch.Size([5, 3, 8])
    """

    def __init__(self, hidden: int, att_dropout: float = 0.0) -> None:
        super().__init__()
        width = max(1, hidden // 4)
        self.query, self.key, self.value = nn.Linear(hidden, width), nn.Linear(hidden, width), nn.Linear(hidden, hidden)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.att_dropout = nn.Dropout(att_dropout)

    def reset_parameters(self) -> None:
        for layer in (self.query, self.key, self.value):
            layer.reset_parameters()
        nn.init.zeros_(self.gamma)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(self.query(h), self.key(h).transpose(1, 2))
        attn = self.att_dropout(torch.softmax(scores, dim=-1))
        return self.gamma * torch.bmm(attn, self.value(h)) + h


class SeHGNN(nn.Module):
    """SeHGNN on a :class:`~sgl.data.HeteroGraph` (see the module docstring).

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 1, 2]])},
        ...     x_dict={"p": torch.randn(4, 3)}, target="p", y=torch.tensor([0, 1, 0, 1]), train_mask=[0, 1])
        >>> model = SeHGNN(g, 2, SeHGNNConfig(k=2, hidden=8))
        >>> model.metapath_names
        ['p', 'p-a', 'p-a-p']
        >>> model(model.precompute(g)[torch.arange(4)]).shape
        torch.Size([4, 2])
    """

    config_class = SeHGNNConfig
    full_batch = False
    default_train_config = {"lr": 0.001, "weight_decay": 0.0, "epochs": 200, "patience": 50, "batch_size": 10000}

    def __init__(self, graph: Any, num_classes: int, config: Optional[SeHGNNConfig] = None) -> None:
        super().__init__()
        graph = require_hetero(graph, "SeHGNN")
        self.config = config = config or SeHGNNConfig()
        self.num_classes = num_classes
        x_dict = prepare_x_dict(graph, config)
        self.metapaths = enumerate_metapaths(graph, config.k, end_types=list(x_dict))
        self.label_metapaths = [p for p in enumerate_metapaths(graph, config.label_hops, end_types=[graph.target])
                                if len(p) > 1] if config.label_hops else []
        widths = [int(x_dict[p[-1]].size(1)) for p in self.metapaths]
        self.input_dropout = nn.Dropout(config.input_dropout)
        self.projections = nn.ModuleList(MLP(w, config.hidden, config.hidden, config.proj_layers, config.dropout,
                                             batch_norm=config.batch_norm) for w in widths)
        self.fusion = SemanticFusion(config.hidden, config.att_dropout)
        self.concat = nn.Linear(config.hidden * len(self.metapaths), config.hidden)
        self.residual = nn.Linear(widths[0], config.hidden, bias=False) if config.residual else None
        self.act = nn.PReLU()
        self.dropout = nn.Dropout(config.dropout)
        self.output = MLP(config.hidden, config.hidden, num_classes, config.num_layers, config.dropout,
                          batch_norm=config.batch_norm)
        self.label_mlp = MLP(num_classes, config.hidden, num_classes, config.label_layers, config.dropout) \
            if self.label_metapaths else None

    @property
    def metapath_names(self) -> List[str]:
        return [metapath_name(p) for p in self.metapaths]

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *, label_matrix: Optional[torch.Tensor] = None,
                   cache_dir: Any = None, progress: bool = False) -> NodeFeatures:
        """Metapath features in :attr:`metapaths` order (+ the mean label feature when ``label_hops > 0``)."""
        graph = require_hetero(graph, "SeHGNN")
        feats = metapath_features(graph, self.config.k, prepare_x_dict(graph, self.config),
                                  metapaths=self.metapaths, progress=progress)
        features = NodeFeatures([feats[p] for p in self.metapaths])
        if self.label_mlp is None:
            return features
        return self.with_label_input(features, graph, train_label_matrix(graph) if label_matrix is None
                                     else label_matrix)

    def with_label_input(self, features: NodeFeatures, graph: Any, label_matrix: torch.Tensor) -> NodeFeatures:
        """The same metapath features with the label input rebuilt from ``label_matrix`` (RLU)."""
        labels = metapath_label_features(graph, label_matrix, self.config.label_hops, metapaths=self.label_metapaths)
        mean = torch.stack([labels[p] for p in self.label_metapaths]).mean(0)
        return NodeFeatures(list(features.data[:len(self.metapaths)]) + [mean])

    def forward(self, batch: List[torch.Tensor]) -> torch.Tensor:
        feats = [self.input_dropout(f) for f in batch[:len(self.metapaths)]]
        h = torch.stack([proj(f) for proj, f in zip(self.projections, feats)], dim=1)
        h = self.fusion(h)
        z = self.concat(h.flatten(1))
        if self.residual is not None:
            z = z + self.residual(feats[0])
        out = self.output(self.dropout(self.act(z)))
        if self.label_mlp is not None:
            out = out + self.label_mlp(batch[len(self.metapaths)])
        return out

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    def __repr__(self) -> str:
        return (f"SeHGNN(metapaths={self.metapath_names}, label_metapaths={len(self.label_metapaths)}, "
                f"hidden={self.config.hidden}, num_classes={self.num_classes})")
