r"""Static embedding tables: full, hashing trick, quotient-remainder.

* :class:`FullEmbedding` — one row per id: ``num_embeddings * dim * 4`` bytes.
* :class:`HashEmbedding` — ``rows`` shared rows, id ``i`` reads row :math:`h(i) \bmod rows`
  (a multiplicative hash, so structured id ranges do not collide systematically).
* :class:`QREmbedding` — quotient-remainder trick (Shi et al., KDD 2020): id ``i`` reads
  :math:`Q[(i \,//\, m) \bmod q] + R[i \bmod m]`; with ``q * m >= num_embeddings`` every id
  gets a distinct pair of rows. The ``q + m`` rows fill the byte budget exactly.

``from_ratio`` builds each of them at a compression ratio, spending exactly
:func:`~sgl.embeddings.base.budget_bytes` bytes.
"""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import torch
from torch import nn

from sgl._checks import check_int
from sgl.embeddings.base import FLOAT_BYTES, EmbeddingBackend, budget_bytes
from sgl.errors import EmbeddingError

__all__ = ["FullEmbedding", "HashEmbedding", "FieldHashEmbedding", "QREmbedding", "hash_ids", "field_rows",
           "FieldLayout"]

_PRIME = 2_147_483_647  # 2^31 - 1
_MULT = 1_000_000_007
_MAX_HASHED_ID = 1 << 32  # ids * _MULT stays inside int64


def hash_ids(ids: torch.Tensor, rows: int, seed: int = 0) -> torch.Tensor:
    """Row of each id in a table of ``rows`` rows: ``((id * 1000000007 + c(seed)) mod (2^31-1)) mod rows``.

    >>> hash_ids(torch.tensor([0, 1, 2]), 10).tolist()
    [5, 2, 9]
    """
    return ((ids * _MULT + (seed * 97 + 12_345)) % _PRIME) % rows


def _check_hashable(num_embeddings: int) -> None:
    if num_embeddings > _MAX_HASHED_ID:
        raise EmbeddingError(f"num_embeddings={num_embeddings} exceeds 2^32, the largest id the hash supports")


