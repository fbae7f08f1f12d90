r"""Full-batch message-passing baselines on heterogeneous graphs: R-GCN and HGT
(torch_geometric's ``RGCNConv`` and ``HGTConv``).

Both read every relation in both directions (reverse relations are added, as PyG's
``ToUndirected``), give each node type a learned input layer -- a linear map of its features,
or a learned embedding for a featureless type (``featureless="embedding"``, the default) --
and classify the target rows of the last layer. ``full_batch = True``: the trainer runs one
forward over the whole graph per epoch.

.. math::
    \text{R-GCN:}\quad h_i' = W_0 h_i + \sum_r \sum_{j \in N_r(i)} \tfrac{1}{|N_r(i)|} W_r h_j
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from sgl._checks import check_bool, check_choice, check_int, check_probability
from sgl.models.hetero.common import require_hetero
from sgl.ops import fill_featureless, row_normalize

__all__ = ["RGCN", "RGCNConfig", "HGT", "HGTConfig", "HeteroFullInput"]


class HeteroFullInput:
    """Everything a full-batch heterogeneous model consumes: per-type features (``None`` for
    types with learned embeddings) and per-relation edges; ``len`` is the target's node count."""

    def __init__(self, x_dict: Dict[str, Optional[torch.Tensor]], edge_index_dict: Dict[Any, torch.Tensor],
                 num_target: int) -> None:
        self.x_dict, self.edge_index_dict, self.num_nodes = x_dict, edge_index_dict, num_target

    def to(self, device: torch.device) -> "HeteroFullInput":
        return HeteroFullInput({t: None if x is None else x.to(device) for t, x in self.x_dict.items()},
                               {e: ei.to(device) for e, ei in self.edge_index_dict.items()}, self.num_nodes)

    def __len__(self) -> int:
        return self.num_nodes


@dataclass
class _FullBatchConfig:
    hidden: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    input_dropout: float = 0.0
    featureless: str = "embedding"
    normalize_features: bool = False

    def _check(self, model: str) -> None:
        check_int(self.hidden, f"{model} hidden", 1)
        check_int(self.num_layers, f"{model} num_layers", 1)
        check_probability(self.dropout, f"{model} dropout")
        check_probability(self.input_dropout, f"{model} input_dropout")
        check_choice(self.featureless, f"{model} featureless", ("embedding", "mean"))
        check_bool(self.normalize_features, f"{model} normalize_features")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class RGCNConfig(_FullBatchConfig):
    """``num_bases``: basis decomposition of the relation weights (0 = none)."""

    num_bases: int = 0

    def __post_init__(self) -> None:
        self._check("RGCN")
        check_int(self.num_bases, "RGCN num_bases", 0)


@dataclass
class HGTConfig(_FullBatchConfig):
    """``heads``: attention heads (``hidden`` must be divisible by it)."""

    heads: int = 4

    def __post_init__(self) -> None:
        self._check("HGT")
        check_int(self.heads, "HGT heads", 1)
        if self.hidden % self.heads:
            from sgl.errors import ConfigError

            raise ConfigError(f"HGT hidden={self.hidden} must be divisible by heads={self.heads}")


class _HeteroFullBatch(nn.Module):
    full_batch = True
    default_train_config = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200, "patience": 50}

    def __init__(self, graph: Any, num_classes: int, config: Any, model: str) -> None:
        super().__init__()
        graph = require_hetero(graph, model).add_reverse_relations()
        self.config, self.num_classes, self.target = config, num_classes, graph.target
        self.node_types, self.edge_types = graph.node_types, graph.edge_types
        x_dict = self._features(graph)
        self.inputs = nn.ModuleDict({
            t: (nn.Linear(int(x_dict[t].size(1)), config.hidden) if x_dict.get(t) is not None
                else nn.Embedding(graph.num_nodes_dict[t], config.hidden)) for t in self.node_types})
        self.input_dropout = nn.Dropout(config.input_dropout)
        self.classifier = nn.Linear(config.hidden, num_classes)

    def _features(self, graph: Any) -> Dict[str, Optional[torch.Tensor]]:
        x_dict: Dict[str, Optional[torch.Tensor]] = dict(graph.x_dict) if self.config.featureless == "embedding" \
            else dict(fill_featureless(graph, "mean"))
        out = {t: x_dict.get(t) for t in graph.node_types}
        if self.config.normalize_features:
            out = {t: None if x is None else row_normalize(x.float()) for t, x in out.items()}
        return {t: None if x is None else x.float() for t, x in out.items()}

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *, cache_dir: Any = None,
                   progress: bool = False) -> HeteroFullInput:
        graph = require_hetero(graph, type(self).__name__).add_reverse_relations()
        edges = {e: graph.edge_index(e) for e in self.edge_types}
        return HeteroFullInput(self._features(graph), edges, graph.num_nodes)

    def _embed(self, inputs: HeteroFullInput) -> Dict[str, torch.Tensor]:
        out = {}
        for t in self.node_types:
            x = inputs.x_dict.get(t)
            layer = self.inputs[t]
            out[t] = layer(self.input_dropout(x)) if x is not None else layer.weight
        return out

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        return logits

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()


