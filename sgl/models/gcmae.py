r"""GCMAE: graph contrastive masked autoencoder, and the GraphMAE-/GRACE-style ablations.

GCMAE (Wang et al., "Generative and Contrastive Paradigms Are Complementary for Graph
Self-Supervised Learning", arXiv 2310.15523) trains one GNN encoder :math:`f` with four
losses:

* **MAE** (GraphMAE-style): a fraction ``mask_rate`` of nodes get their features replaced
  by a learnable mask token; :math:`H = f(\tilde X, A)`; the masked rows of
  :math:`H W_{e2d}` are zeroed again and a one-layer GNN decoder reconstructs :math:`X`.
  :func:`sce_loss` :math:`= \operatorname{mean}_{i \in M} (1 - \cos(\hat x_i, x_i))^{\gamma}`.
* **Adjacency reconstruction** of the *whole* graph from :math:`H` (not only masked
  edges): binary cross-entropy of the pair logits :math:`\cos(h_u, h_v) / \tau_a`, edges and
  non-edges weighted equally. On small graphs over all :math:`N^2` pairs
  (:func:`dense_adjacency_loss`, ``adj_mode="dense"``/``"auto"``); otherwise on up to
  ``adj_max_pos`` sampled edges and ``adj_neg_ratio`` times as many uniform node pairs per
  step (:func:`adjacency_loss`), an estimate of the same loss with memory linear in the sample.
* **Contrastive** (GRACE-style InfoNCE, :func:`info_nce`): two views through projection
  heads; by default the masked view and a view with dropped edges and feature columns;
  the official code's form (``cl_views="single"``, ``augmentation="drop_node"``) passes one
  drop-node view through both heads. Computed on at most ``cl_max_nodes`` random nodes per
  step (memory :math:`O(B^2)`).
* **Discrimination** against over-smoothing (:func:`variance_loss`, VICReg's variance
  term on a linear projection of :math:`H`):
  :math:`\operatorname{mean}_d \max(0, 1 - \sqrt{\operatorname{Var}_d + \epsilon})`.

:func:`gcmae_config` holds named presets; ``gcmae_config("cora")`` is the official Cora
configuration (see :data:`GCMAE_PRESETS`).

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
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCNConv
from torch_geometric.utils import add_self_loops, remove_self_loops
from torch_geometric.utils import softmax as segment_softmax

from sgl.data import Graph
from sgl.device import get_device
from sgl.errors import ConfigError, FeatureError, GraphError
from sgl.ops import row_normalize

__all__ = [
    "GCMAEConfig",
    "GCMAE",
    "GNNEncoder",
    "GCMAE_PRESETS",
    "gcmae_config",
    "graphmae_config",
    "grace_config",
    "sce_loss",
    "info_nce",
    "adjacency_loss",
    "dense_adjacency_loss",
    "variance_loss",
    "drop_nodes",
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
    # three similarity matrices serve both directions (h2 h1^T is the transpose of h1 h2^T)
    s11, s22, s12 = torch.exp(h1 @ h1.t() / tau), torch.exp(h2 @ h2.t() / tau), torch.exp(h1 @ h2.t() / tau)
    pos = s12.diagonal()
    # GRACE: positive over (all inter-view pairs + all intra-view pairs except the self-pair)
    loss12 = -torch.log(pos / (s11.sum(1) + s12.sum(1) - s11.diagonal()))
    loss21 = -torch.log(pos / (s22.sum(1) + s12.sum(0) - s22.diagonal()))
    return 0.5 * (loss12.mean() + loss21.mean())


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


class _SoftplusGramSum(torch.autograd.Function):
    r""":math:`\sum_{u,v} \mathrm{softplus}(h_u \cdot h_v / \tau)` with the symmetric gradient
    :math:`2\,\sigma(HH^\top/\tau)\,H/\tau` (one matrix product instead of autograd's two)."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, temperature: float) -> torch.Tensor:  # type: ignore[override]
        logits = (h @ h.t()) / temperature
        ctx.save_for_backward(h, torch.sigmoid(logits))
        ctx.temperature = temperature
        return F.softplus(logits).sum()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, None]:  # type: ignore[override]
        h, sig = ctx.saved_tensors
        return grad * 2.0 * (sig @ h) / ctx.temperature, None


