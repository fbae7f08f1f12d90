"""The CTR table (:class:`CTRData`) and the dense-feature convention its loaders share."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from sgl.errors import ConfigError, DatasetError

__all__ = ["CTRData", "transform_dense"]


@dataclass
class CTRData:
    """A CTR table: dense features, per-field categorical ids and 0/1 labels.

    Attributes:
        dense: float32 ``[N, D]`` (``log(x+1)`` applied; ``D`` may be 0).
        sparse: int64 ``[N, F]``; field ``f`` holds ids in ``[0, field_dims[f])``, 0 = unknown.
        labels: float32 ``[N]`` in {0, 1}.
        field_dims: vocabulary size of each field, including the unknown bucket.
        field_names: one name per field.
        dense_names: one name per dense column.
        check: validate ids and labels (an on-disk store was validated when it was written).
        order_seed: set when the rows are already in a seeded random order (a memory-mapped
            store, :func:`sgl.datasets.ctr.store.open_ctr_store`): :meth:`split` then cuts
            contiguous ranges instead of copying, and only for this seed.
        source_row: for a store, each row's index in the source file.

    ``sparse`` may be int32 or int64 (other integer types become int64); arrays that already
    have the right dtype and layout, memory maps included, are kept as they are.
    """

    dense: np.ndarray
    sparse: np.ndarray
    labels: np.ndarray
    field_dims: List[int]
    field_names: List[str]
    dense_names: List[str] = field(default_factory=list)
    check: bool = field(default=True, repr=False, compare=False)
    order_seed: Optional[int] = field(default=None, repr=False, compare=False)
    source_row: Optional[np.ndarray] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.dense = _keep_or_convert(self.dense, np.float32)
        sparse_dtype = getattr(self.sparse, "dtype", None)
        self.sparse = _keep_or_convert(self.sparse, sparse_dtype if sparse_dtype in (np.int32, np.int64)
                                       else np.int64)
        self.labels = _keep_or_convert(self.labels, np.float32).reshape(-1)
        self.field_dims = [int(d) for d in self.field_dims]
        self.field_names = [str(n) for n in self.field_names]
        n = self.labels.shape[0]
        if self.dense.ndim != 2 or self.dense.shape[0] != n:
            raise DatasetError(f"dense must be [N={n}, D], got shape {self.dense.shape}")
        if self.sparse.ndim != 2 or self.sparse.shape[0] != n:
            raise DatasetError(f"sparse must be [N={n}, F], got shape {self.sparse.shape}")
        if len(self.field_dims) != self.sparse.shape[1] or len(self.field_names) != self.sparse.shape[1]:
            raise DatasetError(f"{self.sparse.shape[1]} sparse fields but {len(self.field_dims)} field_dims "
                               f"and {len(self.field_names)} field_names")
        if not self.dense_names:
            self.dense_names = [f"I{i + 1}" for i in range(self.dense.shape[1])]
        if n and self.sparse.size and self.check:
            low, high = self.sparse.min(axis=0), self.sparse.max(axis=0)
            bad = np.nonzero((low < 0) | (high >= np.asarray(self.field_dims)))[0]
            if bad.size:
                f = int(bad[0])
                raise DatasetError(f"field {self.field_names[f]!r} has ids in [{low[f]}, {high[f]}] but "
                                   f"field_dims[{f}]={self.field_dims[f]}; ids must be in [0, field_dims)")
        if n and self.check and not np.isin(self.labels, (0.0, 1.0)).all():
            raise DatasetError("labels must be 0 or 1")

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def num_fields(self) -> int:
        return len(self.field_dims)

    @property
    def num_dense(self) -> int:
        return int(self.dense.shape[1])

    @property
    def num_embeddings(self) -> int:
        """Rows of the one table that :meth:`global_ids` indexes: ``sum(field_dims)``."""
        return int(sum(self.field_dims))

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``[F]``: first global id of each field (exclusive cumsum of ``field_dims``)."""
        return np.concatenate([[0], np.cumsum(self.field_dims)[:-1]]).astype(np.int64)

    @property
    def is_mapped(self) -> bool:
        """Whether the arrays are memory maps of an on-disk store (read block by block)."""
        return isinstance(self.sparse, np.memmap)

    def global_ids(self) -> np.ndarray:
        """int64 ``[N, F]``: ``sparse + offsets``, ids into one table of ``sum(field_dims)`` rows."""
        return self._global(self.sparse)

    def batch(self, rows: Union[slice, np.ndarray]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(dense, global ids (int64), labels)`` of ``rows`` only — what a training step reads
        from a memory-mapped store."""
        return np.array(self.dense[rows]), self._global(self.sparse[rows]), np.array(self.labels[rows])

    def _global(self, sparse: np.ndarray) -> np.ndarray:
        return sparse.astype(np.int64, copy=False) + self.offsets[None, :]

    def subset(self, index: Union[slice, np.ndarray]) -> "CTRData":
        """The rows ``index`` (an int array, a boolean mask or a slice), sharing vocabularies.

        A slice of a memory-mapped store stays mapped (no copy); index arrays copy the rows.
        """
        return CTRData(self.dense[index], self.sparse[index], self.labels[index], list(self.field_dims),
                       list(self.field_names), list(self.dense_names), check=False,
                       order_seed=self.order_seed if isinstance(index, slice) else None,
                       source_row=None if self.source_row is None else self.source_row[index])

    def split(self, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
              ) -> Tuple["CTRData", "CTRData", "CTRData"]:
        """Random train/validation/test split with sizes ``floor(fraction * N)`` (test gets the rest)."""
        if len(fractions) != 3 or any(not isinstance(f, Real) or f < 0 for f in fractions) \
                or not math.isclose(sum(fractions), 1.0, abs_tol=1e-6):
            raise ConfigError(f"fractions must be three non-negative numbers summing to 1, got {tuple(fractions)}")
        n = len(self)
        n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
        if self.order_seed is not None:
            if seed != self.order_seed:
                raise ConfigError(f"these rows were shuffled on disk with seed {self.order_seed}, so split() cuts "
                                  f"contiguous ranges and needs seed={self.order_seed} (got {seed}); build the "
                                  f"store with shuffle_seed={seed} for another split")
            return (self.subset(slice(0, n_train)), self.subset(slice(n_train, n_train + n_val)),
                    self.subset(slice(n_train + n_val, n)))
        order = np.random.default_rng(seed).permutation(n)
        return (self.subset(order[:n_train]), self.subset(order[n_train:n_train + n_val]),
                self.subset(order[n_train + n_val:]))

    def __repr__(self) -> str:
        return (f"CTRData(rows={len(self)}, dense={self.num_dense}, fields={self.num_fields}, "
                f"ids={self.num_embeddings}, ctr={float(self.labels.mean()) if len(self) else float('nan'):.3f})")


def _keep_or_convert(values: object, dtype: type) -> np.ndarray:
    """``values`` itself when it is a C-contiguous array of ``dtype`` (a memory map stays one)."""
    if isinstance(values, np.ndarray) and values.dtype == dtype and values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values, dtype=dtype)


def transform_dense(values: np.ndarray) -> np.ndarray:
    """Criteo dense preprocessing: NaN → 0, ``x > -1`` → ``log(x+1)``, ``x <= -1`` kept.

    >>> transform_dense(np.array([0.0, np.e - 1, np.nan, -2.0])).round(3).tolist()
    [0.0, 1.0, 0.0, -2.0]
    """
    values = np.asarray(values, dtype=np.float64)
    out = np.where(np.isnan(values), 0.0, values)
    positive = out > -1
    out[positive] = np.log1p(out[positive])
    return out.astype(np.float32)