class RGCN(_HeteroFullBatch):
    """Full-batch R-GCN (Schlichtkrull et al., 2018) on a :class:`~sgl.data.HeteroGraph`.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 1, 2]])},
        ...     x_dict={"p": torch.randn(4, 3)}, target="p", y=torch.tensor([0, 1, 0, 1]))
        >>> model = RGCN(g, 2, RGCNConfig(hidden=8))
        >>> model(model.precompute(g)).shape
        torch.Size([4, 2])
    """

    config_class = RGCNConfig

    def __init__(self, graph: Any, num_classes: int, config: Optional[RGCNConfig] = None) -> None:
        from torch_geometric.nn import RGCNConv

        super().__init__(graph, num_classes, config or RGCNConfig(), "RGCN")
        cfg = self.config
        bases = cfg.num_bases or None
        self.convs = nn.ModuleList(RGCNConv(cfg.hidden, cfg.hidden, len(self.edge_types), num_bases=bases)
                                   for _ in range(cfg.num_layers))

    def forward(self, inputs: HeteroFullInput) -> torch.Tensor:
        h_dict = self._embed(inputs)
        offsets, start = {}, 0
        for t in self.node_types:
            offsets[t] = start
            start += h_dict[t].size(0)
        h = torch.cat([h_dict[t] for t in self.node_types])
        src, dst, kind = [], [], []
        for i, etype in enumerate(self.edge_types):
            ei = inputs.edge_index_dict[etype]
            src.append(ei[0] + offsets[etype[0]])
            dst.append(ei[1] + offsets[etype[2]])
            kind.append(torch.full((ei.size(1),), i, dtype=torch.long, device=ei.device))
        edge_index, edge_type = torch.stack([torch.cat(src), torch.cat(dst)]), torch.cat(kind)
        for i, conv in enumerate(self.convs):
            h = conv(h, edge_index, edge_type)
            if i < len(self.convs) - 1:
                h = F.dropout(F.relu(h), self.config.dropout, self.training)
        lo = offsets[self.target]
        return self.classifier(h[lo:lo + inputs.num_nodes])

    def __repr__(self) -> str:
        return (f"RGCN(relations={len(self.edge_types)}, hidden={self.config.hidden}, "
                f"layers={self.config.num_layers}, num_classes={self.num_classes})")


class HGT(_HeteroFullBatch):
    """Full-batch HGT (Hu et al., 2020) on a :class:`~sgl.data.HeteroGraph`.

    Example:
        >>> import torch
        >>> from sgl.data import HeteroGraph
        >>> g = HeteroGraph.from_edge_index({"p": 4, "a": 2}, {("a", "w", "p"): torch.tensor([[0, 1, 1], [0, 1, 2]])},
        ...     x_dict={"p": torch.randn(4, 3)}, target="p", y=torch.tensor([0, 1, 0, 1]))
        >>> model = HGT(g, 2, HGTConfig(hidden=8, heads=2))
        >>> model(model.precompute(g)).shape
        torch.Size([4, 2])
    """

    config_class = HGTConfig

    def __init__(self, graph: Any, num_classes: int, config: Optional[HGTConfig] = None) -> None:
        from torch_geometric.nn import HGTConv

        super().__init__(graph, num_classes, config or HGTConfig(), "HGT")
        cfg = self.config
        metadata = (self.node_types, self.edge_types)
        self.convs = nn.ModuleList(HGTConv(cfg.hidden, cfg.hidden, metadata, heads=cfg.heads)
                                   for _ in range(cfg.num_layers))

    def forward(self, inputs: HeteroFullInput) -> torch.Tensor:
        h = self._embed(inputs)
        for i, conv in enumerate(self.convs):
            out = conv(h, inputs.edge_index_dict)
            # HGTConv returns None for a type without incoming edges: keep its input
            h = {t: (out.get(t) if out.get(t) is not None else h[t]) for t in h}
            if i < len(self.convs) - 1:
                h = {t: F.dropout(F.relu(v), self.config.dropout, self.training) for t, v in h.items()}
        return self.classifier(h[self.target])

    def __repr__(self) -> str:
        return (f"HGT(relations={len(self.edge_types)}, hidden={self.config.hidden}, heads={self.config.heads}, "
                f"layers={self.config.num_layers}, num_classes={self.num_classes})")
