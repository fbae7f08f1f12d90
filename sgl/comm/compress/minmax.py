"""SketchML's MinMaxSketch: a count-min-shaped table of small non-negative ranks.

``rows`` hash rows of ``cols`` cells each. :meth:`MinMaxSketch.insert` writes every item's rank
into its cell of each row, keeping the **smallest** rank a cell sees (rank = distance from zero,
so "closest to zero"); :meth:`MinMaxSketch.query` reads the item's cells and returns the
**largest** of them. Every cell of an item holds a rank no larger than its own, so the answer
never exceeds the true rank: a collision can only pull a value toward zero, never past it
(the scheme is biased toward zero, never in sign or magnitude beyond the item's own bucket).

The hash of row ``r`` is ``((x mod P) * a_r + b_r) mod P mod cols`` with ``P = 2**31 - 1`` and
``a_r, b_r`` drawn from ``seed``; vectorised torch (``scatter_reduce`` with ``amin``), on the
ids' device.

>>> import torch
>>> sketch = MinMaxSketch(rows=2, cols=4, levels=32, seed=0)
>>> ids, ranks = torch.arange(10), torch.tensor([5, 9, 0, 31, 7, 7, 2, 30, 1, 4])
>>> sketch.insert(ids, ranks)
>>> got = sketch.query(ids)
>>> bool((got <= ranks).all()), sketch.table.shape
(True, torch.Size([2, 4]))
"""
from __future__ import annotations

import torch

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["MinMaxSketch", "hash_cells", "MERSENNE_PRIME"]

MERSENNE_PRIME = (1 << 31) - 1


def _coefficients(seed: int, rows: int) -> list:
    gen = torch.Generator().manual_seed(int(seed))
    # host-side draw of 2*rows small ints: the same on every rank and device
    coef = torch.randint(1, MERSENNE_PRIME - 1, (rows, 2), generator=gen)
    return coef.tolist()


def hash_cells(ids: torch.Tensor, row: int, cols: torch.Tensor | int, seed: int, rows: int) -> torch.Tensor:
    """Cell of each id (int64 >= 0) in hash row ``row`` of a table with ``cols`` columns (an int,
    or one column count per id)."""
    a, b = _coefficients(seed, rows)[row]
    x = ids.to(torch.int64) % MERSENNE_PRIME
    return ((x * a + b) % MERSENNE_PRIME) % cols


class MinMaxSketch:
    """``rows x cols`` cells of ranks in ``[0, levels)``: insert keeps the minimum, query takes the maximum.

    Args:
        rows: hash rows (SketchML: 2).
        cols: cells per row (SketchML: ``ceil(0.3 * items)``); at least 1.
        levels: ranks are ``0 .. levels-1``; an untouched cell holds ``levels - 1``.
        seed: seeds the row hashes (encoder and decoder must agree).
        device: where the table lives.
    """

    def __init__(self, rows: int, cols: int, levels: int, seed: int = 0, device: torch.device | str | None = None):
        self.rows = check_int(rows, "MinMaxSketch rows", 1, 16)
        self.cols = check_int(cols, "MinMaxSketch cols (a sketch needs at least one cell per row)", 1)
        self.levels = check_int(levels, "MinMaxSketch levels", 2, 1 << 16)
        self.seed = int(seed)
        self.table = torch.full((self.rows, self.cols), self.levels - 1, dtype=torch.int64, device=device)

    def _check(self, ranks: torch.Tensor) -> None:
        if ranks.numel() and (int(ranks.min()) < 0 or int(ranks.max()) >= self.levels):
            raise ConfigError(f"MinMaxSketch: ranks must be in [0, {self.levels}), got "
                              f"[{int(ranks.min())}, {int(ranks.max())}]")

    def insert(self, ids: torch.Tensor, ranks: torch.Tensor) -> None:
        """Write ``ranks`` of ``ids`` (each cell keeps the smallest rank it sees)."""
        self._check(ranks)
        ids, ranks = ids.to(self.table.device), ranks.to(self.table.device, torch.int64)
        for r in range(self.rows):
            cells = hash_cells(ids, r, self.cols, self.seed, self.rows)
            self.table[r].scatter_reduce_(0, cells, ranks, reduce="amin")

    def query(self, ids: torch.Tensor) -> torch.Tensor:
        """The largest rank among each id's cells (never above the rank it was inserted with)."""
        ids = ids.to(self.table.device)
        got = torch.stack([self.table[r][hash_cells(ids, r, self.cols, self.seed, self.rows)]
                           for r in range(self.rows)])
        return got.max(0).values

    def __repr__(self) -> str:
        return f"MinMaxSketch(rows={self.rows}, cols={self.cols}, levels={self.levels})"