def dense_adjacency_loss(z: torch.Tensor, edge_index: torch.Tensor, temperature: float = 0.25) -> torch.Tensor:
    r"""Whole-matrix form of :func:`adjacency_loss`: every node pair is scored (memory :math:`O(N^2)`).

    With logits :math:`\ell_{uv} = \cos(z_u, z_v)/\tau` over all :math:`N^2` ordered pairs
    (self-pairs included, as the encoder's graph has self-loops), the loss is
    :math:`\tfrac12 \operatorname{mean}_{A_{uv}=1} \mathrm{BCE}(\ell_{uv}, 1) +
    \tfrac12 \operatorname{mean}_{A_{uv}=0} \mathrm{BCE}(\ell_{uv}, 0)`, where :math:`A` is
    ``edge_index`` plus self-loops: edges and non-edges weigh the same, as in the sampled form.
    Use it for graphs of up to a few tens of thousands of nodes.

    Example:
        >>> import torch
        >>> z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        >>> no_edges = torch.zeros(2, 0, dtype=torch.long)
        >>> round(float(dense_adjacency_loss(z, no_edges, 1.0)), 4)   # (softplus(-1) + softplus(0)) / 2
        0.5032
    """
    n = z.size(0)
    h = F.normalize(z, dim=1)
    # the distinct positive pairs (edges and self-loops) are scored directly; the negatives'
    # sum is the sum over all pairs minus the positives' (no N x N mask is built)
    loops = torch.arange(n, device=z.device)
    keys = torch.unique(torch.cat([edge_index[0] * n + edge_index[1], loops * n + loops]))
    src, dst = keys // n, keys % n
    pos_logits = (h[src] * h[dst]).sum(1) / temperature
    num_pos, num_neg = keys.numel(), n * n - keys.numel()
    pos_part = F.softplus(-pos_logits).sum() / num_pos
    if not num_neg:
        return 0.5 * pos_part
    all_sum = _SoftplusGramSum.apply(h, float(temperature))
    neg_part = (all_sum - F.softplus(pos_logits).sum()) / num_neg
    return 0.5 * (pos_part + neg_part)


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
    ``"masked"`` (masked view vs one augmented view), ``"augmented"`` (two augmented
    views, GRACE) or ``"single"`` (one augmented view through both projection heads, as
    GCMAE's official code does). ``augmentation`` builds the augmented views:
    ``"edge_feature"`` (drop ``drop_edge`` of the edges and ``drop_feature`` of the feature
    columns) or ``"drop_node"`` (keep the subgraph induced by the nodes that survive a
    ``drop_node`` Bernoulli drop). ``in_drop`` is dropout on every encoder/decoder layer's
    input (GraphMAE's ``in_drop``), ``dropout`` only between encoder layers; ``attn_drop``
    and ``negative_slope`` are the GAT attention dropout and LeakyReLU slope.
    ``adj_mode``: ``"sampled"`` (:func:`adjacency_loss` on sampled pairs, memory linear in
    the sample), ``"dense"`` (:func:`dense_adjacency_loss`, all :math:`N^2` pairs) or
    ``"auto"`` (dense up to ``adj_dense_max_nodes`` nodes). ``std_head``: ``"linear"``
    (variance of a linear projection) or ``"prelu_norm"`` (Linear, PReLU, then
    L2-normalised rows, as GCMAE's code). ``proj_out`` is the projection heads' output
    width (0: ``hidden``). :func:`gcmae_config` returns the named dataset presets.
    """

    encoder: str = "gcn"
    hidden: int = 512
    num_layers: int = 2
    heads: int = 4
    dropout: float = 0.2
    in_drop: float = 0.0
    attn_drop: float = 0.0
    negative_slope: float = 0.2
    mask_rate: float = 0.5
    replace_rate: float = 0.05
    sce_alpha: float = 3.0
    drop_edge: float = 0.3
    drop_feature: float = 0.3
    augmentation: str = "edge_feature"
    drop_node: float = 0.5
    tau: float = 0.5
    proj_dim: int = 256
    proj_out: int = 0
    adj_temperature: float = 0.25
    adj_mode: str = "sampled"
    adj_dense_max_nodes: int = 20_000
    adj_max_pos: int = 50_000
    adj_neg_ratio: int = 1
    std_head: str = "linear"
    #: keep the (sparse) input features as a sparse matrix: the first GAT layer projects only
    #: the non-zero entries and adds the mask token's projection to the masked rows
    sparse_input: bool = False
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
        for name, allowed in (("cl_views", ("masked", "augmented", "single")),
                              ("augmentation", ("edge_feature", "drop_node")),
                              ("adj_mode", ("sampled", "dense", "auto")), ("std_head", ("linear", "prelu_norm"))):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"GCMAE {name} must be one of {', '.join(map(repr, allowed))}, "
                                  f"got {getattr(self, name)!r}")
        for name in ("hidden", "num_layers", "heads", "proj_dim", "adj_max_pos", "adj_neg_ratio",
                     "cl_max_nodes", "epochs", "adj_dense_max_nodes"):
            _check_int(getattr(self, name), name, 1)
        _check_int(self.proj_out, "proj_out", 0)
        if self.encoder == "gat" and self.hidden % self.heads:
            raise ConfigError(f"GCMAE with a GAT encoder needs hidden divisible by heads, got {self.hidden}, {self.heads}")
        for name in ("dropout", "in_drop", "attn_drop", "mask_rate", "replace_rate", "drop_edge", "drop_feature",
                     "drop_node"):
            _check_real(getattr(self, name), name, 0.0, 1.0, open_high=True)
        _check_real(self.negative_slope, "negative_slope", 0.0)
        for name in ("sce_alpha", "tau", "adj_temperature", "lr"):
            _check_real(getattr(self, name), name, 1e-12)
        for name in ("mae_weight", "cl_weight", "adj_weight", "std_weight", "weight_decay"):
            _check_real(getattr(self, name), name, 0.0)
        if self.mae_weight == self.cl_weight == self.adj_weight == self.std_weight == 0:
            raise ConfigError("GCMAE needs at least one positive loss weight (mae/cl/adj/std)")
        if self.mae_weight > 0 and self.mask_rate == 0:
            raise ConfigError("GCMAE mae_weight > 0 needs mask_rate > 0 (nothing would be reconstructed)")
        if not isinstance(self.sparse_input, bool):
            raise ConfigError(f"GCMAE sparse_input must be True or False, got {self.sparse_input!r}")
        if self.sparse_input and self.encoder != "gat":
            raise ConfigError("GCMAE sparse_input=True needs encoder='gat' (the GCN encoder takes dense features)")
        if not isinstance(self.shared_projector, bool):
            raise ConfigError(f"GCMAE shared_projector must be True or False, got {self.shared_projector!r}")
        if not isinstance(self.normalize_features, bool):
            raise ConfigError(f"GCMAE normalize_features must be True or False, got {self.normalize_features!r}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


#: Named dataset presets of :func:`gcmae_config`. ``"cora"`` is GCMAE's official Cora
#: configuration (wyx11112/GCMAE configs.yml): GAT encoder, 2 layers of 4 concatenated
#: heads x 128 (hidden 512, heads also concatenated on the last layer), PReLU, in_drop and
#: attn_drop 0.1, no residual/norm; mask rate 0.6 without random replacement; a one-head
#: GAT decoder; SCE alpha 3; contrastive branch on one drop-node (0.5) view through two
#: Linear-PReLU-Linear heads (256-256), tau 1, weight 0.3 (GRACE's denominator, not the
#: code's precedence slip); whole-adjacency reconstruction (dense on small graphs) weight 0.3;
#: variance loss on L2-normalised PReLU(Linear(h)) weight 0.5; Adam lr 1e-3, weight decay
#: 2e-4, cosine decay, 2000 epochs. The probe of that protocol is
#: ``linear_probe(..., lr=0.01, weight_decay=1e-4, epochs=400)``.
GCMAE_PRESETS: Dict[str, Dict[str, Any]] = {
    "cora": dict(
        encoder="gat", hidden=512, num_layers=2, heads=4, dropout=0.0, in_drop=0.1, attn_drop=0.1,
        negative_slope=0.2, mask_rate=0.6, replace_rate=0.0, sce_alpha=3.0,
        cl_views="single", augmentation="drop_node", drop_node=0.5, tau=1.0, proj_dim=256, proj_out=256,
        cl_max_nodes=100_000, cl_weight=0.3, adj_weight=0.3, adj_mode="auto", std_weight=0.5,
        std_head="prelu_norm", mae_weight=1.0, epochs=2000, lr=1e-3, weight_decay=2e-4,
        normalize_features=True, sparse_input=True,
    ),
}


def gcmae_config(preset: Optional[str] = None, **overrides: Any) -> GCMAEConfig:
    """A :class:`GCMAEConfig` from a named preset (see :data:`GCMAE_PRESETS`) plus ``overrides``.

    ``gcmae_config()`` (no preset) is ``GCMAEConfig(**overrides)``.

    Example:
        >>> cfg = gcmae_config("cora", epochs=10)
        >>> cfg.encoder, cfg.hidden, cfg.heads, cfg.mask_rate, cfg.epochs
        ('gat', 512, 4, 0.6, 10)
    """
    if preset is None:
        return GCMAEConfig(**overrides)
    key = str(preset).lower()
    if key not in GCMAE_PRESETS:
        raise ConfigError(f"unknown GCMAE preset {preset!r}; available: {', '.join(sorted(GCMAE_PRESETS))}")
    unknown = set(overrides) - set(GCMAEConfig.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown GCMAE option(s) {sorted(unknown)}; "
                          f"valid: {sorted(GCMAEConfig.__dataclass_fields__)}")
    return GCMAEConfig(**{**GCMAE_PRESETS[key], **overrides})


def graphmae_config(**overrides: Any) -> GCMAEConfig:
    """GraphMAE-style ablation: masked-feature reconstruction (SCE) only."""
    return GCMAEConfig(**{"cl_weight": 0.0, "adj_weight": 0.0, "std_weight": 0.0, **overrides})


def grace_config(**overrides: Any) -> GCMAEConfig:
    """GRACE-style ablation: InfoNCE between two augmented views only."""
    return GCMAEConfig(**{"mae_weight": 0.0, "cl_weight": 1.0, "adj_weight": 0.0, "std_weight": 0.0,
                          "cl_views": "augmented", "mask_rate": 0.0, "replace_rate": 0.0,
                          "shared_projector": True, **overrides})


# ---------------------------------------------------------------------------- modules
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


def drop_nodes(x: torch.Tensor, edge_index: torch.Tensor, p: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drop each node with probability ``p``; the subgraph induced by the kept nodes.

    Returns ``(x[kept], edge_index relabelled to 0..len(kept)-1, kept)``; ``x`` may be a
    sparse COO tensor. At least one node is always kept.

    Example:
        >>> import torch
        >>> x, ei = torch.arange(3.0).view(3, 1), torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
        >>> x_sub, ei_sub, kept = drop_nodes(x, ei, 0.0)
        >>> kept.tolist(), ei_sub.tolist()
        ([0, 1, 2], [[0, 1, 1, 2], [1, 0, 2, 1]])
    """
    n = x.size(0)
    keep = torch.rand(n, device=x.device) >= p
    if not bool(keep.any()):
        keep[torch.randint(0, n, (1,), device=x.device)] = True
    kept = keep.nonzero().flatten()
    new_id = torch.full((n,), -1, dtype=torch.long, device=x.device)
    new_id[kept] = torch.arange(kept.numel(), device=x.device)
    both = keep[edge_index[0]] & keep[edge_index[1]]
    return x.index_select(0, kept), new_id[edge_index[:, both]], kept


def _drop_feature_columns(x: torch.Tensor, p: float) -> torch.Tensor:
    if p == 0:
        return x
    keep = (torch.rand(x.size(1), device=x.device) >= p).to(x.dtype)
    if x.is_sparse:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), x.values() * keep[x.indices()[1]], x.shape, check_invariants=False)
    return x * keep


def run_pretraining(module: nn.Module, x: torch.Tensor, edge_index: torch.Tensor,
                    step: Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, Dict[str, torch.Tensor]]], *,
                    epochs: int, lr: float, weight_decay: float, name: str, cosine: bool = False,
                    progress: bool = False, callback: Optional[Callable[[int, Any], None]] = None
                    ) -> List[Dict[str, float]]:
    """Full-graph self-supervised pre-training shared by GCMAE and the SSL baselines.

    Adam over ``module``'s parameters (cosine learning-rate decay when ``cosine``); each epoch
    ``step(x, edge_index)`` returns ``(loss, named terms)``. Returns per-epoch ``{"loss", terms...}``,
    sets ``module.fit_time_s`` and raises :class:`FeatureError` on a non-finite loss.
    """
    optimizer = torch.optim.Adam(module.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = (torch.optim.lr_scheduler.LambdaLR(optimizer, lambda e: 0.5 * (1 + math.cos(math.pi * e / epochs)))
                if cosine else None)
    history: List[Dict[str, float]] = []
    loop = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        loop = tqdm(loop, desc=f"{name} pre-training", leave=False, disable=None)
    start = time.perf_counter()
    for epoch in loop:
        module.train()
        optimizer.zero_grad()
        loss, terms = step(x, edge_index)
        if not torch.isfinite(loss):
            raise FeatureError(f"{name} pre-training diverged (loss {float(loss.detach())}) at epoch {epoch}; "
                               f"lower lr or check the features for huge values")
        loss.backward()
        optimizer.step()
        if schedule is not None:
            schedule.step()
        history.append({"loss": float(loss.detach()), **{k: float(v.detach()) for k, v in terms.items()}})
        if callback is not None:
            callback(epoch, module)
    module.fit_time_s = time.perf_counter() - start
    return history


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
        self.encoder = GNNEncoder(in_features, cfg.hidden, cfg.num_layers, cfg.encoder, cfg.heads, cfg.dropout,
                                  cfg.in_drop, cfg.attn_drop, cfg.negative_slope)
        self.mask_token = nn.Parameter(torch.zeros(1, in_features))
        self.encoder_to_decoder = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        if cfg.encoder == "gat":
            self.decoder = GATConv(cfg.hidden, in_features, heads=1, dropout=cfg.attn_drop,
                                   negative_slope=cfg.negative_slope)
        else:
            self.decoder = GCNConv(cfg.hidden, in_features)
        out = cfg.proj_out or cfg.hidden
        self.projector = nn.Sequential(nn.Linear(cfg.hidden, cfg.proj_dim), nn.PReLU(), nn.Linear(cfg.proj_dim, out))
        self.projector2 = nn.Sequential(nn.Linear(cfg.hidden, cfg.proj_dim), nn.PReLU(), nn.Linear(cfg.proj_dim, out))
        self.std_head = nn.Linear(cfg.hidden, cfg.hidden)
        self.std_act = nn.PReLU() if cfg.std_head == "prelu_norm" else None

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
        for module in (*self.projector, *self.projector2, self.std_act):
            if isinstance(module, nn.PReLU):
                nn.init.constant_(module.weight, 0.25)

    # -- inputs -----------------------------------------------------------------------
    def _inputs(self, graph: Graph, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        graph = check_ssl_graph(graph, self.in_features, "GCMAE")
        x = graph.x.float()
        if self.config.normalize_features:
            x = row_normalize(x)
        if self.config.sparse_input:
            x = x.to_sparse().coalesce()
        return x.to(device), graph.edge_index.to(device)

    def _mask_sparse(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_mask` on a sparse COO ``x``: (masked input without the token, masked nodes, token nodes)."""
        cfg = self.config
        n, dev = x.size(0), x.device
        rows, cols = x.indices()
        values = x.values()
        perm = torch.randperm(n, device=dev)
        num_mask = max(1, int(cfg.mask_rate * n))
        masked = perm[:num_mask]
        is_masked = torch.zeros(n, dtype=torch.bool, device=dev)
        is_masked[masked] = True
        keep = ~is_masked[rows]
        parts = [(rows[keep], cols[keep], values[keep])]
        num_replace = int(cfg.replace_rate * num_mask)
        token_nodes = masked
        if num_replace:
            order = masked[torch.randperm(num_mask, device=dev)]
            token_nodes, noise_nodes = order[num_replace:], order[:num_replace]
            sources = torch.randint(0, n, (num_replace,), device=dev)
            indptr = torch.zeros(n + 1, dtype=torch.long, device=dev)
            indptr[1:] = torch.bincount(rows, minlength=n).cumsum(0)
            counts = indptr[sources + 1] - indptr[sources]
            starts = torch.repeat_interleave(counts.cumsum(0) - counts, counts)
            offsets = torch.arange(int(counts.sum()), device=dev) - starts
            entries = torch.repeat_interleave(indptr[sources], counts) + offsets
            parts.append((torch.repeat_interleave(noise_nodes, counts), cols[entries], values[entries]))
        out = torch.sparse_coo_tensor(torch.stack([torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])]),
                                      torch.cat([p[2] for p in parts]), x.shape, check_invariants=False)
        return out, masked, token_nodes


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
            if x.is_sparse:
                if cfg.mask_rate > 0:
                    x_masked, masked, token_rows = self._mask_sparse(x)
                else:
                    x_masked, masked, token_rows = x, torch.arange(0, device=x.device), None
                h_masked = self.encoder(x_masked, edge_index, self.mask_token, token_rows)
            else:
                x_masked, masked = self._mask(x) if cfg.mask_rate > 0 else (x, torch.arange(0, device=x.device))
                h_masked = self.encoder(x_masked, edge_index)
            if cfg.mae_weight > 0:
                rep = self.encoder_to_decoder(h_masked)
                rep = rep.index_fill(0, masked, 0.0)
                if isinstance(self.decoder, GATConv):
                    if cfg.in_drop:
                        rep = F.dropout(rep, p=cfg.in_drop, training=self.training)
                    unmasked = torch.ones(n, dtype=torch.bool, device=x.device)
                    unmasked[masked] = False
                    # re-masked rows are zero: project only the others
                    proj = _project(self.decoder, rep, rows=unmasked.nonzero().flatten())
                    recon = _gat_propagate(self.decoder, proj, edge_index)
                else:
                    recon = self.decoder(rep, edge_index)
                target = x.index_select(0, masked).to_dense() if x.is_sparse else x[masked]
                out["mae"] = sce_loss(recon[masked], target, cfg.sce_alpha)
        if cfg.cl_weight > 0:
            second_head = self.projector if cfg.shared_projector else self.projector2
            if cfg.augmentation == "drop_node":
                # the views are induced subgraphs on different node sets, so the two views compared
                # are either one view through both heads ("single") or the masked view restricted
                # to the nodes the augmented view kept
                x_aug, ei_aug, kept = drop_nodes(x, edge_index, cfg.drop_node)
                h_aug = self.encoder(x_aug, ei_aug)
                if cfg.cl_views == "single":
                    first = h_aug
                elif cfg.cl_views == "masked":
                    first = h_masked[kept]
                else:
                    x2, ei2, kept2 = drop_nodes(x, edge_index, cfg.drop_node)
                    both = torch.zeros(n, 2, dtype=torch.long, device=x.device).fill_(-1)
                    both[kept, 0] = torch.arange(kept.numel(), device=x.device)
                    both[kept2, 1] = torch.arange(kept2.numel(), device=x.device)
                    common = (both >= 0).all(1)
                    h2 = self.encoder(x2, ei2)
                    first, h_aug = h2[both[common, 1]], h_aug[both[common, 0]]
            else:
                h_aug = self.encoder(_drop_feature_columns(x, cfg.drop_feature), _drop_edges(edge_index, cfg.drop_edge))
                if cfg.cl_views == "single":
                    first = h_aug
                elif cfg.cl_views == "masked":
                    first = h_masked
                else:
                    first = self.encoder(_drop_feature_columns(x, cfg.drop_feature), _drop_edges(edge_index, cfg.drop_edge))
            m = h_aug.size(0)
            nodes = torch.randperm(m, device=x.device)[:cfg.cl_max_nodes] if m > cfg.cl_max_nodes else slice(None)
            out["cl"] = info_nce(self.projector(first[nodes]), second_head(h_aug[nodes]), cfg.tau)
        h = h_masked if h_masked is not None else None
        if cfg.adj_weight > 0 or cfg.std_weight > 0:
            if h is None:
                h = self.encoder(x, edge_index)
            dense = cfg.adj_mode == "dense" or (cfg.adj_mode == "auto" and n <= cfg.adj_dense_max_nodes)
            if cfg.adj_weight > 0 and dense:
                out["adj"] = dense_adjacency_loss(h, edge_index, cfg.adj_temperature)
            elif cfg.adj_weight > 0 and edge_index.size(1) > 0:
                e = edge_index.size(1)
                pos = edge_index if e <= cfg.adj_max_pos else \
                    edge_index[:, torch.randint(0, e, (cfg.adj_max_pos,), device=x.device)]
                neg = torch.randint(0, n, (2, pos.size(1) * cfg.adj_neg_ratio), device=x.device)
                out["adj"] = adjacency_loss(h, pos, neg, cfg.adj_temperature)
            if cfg.std_weight > 0:
                z = self.std_head(h)
                if self.std_act is not None:
                    z = F.normalize(self.std_act(z), dim=1)
                out["std"] = variance_loss(z)
        return out

    def total_loss(self, terms: Dict[str, torch.Tensor]) -> torch.Tensor:
        cfg = self.config
        return (cfg.mae_weight * terms["mae"] + cfg.cl_weight * terms["cl"] + cfg.adj_weight * terms["adj"]
                + cfg.std_weight * terms["std"])

    # -- training / inference -------------------------------------------------------------
    def fit(self, graph: Graph, seed: int = 0, progress: bool = False,
            callback: Optional[Callable[[int, "GCMAE"], None]] = None) -> List[Dict[str, float]]:
        """Pre-train on ``graph`` (Adam, cosine learning-rate decay); returns per-epoch losses.

        ``callback(epoch, model)``, if given, runs after every epoch (e.g. to log a probe).
        """
        cfg = self.config
        torch.manual_seed(seed)
        self.reset_parameters()
        device = get_device(cfg.device)
        self.to(device)
        x, edge_index = self._inputs(graph, device)

        def step(x: torch.Tensor, edge_index: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
            terms = self.losses(x, edge_index)
            return self.total_loss(terms), terms

        return run_pretraining(self, x, edge_index, step, epochs=cfg.epochs, lr=cfg.lr,
                               weight_decay=cfg.weight_decay, name="GCMAE", cosine=True, progress=progress,
                               callback=callback)

    @torch.no_grad()
    def embed(self, graph: Graph) -> torch.Tensor:
        """Node embeddings ``[N, hidden]`` of the frozen encoder on the clean graph (CPU tensor)."""
        self.eval()
        device = next(self.parameters()).device
        x, edge_index = self._inputs(graph, device)
        return self.encoder(x, edge_index).cpu()
