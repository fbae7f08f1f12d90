r"""Full-batch message-passing baselines: GCN, GraphSAGE and GAT on torch_geometric layers.

These are the coupled GNNs that SGL's scalable (SGAP) models are measured against. Unlike
an :class:`~sgl.models.SGAPModel`, they propagate *inside* every forward pass, so each
training epoch touches every edge of the graph ``num_layers`` times (forward and
backward). Their :meth:`precompute` is therefore trivial and parameter-free: it only
(optionally) row-normalises the features and packs them with the edges into a
:class:`~sgl.models.FullGraphInput`; the class attribute ``full_batch = True`` tells
:class:`sgl.tasks.Trainer` to call ``model(inputs)`` once per epoch and read the logits of
*all* nodes.

Each model carries ``default_train_config``: the optimisation settings of its paper on
Cora, as keyword arguments of :class:`sgl.tasks.TrainConfig`.

Example:
    >>> import sgl
    >>> from sgl.models.message_passing import GCN
    >>> from sgl.tasks import TrainConfig, run_node_classification
    >>> graph = sgl.datasets.load("karate")
    >>> train_config = TrainConfig(**{**GCN.default_train_config, "epochs": 5}, progress=False)
    >>> record = run_node_classification(lambda: GCN(graph.num_features, graph.num_classes), graph,
    ...                                  seeds=[0], train_config=train_config)
    >>> 0.0 <= record["test_acc"]["mean"] <= 1.0
    True
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Integral
from typing import Any, Dict, Optional, Tuple, Type

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from sgl._checks import check_bool, check_int, check_probability, check_real
from sgl.errors import ConfigError, FeatureError
from sgl.models.features import FullGraphInput
from sgl.ops import row_normalize

__all__ = [
    "GCN",
    "GCNConfig",
    "GraphSAGE",
    "SAGEConfig",
    "GAT",
    "GATConfig",
    "MESSAGE_PASSING_MODELS",
]


# ---------------------------------------------------------------------------- validation
def _check_common(config: Any, model: str) -> None:
    check_int(config.hidden, f"{model} hidden", 1)
    check_int(config.num_layers, f"{model} num_layers", 1)
    check_probability(config.dropout, f"{model} dropout")
    check_bool(config.bias, f"{model} bias")
    check_bool(config.normalize_features, f"{model} normalize_features")


# ---------------------------------------------------------------------------- configs
@dataclass
class GCNConfig:
    """Hyper-parameters of :class:`GCN` (defaults: Kipf & Welling's Cora setting)."""

    hidden: int = 16
    num_layers: int = 2
    #: dropout on the input of every layer (the paper's 0.5)
    dropout: float = 0.5
    bias: bool = True
    #: row-normalise features in precompute (the GCN paper's Cora/Citeseer preprocessing)
    normalize_features: bool = True

    def __post_init__(self) -> None:
        _check_common(self, "GCN")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class SAGEConfig:
    """Hyper-parameters of :class:`GraphSAGE` (mean aggregator, full-batch)."""

    hidden: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    bias: bool = True
    normalize_features: bool = True

    def __post_init__(self) -> None:
        _check_common(self, "GraphSAGE")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class GATConfig:
    """Hyper-parameters of :class:`GAT` (defaults: Veličković et al.'s Cora setting).

    ``hidden`` is the size of *each* head, so a hidden layer outputs ``hidden * heads``
    features (8 x 8 = 64 on Cora); the output layer averages ``out_heads`` heads.
    """

    hidden: int = 8
    heads: int = 8
    out_heads: int = 1
    num_layers: int = 2
    #: dropout on the input of every layer
    dropout: float = 0.6
    #: dropout on the normalised attention coefficients (the paper uses 0.6 for both)
    attention_dropout: float = 0.6
    #: slope of the LeakyReLU inside the attention scores (the paper's 0.2)
    negative_slope: float = 0.2
    bias: bool = True
    normalize_features: bool = True

    def __post_init__(self) -> None:
        _check_common(self, "GAT")
        check_int(self.heads, "GAT heads", 1)
        check_int(self.out_heads, "GAT out_heads", 1)
        check_probability(self.attention_dropout, "GAT attention_dropout")
        check_real(self.negative_slope, "GAT negative_slope", 0)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------- models
#: below this fraction of nonzero entries, input dropout draws random numbers for the
#: nonzeros only (Cora's bag-of-words features are 1.3% nonzero)
_SPARSE_DROPOUT_DENSITY = 0.25


def _input_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout on the raw features, equal in distribution to :func:`F.dropout`.

    Zeroing a zero entry is a no-op, so on sparse features only the nonzeros need a random
    draw (the ``sparse_dropout`` of Kipf & Welling's code). On CPU the per-element Bernoulli
    draw of ``F.dropout`` dominates a Cora GCN epoch (measured ~75% of it, ~4x slower than
    this path); dense features take the ordinary path. The density is estimated on a
    strided sample of ~1024 rows: a wrong guess only costs speed, never correctness.
    """
    if not training or p == 0.0 or x.requires_grad or x.dim() != 2 or x.numel() == 0:
        return F.dropout(x, p=p, training=training)
    sample = x[::max(1, x.size(0) // 1024)]
    if float((sample != 0).float().mean()) >= _SPARSE_DROPOUT_DENSITY:
        return F.dropout(x, p=p, training=training)
    flat = x.reshape(-1)
    index = flat.nonzero().squeeze(1)
    keep = index[torch.rand(index.numel(), device=x.device) >= p]
    out = torch.zeros_like(flat)
    out[keep] = flat[keep] / (1.0 - p)
    return out.view_as(x)


class _FullBatchGNN(nn.Module):
    """Shared skeleton: ``dropout -> conv -> activation`` per layer, no activation at the end.

    Subclasses fill ``self.convs`` and may override :meth:`_conv` to pass extra edge data.
    """

    full_batch = True
    default_train_config: Dict[str, Any] = {}
    #: whether ``precompute`` keeps the graph's edge weights (only GCN's layer uses them)
    uses_edge_weight = False

    def __init__(self, in_features: int, num_classes: int, config: Any, config_cls: type) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(config, config_cls):
            raise ConfigError(f"{name} takes a {config_cls.__name__}, got {type(config).__name__}")
        if isinstance(in_features, bool) or not isinstance(in_features, Integral) or in_features < 1 \
                or isinstance(num_classes, bool) or not isinstance(num_classes, Integral) or num_classes < 2:
            raise ConfigError(
                f"{name} needs in_features >= 1 and num_classes >= 2, got {in_features!r}, {num_classes!r}"
            )
        self.in_features, self.num_classes, self.config = int(in_features), int(num_classes), config
        self.convs = nn.ModuleList()

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x)

    def _conv(self, conv: nn.Module, x: torch.Tensor, inputs: FullGraphInput) -> torch.Tensor:
        return conv(x, inputs.edge_index)

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, **kwargs: Any) -> FullGraphInput:
        """Pack (row-normalised) features and edges; parameter-free, nothing is propagated.

        ``kwargs`` (``cache_dir``, ``progress``) are accepted for interface parity with
        :meth:`sgl.models.SGAPModel.precompute` and ignored: there is nothing worth caching.
        """
        x = graph.x if x is None else x
        if x is None:
            raise FeatureError(
                f"{type(self).__name__} needs node features: the graph has no x; pass x=... or set graph.x"
            )
        if x.dim() != 2 or x.size(0) != graph.num_nodes or x.size(1) != self.in_features:
            raise FeatureError(
                f"features have shape {tuple(x.shape)}; expected [{graph.num_nodes}, {self.in_features}] "
                f"(num_nodes x in_features)"
            )
        x = x.float()
        if self.config.normalize_features:
            x = row_normalize(x)
        weight = graph.edge_weight if self.uses_edge_weight else None
        return FullGraphInput(x, graph.edge_index, weight)

    def forward(self, inputs: FullGraphInput) -> torch.Tensor:
        """Logits ``[num_nodes, num_classes]`` for every node of the graph."""
        x = inputs.x
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            x = _input_dropout(x, self.config.dropout, self.training) if i == 0 else \
                F.dropout(x, p=self.config.dropout, training=self.training)
            x = self._conv(conv, x, inputs)
            if i < last:
                x = self.activation(x)
        return x

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        """Identity: message-passing models have no post-propagation stage."""
        return logits

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()

    def _repr_extra(self) -> str:
        return ""

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(in_features={self.in_features}, num_classes={self.num_classes}, "
                f"hidden={self.config.hidden}, num_layers={self.config.num_layers}{self._repr_extra()}, "
                f"dropout={self.config.dropout})")


class GCN(_FullBatchGNN):
    r"""Graph convolutional network (Kipf & Welling, ICLR 2017), full batch.

    Each layer computes

    .. math::
        H^{(l+1)} = \sigma\!\left(\tilde D^{-1/2} \tilde A \tilde D^{-1/2} H^{(l)} W^{(l)}\right),
        \qquad \tilde A = A + I,\ \tilde D_{ii} = \textstyle\sum_j \tilde A_{ij},

    with :math:`\sigma` = ReLU between layers and none after the last, dropout on every
    layer's input, and :math:`H^{(0)} = X` (row-normalised when
    ``config.normalize_features``). :class:`torch_geometric.nn.GCNConv` adds the self-loops
    and the normalisation on every call; the graph's ``edge_weight`` (if any) fills
    :math:`A`.

    Args:
        in_features (int): feature dimension.
        num_classes (int): number of classes.
        config (GCNConfig, optional): ``hidden``, ``num_layers``, ``dropout``, ...

    Example:
        >>> import sgl
        >>> from sgl.models.message_passing import GCN
        >>> graph = sgl.datasets.load("karate")
        >>> model = GCN(graph.num_features, graph.num_classes)
        >>> inputs = model.precompute(graph)      # no parameters involved
        >>> model(inputs).shape
        torch.Size([34, 2])
        >>> model
        GCN(in_features=34, num_classes=2, hidden=16, num_layers=2, dropout=0.5)
    """

    #: Kipf & Welling's Cora setting (they also stop when the validation loss has not
    #: improved for 10 epochs; the Trainer keeps the best-validation-accuracy epoch instead)
    default_train_config: Dict[str, Any] = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200}
    uses_edge_weight = True

    def __init__(self, in_features: int, num_classes: int, config: Optional[GCNConfig] = None) -> None:
        super().__init__(in_features, num_classes, GCNConfig() if config is None else config, GCNConfig)
        config = self.config
        sizes = [self.in_features] + [config.hidden] * (config.num_layers - 1) + [self.num_classes]
        self.convs.extend(GCNConv(a, b, bias=config.bias) for a, b in zip(sizes[:-1], sizes[1:]))

    def _conv(self, conv: nn.Module, x: torch.Tensor, inputs: FullGraphInput) -> torch.Tensor:
        return conv(x, inputs.edge_index, inputs.edge_weight)


class GraphSAGE(_FullBatchGNN):
    r"""GraphSAGE with the mean aggregator (Hamilton et al., NeurIPS 2017), full batch.

    Each layer computes

    .. math::
        h_v^{(l+1)} = \sigma\!\left(W_1^{(l)} h_v^{(l)}
            + W_2^{(l)} \tfrac{1}{|\mathcal N(v)|}\textstyle\sum_{u \in \mathcal N(v)} h_u^{(l)}\right)

    (:class:`torch_geometric.nn.SAGEConv`, ``aggr="mean"``, root weight on), with ReLU
    between layers and dropout on every layer's input. All neighbours are used (no
    sampling), so this is the full-batch variant; edge weights are ignored.

    Args:
        in_features (int): feature dimension.
        num_classes (int): number of classes.
        config (SAGEConfig, optional): ``hidden``, ``num_layers``, ``dropout``, ...

    Example:
        >>> import sgl
        >>> from sgl.models.message_passing import GraphSAGE
        >>> graph = sgl.datasets.load("karate")
        >>> model = GraphSAGE(graph.num_features, graph.num_classes)
        >>> model(model.precompute(graph)).shape
        torch.Size([34, 2])
    """

    #: the GCN paper's optimiser settings with a 64-unit hidden layer (GraphSAGE's paper has
    #: no Cora setting; these are the common full-batch Planetoid baseline values)
    default_train_config: Dict[str, Any] = {"lr": 0.01, "weight_decay": 5e-4, "epochs": 200}

    def __init__(self, in_features: int, num_classes: int, config: Optional[SAGEConfig] = None) -> None:
        super().__init__(in_features, num_classes, SAGEConfig() if config is None else config, SAGEConfig)
        config = self.config
        sizes = [self.in_features] + [config.hidden] * (config.num_layers - 1) + [self.num_classes]
        self.convs.extend(SAGEConv(a, b, aggr="mean", bias=config.bias) for a, b in zip(sizes[:-1], sizes[1:]))


class GAT(_FullBatchGNN):
    r"""Graph attention network (Veličković et al., ICLR 2018), full batch.

    Each head of each layer computes, over the neighbours of :math:`i` and :math:`i` itself,

    .. math::
        \alpha_{ij} = \mathrm{softmax}_j\!\left(\mathrm{LeakyReLU}_{0.2}\!\left(
            a^\top [W h_i \,\|\, W h_j]\right)\right), \qquad
        h_i' = \textstyle\sum_j \alpha_{ij} W h_j,

    hidden layers concatenate ``heads`` heads followed by ELU; the output layer averages
    ``out_heads`` heads. Dropout (``dropout``) is applied to every layer's input and
    (``attention_dropout``) to the attention coefficients
    (:class:`torch_geometric.nn.GATConv`, which also adds the self-loops). Edge weights
    are ignored.

    Args:
        in_features (int): feature dimension.
        num_classes (int): number of classes.
        config (GATConfig, optional): ``hidden`` (per head), ``heads``, ``out_heads``, ...

    Example:
        >>> import sgl
        >>> from sgl.models.message_passing import GAT
        >>> graph = sgl.datasets.load("karate")
        >>> model = GAT(graph.num_features, graph.num_classes)
        >>> model(model.precompute(graph)).shape
        torch.Size([34, 2])
        >>> model
        GAT(in_features=34, num_classes=2, hidden=8, num_layers=2, heads=8, out_heads=1, dropout=0.6)
    """

    #: Veličković et al.'s Cora optimiser settings. The paper trains until the validation
    #: metrics stall for 100 epochs; 200 epochs (PyG's example budget) with patience 100
    #: suffice: allowing up to 1000 epochs left the 10-seed Cora mean unchanged (82.0%).
    default_train_config: Dict[str, Any] = {"lr": 0.005, "weight_decay": 5e-4, "epochs": 200, "patience": 100}

    def __init__(self, in_features: int, num_classes: int, config: Optional[GATConfig] = None) -> None:
        super().__init__(in_features, num_classes, GATConfig() if config is None else config, GATConfig)
        config = self.config
        width = self.in_features
        for _ in range(config.num_layers - 1):
            self.convs.append(GATConv(width, config.hidden, heads=config.heads, concat=True,
                                      negative_slope=config.negative_slope, dropout=config.attention_dropout,
                                      bias=config.bias))
            width = config.hidden * config.heads
        self.convs.append(GATConv(width, self.num_classes, heads=config.out_heads, concat=False,
                                  negative_slope=config.negative_slope, dropout=config.attention_dropout,
                                  bias=config.bias))

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x)

    def _repr_extra(self) -> str:
        return f", heads={self.config.heads}, out_heads={self.config.out_heads}"


#: name -> (model class, config dataclass, one-line description), merged into ``sgl.models.MODELS``
MESSAGE_PASSING_MODELS: Dict[str, Tuple[Type[nn.Module], type, str]] = {
    "gcn": (GCN, GCNConfig, "Graph convolutional network, full-batch message passing (Kipf & Welling 2017)"),
    "sage": (GraphSAGE, SAGEConfig, "GraphSAGE with mean aggregation, full-batch message passing (Hamilton et al. 2017)"),
    "gat": (GAT, GATConfig, "Graph attention network, full-batch message passing (Velickovic et al. 2018)"),
}
