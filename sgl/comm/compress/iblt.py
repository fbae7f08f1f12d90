"""KVSAgg's HyperIBLT: an invertible Bloom lookup table whose cells add like vectors.

``rows`` (3) hash rows of ``width`` cells; each cell holds ``(keySum, fingerprintSum, count,
valueSum[dim])`` in the prime field ``Z_p``, ``p = 2**31 - 1``. Inserting ``(k, v)`` adds
``(k, fp(k), 1, v)`` to cell ``h_r(k)`` of every row, so the table of a union of key-value sets
is the elementwise sum of the sets' tables (mod ``p``): set-sum becomes vector addition, and
masked secure aggregation applies (:mod:`sgl.comm.compress.kvsagg`). ``count`` ends up as the
number of clients that hold ``k``.

**Decoding** peels: a cell is *pure* when ``count != 0``, ``k = keySum * count^-1 (mod p)`` is a
valid key that hashes back to this cell, and ``fingerprintSum == count * fp(k)``. Every pure
cell's key is emitted with ``valueSum`` and ``count`` and subtracted from its other cells;
rounds repeat (all pure cells of a round at once, vectorised torch) until none is left. The
decode **succeeds only when the table ends empty**; otherwise :class:`IBLTResult` has
``ok=False`` and holds what was peeled, and :meth:`IBLTResult.require` raises. A wrong sum
would need a false pure cell: a key that rehashes there *and* matches a 31-bit fingerprint.

**Sizing** (KVSAgg's appendix, Thm 2): with ``rows * width > 1.222 * M`` cells for ``M``
distinct keys (``rows = 3``) decoding fails with probability ``O(1/M)``; below it, it fails
almost surely. :meth:`HyperIBLT.for_keys` takes ``1.25 * M`` cells (KVSAgg's code).

Values are integers (counts), or floats in fixed point with ``value_scale`` (``round(v *
scale)``), signed: results above ``p / 2`` read as negative. Keys must lie in
``[0, key_space)`` with ``key_space <= p``.

>>> import torch
>>> iblt = HyperIBLT.for_keys(100, key_space=10**9, seed=1)
>>> a = iblt.encode(torch.tensor([5, 77, 10**8]), torch.tensor([1, 2, 3]))
>>> b = iblt.encode(torch.tensor([77, 9]), torch.tensor([10, -4]))
>>> out = iblt.decode(iblt.add(a, b)).require()
>>> out.keys.tolist(), out.values.reshape(-1).tolist(), out.counts.tolist()
([5, 9, 77, 100000000], [1, -4, 12, 3], [1, 1, 2, 1])
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from sgl._checks import check_int
from sgl.comm.compress.minmax import MERSENNE_PRIME
from sgl.errors import CommError, ConfigError

__all__ = ["HyperIBLT", "IBLTResult", "FIELD_PRIME", "PEEL_THRESHOLD"]

#: the field of every cell: Z_p with the Mersenne prime 2^31 - 1 (products fit in int64)
FIELD_PRIME = MERSENNE_PRIME
#: cells per distinct key below which 3-row peeling fails almost surely (KVSAgg, Thm 2: R_3)
PEEL_THRESHOLD = 1.222
_KEY, _FP, _COUNT = 0, 1, 2
#: the most clients that can share one key (a pure cell's count); larger counts are never pure
_MAX_PURE_COUNT = 1 << 20


def _modpow(base: torch.Tensor, exp: int) -> torch.Tensor:
    result = torch.ones_like(base)
    b = base % FIELD_PRIME
    while exp:
        if exp & 1:
            result = result * b % FIELD_PRIME
        b = b * b % FIELD_PRIME
        exp >>= 1
    return result


@dataclass
class IBLTResult:
    """A decode: ``ok`` (the table peeled to empty), the keys found (ascending), their summed
    ``values`` ``[n, dim]`` and ``counts`` (clients holding each key), and the cells left."""

    ok: bool
    keys: torch.Tensor
    values: torch.Tensor
    counts: torch.Tensor
    cells_left: int

    def require(self) -> "IBLTResult":
        """``self`` when decoding succeeded; otherwise raise :class:`~sgl.errors.CommError`."""
        if not self.ok:
            raise CommError(f"HyperIBLT decode failed: {self.cells_left} cells could not be peeled after "
                            f"recovering {self.keys.numel()} keys. The table is too small for the number of distinct "
                            f"keys in the sum; size it with HyperIBLT.for_keys(M) for M >= the distinct keys "
                            f"(>= {PEEL_THRESHOLD} cells per key).")
        return self


class HyperIBLT:
    """``rows x width`` cells of ``(keySum, fpSum, count, valueSum[value_dim])`` in ``Z_p``.

    Args:
        width: cells per row (at least 1; :meth:`for_keys` sizes it).
        key_space: keys lie in ``[0, key_space)``; at most ``2**31 - 1``. Every client must use
            the same value (and the same ``rows``, ``width``, ``value_dim``, ``seed``).
        rows: hash rows (KVSAgg: 3), at least 2.
        value_dim: values per key.
        value_scale: ``None`` for integer values, else the fixed-point scale of float values.
        seed: seeds the row hashes and the fingerprint.
    """

    def __init__(self, width: int, key_space: int, rows: int = 3, value_dim: int = 1,
                 value_scale: Optional[float] = None, seed: int = 0) -> None:
        self.rows = check_int(rows, "HyperIBLT rows", 2, 8)
        self.width = check_int(width, "HyperIBLT width (cells per row; a table needs at least one)", 1)
        self.key_space = check_int(key_space, f"HyperIBLT key_space (keys must fit the field Z_{FIELD_PRIME})", 1,
                                   FIELD_PRIME)
        self.value_dim = check_int(value_dim, "HyperIBLT value_dim", 1)
        if value_scale is not None and not value_scale > 0:
            raise ConfigError(f"HyperIBLT value_scale must be > 0 (or None for integer values), got {value_scale!r}")
        self.value_scale = value_scale
        self.seed = int(seed)
        gen = torch.Generator().manual_seed(self.seed)
        # degree-3 polynomials mod p (4-wise independent): one per row, one for the fingerprint
        self._coef = torch.randint(1, FIELD_PRIME - 1, (self.rows + 1, 4), generator=gen).tolist()

    @classmethod
    def for_keys(cls, expected_keys: int, key_space: int, *, cells_per_key: float = 1.25, rows: int = 3,
                 **kwargs) -> "HyperIBLT":
        """A table for ``expected_keys`` distinct keys in the *sum* (``cells_per_key * M`` cells).

        ``cells_per_key`` below :data:`PEEL_THRESHOLD` is refused: such a table fails almost surely.
        """
        m = check_int(expected_keys, "HyperIBLT.for_keys expected_keys", 1)
        if not cells_per_key >= PEEL_THRESHOLD:
            raise ConfigError(f"HyperIBLT.for_keys: cells_per_key must be >= {PEEL_THRESHOLD} (below it peeling fails "
                              f"almost surely), got {cells_per_key!r}")
        return cls(max(1, math.ceil(cells_per_key * m / rows)), key_space, rows=rows, **kwargs)

    @property
    def num_cells(self) -> int:
        return self.rows * self.width

    @property
    def shape(self) -> tuple:
        """Shape of a table: ``(rows * width, 3 + value_dim)``."""
        return (self.num_cells, 3 + self.value_dim)

    def spec(self) -> list:
        """What every client must agree on (exchanged before aggregating)."""
        return [self.rows, self.width, self.key_space, self.value_dim, self.seed,
                -1 if self.value_scale is None else int(round(self.value_scale * 1000))]

    def __repr__(self) -> str:
        return (f"HyperIBLT(rows={self.rows}, width={self.width}, key_space={self.key_space}, "
                f"value_dim={self.value_dim})")

    # -- hashing ----------------------------------------------------------------------------
    def cells(self, keys: torch.Tensor) -> torch.Tensor:
        """``[rows, n]`` cell of each key in each row."""
        return torch.stack([r * self.width + _poly_hash(keys, self._coef[r]) % self.width
                            for r in range(self.rows)])

    def fingerprint(self, keys: torch.Tensor) -> torch.Tensor:
        """``fp(k)`` in ``Z_p``: a cubic, so a sum of several keys' fingerprints is not the fingerprint
        of their mean (a linear hash would let every two-key cell pass as pure)."""
        return _poly_hash(keys, self._coef[self.rows])

    # -- encode / add -----------------------------------------------------------------------
    def _field_values(self, values: torch.Tensor, n: int) -> torch.Tensor:
        if values.dim() == 1:
            values = values.reshape(-1, 1)
        if values.shape != (n, self.value_dim):
            raise ConfigError(f"HyperIBLT.encode: values must be [{n}] or [{n}, {self.value_dim}], got "
                              f"{tuple(values.shape)}")
        if self.value_scale is None:
            if values.is_floating_point() and not torch.equal(values, values.round()):
                raise ConfigError("HyperIBLT.encode: float values need value_scale (fixed point); this table takes "
                                  "integers")
            ints = values.to(torch.int64)
        else:
            ints = torch.round(values.to(torch.float64) * self.value_scale).to(torch.int64)
        if ints.numel() and int(ints.abs().max()) >= FIELD_PRIME // 2:
            raise ConfigError(f"HyperIBLT.encode: a value's magnitude reaches {int(ints.abs().max())}, beyond the "
                              f"field's signed range (< {FIELD_PRIME // 2}); lower value_scale")
        return ints % FIELD_PRIME

    def encode(self, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """The int64 table ``[rows * width, 3 + value_dim]`` (entries in ``Z_p``) of one client's
        set (``keys`` unique, int64 in ``[0, key_space)``), on the keys' device."""
        if keys.dtype != torch.int64 or keys.dim() != 1:
            raise ConfigError(f"HyperIBLT.encode: keys must be 1-D int64, got {keys.dtype} {tuple(keys.shape)}")
        if keys.numel() and (int(keys.min()) < 0 or int(keys.max()) >= self.key_space):
            raise ConfigError(f"HyperIBLT.encode: keys must be in [0, {self.key_space}) (the agreed key_space), got "
                              f"[{int(keys.min())}, {int(keys.max())}]")
        if torch.unique(keys).numel() != keys.numel():
            raise ConfigError("HyperIBLT.encode: keys must be unique within one client's set; sum duplicates first")
        n = keys.numel()
        rec = torch.cat([torch.stack([keys, self.fingerprint(keys), torch.ones_like(keys)], 1),
                         self._field_values(values.to(keys.device), n)], 1)
        table = torch.zeros(self.shape, dtype=torch.int64, device=keys.device)
        for cells in self.cells(keys):
            table.index_add_(0, cells, rec)
        return table % FIELD_PRIME

    def check_table(self, table: torch.Tensor, who: str = "table") -> torch.Tensor:
        """``table`` if it has this IBLT's shape and field entries; otherwise a CommError naming ``who``."""
        if not isinstance(table, torch.Tensor) or tuple(table.shape) != self.shape or table.is_floating_point():
            raise CommError(f"KVSAgg: {who} has shape {tuple(getattr(table, 'shape', ()))} "
                            f"{getattr(table, 'dtype', type(table))}, but the agreed HyperIBLT takes integer tables "
                            f"of shape {self.shape} ({self!r}); every client must build its table with the same "
                            "HyperIBLT parameters")
        return table.to(torch.int64)

    def add(self, *tables: torch.Tensor) -> torch.Tensor:
        """The elementwise sum of ``tables`` in ``Z_p`` (the table of the union of the sets)."""
        out = torch.zeros(self.shape, dtype=torch.int64, device=tables[0].device)
        for i, t in enumerate(tables):
            out = (out + self.check_table(t, f"table {i}").to(out.device)) % FIELD_PRIME
        return out

    # -- decode -----------------------------------------------------------------------------
    def decode(self, table: torch.Tensor, max_rounds: int = 10_000) -> IBLTResult:
        """Peel ``table``; ``ok`` only when every cell ends at zero."""
        # column-major (one row per field) so every per-cell read is a fast 1-D index_select
        t = (self.check_table(table) % FIELD_PRIME).T.contiguous()
        device = t.device
        found_k, found_v, found_c = [], [], []
        idx = (t[_COUNT] != 0).nonzero().reshape(-1)  # cells to examine: all at first, then the touched
        # a pure cell's count is the number of clients holding its key: small. Invert the counts up to
        # the largest one once (a modular inverse per cell would dominate the decode).
        top = min(int(t[_COUNT].max()) if t.shape[1] else 0, _MAX_PURE_COUNT)
        inverse = _modpow(torch.arange(top + 1, device=device), FIELD_PRIME - 2)
        touched_mask = torch.zeros(t.shape[1], dtype=torch.bool, device=device)
        for _ in range(max_rounds):
            if idx.numel() == 0:
                break
            # entries are kept unreduced between rounds (each stays far below 2^63); reduce on read
            count = t[_COUNT].index_select(0, idx) % FIELD_PRIME
            keep = ((count > 0) & (count <= top)).nonzero().reshape(-1)
            idx, count = idx.index_select(0, keep), count.index_select(0, keep)
            kc = (t[_KEY].index_select(0, idx) % FIELD_PRIME) * inverse[count] % FIELD_PRIME
            row = idx // self.width
            home = row * self.width + torch.zeros_like(kc)
            for r in range(self.rows):  # the cell of each candidate key in the candidate cell's own row
                in_row = row == r
                home = torch.where(in_row, home + _poly_hash(kc, self._coef[r]) % self.width, home)
            sel = (kc < self.key_space) & (home == idx)
            sel &= (self.fingerprint(kc) * count) % FIELD_PRIME == t[_FP].index_select(0, idx) % FIELD_PRIME
            pure = idx[sel]
            if pure.numel() == 0:
                break
            keys, first = _unique_first(kc[sel])
            rec = t.index_select(1, pure[first]) % FIELD_PRIME  # [fields, keys]: (key*c, fp*c, c, value)
            found_k.append(keys)
            found_v.append(rec[3:].T)
            found_c.append(rec[_COUNT])
            touched = self.cells(keys)
            neg = FIELD_PRIME - rec
            for cells in touched:
                t.index_add_(1, cells, neg)
            touched_mask[touched.reshape(-1)] = True
            idx = touched_mask.nonzero().reshape(-1)
            touched_mask[idx] = False
        left = int(((t % FIELD_PRIME) != 0).any(0).sum())
        if found_k:
            keys, values, counts = torch.cat(found_k), torch.cat(found_v), torch.cat(found_c)
        else:
            keys = torch.zeros(0, dtype=torch.int64, device=device)
            values = torch.zeros(0, self.value_dim, dtype=torch.int64, device=device)
            counts = torch.zeros(0, dtype=torch.int64, device=device)
        order = torch.argsort(keys)
        signed = torch.where(values > FIELD_PRIME // 2, values - FIELD_PRIME, values)[order]
        out_values = signed if self.value_scale is None else signed.to(torch.float64) / self.value_scale
        return IBLTResult(left == 0, keys[order], out_values, counts[order], left)


def _poly_hash(keys: torch.Tensor, coef: list) -> torch.Tensor:
    """``((c0*x + c1)*x + c2)*x + c3 mod p`` for ``x = key mod p`` (every product stays below 2^62)."""
    x = keys.to(torch.int64) % FIELD_PRIME
    h = torch.full_like(x, coef[0])
    for c in coef[1:]:
        h = (h * x + c) % FIELD_PRIME
    return h


def _unique_first(keys: torch.Tensor) -> tuple:
    """Distinct ``keys`` and the position of each one's first occurrence."""
    uniq, inverse = torch.unique(keys, return_inverse=True)
    first = torch.full((uniq.numel(),), keys.numel(), dtype=torch.int64, device=keys.device)
    first.scatter_reduce_(0, inverse, torch.arange(keys.numel(), device=keys.device), reduce="amin")
    return uniq, first
