r"""Split CTR models: one bottom model per party, a top model at the active party.

A party's bottom model maps its own columns to field embeddings ``[B, F_p, k]``:

* each categorical field through an :mod:`sgl.embeddings` table (one table per party, fields
  offset inside it);
* each dense column ``j`` of a *passive* party as a numeric field, :math:`x_j v_j` with a learned
  :math:`v_j \in \mathbb{R}^k` (raw dense values never leave their owner); the active party
  keeps its dense columns raw, they go straight into the top model;
* optionally an MLP on the flattened fields, back to ``[B, F_p, k]`` (``bottom_hidden``).

The top model is a CTR model of :mod:`sgl.models.ctr` (WDL, DeepFM, DLRM, DCN) whose embedding
backend is a :class:`StagedEmbedding`: it serves the concatenation of every party's bottom
output instead of looking ids up. The whole composition in one process,
:class:`SplitCTRModel`, is the centralised reference that split learning must equal.

Every part is initialised from its own seed (:func:`part_seed`), so a party builds its part
without knowing any other part's weights, and the centralised model is built identically.

Example:
    >>> import torch
    >>> from sgl.datasets.ctr import make_synthetic_ctr
    >>> from sgl.federated.split import default_split
    >>> data = make_synthetic_ctr(64, [20, 20, 20], num_dense=2, seed=0)
    >>> views = default_split(data).views(data)
    >>> model = SplitCTRModel.build(views, "wdl", embed_dim=4, hidden=[8], seed=0)
    >>> model([torch.as_tensor(v.dense) for v in views], [torch.as_tensor(v.sparse) for v in views]).shape
    torch.Size([64])
"""
from __future__ import annotations

import contextlib
import zlib
from typing import Iterator, List, Optional, Sequence

import torch
from torch import nn

from sgl.embeddings import build_embedding
from sgl.errors import ConfigError

__all__ = ["PartyBottom", "StagedEmbedding", "TopModel", "SplitCTRModel", "part_seed"]


