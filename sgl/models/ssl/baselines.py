r"""Self-supervised baselines beside GCMAE: GraphMAE-/GRACE-style GCMAE configs, DGI and GAE.

Every self-supervised model has the same API as :class:`~sgl.models.ssl.GCMAE`:
``loss(x, edge_index) -> (loss, named terms)`` for one training step, ``inputs(graph, device)``
and ``embed(graph) -> [N, hidden]`` frozen embeddings; :func:`sgl.tasks.ssl_pretraining.pretrain`
trains any of them. The embeddings feed the tasks in :mod:`sgl.tasks` (linear probe,
clustering, link prediction, graph classification).

* ``graphmae`` / ``grace`` -- :class:`~sgl.models.ssl.GCMAE` with :func:`graphmae_config`
  (masked-feature reconstruction only) / :func:`grace_config` (InfoNCE between two augmented
  views only).
* :class:`DGI` -- torch_geometric's :class:`~torch_geometric.nn.DeepGraphInfomax` with a
  one-layer GCN + PReLU encoder, feature-shuffling corruption and a sigmoid-mean summary
  (Veličković et al., ICLR 2019).
* :class:`GAE` -- torch_geometric's :class:`~torch_geometric.nn.GAE`: a two-layer GCN
  encoder trained to reconstruct edges with an inner-product decoder and negative
  sampling (Kipf & Welling 2016).

Example:
    >>> import sgl
    >>> from sgl.models.ssl import build_ssl_model
    >>> from sgl.tasks.ssl_pretraining import pretrain
    >>> graph = sgl.datasets.load("karate")
    >>> model = build_ssl_model("dgi", graph.num_features, hidden=8, epochs=2)
    >>> _ = pretrain(model, graph)
    >>> model.embed(graph).shape
    torch.Size([34, 8])
"""
from __future__ import annotations

import abc
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn
from torch_geometric.nn import GCNConv
from torch_geometric.nn import GAE as PyGGAE
from torch_geometric.nn import DeepGraphInfomax

from sgl._checks import check_int, check_real
from sgl.data import Graph
from sgl.models.ssl.config import GCMAEConfig
from sgl.models.ssl.inputs import check_ssl_model_args, ssl_inputs

__all__ = ["graphmae_config", "grace_config", "DGIConfig", "DGI", "GAEConfig", "GAE"]


def graphmae_config(**overrides: Any) -> GCMAEConfig:
    """GraphMAE-style ablation: masked-feature reconstruction (SCE) only."""
    return GCMAEConfig(**{"cl_weight": 0.0, "adj_weight": 0.0, "std_weight": 0.0, **overrides})


def grace_config(**overrides: Any) -> GCMAEConfig:
    """GRACE-style ablation: InfoNCE between two augmented views only."""
    return GCMAEConfig(**{"mae_weight": 0.0, "cl_weight": 1.0, "adj_weight": 0.0, "std_weight": 0.0,
                          "cl_views": "augmented", "mask_rate": 0.0, "replace_rate": 0.0,
                          "shared_projector": True, **overrides})


def _check(config: Any, who: str) -> None:
    for name in ("hidden", "num_layers", "epochs"):
        check_int(getattr(config, name), f"{who} {name}", 1)
    check_real(config.lr, f"{who} lr", 0, open_low=True)
    check_real(config.weight_decay, f"{who} weight_decay", 0)


@dataclass
class DGIConfig:
    """Hyper-parameters of :class:`DGI` (defaults: the DGI paper's Cora setting, fewer epochs)."""

    hidden: int = 512
    num_layers: int = 1
    epochs: int = 300
    lr: float = 1e-3
    weight_decay: float = 0.0
    normalize_features: bool = True
    device: Optional[str] = None

    def __post_init__(self) -> None:
        _check(self, "DGI")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class GAEConfig:
    """Hyper-parameters of :class:`GAE` (defaults: Kipf & Welling's GAE, 32-d embeddings)."""

    hidden: int = 32
    num_layers: int = 2
    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 0.0
    normalize_features: bool = True
    device: Optional[str] = None

    def __post_init__(self) -> None:
        _check(self, "GAE")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class _GCNStack(nn.Module):
    """GCN layers; ReLU between layers, ``last_act`` (PReLU for DGI, none for GAE) at the end."""

    def __init__(self, in_features: int, hidden: int, num_layers: int, last_act: bool) -> None:
        super().__init__()
        widths = [in_features] + [2 * hidden] * (num_layers - 1) + [hidden]
        self.convs = nn.ModuleList(GCNConv(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.act = nn.PReLU(hidden) if last_act else None

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = torch.relu(x)
        return self.act(x) if self.act is not None else x


class _PyGWrapper(nn.Module, abc.ABC):
    """Inputs, loss and embeddings around a torch_geometric self-supervised module ``self.model``."""

    #: learning-rate schedule of the pre-training loop (constant, as the papers' code)
    lr_schedule = "constant"

    def __init__(self, in_features: int, config: Any, config_cls: type) -> None:
        super().__init__()
        check_ssl_model_args(type(self).__name__, in_features, config, config_cls)
        self.in_features, self.config = int(in_features), config

    def reset_parameters(self) -> None:
        self.model.reset_parameters()

    def inputs(self, graph: Graph, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(x, edge_index)`` of ``graph`` on ``device``, prepared as the config says."""
        return ssl_inputs(graph, self.in_features, type(self).__name__, device, self.config.normalize_features)

    @abc.abstractmethod
    def loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """The wrapped model's self-supervised loss on the whole graph (and no named terms)."""

    @torch.no_grad()
    def embed(self, graph: Graph) -> torch.Tensor:
        """Node embeddings ``[N, hidden]`` of the frozen encoder (CPU tensor)."""
        self.eval()
        device = next(self.parameters()).device
        x, edge_index = self.inputs(graph, device)
        return self.model.encoder(x, edge_index).cpu()


def _corruption(x: torch.Tensor, edge_index: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    return x[torch.randperm(x.size(0), device=x.device)], edge_index


def _summary(z: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    return torch.sigmoid(z.mean(dim=0))


class DGI(_PyGWrapper):
    """Deep Graph Infomax (torch_geometric ``DeepGraphInfomax``) with a GCN encoder."""

    def __init__(self, in_features: int, config: Optional[DGIConfig] = None) -> None:
        super().__init__(in_features, config or DGIConfig(), DGIConfig)
        cfg = self.config
        self.model = DeepGraphInfomax(cfg.hidden, _GCNStack(in_features, cfg.hidden, cfg.num_layers, True),
                                      summary=_summary, corruption=_corruption)

    def __repr__(self) -> str:
        return f"DGI(in_features={self.in_features}, hidden={self.config.hidden})"

    def loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        pos, neg, summary = self.model(x, edge_index)
        return self.model.loss(pos, neg, summary), {}


class GAE(_PyGWrapper):
    """Graph autoencoder (torch_geometric ``GAE``): GCN encoder, inner-product decoder."""

    def __init__(self, in_features: int, config: Optional[GAEConfig] = None) -> None:
        super().__init__(in_features, config or GAEConfig(), GAEConfig)
        cfg = self.config
        self.model = PyGGAE(_GCNStack(in_features, cfg.hidden, cfg.num_layers, False))

    def __repr__(self) -> str:
        return f"GAE(in_features={self.in_features}, hidden={self.config.hidden})"

    def loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        z = self.model.encode(x, edge_index)
        return self.model.recon_loss(z, edge_index), {}