class FullEmbedding(EmbeddingBackend):
    """One ``dim``-vector per id (no compression).

    Example:
        >>> emb = FullEmbedding(100, 8)
        >>> emb(torch.tensor([[1, 99]])).shape, emb.memory_bytes()
        (torch.Size([1, 2, 8]), 3200)
    """

    def __init__(self, num_embeddings: int, dim: int, init_std: float = 0.01) -> None:
        super().__init__(num_embeddings, dim)
        self.init_std = float(init_std)
        self.weight = nn.Parameter(torch.empty(self.num_embeddings, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, 0.0, self.init_std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weight[self.check_ids(ids)]


class HashEmbedding(EmbeddingBackend):
    """The hashing trick: ``rows`` shared vectors, id ``i`` → row ``hash_ids(i, rows)``.

    Example:
        >>> emb = HashEmbedding.from_ratio(10_000, 16, ratio=100)
        >>> emb.rows, emb.memory_bytes() == 100 * 16 * 4
        (100, True)
        >>> emb(torch.tensor([[0, 9_999]])).shape
        torch.Size([1, 2, 16])
    """

    def __init__(self, num_embeddings: int, dim: int, rows: int, init_std: float = 0.01, seed: int = 0) -> None:
        super().__init__(num_embeddings, dim)
        _check_hashable(self.num_embeddings)
        self.rows = check_int(rows, "rows", 1, error=EmbeddingError)
        self.seed = int(seed)
        self.init_std = float(init_std)
        self.weight = nn.Parameter(torch.empty(self.rows, self.dim))
        self.reset_parameters()

    @classmethod
    def from_ratio(cls, num_embeddings: int, dim: int, ratio: float, **kwargs) -> "HashEmbedding":
        rows = budget_bytes(num_embeddings, dim, ratio) // (dim * FLOAT_BYTES)
        return cls(num_embeddings, dim, rows, **kwargs)

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, 0.0, self.init_std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weight[hash_ids(self.check_ids(ids), self.rows, self.seed)]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rows={self.rows}"


def qr_split(num_embeddings: int, rows: int) -> Tuple[int, int]:
    """(quotient rows ``q``, remainder rows ``m``) with ``q + m == rows``.

    The largest ``m`` with ``ceil(N / m) <= rows - m`` (every id a distinct pair, few idle
    quotient rows); when ``rows < 2 sqrt(N)`` no such ``m`` exists and the rows are halved.

    >>> qr_split(10_000, 1_000)
    (11, 989)
    """
    n = num_embeddings
    if rows < 2:
        raise EmbeddingError(f"the quotient-remainder trick needs at least 2 rows, got a budget of {rows}")
    # ceil(n/m) + m <= rows  <=>  m in [m_lo, m_hi]; the largest root of m^2 - rows*m + n = 0 (approx.)
    disc = rows * rows - 4 * n
    if disc >= 0:
        m = int((rows + math.isqrt(disc)) // 2)
        while m > 0 and -(-n // m) + m > rows:
            m -= 1
        if m > 0:
            return rows - m, m
    return rows - rows // 2, rows // 2


class QREmbedding(EmbeddingBackend):
    """Quotient-remainder embedding: ``Q[(i // m) mod q] + R[i mod m]`` (sum combiner).

    Example:
        >>> emb = QREmbedding.from_ratio(10_000, 16, ratio=10)
        >>> emb.q + emb.m, emb.memory_bytes() == 1_000 * 16 * 4
        (1000, True)
    """

    def __init__(self, num_embeddings: int, dim: int, q: int, m: int, init_std: float = 0.01) -> None:
        super().__init__(num_embeddings, dim)
        self.q = check_int(q, "q", 1, error=EmbeddingError)
        self.m = check_int(m, "m", 1, error=EmbeddingError)
        self.init_std = float(init_std)
        self.quotient = nn.Parameter(torch.empty(self.q, self.dim))
        self.remainder = nn.Parameter(torch.empty(self.m, self.dim))
        self.reset_parameters()

    @classmethod
    def from_ratio(cls, num_embeddings: int, dim: int, ratio: float, **kwargs) -> "QREmbedding":
        rows = budget_bytes(num_embeddings, dim, ratio) // (dim * FLOAT_BYTES)
        q, m = qr_split(num_embeddings, rows)
        return cls(num_embeddings, dim, q, m, **kwargs)

    def reset_parameters(self) -> None:
        # each output is a sum of two rows: halve the variance of each
        nn.init.normal_(self.quotient, 0.0, self.init_std / math.sqrt(2))
        nn.init.normal_(self.remainder, 0.0, self.init_std / math.sqrt(2))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = self.check_ids(ids)
        return self.quotient[(ids // self.m) % self.q] + self.remainder[ids % self.m]

    @property
    def collision_free(self) -> bool:
        return self.q * self.m >= self.num_embeddings

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, q={self.q}, m={self.m}"


def check_field_dims(field_dims: object, num_embeddings: int, who: str) -> None:
    """Raise EmbeddingError unless ``field_dims`` is a list of field sizes summing to ``num_embeddings``."""
    if field_dims is None or sum(field_dims) != num_embeddings:
        raise EmbeddingError(f"{who} needs field_dims summing to num_embeddings={num_embeddings}, "
                             f"got {field_dims!r}")


def field_rows(field_dims: Sequence[int], total_rows: int, ratio: float, exempt_small: bool = True) -> List[int]:
    """Rows per field for ``total_rows`` rows at ``ratio``x, as the CAFE artifact lays fields out.

    A field of ``n`` ids is compressed only when ``n > 2000 / ratio`` (the artifact's
    ``n > 2000 * compress_rate``); smaller fields keep one row per id (``rows[f] == n``), their
    rows taken from the budget first, smallest fields first while every compressed field can
    still get a row.  The rest is split over the compressed fields in proportion to their ids
    (largest remainders, at least one row each).

    >>> field_rows([1_000, 150, 10], 200, ratio=10)       # 150 and 10 <= 2000/10: kept whole
    [40, 150, 10]
    >>> field_rows([1_000, 150, 10], 200, ratio=10, exempt_small=False)
    [172, 26, 2]
    """
    dims = [check_int(d, "field_dims[i]", 1, error=EmbeddingError) for d in field_dims]
    total_rows = int(total_rows)
    if total_rows < len(dims):
        raise EmbeddingError(f"a budget of {total_rows} rows cannot give each of {len(dims)} fields a row")
    full = [False] * len(dims)
    if exempt_small:
        left = total_rows
        for f in sorted(range(len(dims)), key=lambda f: dims[f]):
            others = sum(1 for g in range(len(dims)) if not full[g] and g != f)
            if dims[f] > 2000 / float(ratio) or left - dims[f] < others:
                break
            full[f], left = True, left - dims[f]
    rows = [dims[f] if full[f] else 0 for f in range(len(dims))]
    comp = [f for f in range(len(dims)) if not full[f]]
    if comp:
        total = total_rows - sum(rows)
        n_comp = sum(dims[f] for f in comp)
        share = {f: total * dims[f] / n_comp for f in comp}
        for f in comp:
            rows[f] = max(1, int(share[f]))
        order = sorted(comp, key=lambda f: share[f] - int(share[f]), reverse=True)
        i = 0
        while sum(rows) < total_rows:
            rows[order[i % len(order)]] += 1
            i += 1
        while sum(rows) > total_rows:  # the max(1, .) floors overshot: take rows back from the largest fields
            rows[max(comp, key=lambda f: rows[f])] -= 1
    return rows


class FieldLayout:
    """Per-field tables in one weight: global id ``offset_f + i`` reads row ``start_f + i mod rows[f]``.

    A field with ``rows[f] == field_dims[f]`` is stored in full (:meth:`full_mask`).

    >>> layout = FieldLayout([1_000, 10], [100, 10])
    >>> layout.index(torch.tensor([7, 107, 1_003])).tolist(), layout.full_mask(torch.tensor([7, 1_003])).tolist()
    ([7, 7, 103], [False, True])
    """

    def __init__(self, field_dims: Sequence[int], rows: Sequence[int]) -> None:
        self.field_dims = [check_int(d, "field_dims[i]", 1, error=EmbeddingError) for d in field_dims]
        self.rows = [check_int(r, "rows[i]", 1, error=EmbeddingError) for r in rows]
        if len(self.rows) != len(self.field_dims):
            raise EmbeddingError(f"{len(self.field_dims)} fields but {len(self.rows)} row counts")
        self.id_offsets = torch.tensor([0] + self.field_dims, dtype=torch.int64).cumsum(0)
        self.row_offsets = torch.tensor([0] + self.rows[:-1], dtype=torch.int64).cumsum(0)
        self._rows = torch.tensor(self.rows, dtype=torch.int64)
        self._full = torch.tensor([r == d for r, d in zip(self.rows, self.field_dims)])

    @property
    def total_rows(self) -> int:
        return sum(self.rows)

    def field_of(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(self.id_offsets, ids.cpu(), right=True) - 1

    def index(self, ids: torch.Tensor) -> torch.Tensor:
        f = self.field_of(ids)
        local = ids.cpu() - self.id_offsets[f]
        return (self.row_offsets[f] + local % self._rows[f]).to(ids.device)

    def full_mask(self, ids: torch.Tensor) -> torch.Tensor:
        return self._full[self.field_of(ids)].to(ids.device)


class FieldHashEmbedding(EmbeddingBackend):
    """The hashing trick per field (the CAFE artifact's hash baseline): field ``f`` owns
    ``rows[f]`` rows and its local id ``i`` reads its own row ``i mod rows[f]``, so ids only
    collide with ids of the same field. :meth:`from_ratio` lays the fields out with
    :func:`field_rows`: fields of at most ``2000 / ratio`` ids are kept whole (the artifact's
    small-field rule, ``exempt_small=True``), the rest of the row budget is split over the
    other fields in proportion to their ids.

    Example:
        >>> emb = FieldHashEmbedding.from_ratio(1_100, 4, ratio=10, field_dims=[1_000, 100])
        >>> emb.rows, emb.memory_bytes() == 110 * 4 * 4      # the 100-id field is kept whole
        ([10, 100], True)
        >>> torch.equal(emb(torch.tensor([[5, 1_005]]))[0, 1], emb.weight[10 + 5])
        True
    """

    def __init__(self, field_dims: Sequence[int], dim: int, rows: Sequence[int], init_std: float = 0.01) -> None:
        field_dims = [check_int(d, "field_dims[i]", 1, error=EmbeddingError) for d in field_dims]
        super().__init__(sum(field_dims), dim)
        if len(rows) != len(field_dims):
            raise EmbeddingError(f"{len(field_dims)} fields but {len(rows)} row counts")
        self.field_dims = field_dims
        self.rows = [check_int(r, "rows[i]", 1, error=EmbeddingError) for r in rows]
        self.init_std = float(init_std)
        self.register_buffer("_id_offsets", torch.tensor([0] + field_dims[:-1]).cumsum(0), persistent=False)
        self.register_buffer("_row_offsets", torch.tensor([0] + self.rows[:-1]).cumsum(0), persistent=False)
        self.register_buffer("_rows", torch.tensor(self.rows), persistent=False)
        self.weight = nn.Parameter(torch.empty(sum(self.rows), self.dim))
        self.reset_parameters()

    @classmethod
    def from_ratio(cls, num_embeddings: int, dim: int, ratio: float, field_dims: Sequence[int] = None,
                   exempt_small: bool = True, **kwargs) -> "FieldHashEmbedding":
        check_field_dims(field_dims, num_embeddings, "per-field hashing")
        total = budget_bytes(num_embeddings, dim, ratio) // (dim * FLOAT_BYTES)
        return cls(field_dims, dim, field_rows(field_dims, total, ratio, exempt_small), **kwargs)

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, 0.0, self.init_std)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = self.check_ids(ids)
        if ids.shape[-1] != len(self.field_dims):
            raise EmbeddingError(f"ids must have {len(self.field_dims)} fields in the last dimension, "
                                 f"got shape {tuple(ids.shape)}")
        local = ids - self._id_offsets
        if (local < 0).any() or (local >= torch.tensor(self.field_dims, device=local.device)).any():
            raise EmbeddingError("an id lies outside its field's range (global id = field offset + local id)")
        return self.weight[self._row_offsets + local % self._rows]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rows={self.rows}"
