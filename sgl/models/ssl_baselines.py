r"""Self-supervised baselines beside GCMAE, and the registry of self-supervised models.

Every self-supervised model has the same two-method API as :class:`~sgl.models.gcmae.GCMAE`:
``fit(graph, seed=0, progress=False) -> list of per-epoch losses`` and
``embed(graph) -> [N, hidden]`` frozen embeddings. The embeddings feed the tasks in
:mod:`sgl.tasks` (linear probe, clustering, link prediction, graph classification).

* :class:`DGI` — torch_geometric's :class:`~torch_geometric.nn.DeepGraphInfomax` with a
  one-layer GCN + PReLU encoder, feature-shuffling corruption and a sigmoid-mean summary
  (Veličković et al., ICLR 2019).
* :class:`GAE` — torch_geometric's :class:`~torch_geometric.nn.GAE`: a two-layer GCN
  encoder trained to reconstruct edges with an inner-product decoder and negative
  sampling (Kipf & Welling 2016).
* ``graphmae`` / ``grace`` — :class:`GCMAE` with :func:`~sgl.models.gcmae.graphmae_config`
  / :func:`~sgl.models.gcmae.grace_config`.

Example:
    >>> import sgl
    >>> from sgl.models.ssl_baselines import build_ssl_model
    >>> graph = sgl.datasets.load("karate")
    >>> model = build_ssl_model("dgi", graph.num_features, hidden=8, epochs=2)
    >>> _ = model.fit(graph)
    >>> model.embed(graph).shape
    torch.Size([34, 8])
"""
from __future__ import annotations

import abc
from dataclasses import asdict, dataclass
from numbers import Integral, Real
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch_geometric.nn import GCNConv
from torch_geometric.nn import GAE as PyGGAE
from torch_geometric.nn import DeepGraphInfomax

from sgl.data import Graph
from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.models.gcmae import (
    GCMAE, GCMAEConfig, GNNEncoder, check_ssl_graph, gcmae_config, grace_config, graphmae_config, run_pretraining,
)
from sgl.ops import row_normalize

__all__ = ["DGIConfig", "DGI", "GAEConfig", "GAE", "SSL_MODELS", "build_ssl_model", "ssl_model_config"]