def part_seed(seed: int, part: str) -> int:
    """The initialisation seed of one model part (``"top"``, ``"bottom0"``, ...)."""
    return (int(seed) * 1_000_003 + zlib.crc32(part.encode())) % (2 ** 31)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class PartyBottom(nn.Module):
    r"""A party's bottom model: ``forward(dense [B, D_p], ids [B, F_p]) -> [B, F_out, k]``.

    ``F_out = F_p + D_p`` when ``embed_dense`` (passive parties), else ``F_p``. ``ids`` are
    per-field local ids (field ``f`` in ``[0, field_dims[f])``).
    """

    def __init__(self, field_dims: Sequence[int], num_dense: int, embed_dim: int, embed_dense: bool,
                 hidden: Sequence[int] = (), embedding: str = "full") -> None:
        super().__init__()
        self.field_dims = [int(d) for d in field_dims]
        self.num_dense, self.embed_dim, self.embed_dense = int(num_dense), int(embed_dim), bool(embed_dense)
        self.num_out = len(self.field_dims) + (self.num_dense if self.embed_dense else 0)
        if self.num_out == 0 and self.embed_dense:
            raise ConfigError("a passive party's bottom model needs at least one column")
        offsets = torch.tensor([0] + self.field_dims[:-1], dtype=torch.int64).cumsum(0)
        self.register_buffer("offsets", offsets, persistent=False)
        self.embedding = build_embedding(embedding, max(sum(self.field_dims), 1), embed_dim) \
            if self.field_dims else None
        self.dense_vectors = nn.Parameter(torch.randn(self.num_dense, embed_dim) * 0.1) \
            if self.embed_dense and self.num_dense else None
        self.mlp: Optional[nn.Sequential] = None
        if hidden and self.num_out:
            width, layers = self.num_out * embed_dim, []
            for h in hidden:
                layers += [nn.Linear(width, int(h)), nn.ReLU()]
                width = int(h)
            layers.append(nn.Linear(width, self.num_out * embed_dim))
            self.mlp = nn.Sequential(*layers)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        out = self.fields(dense, ids)
        if self.mlp is not None:
            out = self.mlp(out.flatten(1)).view(out.shape[0], self.num_out, self.embed_dim)
        return out

    def fields(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The field embeddings ``[B, F_out, k]`` before the MLP head (the whole output without one)."""
        parts = []
        if self.embedding is not None:
            parts.append(self.embedding(ids + self.offsets))
        if self.dense_vectors is not None:
            parts.append(dense.unsqueeze(-1) * self.dense_vectors)
        if not parts:  # an active party that owns only dense columns: they go raw to the top model
            return dense.new_zeros(dense.shape[0], 0, self.embed_dim)
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


class StagedEmbedding(nn.Module):
    """An "embedding backend" that returns the field embeddings staged for this forward pass.

    Lets an unchanged :mod:`sgl.models.ctr` model run on embeddings computed elsewhere (the
    parties' bottom models).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = int(dim)
        self._staged: Optional[torch.Tensor] = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        staged = self._staged
        if staged is None or staged.shape[:2] != ids.shape:
            raise ConfigError(f"StagedEmbedding: no field embeddings staged for ids of shape {tuple(ids.shape)}")
        return staged


class TopModel(nn.Module):
    """The active party's top model: a CTR model over all parties' field embeddings.

    ``forward(dense [B, D_0], fields [B, F, k]) -> logits [B]``.
    """

    def __init__(self, model: str, num_fields: int, embed_dim: int, num_dense: int, hidden: Sequence[int],
                 dropout: float = 0.0) -> None:
        from sgl.models.ctr import build_ctr_model  # lazy: passive parties never import the model zoo

        super().__init__()
        self.staged = StagedEmbedding(embed_dim)
        self.num_fields = int(num_fields)
        self.ctr = build_ctr_model(model, self.staged, num_fields, embed_dim, num_dense, hidden=list(hidden),
                                   dropout=dropout, bottom=[max(2 * embed_dim, 8)])

    def forward(self, dense: torch.Tensor, fields: torch.Tensor) -> torch.Tensor:
        ids = torch.zeros(fields.shape[:2], dtype=torch.int64, device=fields.device)
        self.staged._staged = fields
        try:
            return self.ctr(dense, ids)
        finally:
            self.staged._staged = None


def build_bottom(view, rank: int, embed_dim: int, hidden: Sequence[int], embedding: str, seed: int,
                 copy: int = 0) -> PartyBottom:
    """Party ``rank``'s bottom model for ``view`` (seeded by :func:`part_seed`); ``copy`` names
    a second bottom (Rake)."""
    with _seeded(part_seed(seed, f"bottom{rank}" + (f".{copy}" if copy else ""))):
        return PartyBottom(view.field_dims, view.num_dense, embed_dim, embed_dense=rank > 0, hidden=hidden,
                           embedding=embedding)


def build_top(model: str, out_fields: Sequence[int], embed_dim: int, num_dense: int, hidden: Sequence[int],
              seed: int, dropout: float = 0.0) -> TopModel:
    """The top model over ``sum(out_fields)`` fields (seeded by :func:`part_seed`)."""
    with _seeded(part_seed(seed, "top")):
        return TopModel(model, int(sum(out_fields)), embed_dim, num_dense, hidden, dropout)


def out_fields(views) -> List[int]:
    """Fields each party's bottom outputs (passive parties embed their dense columns too)."""
    return [v.num_fields + (v.num_dense if r > 0 else 0) for r, v in enumerate(views)]


class SplitCTRModel(nn.Module):
    """Every party's bottom model and the top model in one process: the centralised reference.

    ``forward(dense_list, ids_list)`` with one ``[B, D_p]`` / ``[B, F_p]`` pair per party.
    """

    def __init__(self, bottoms: Sequence[PartyBottom], top: TopModel) -> None:
        super().__init__()
        self.bottoms = nn.ModuleList(bottoms)
        self.top = top

    @classmethod
    def build(cls, views, model: str = "wdl", embed_dim: int = 8, hidden: Sequence[int] = (64,),
              bottom_hidden: Sequence[int] = (), embedding: str = "full", seed: int = 0,
              dropout: float = 0.0) -> "SplitCTRModel":
        bottoms = [build_bottom(v, r, embed_dim, bottom_hidden, embedding, seed) for r, v in enumerate(views)]
        top = build_top(model, out_fields(views), embed_dim, views[0].num_dense, hidden, seed, dropout)
        return cls(bottoms, top)

    def forward(self, dense: Sequence[torch.Tensor], ids: Sequence[torch.Tensor]) -> torch.Tensor:
        fields = torch.cat([b(d, i) for b, d, i in zip(self.bottoms, dense, ids)], dim=1)
        return self.top(dense[0], fields)
