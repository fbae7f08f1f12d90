"""SketchML (Jiang et al., SIGMOD 2018): sparse key-value gradients in a few bits a value.

Three stages, all vectorised torch on the values' device:

1. **Quantile buckets.** The message's values are cut into ``bins`` equal-count buckets, in
   ``groups`` groups of ``bins / groups`` buckets. Negative and positive values get their own
   groups (as many as their share of the values, at least one each when both occur), so the
   zero point is a bucket edge and every group is single-signed. A value is sent as its bucket
   and decoded as the **midpoint of the bucket's edges**.
2. **MinMaxSketch of bucket indices.** Each value's group is sent (``log2 groups`` bits) and its
   position inside the group as a *rank* (distance from zero: 0 is the bucket next to zero).
   The ranks of group ``g`` go into a :class:`~sgl.comm.compress.MinMaxSketch` of ``rows`` x
   ``ceil(ratio * n_g)`` cells, hashed by ``key * dim + column``; a cell keeps the smallest rank
   and a query takes the largest of the key's cells. ``ratio=None`` sends every rank as it is
   (no sketch, no collision error).
3. **Delta-binary keys** (:func:`~sgl.comm.compress.encode_keys`).

**Error bound.** Keys decode exactly. With ``ratio=None`` every value decodes inside its own
bucket ``[e_b, e_{b+1}]``. With a sketch, a value decodes to a bucket of its own group that is
no farther from zero than its own: same sign, never larger in magnitude than its bucket's far
edge, at most the group's span off (collisions shrink gradients: the scheme is biased).

Bytes of a message of ``n`` keys and ``n*dim`` values: the 24-byte frame, the keys (about 1-2
bytes each when dense), ``4 * (bins + 1) + 8`` bytes of edges, ``n*dim*log2(groups)`` bits of
groups and ``rows * ratio * n * dim * log2(bins/groups)`` bits of sketch (SketchML Huffman-codes
the table; we bit-pack it).

>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> keys = torch.randperm(5000, generator=g)[:400]
>>> values = torch.randn(400, 8, generator=g) * 0.01
>>> codec = SketchMLCodec(ratio=None)
>>> payload = codec.encode(keys, values)
>>> k, v, _ = codec.decode(payload)
>>> torch.equal(k, keys.sort().values), payload.numel() < 0.3 * (400 * 8 + 400 * 8 * 4)
(True, True)
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from sgl._checks import check_int, check_real
from sgl.comm.compress.bitpack import bits_for, pack_bits, unpack_bits
from sgl.comm.compress.codec import KV_CODECS, KVCodec, _bytes_of
from sgl.comm.compress.minmax import hash_cells
from sgl.errors import CommError, ConfigError

__all__ = ["SketchMLCodec", "quantile_edges"]

#: the smallest sketch SketchML's bound still means something for: 0.05 cells per value
MIN_RATIO = 0.05


def quantile_edges(values: torch.Tensor, bins: int, groups: int) -> Tuple[torch.Tensor, int]:
    """``bins + 1`` ascending float32 edges of equal-count buckets with 0 on a group edge, and the
    number of negative groups.

    >>> import torch
    >>> edges, neg = quantile_edges(torch.tensor([-4., -3., -2., -1., 1., 2., 3., 4.]), 4, 2)
    >>> edges.tolist(), neg
    ([-4.0, -2.0, 0.0, 3.0, 4.0], 1)
    """
    v = values.reshape(-1).to(torch.float32)
    per = bins // groups
    negative = v < 0
    n, n_neg = v.numel(), int(negative.sum())
    if n_neg == 0:
        g_neg = 0
    elif n_neg == n:
        g_neg = groups
    else:
        g_neg = min(max(int(round(groups * n_neg / n)), 1), groups - 1)
    parts = []
    if g_neg:
        e = _equal_count(v[negative], g_neg * per)
        e[-1] = 0.0
        parts.append(e if g_neg == groups else e[:-1])
    if g_neg < groups:
        e = _equal_count(v[~negative], (groups - g_neg) * per)
        e[0] = 0.0
        parts.append(e)
    return torch.cat(parts), g_neg


def _equal_count(v: torch.Tensor, buckets: int) -> torch.Tensor:
    if v.numel() == 0:
        return torch.zeros(buckets + 1, device=v.device)
    s = torch.sort(v).values
    pos = torch.linspace(0, s.numel() - 1, buckets + 1, device=v.device).round().long()
    return s[pos].clone()


class SketchMLCodec(KVCodec):
    """SketchML's key-value codec (see the module docstring).

    Args:
        bins: quantile buckets (SketchML: 256), a multiple of ``groups``, at most 65,536.
        groups: single-signed bucket groups (SketchML: 8), at least 2.
        rows: hash rows of each group's MinMaxSketch (SketchML: 2).
        ratio: sketch cells per row over the group's values (SketchML: 0.3), at least
            ``0.05``; ``None`` sends the exact bucket ranks.
        key_coding: ``"delta"`` (SketchML) or ``"raw"``.
        seed: seeds the sketch hashes (both ends must agree).
    """

    name = "sketchml"

    def __init__(self, bins: int = 256, groups: int = 8, rows: int = 2, ratio: Optional[float] = 0.3,
                 key_coding: str = "delta", seed: int = 0) -> None:
        super().__init__(key_coding, seed)
        self.groups = check_int(groups, "SketchMLCodec groups", 2, 256)
        self.bins = check_int(bins, "SketchMLCodec bins", 2 * self.groups, 1 << 16)
        if self.bins % self.groups:
            raise ConfigError(f"SketchMLCodec: bins ({bins}) must be a multiple of groups ({groups}); e.g. bins=256, "
                              "groups=8")
        self.rows = check_int(rows, "SketchMLCodec rows", 1, 16)
        if ratio is not None:
            ratio = check_real(ratio, f"SketchMLCodec ratio (a sketch needs at least {MIN_RATIO} cells per value; "
                               "use None for exact ranks)", MIN_RATIO, 64.0)
        self.ratio = ratio
        self.per = self.bins // self.groups

    def __repr__(self) -> str:
        return (f"SketchMLCodec(bins={self.bins}, groups={self.groups}, rows={self.rows}, ratio={self.ratio}, "
                f"key_coding={self.key_coding!r})")

    def _layout(self, group: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Columns of each group's sketch and where each group's table starts (in cells)."""
        sizes = torch.bincount(group, minlength=self.groups)
        cols = torch.ceil(sizes.to(torch.float64) * self.ratio).to(torch.int64).clamp(min=1) * (sizes > 0)
        start = torch.cumsum(cols * self.rows, 0) - cols * self.rows
        return cols, start

    def _cells(self, ids: torch.Tensor, group: torch.Tensor, cols: torch.Tensor, start: torch.Tensor,
               row: int) -> torch.Tensor:
        c = cols[group]
        return start[group] + row * c + hash_cells(ids, row, c, self.seed, self.rows)

    def encode_values(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        n, dim = values.shape
        device = values.device
        if n * dim == 0:
            return torch.zeros(0, dtype=torch.uint8, device=device)
        v = values.reshape(-1)
        edges, g_neg = quantile_edges(v, self.bins, self.groups)
        bucket = (torch.searchsorted(edges, v, right=True) - 1).clamp(0, self.bins - 1)
        group, local = bucket // self.per, bucket % self.per
        rank = torch.where(group < g_neg, self.per - 1 - local, local)
        head = torch.cat([_bytes_of(torch.tensor([g_neg, 0], dtype=torch.int32, device=device)), _bytes_of(edges)])
        parts = [head, pack_bits(group, bits_for(self.groups))]
        lbits = bits_for(self.per)
        if self.ratio is None:
            parts.append(pack_bits(rank, lbits))
        else:
            ids = (keys.unsqueeze(1) * dim + torch.arange(dim, device=device)).reshape(-1)
            cols, start = self._layout(group)
            table = torch.full((int((cols * self.rows).sum()),), self.per - 1, dtype=torch.int64, device=device)
            for r in range(self.rows):
                table.scatter_reduce_(0, self._cells(ids, group, cols, start, r), rank, reduce="amin")
            parts.append(pack_bits(table, lbits))
        return torch.cat(parts)

    def decode_values(self, keys: torch.Tensor, blob: torch.Tensor, n: int, dim: int) -> torch.Tensor:
        device = blob.device
        count = n * dim
        if count == 0:
            return torch.zeros(n, dim, device=device)
        head = 8 + 4 * (self.bins + 1)
        gbits, lbits = bits_for(self.groups), bits_for(self.per)
        g_bytes = (count * gbits + 7) // 8
        if blob.numel() < head + g_bytes:
            raise CommError(f"SketchMLCodec.decode: value section of {blob.numel()} bytes is shorter than its "
                            f"{head + g_bytes}-byte head; both ends must use the same bins/groups")
        g_neg = int(blob[:4].clone().view(torch.int32))
        edges = blob[8:head].clone().view(torch.float32)
        group = unpack_bits(blob[head:head + g_bytes], gbits, count)
        rest = blob[head + g_bytes:]
        if self.ratio is None:
            rank = unpack_bits(rest, lbits, count)
        else:
            cols, start = self._layout(group)
            cells = int((cols * self.rows).sum())
            if rest.numel() != (cells * lbits + 7) // 8:
                raise CommError(f"SketchMLCodec.decode: sketch section has {rest.numel()} bytes, expected "
                                f"{(cells * lbits + 7) // 8}; both ends must use the same rows/ratio")
            table = unpack_bits(rest, lbits, cells)
            ids = (keys.unsqueeze(1) * dim + torch.arange(dim, device=device)).reshape(-1)
            rank = torch.stack([table[self._cells(ids, group, cols, start, r)] for r in range(self.rows)]).max(0).values
        local = torch.where(group < g_neg, self.per - 1 - rank, rank)
        bucket = group * self.per + local
        return ((edges[bucket] + edges[bucket + 1]) / 2).reshape(n, dim)

    def bucket_of(self, values: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each value's bucket and the message's edges (what :meth:`encode` would use); for tests and
        error analysis."""
        v = values.reshape(-1).to(torch.float32)
        edges, _ = quantile_edges(v, self.bins, self.groups)
        return (torch.searchsorted(edges, v, right=True) - 1).clamp(0, self.bins - 1), edges


KV_CODECS["sketchml"] = SketchMLCodec