def _check(config: Any, who: str) -> None:
    for name in ("hidden", "num_layers", "epochs"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
            raise ConfigError(f"{who} {name} must be an integer >= 1, got {value!r}")
    for name in ("lr", "weight_decay"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, Real) or value < 0 or (name == "lr" and value == 0):
            raise ConfigError(f"{who} {name} must be a number {'> 0' if name == 'lr' else '>= 0'}, got {value!r}")


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
    """Shared fit/embed loop around a torch_geometric self-supervised module."""

    name = "model"

    def __init__(self, in_features: int, config: Any, config_cls: type) -> None:
        super().__init__()
        if not isinstance(config, config_cls):
            raise ConfigError(f"{type(self).__name__} takes a {config_cls.__name__}, got {type(config).__name__}")
        if isinstance(in_features, bool) or not isinstance(in_features, Integral) or in_features < 1:
            raise ConfigError(f"{type(self).__name__} needs in_features >= 1, got {in_features!r}")
        self.in_features, self.config = int(in_features), config

    def _inputs(self, graph: Graph, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        graph = check_ssl_graph(graph, self.in_features, type(self).__name__)
        x = graph.x.float()
        if self.config.normalize_features:
            x = row_normalize(x)
        return x.to(device), graph.edge_index.to(device)

    @abc.abstractmethod
    def _loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """The wrapped model's self-supervised loss on the whole graph."""

    def fit(self, graph: Graph, seed: int = 0, progress: bool = False) -> List[Dict[str, float]]:
        cfg = self.config
        torch.manual_seed(seed)
        self.model.reset_parameters()
        device = get_device(cfg.device)
        self.to(device)
        x, edge_index = self._inputs(graph, device)
        return run_pretraining(self, x, edge_index, lambda x, e: (self._loss(x, e), {}), epochs=cfg.epochs,
                               lr=cfg.lr, weight_decay=cfg.weight_decay, name=type(self).__name__,
                               progress=progress)

    @torch.no_grad()
    def embed(self, graph: Graph) -> torch.Tensor:
        self.eval()
        device = next(self.parameters()).device
        x, edge_index = self._inputs(graph, device)
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

    def _loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        pos, neg, summary = self.model(x, edge_index)
        return self.model.loss(pos, neg, summary)


class GAE(_PyGWrapper):
    """Graph autoencoder (torch_geometric ``GAE``): GCN encoder, inner-product decoder."""

    def __init__(self, in_features: int, config: Optional[GAEConfig] = None) -> None:
        super().__init__(in_features, config or GAEConfig(), GAEConfig)
        cfg = self.config
        self.model = PyGGAE(_GCNStack(in_features, cfg.hidden, cfg.num_layers, False))

    def __repr__(self) -> str:
        return f"GAE(in_features={self.in_features}, hidden={self.config.hidden})"

    def _loss(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        z = self.model.encode(x, edge_index)
        return self.model.recon_loss(z, edge_index)


#: name -> (model class, config factory, description)
SSL_MODELS: Dict[str, Tuple[type, Callable[..., Any], str]] = {
    "gcmae": (GCMAE, GCMAEConfig, "GCMAE: masked autoencoder + contrastive + adjacency + variance losses"),
    "graphmae": (GCMAE, graphmae_config, "GraphMAE-style: masked feature reconstruction (SCE) only"),
    "grace": (GCMAE, grace_config, "GRACE-style: InfoNCE between two augmented views only"),
    "dgi": (DGI, DGIConfig, "Deep Graph Infomax (torch_geometric DeepGraphInfomax, GCN encoder)"),
    "gae": (GAE, GAEConfig, "Graph autoencoder (torch_geometric GAE, GCN encoder)"),
}


def ssl_model_config(name: str, **overrides: Any) -> Any:
    """The config of self-supervised model ``name`` with ``overrides`` (unknown keys rejected).

    For ``gcmae``, ``preset="cora"`` starts from :func:`~sgl.models.gcmae.gcmae_config`'s preset.
    """
    key = str(name).lower()
    if key not in SSL_MODELS:
        raise ConfigError(f"unknown self-supervised model {name!r}; available: {', '.join(sorted(SSL_MODELS))}")
    _, factory, _ = SSL_MODELS[key]
    config_cls = GCMAEConfig if key in ("gcmae", "graphmae", "grace") else factory
    if key == "gcmae" and "preset" in overrides:
        # a named GCMAE preset (gcmae_config), e.g. --model-option preset=cora
        preset = overrides.pop("preset")
        factory = lambda **kw: gcmae_config(preset, **kw)  # noqa: E731
    unknown = set(overrides) - set(config_cls.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown option(s) {sorted(unknown)} for {name!r}; valid: "
                          f"{sorted(config_cls.__dataclass_fields__)}")
    try:
        return factory(**overrides)
    except TypeError as exc:  # pragma: no cover - guarded above
        raise ConfigError(f"bad option for {name!r}: {exc}") from exc


def build_ssl_model(name: str, in_features: int, config: Any = None, **overrides: Any) -> Any:
    """Instantiate self-supervised model ``name`` (``gcmae``, ``graphmae``, ``grace``, ``dgi``, ``gae``)."""
    if str(name).lower() not in SSL_MODELS:
        raise ConfigError(f"unknown self-supervised model {name!r}; available: {', '.join(sorted(SSL_MODELS))}")
    cfg = config if config is not None else ssl_model_config(name, **overrides)
    cls = SSL_MODELS[str(name).lower()][0]
    return cls(in_features, cfg)
