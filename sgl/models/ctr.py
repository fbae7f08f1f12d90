r"""CTR models over a pluggable embedding backend: WDL, DeepFM, DCN, DLRM.

Each takes ``embedding`` (any :mod:`sgl.embeddings` backend, or any module mapping global ids
``[B, F]`` to ``[B, F, embed_dim]``), ``num_fields``, ``embed_dim``, ``num_dense`` and
returns logits ``[B]`` from ``forward(dense [B, D], ids [B, F])``. All id-indexed parameters
live in the backend, so swapping it (full table, hash, CAFE, a HET cache) compresses or
distributes the whole model. Shapes follow the reference implementations (HET/Hetu
``examples/ctr``, the CAFE artifact's DLRM):

* **WDL** — wide: a linear layer on ``[flattened embeddings, dense]``; deep: an MLP on the
  same input; logit = wide + deep.
* **DeepFM** — first order: a linear layer on dense plus a learned projection of each field's
  embedding (a 1-d embedding table would be a second id-indexed table outside the backend);
  second order: :math:`\tfrac12\sum_d[(\sum_f v_{f,d})^2 - \sum_f v_{f,d}^2]`; deep: an MLP on
  the flattened embeddings; logit = sum of the three.
* **DCN** — :math:`x_0 = [\text{embeddings}, \text{dense}]`, cross layers
  :math:`x_{l+1} = x_0 (x_l^\top w_l) + b_l + x_l`, a deep MLP beside them, a linear layer on
  their concatenation.
* **DLRM** — a bottom MLP maps dense to ``embed_dim``; pairwise dot products (upper
  triangle) of ``[bottom, F embeddings]``; a top MLP on ``[bottom, interactions]``.

Example:
    >>> import torch
    >>> from sgl.embeddings import build_embedding
    >>> emb = build_embedding("hash", 1000, 8, ratio=10)
    >>> model = build_ctr_model("deepfm", emb, num_fields=3, embed_dim=8, num_dense=2)
    >>> model(torch.randn(4, 2), torch.randint(0, 1000, (4, 3))).shape
    torch.Size([4])
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Sequence, Tuple

import torch
from torch import nn

from sgl.errors import ConfigError

__all__ = ["CTRModelConfig", "WDL", "DeepFM", "DCN", "DLRM", "CTR_MODELS", "build_ctr_model", "ctr_model_config"]


@dataclass
class CTRModelConfig:
    """Hyper-parameters shared by the CTR models (unused fields are ignored by a model).

    Attributes:
        hidden: widths of the deep MLP (DLRM: the top MLP).
        dropout: dropout after each hidden layer.
        num_cross: DCN cross layers.
        bottom: DLRM bottom-MLP hidden widths (its last layer is ``embed_dim``).
    """

    hidden: List[int] = field(default_factory=lambda: [256, 256])
    dropout: float = 0.0
    num_cross: int = 3
    bottom: List[int] = field(default_factory=lambda: [64])

    def __post_init__(self) -> None:
        if isinstance(self.hidden, int):
            self.hidden = [self.hidden]
        if isinstance(self.bottom, int):
            self.bottom = [self.bottom]
        if not all(isinstance(h, int) and h > 0 for h in list(self.hidden) + list(self.bottom)):
            raise ConfigError(f"hidden/bottom widths must be positive integers, got {self.hidden} / {self.bottom}")
        if not 0 <= float(self.dropout) < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if not isinstance(self.num_cross, int) or self.num_cross < 0:
            raise ConfigError(f"num_cross must be an integer >= 0, got {self.num_cross}")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _mlp(in_dim: int, widths: Sequence[int], dropout: float, out_dim: int = 0) -> Tuple[nn.Sequential, int]:
    layers: List[nn.Module] = []
    for width in widths:
        layers += [nn.Linear(in_dim, width), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        in_dim = width
    if out_dim:
        layers.append(nn.Linear(in_dim, out_dim))
        in_dim = out_dim
    return nn.Sequential(*layers), in_dim


class _CTRModel(nn.Module):
    def __init__(self, embedding: nn.Module, num_fields: int, embed_dim: int, num_dense: int,
                 config: CTRModelConfig = None) -> None:
        super().__init__()
        for name, value, low in (("num_fields", num_fields, 1), ("embed_dim", embed_dim, 1),
                                 ("num_dense", num_dense, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        backend_dim = getattr(embedding, "dim", embed_dim)
        if backend_dim != embed_dim:
            raise ConfigError(f"the embedding backend has dim {backend_dim} but embed_dim={embed_dim}")
        self.embedding = embedding
        self.num_fields, self.embed_dim, self.num_dense = num_fields, embed_dim, num_dense
        self.config = config or CTRModelConfig()

    def embed(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if ids.dim() != 2 or ids.shape[1] != self.num_fields:
            raise ConfigError(f"ids must be [batch, {self.num_fields}], got {tuple(ids.shape)}")
        if dense.dim() != 2 or dense.shape[1] != self.num_dense or dense.shape[0] != ids.shape[0]:
            raise ConfigError(f"dense must be [{ids.shape[0]}, {self.num_dense}], got {tuple(dense.shape)}")
        return self.embedding(ids)

    def memory_bytes(self) -> int:
        """Bytes of the embedding backend (``memory_bytes()``) + the dense parameters."""
        dense = sum(p.numel() * p.element_size() for name, p in self.named_parameters()
                    if not name.startswith("embedding."))
        backend = self.embedding.memory_bytes() if hasattr(self.embedding, "memory_bytes") else \
            sum(p.numel() * p.element_size() for p in self.embedding.parameters())
        return backend + dense


class WDL(_CTRModel):
    """Wide & Deep (Cheng et al. 2016). See the module docstring."""

    def __init__(self, embedding, num_fields, embed_dim, num_dense, config=None):
        super().__init__(embedding, num_fields, embed_dim, num_dense, config)
        width = num_fields * embed_dim + num_dense
        self.wide = nn.Linear(width, 1)
        self.deep, _ = _mlp(width, self.config.hidden, self.config.dropout, out_dim=1)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.embed(dense, ids).flatten(1), dense], dim=1)
        return (self.wide(x) + self.deep(x)).squeeze(1)


class DeepFM(_CTRModel):
    """DeepFM (Guo et al. 2017). See the module docstring."""

    def __init__(self, embedding, num_fields, embed_dim, num_dense, config=None):
        super().__init__(embedding, num_fields, embed_dim, num_dense, config)
        self.first_order = nn.Linear(num_fields * embed_dim + num_dense, 1)
        self.deep, _ = _mlp(num_fields * embed_dim, self.config.hidden, self.config.dropout, out_dim=1)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        v = self.embed(dense, ids)
        flat = v.flatten(1)
        first = self.first_order(torch.cat([flat, dense], dim=1)).squeeze(1)
        second = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1)
        return first + second + self.deep(flat).squeeze(1)


class DCN(_CTRModel):
    """Deep & Cross Network (Wang et al. 2017). See the module docstring."""

    def __init__(self, embedding, num_fields, embed_dim, num_dense, config=None):
        super().__init__(embedding, num_fields, embed_dim, num_dense, config)
        width = num_fields * embed_dim + num_dense
        self.cross_w = nn.ParameterList([nn.Parameter(torch.randn(width) * width ** -0.5)
                                         for _ in range(self.config.num_cross)])
        self.cross_b = nn.ParameterList([nn.Parameter(torch.zeros(width)) for _ in range(self.config.num_cross)])
        self.deep, deep_out = _mlp(width, self.config.hidden, self.config.dropout)
        self.out = nn.Linear(width + deep_out, 1)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        x0 = torch.cat([self.embed(dense, ids).flatten(1), dense], dim=1)
        x = x0
        for w, b in zip(self.cross_w, self.cross_b):
            x = x0 * (x @ w).unsqueeze(1) + b + x
        return self.out(torch.cat([x, self.deep(x0)], dim=1)).squeeze(1)


class DLRM(_CTRModel):
    """DLRM (Naumov et al. 2019). See the module docstring."""

    def __init__(self, embedding, num_fields, embed_dim, num_dense, config=None):
        super().__init__(embedding, num_fields, embed_dim, num_dense, config)
        self.bottom, _ = _mlp(max(num_dense, 1), self.config.bottom, self.config.dropout, out_dim=embed_dim)
        n = num_fields + 1
        rows, cols = torch.triu_indices(n, n, offset=1)
        self.register_buffer("_rows", rows, persistent=False)
        self.register_buffer("_cols", cols, persistent=False)
        self.top, _ = _mlp(embed_dim + rows.numel(), self.config.hidden, self.config.dropout, out_dim=1)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        v = self.embed(dense, ids)
        bottom = self.bottom(dense if self.num_dense else dense.new_zeros(dense.shape[0], 1))
        z = torch.cat([bottom.unsqueeze(1), v], dim=1)
        dots = torch.bmm(z, z.transpose(1, 2))[:, self._rows, self._cols]
        return self.top(torch.cat([bottom, dots], dim=1)).squeeze(1)


#: name -> (model class, one-line description); CTR models, apart from the graph MODELS registry
CTR_MODELS: Dict[str, Tuple[type, str]] = {
    "wdl": (WDL, "Wide & Deep: linear + MLP on embeddings and dense features (Cheng et al. 2016)"),
    "deepfm": (DeepFM, "DeepFM: first order + FM second order + MLP (Guo et al. 2017)"),
    "dcn": (DCN, "Deep & Cross Network: cross layers beside an MLP (Wang et al. 2017)"),
    "dlrm": (DLRM, "DLRM: bottom MLP, pairwise dot interactions, top MLP (Naumov et al. 2019)"),
}


def ctr_model_config(**overrides: Any) -> CTRModelConfig:
    """A :class:`CTRModelConfig` with ``overrides`` (unknown keys rejected)."""
    valid = set(CTRModelConfig.__dataclass_fields__)
    unknown = set(overrides) - valid
    if unknown:
        raise ConfigError(f"unknown CTR model option(s) {sorted(unknown)}; valid: {sorted(valid)}")
    return CTRModelConfig(**overrides)


def build_ctr_model(name: str, embedding: nn.Module, num_fields: int, embed_dim: int, num_dense: int,
                    config: CTRModelConfig = None, **overrides: Any) -> nn.Module:
    """CTR model ``name`` (``wdl``, ``deepfm``, ``dcn``, ``dlrm``) over ``embedding``."""
    key = str(name).lower().replace("_", "-")
    if key not in CTR_MODELS:
        raise ConfigError(f"unknown CTR model {name!r}; available: {', '.join(sorted(CTR_MODELS))}")
    if config is None:
        config = ctr_model_config(**overrides)
    elif overrides:
        ctr_model_config(**overrides)  # validates the keys
        config = CTRModelConfig(**{**config.to_dict(), **overrides})
    return CTR_MODELS[key][0](embedding, num_fields, embed_dim, num_dense, config)
