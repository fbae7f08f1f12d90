r"""Hyper-parameters of :class:`~sgl.models.ssl.GCMAE` and its named dataset presets.

:class:`GCMAEConfig` is validated once, on construction; :func:`gcmae_config` builds one from
a preset of :data:`GCMAE_PRESETS` (``"cora"``: GCMAE's official Cora configuration) plus
overrides. The GraphMAE-/GRACE-style ablations are configs too (:mod:`sgl.models.ssl.baselines`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

from sgl._checks import check_bool, check_int, check_real, with_message
from sgl.errors import ConfigError

__all__ = ["GCMAEConfig", "GCMAE_PRESETS", "gcmae_config"]


def _check_real(value: Any, name: str, low: float, high: float = math.inf, open_high: bool = False) -> None:
    # GCMAE's message spells out an unbounded interval as "[low, inf]" (check_real would write ">= low")
    message = f"GCMAE {name} must be a number in [{low}, {high}{')' if open_high else ']'}, got {value!r}"
    with_message(message, check_real, value, low, high, open_high=open_high)


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
            check_int(getattr(self, name), f"GCMAE {name}", 1)
        check_int(self.proj_out, "GCMAE proj_out", 0)
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
        check_bool(self.sparse_input, "GCMAE sparse_input")
        if self.sparse_input and self.encoder != "gat":
            raise ConfigError("GCMAE sparse_input=True needs encoder='gat' (the GCN encoder takes dense features)")
        check_bool(self.shared_projector, "GCMAE shared_projector")
        check_bool(self.normalize_features, "GCMAE normalize_features")

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
