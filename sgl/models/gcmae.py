r"""GCMAE: graph contrastive masked autoencoder, and the GraphMAE-/GRACE-style ablations.

GCMAE (Wang et al., "Generative and Contrastive Paradigms Are Complementary for Graph
Self-Supervised Learning", arXiv 2310.15523) trains one GNN encoder :math:`f` with four
losses:

* **MAE** (GraphMAE-style): a fraction ``mask_rate`` of nodes get their features replaced
  by a learnable mask token; :math:`H = f(\tilde X, A)`; the masked rows of
  :math:`H W_{e2d}` are zeroed again and a one-layer GNN decoder reconstructs :math:`X`.
  :func:`sce_loss` :math:`= \operatorname{mean}_{i \in M} (1 - \cos(\hat x_i, x_i))^{\gamma}`.
* **Adjacency reconstruction** of the *whole* graph from :math:`H` (not only masked
  edges). Instead of the dense :math:`N \times N` target we sample up to ``adj_max_pos``
  edges and ``adj_neg_ratio`` times as many uniform node pairs per step; the logit of a
  pair is :math:`\cos(h_u, h_v) / \tau_a` (:func:`adjacency_loss`, binary cross-entropy), an
  unbiased estimate of the full-matrix loss with memory linear in the sample.
* **Contrastive** (GRACE-style InfoNCE, :func:`info_nce`): two views through projection
  heads; by default the masked view and a view with dropped edges and feature columns.
  Computed on at most ``cl_max_nodes`` random nodes per step (memory :math:`O(B^2)`).
* **Discrimination** against over-smoothing (:func:`variance_loss`, VICReg's variance
  term on a linear projection of :math:`H`):
  :math:`\operatorname{mean}_d \max(0, 1 - \sqrt{\operatorname{Var}_d + \epsilon})`.

Total: :math:`L = w_{mae} L_{mae} + \lambda L_{cl} + \mu L_{adj} + \nu L_{std}`. Setting
weights to zero gives the ablations: :func:`graphmae_config` (MAE only) and
:func:`grace_config` (two augmented views, InfoNCE only). We follow the paper's description,
not two quirks of the official code (an operator-precedence slip in its InfoNCE
denominator, and swapped arguments in its adjacency BCE).

Example:
    >>> import sgl
    >>> from sgl.models.gcmae import GCMAE, GCMAEConfig
    >>> graph = sgl.datasets.load("karate")
    >>> model = GCMAE(graph.num_features, GCMAEConfig(hidden=16, epochs=3))
    >>> history = model.fit(graph, seed=0)
    >>> len(history), sorted(history[-1])
    (3, ['adj', 'cl', 'loss', 'mae', 'std'])
    >>> model.embed(graph).shape
    torch.Size([34, 16])
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from numbers import Integral, Real
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCNConv

from sgl.data import Graph
from sgl.device import get_device
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops import row_normalize

__all__ = [
    "GCMAEConfig",
    "GCMAE",
    "GNNEncoder",
    "graphmae_config",
    "grace_config",
    "sce_loss",
    "info_nce",
    "adjacency_loss",
    "variance_loss",
    "check_ssl_graph",
]


# ---------------------------------------------------------------------------- losses
def sce_loss(x_hat: torch.Tensor, x: torch.Tensor, alpha: float = 3.0) -> torch.Tensor:
    r"""Scaled cosine error :math:`\operatorname{mean}_i (1 - \cos(\hat x_i, x_i))^{\alpha}`.

    Example:
        >>> import torch
        >>> round(float(sce_loss(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0]]), 2.0)), 4)
        0.5
    """
    cos = F.cosine_similarity(x_hat, x, dim=-1)
    return (1.0 - cos).clamp_min(0).pow(alpha).mean()


def _semi_nce(h1: torch.Tensor, h2: torch.Tensor, tau: float) -> torch.Tensor:
    refl = torch.exp(h1 @ h1.t() / tau)
    between = torch.exp(h1 @ h2.t() / tau)
    # GRACE: positive over (all inter-view pairs + all intra-view pairs except the self-pair)
    return -torch.log(between.diag() / (refl.sum(1) + between.sum(1) - refl.diag()))


def info_nce(z1: torch.Tensor, z2: torch.Tensor, tau: float = 0.5) -> torch.Tensor:
    r"""Symmetric GRACE InfoNCE between two views (rows are L2-normalised first).

    For node :math:`i`, with :math:`s(a, b) = e^{\cos(a, b)/\tau}`,
    :math:`\ell_i = -\log \frac{s(u_i, v_i)}{\sum_k s(u_i, v_k) + \sum_{k \ne i} s(u_i, u_k)}`;
    the loss is the mean of :math:`\ell` over both directions.

    Example:
        >>> import torch
        >>> z = torch.eye(2)
        >>> round(float(info_nce(z, z, tau=1.0)), 4)   # -log(e / ((e + 1) + (e + 1) - e))
        0.5514
    """
    h1, h2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    return 0.5 * (_semi_nce(h1, h2, tau).mean() + _semi_nce(h2, h1, tau).mean())


def adjacency_loss(z: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, temperature: float = 0.25) -> torch.Tensor:
    r"""Binary cross-entropy of edge logits :math:`\cos(z_u, z_v)/\tau` on positive and negative pairs.

    ``pos``/``neg`` are ``[2, P]`` / ``[2, Q]`` node pairs; positives target 1, negatives 0,
    each set weighted by its size (mean over all pairs).

    Example:
        >>> import torch
        >>> z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        >>> round(float(adjacency_loss(z, torch.tensor([[0], [1]]), torch.tensor([[0], [2]]), 1.0)), 4)
        0.5032
    """
    h = F.normalize(z, dim=1)
    logits = torch.cat([(h[pos[0]] * h[pos[1]]).sum(1), (h[neg[0]] * h[neg[1]]).sum(1)]) / temperature
    target = torch.cat([torch.ones(pos.size(1), device=z.device), torch.zeros(neg.size(1), device=z.device)])
    return F.binary_cross_entropy_with_logits(logits, target)


def variance_loss(z: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    r"""VICReg variance hinge :math:`\operatorname{mean}_d \max(0, 1 - \sqrt{\operatorname{Var}(z_{:,d}) + \epsilon})`.

    ``Var`` is the unbiased variance over rows.

    Example:
        >>> import torch
        >>> round(float(variance_loss(torch.tensor([[0.0, 0.0], [0.5, 4.0]]), eps=0.0)), 4)   # var 0.125, 8
        0.3232
    """
    std = torch.sqrt(z.var(dim=0) + eps)
    return F.relu(1.0 - std).mean()


# ---------------------------------------------------------------------------- config
def _check_int(value: Any, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ConfigError(f"GCMAE {name} must be an integer >= {minimum}, got {value!r}")


def _check_real(value: Any, name: str, low: float, high: float = math.inf, open_high: bool = False) -> None:
    ok = isinstance(value, Real) and not isinstance(value, bool) and low <= float(value) and (
        float(value) < high if open_high else float(value) <= high)
    if not ok:
        raise ConfigError(f"GCMAE {name} must be a number in [{low}, {high}{')' if open_high else ']'}, got {value!r}")


@dataclass
class GCMAEConfig:
    """Hyper-parameters of :class:`GCMAE` (defaults: a CPU-friendly Cora setting).

    Loss weights: ``mae_weight`` (:math:`w_{mae}`), ``cl_weight`` (:math:`\\lambda`),
    ``adj_weight`` (:math:`\\mu`), ``std_weight`` (:math:`\\nu`). ``cl_views`` is
    ``"masked"`` (masked view vs one augmented view, GCMAE) or ``"augmented"`` (two
    augmented views, GRACE).
    """

    encoder: str = "gcn"
    hidden: int = 512
    num_layers: int = 2
    heads: int = 4
    dropout: float = 0.2
    mask_rate: float = 0.5
    replace_rate: float = 0.05
    sce_alpha: float = 3.0
    drop_edge: float = 0.3
    drop_feature: float = 0.3
    tau: float = 0.5
    proj_dim: int = 256
    adj_temperature: float = 0.25
    adj_max_pos: int = 50_000
    adj_neg_ratio: int = 1
    cl_max_nodes: int = 1024
    mae_weight: float = 1.0
    cl_weight: float = 0.3
    adj_weight: float = 0.3
    std_weight: float = 0.5
    cl_views: str = "masked"
    #: one projection head for both views (GRACE) instead of one per view (GCMAE's code)
    shared_projector: bool = False
    epochs: int = 300
    lr: float = 1e-3
    weight_decay: float = 2e-4
    normalize_features: bool = True
    device: Optional[str] = None

    def __post_init__(self) -> None:
        if self.encoder not in ("gcn", "gat"):
            raise ConfigError(f"GCMAE encoder must be 'gcn' or 'gat', got {self.encoder!r}")
        if self.cl_views not in ("masked", "augmented"):
            raise ConfigError(f"GCMAE cl_views must be 'masked' or 'augmented', got {self.cl_views!r}")
        for name in ("hidden", "num_layers", "heads", "proj_dim", "adj_max_pos", "adj_neg_ratio",
                     "cl_max_nodes", "epochs"):
            _check_int(getattr(self, name), name, 1)
        if self.encoder == "gat" and self.hidden % self.heads:
            raise ConfigError(f"GCMAE with a GAT encoder needs hidden divisible by heads, got {self.hidden}, {self.heads}")
        for name in ("dropout", "mask_rate", "replace_rate", "drop_edge", "drop_feature"):
            _check_real(getattr(self, name), name, 0.0, 1.0, open_high=True)
        for name in ("sce_alpha", "tau", "adj_temperature", "lr"):
            _check_real(getattr(self, name), name, 1e-12)
        for name in ("mae_weight", "cl_weight", "adj_weight", "std_weight", "weight_decay"):
            _check_real(getattr(self, name), name, 0.0)
        if self.mae_weight == self.cl_weight == self.adj_weight == self.std_weight == 0:
            raise ConfigError("GCMAE needs at least one positive loss weight (mae/cl/adj/std)")
        if self.mae_weight > 0 and self.mask_rate == 0:
            raise ConfigError("GCMAE mae_weight > 0 needs mask_rate > 0 (nothing would be reconstructed)")
        if not isinstance(self.shared_projector, bool):
            raise ConfigError(f"GCMAE shared_projector must be True or False, got {self.shared_projector!r}")
        if not isinstance(self.normalize_features, bool):
            raise ConfigError(f"GCMAE normalize_features must be True or False, got {self.normalize_features!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def graphmae_config(**overrides: Any) -> GCMAEConfig:
    """GraphMAE-style ablation: masked-feature reconstruction (SCE) only."""
    return GCMAEConfig(**{"cl_weight": 0.0, "adj_weight": 0.0, "std_weight": 0.0, **overrides})


def grace_config(**overrides: Any) -> GCMAEConfig:
    """GRACE-style ablation: InfoNCE between two augmented views only."""
    return GCMAEConfig(**{"mae_weight": 0.0, "cl_weight": 1.0, "adj_weight": 0.0, "std_weight": 0.0,
                          "cl_views": "augmented", "mask_rate": 0.0, "replace_rate": 0.0,
                          "shared_projector": True, **overrides})


# ---------------------------------------------------------------------------- modules
class GNNEncoder(nn.Module):
    """``num_layers`` GCN or GAT layers of width ``hidden``, each followed by PReLU.

    Example:
        >>> import torch
        >>> enc = GNNEncoder(3, 8, num_layers=2)
        >>> enc(torch.ones(4, 3), torch.tensor([[0, 1], [1, 0]])).shape
        torch.Size([4, 8])
    """

    def __init__(self, in_features: int, hidden: int, num_layers: int = 2, kind: str = "gcn", heads: int = 4,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        self.acts = nn.ModuleList()
        width = in_features
        for _ in range(num_layers):
            if kind == "gat":
                self.convs.append(GATConv(width, hidden // heads, heads=heads, concat=True))
            else:
                self.convs.append(GCNConv(width, hidden))
            self.acts.append(nn.PReLU())
            width = hidden
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, (conv, act) in enumerate(zip(self.convs, self.acts)):
            if i > 0:
                x = F.dropout(x, p=self.dropout, training=self.training)
            x = act(conv(x, edge_index))
        return x

    def reset_parameters(self) -> None:
        for conv in self.convs:
            conv.reset_parameters()
        for act in self.acts:
            nn.init.constant_(act.weight, 0.25)


def check_ssl_graph(graph: Any, in_features: Optional[int], who: str) -> Graph:
    """Validate a graph for a self-supervised model: features present, finite, right width."""
    if not isinstance(graph, Graph):
        raise GraphError(f"{who} takes an sgl.data.Graph, got {type(graph).__name__}")
    if graph.x is None:
        raise FeatureError(
            f"{who} needs node features: the graph has no x; set graph.x (for a featureless graph, "
            f"one-hot degrees or a constant column are common choices)"
        )
    if graph.x.dim() != 2 or (in_features is not None and graph.x.size(1) != in_features):
        raise FeatureError(f"{who} expects features [num_nodes, {in_features}], got {tuple(graph.x.shape)}")
    return graph


def _drop_edges(edge_index: torch.Tensor, p: float, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    if p == 0:
        return edge_index
    keep = torch.rand(edge_index.size(1), device=edge_index.device) >= p
    return edge_index[:, keep]


def _drop_feature_columns(x: torch.Tensor, p: float) -> torch.Tensor:
    if p == 0:
        return x
    keep = (torch.rand(x.size(1), device=x.device) >= p).to(x.dtype)
    return x * keep


class GCMAE(nn.Module):
    r"""Graph contrastive masked autoencoder (see the module docstring for the losses).

    Args:
        in_features (int): node feature dimension.
        config (GCMAEConfig, optional): hyper-parameters (see also :func:`graphmae_config`,
            :func:`grace_config`).

    :meth:`fit` trains on one graph (for graph classification: the disjoint union of the
    collection's graphs) and returns per-epoch losses; :meth:`embed` returns the frozen
    encoder's node embeddings ``[N, hidden]``. Nothing trains in the constructor.
    """

    def __init__(self, in_features: int, config: Optional[GCMAEConfig] = None) -> None:
        super().__init__()
        if config is not None and not isinstance(config, GCMAEConfig):
            raise ConfigError(f"GCMAE takes a GCMAEConfig, got {type(config).__name__}")
        if isinstance(in_features, bool) or not isinstance(in_features, Integral) or in_features < 1:
            raise ConfigError(f"GCMAE needs in_features >= 1, got {in_features!r}")
        self.config = cfg = config or GCMAEConfig()
        self.in_features = int(in_features)
        self.encoder = GNNEncoder(in_features, cfg.hidden, cfg.num_layers, cfg.encoder, cfg.heads, cfg.dropout)
        self.mask_token = nn.Parameter(torch.zeros(1, in_features))
        self.encoder_to_decoder = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        self.decoder = GATConv(cfg.hidden, in_features, heads=1) if cfg.encoder == "gat" else GCNConv(cfg.hidden, in_features)
        self.projector = nn.Sequential(nn.Linear(cfg.hidden, cfg.proj_dim), nn.PReLU(), nn.Linear(cfg.proj_dim, cfg.hidden))
        self.projector2 = nn.Sequential(nn.Linear(cfg.hidden, cfg.proj_dim), nn.PReLU(), nn.Linear(cfg.proj_dim, cfg.hidden))
        self.std_head = nn.Linear(cfg.hidden, cfg.hidden)

    def __repr__(self) -> str:
        c = self.config
        return (f"GCMAE(in_features={self.in_features}, encoder={c.encoder}, hidden={c.hidden}, "
                f"num_layers={c.num_layers}, weights(mae={c.mae_weight}, cl={c.cl_weight}, adj={c.adj_weight}, "
                f"std={c.std_weight}))")

    def reset_parameters(self) -> None:
        self.encoder.reset_parameters()
        nn.init.zeros_(self.mask_token)
        for module in (self.encoder_to_decoder, self.decoder, self.std_head, *self.projector, *self.projector2):
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()

    # -- inputs -----------------------------------------------------------------------
    def _inputs(self, graph: Graph, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        graph = check_ssl_graph(graph, self.in_features, "GCMAE")
        x = graph.x.float()
        if self.config.normalize_features:
            x = row_normalize(x)
        return x.to(device), graph.edge_index.to(device)

    def _mask(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        cfg = self.config
        n = x.size(0)
        perm = torch.randperm(n, device=x.device)
        num_mask = max(1, int(cfg.mask_rate * n))
        masked = perm[:num_mask]
        out = x.clone()
        num_replace = int(cfg.replace_rate * num_mask)
        if num_replace:
            # GraphMAE's replace trick: a few masked nodes get another node's features instead of the token
            order = masked[torch.randperm(num_mask, device=x.device)]
            token_nodes, noise_nodes = order[num_replace:], order[:num_replace]
            out[token_nodes] = 0.0
            out[noise_nodes] = x[torch.randint(0, n, (num_replace,), device=x.device)]
            out[token_nodes] += self.mask_token
        else:
            out[masked] = 0.0
            out[masked] += self.mask_token
        return out, masked

    # -- losses -------------------------------------------------------------------------
    def losses(self, x: torch.Tensor, edge_index: torch.Tensor) -> Dict[str, torch.Tensor]:
        """The four loss terms (unweighted) for one training step on ``(x, edge_index)``."""
        cfg = self.config
        n = x.size(0)
        zero = x.new_zeros(())
        out = {"mae": zero, "cl": zero, "adj": zero, "std": zero}
        h_masked = None
        if cfg.mae_weight > 0 or cfg.cl_views == "masked":
            x_masked, masked = self._mask(x) if cfg.mask_rate > 0 else (x, torch.arange(0, device=x.device))
            h_masked = self.encoder(x_masked, edge_index)
            if cfg.mae_weight > 0:
                rep = self.encoder_to_decoder(h_masked)
                rep = rep.index_fill(0, masked, 0.0)
                recon = self.decoder(rep, edge_index)
                out["mae"] = sce_loss(recon[masked], x[masked], cfg.sce_alpha)
        if cfg.cl_weight > 0:
            h_aug = self.encoder(_drop_feature_columns(x, cfg.drop_feature), _drop_edges(edge_index, cfg.drop_edge))
            if cfg.cl_views == "masked":
                first = h_masked
            else:
                first = self.encoder(_drop_feature_columns(x, cfg.drop_feature), _drop_edges(edge_index, cfg.drop_edge))
            nodes = torch.randperm(n, device=x.device)[:cfg.cl_max_nodes] if n > cfg.cl_max_nodes else slice(None)
            second_head = self.projector if cfg.shared_projector else self.projector2
            out["cl"] = info_nce(self.projector(first[nodes]), second_head(h_aug[nodes]), cfg.tau)
        h = h_masked if h_masked is not None else None
        if cfg.adj_weight > 0 or cfg.std_weight > 0:
            if h is None:
                h = self.encoder(x, edge_index)
            if cfg.adj_weight > 0 and edge_index.size(1) > 0:
                e = edge_index.size(1)
                pos = edge_index if e <= cfg.adj_max_pos else \
                    edge_index[:, torch.randint(0, e, (cfg.adj_max_pos,), device=x.device)]
                neg = torch.randint(0, n, (2, pos.size(1) * cfg.adj_neg_ratio), device=x.device)
                out["adj"] = adjacency_loss(h, pos, neg, cfg.adj_temperature)
            if cfg.std_weight > 0:
                out["std"] = variance_loss(self.std_head(h))
        return out

    def total_loss(self, terms: Dict[str, torch.Tensor]) -> torch.Tensor:
        cfg = self.config
        return (cfg.mae_weight * terms["mae"] + cfg.cl_weight * terms["cl"] + cfg.adj_weight * terms["adj"]
                + cfg.std_weight * terms["std"])

    # -- training / inference -------------------------------------------------------------
    def fit(self, graph: Graph, seed: int = 0, progress: bool = False) -> List[Dict[str, float]]:
        """Pre-train on ``graph`` (Adam, cosine learning-rate decay); returns per-epoch losses."""
        cfg = self.config
        torch.manual_seed(seed)
        self.reset_parameters()
        device = get_device(cfg.device)
        self.to(device)
        x, edge_index = self._inputs(graph, device)
        optimizer = torch.optim.Adam(self.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda epoch: 0.5 * (1 + math.cos(math.pi * epoch / cfg.epochs)))
        history: List[Dict[str, float]] = []
        epochs = range(cfg.epochs)
        if progress:
            from tqdm.auto import tqdm

            epochs = tqdm(epochs, desc="GCMAE pre-training", leave=False, disable=None)
        start = time.perf_counter()
        for epoch in epochs:
            self.train()
            optimizer.zero_grad()
            terms = self.losses(x, edge_index)
            loss = self.total_loss(terms)
            if not torch.isfinite(loss):
                raise FeatureError(f"GCMAE pre-training diverged (loss {float(loss)}) at epoch {epoch}; "
                                   f"lower lr or check the features for huge values")
            loss.backward()
            optimizer.step()
            schedule.step()
            history.append({"loss": float(loss.detach()), **{k: float(v.detach()) for k, v in terms.items()}})
        self.fit_time_s = time.perf_counter() - start
        return history

    @torch.no_grad()
    def embed(self, graph: Graph) -> torch.Tensor:
        """Node embeddings ``[N, hidden]`` of the frozen encoder on the clean graph (CPU tensor)."""
        self.eval()
        device = next(self.parameters()).device
        x, edge_index = self._inputs(graph, device)
        return self.encoder(x, edge_index).cpu()
