r"""CAFE and CAFE+ embeddings: a sketch picks hot features, which get their own rows.

A feature the sketch reports hot reads its own row of ``hot_weight``; every other feature
reads a hash row: ``hash_weight[hash_ids(id)]`` of one table shared by all fields
(``cold="shared"``, the default), or, as the CAFE artifact lays it out (``cold="field"``),
``id mod rows_f`` of its own field's table, with fields of at most ``2000 / ratio`` ids kept
whole and never entering the sketch (:func:`~sgl.embeddings.tables.field_rows`). With ``medium_rows > 0`` (multi-level
hash embedding, on by default in CAFE+) features whose score is at least
``medium_fraction * threshold`` but not hot read ``hash_weight[h1] + medium_weight[h2]``
with an independent second hash ``h2``, so medium features collide less than cold ones.

Training (the order of the CAFE artifact): forward → backward → :meth:`after_backward`
inserts each occurrence's importance — the L2 norm of its embedding-gradient row, scaled
so the batch mean is 1 (with ``cold="field"``, as the artifact, each field's mean is 1;
``use_frequency=True``: 1 per occurrence) — into the sketch; every
newly hot feature gets its current hash row copied into its hot row (its optimizer state
reset) before ``optimizer.step()``.

**Memory budget** (the paper's formula, with the sketch counted): a budget of ``B`` bytes
gives ``hash_rate * B`` to hash rows and the rest to hot rows, each hot row costing
``4·dim`` bytes plus one 48-byte sketch bucket plus a 4-byte free-list entry (CAFE+ adds one
48-byte LRU-filter bucket per ``1/filter_fraction`` hot rows). Whatever the hot part leaves
goes to hash (and medium) rows; a few extra sketch buckets make the sketch bytes a multiple
of ``4·dim`` so the total equals ``B`` exactly (see :func:`split_budget`);
:meth:`memory_bytes` is never above ``B``.

Example:
    >>> import torch
    >>> emb = CAFEEmbedding.from_ratio(100_000, 16, ratio=100, threshold=5.0)
    >>> emb.memory_bytes() == 1_000 * 16 * 4, emb.num_hot > 0
    (True, True)
    >>> out = emb(torch.tensor([[3, 99_999]]))
    >>> out.sum().backward(); emb.after_backward()
    >>> out.shape
    torch.Size([1, 2, 16])
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
import torch
from torch import nn

from sgl._checks import check_int, check_real
from sgl.embeddings.base import FLOAT_BYTES, EmbeddingBackend, budget_bytes, check_scalar, copy_rows
from sgl.embeddings.hotsketch import BUCKET_BYTES, HotSketch
from sgl.embeddings.hotsketch_plus import HotSketchPlus
from sgl.embeddings.tables import FieldLayout, _check_hashable, check_field_dims, field_rows, hash_ids
from sgl.errors import EmbeddingError

__all__ = ["CAFEEmbedding", "CAFEPlusEmbedding", "split_budget", "paper_hyperparameters"]

_FREE_LIST_BYTES = 4

# tasks/criteo.json of the CAFE artifact: compress rate -> (threshold, hash_rate), D=16, batch 128
_PAPER_TABLE = ((0.5, 10, 0.7), (0.2, 10, 0.5), (0.1, 20, 0.5), (0.05, 30, 0.5), (0.02, 50, 0.3),
                (0.01, 100, 0.3), (0.005, 200, 0.2), (0.002, 500, 0.2), (0.001, 500, 0.2),
                (0.0005, 500, 0.1), (0.0002, 500, 0.1), (0.0001, 500, 0.1))


def paper_hyperparameters(ratio: float) -> Tuple[float, float]:
    """(threshold, hash_rate) of the CAFE artifact's Criteo table at the nearest compress rate.

    >>> paper_hyperparameters(100)
    (100.0, 0.3)
    """
    rate = 1.0 / float(ratio)
    best = min(_PAPER_TABLE, key=lambda row: abs(math.log(row[0]) - math.log(rate)))
    return float(best[1]), float(best[2])


def split_budget(budget: int, dim: int, hash_rate: float, filter_fraction: float = 0.0,
                 medium_rate: float = 0.0) -> Tuple[int, int, int, int, int]:
    """``(num_hot, num_buckets, num_filter_buckets, hash_rows, medium_rows)`` for ``budget`` bytes.

    ``num_hot`` is the largest count (at most 4·dim below the formula's) for which a few
    extra sketch buckets (main ones for CAFE, filter ones for CAFE+) make the sketch bytes a
    multiple of ``4·dim``, so the hash rows fill the budget exactly.

    >>> split_budget(64_000, 16, 0.5)   # 1000 rows of 64 B at 10x of 10k ids
    (272, 272, 0, 507, 0)
    """
    check_scalar(check_real, hash_rate, f"hash_rate must be in (0, 1), got {hash_rate!r}", 0.0, 1.0,
                 open_low=True, open_high=True)
    check_scalar(check_real, medium_rate, f"medium_rate must be in [0, 1), got {medium_rate!r}", 0.0, 1.0,
                 open_high=True)
    row = dim * FLOAT_BYTES
    per_hot = row + BUCKET_BYTES + _FREE_LIST_BYTES + BUCKET_BYTES * filter_fraction
    hot_max = int(budget * (1 - hash_rate) // per_hot)

    def sketch_bytes(hot: int, buckets: int, filters: int) -> int:
        return BUCKET_BYTES * (buckets + filters) + _FREE_LIST_BYTES * hot

    def base_filters(hot: int) -> int:
        return max(1, math.ceil(filter_fraction * hot)) if filter_fraction > 0 else 0

    chosen = None
    for hot in range(hot_max, max(0, hot_max - row), -1):  # exact bytes when a close num_hot allows
        filters = base_filters(hot)
        for extra in range(row):
            buckets, more = (hot, filters + extra) if filter_fraction > 0 else (hot + extra, filters)
            if sketch_bytes(hot, buckets, more) % row == 0:
                chosen = (hot, buckets, more)
                break
        if chosen:
            break
    if chosen is None and hot_max >= 1:
        chosen = (hot_max, hot_max, base_filters(hot_max))
    smallest = per_hot + row
    if chosen is None or budget - chosen[0] * row - sketch_bytes(*chosen) < row:
        raise EmbeddingError(f"a budget of {budget} bytes is smaller than the sketch needs: one hot row with its "
                             f"sketch bucket ({per_hot:.0f} B) plus one hash row ({row} B) = {smallest:.0f} B at "
                             f"dim={dim}, hash_rate={hash_rate}; use a lower compression ratio or a higher hash_rate")
    hot, buckets, filters = chosen
    rest = (budget - hot * row - sketch_bytes(hot, buckets, filters)) // row
    medium = int(rest * medium_rate)
    if rest - medium < 1:
        raise EmbeddingError(f"budget {budget} B leaves no hash row after {hot} hot rows")
    return hot, buckets, filters, rest - medium, medium


class _Grad:
    """Stand-in carrying only ``.grad`` (the gradient rows of the ids that enter the sketch)."""

    def __init__(self, grad: torch.Tensor) -> None:
        self.grad = grad


def _field_split(num_embeddings: int, dim: int, ratio: float, field_dims, exempt_small: bool
                 ) -> Tuple[int, list]:
    """(bytes left for hot rows, sketch and cold rows; rows of the fields kept whole or -1)."""
    check_field_dims(field_dims, num_embeddings, "CAFE with per-field cold tables")
    budget = budget_bytes(num_embeddings, dim, ratio)
    whole = field_rows(field_dims, budget // (dim * FLOAT_BYTES), ratio, exempt_small)
    whole = [r if r == d else -1 for r, d in zip(whole, field_dims)]
    return budget - sum(r for r in whole if r > 0) * dim * FLOAT_BYTES, whole


def _field_layout(field_dims, whole: list, hash_rows: int) -> FieldLayout:
    """Per-field cold rows: the whole fields keep theirs, ``hash_rows`` are split over the others."""
    comp = [f for f, r in enumerate(whole) if r < 0]
    if hash_rows < len(comp):
        raise EmbeddingError(f"{hash_rows} cold rows cannot give each of {len(comp)} compressed fields a row; "
                             "use a higher hash_rate or a lower compression ratio")
    split = field_rows([field_dims[f] for f in comp], hash_rows, 1.0, exempt_small=False)
    rows = list(whole)
    for f, r in zip(comp, split):
        rows[f] = r
    return FieldLayout(field_dims, rows)


class _SketchEmbedding(EmbeddingBackend):
    """Hot rows chosen by a sketch + hash rows (+ optional medium rows)."""

    sketch: HotSketch

    def __init__(self, num_embeddings: int, dim: int, num_hot: int, hash_rows: int, medium_rows: int,
                 medium_fraction: float, use_frequency: bool, init_std: float, seed: int,
                 layout: Optional[FieldLayout] = None) -> None:
        super().__init__(num_embeddings, dim)
        if layout is not None:
            check_field_dims(layout.field_dims, self.num_embeddings, "CAFE with per-field cold tables")
            if layout.total_rows != hash_rows:
                raise EmbeddingError(f"the field layout has {layout.total_rows} rows, hash_rows={hash_rows}")
        self.layout = layout
        _check_hashable(self.num_embeddings)
        if self.num_embeddings > (1 << 32) - 1:
            raise EmbeddingError("CAFE keys are 4 bytes: num_embeddings must be < 2^32 - 1")
        self.num_hot = check_int(num_hot, "num_hot", 1, error=EmbeddingError)
        self.hash_rows = check_int(hash_rows, "hash_rows", 1, error=EmbeddingError)
        self.medium_rows = check_int(medium_rows, "medium_rows", 0, error=EmbeddingError)
        self.medium_fraction = float(medium_fraction)
        self.use_frequency = bool(use_frequency)
        self.init_std = float(init_std)
        self.seed = int(seed)
        self.hot_weight = nn.Parameter(torch.empty(self.num_hot, self.dim))
        self.hash_weight = nn.Parameter(torch.empty(self.hash_rows, self.dim))
        self.medium_weight = nn.Parameter(torch.empty(self.medium_rows, self.dim)) if self.medium_rows else None
        self._pending: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weight in (self.hot_weight, self.hash_weight):
            nn.init.normal_(weight, 0.0, self.init_std)
        if self.medium_weight is not None:
            nn.init.normal_(self.medium_weight, 0.0, self.init_std / 4)

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.sketch.memory_bytes()

    def _medium_mask(self, hot: np.ndarray, score: np.ndarray) -> np.ndarray:
        return (hot < 0) & (score >= self.medium_fraction * self.sketch.threshold) & (score > 0)

    def _effective(self, score: np.ndarray) -> np.ndarray:
        return score

    def lookup(self, flat: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(hot id or -1, medium flag) of each id, from the sketch."""
        hot, score = self.sketch.query(flat.cpu().numpy())  # the sketch: numba, host
        medium = self._medium_mask(hot, self._effective(score)) if self.medium_rows else np.zeros(hot.shape, bool)
        hot, medium = torch.from_numpy(hot.astype(np.int64)), torch.from_numpy(medium)
        if self.layout is not None:  # ids of fields kept whole never go through the sketch
            full = self.layout.full_mask(flat)
            hot[full], medium[full] = -1, False
        return hot, medium

    def cold_index(self, ids: torch.Tensor) -> torch.Tensor:
        """Row of ``hash_weight`` each id reads when it is not hot."""
        if self.layout is None:
            return hash_ids(ids, self.hash_rows, self.seed)
        return self.layout.index(ids)

    def _cold_rows(self, flat: torch.Tensor, medium: torch.Tensor) -> torch.Tensor:
        cold = self.hash_weight[self.cold_index(flat)]
        if self.medium_weight is not None:
            extra = self.medium_weight[hash_ids(flat, self.medium_rows, self.seed + 1)]
            cold = cold + extra * medium[:, None].to(extra.dtype)
        return cold

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids = self.check_ids(ids)
        flat = ids.reshape(-1).cpu()
        hot, medium = self.lookup(flat)
        is_hot = (hot >= 0).to(self.hot_weight.device)
        flat_dev = flat.to(self.hot_weight.device)
        out = torch.where(is_hot[:, None], self.hot_weight[hot.clamp(min=0).to(self.hot_weight.device)],
                          self._cold_rows(flat_dev, medium.to(self.hot_weight.device)))
        if self.training and out.requires_grad:
            out.retain_grad()
            self._pending = (flat, out)
        return out.view(*ids.shape, self.dim)

    def importance(self) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """(unique ids, summed importance) of the last training forward, or None."""
        pending, self._pending = self._pending, None
        if pending is None or pending[1].grad is None:
            return None
        flat, out = pending
        if self.layout is not None:
            keep = ~self.layout.full_mask(flat)
            if not bool(keep.all()):
                flat, grad = flat[keep], out.grad[keep.to(out.grad.device)]
                if flat.numel() == 0:
                    return None
                out = _Grad(grad)
        if self.use_frequency:
            values = torch.ones(flat.numel())
        elif self.layout is not None:  # as the artifact: each field's occurrences average 1
            values = out.grad.detach().float().norm(dim=1).cpu()
            field = self.layout.field_of(flat)
            n = len(self.layout.field_dims)
            count = torch.bincount(field, minlength=n).float()
            total = torch.zeros(n).index_add_(0, field, values)
            scale = torch.where(total > 0, count / total.clamp_min(1e-30), torch.zeros_like(total))
            values = torch.where(total[field] > 0, values * scale[field], torch.ones_like(values))
        else:
            values = out.grad.detach().float().norm(dim=1).cpu()
            total = float(values.sum())
            values = values * (values.numel() / total) if total > 0 else torch.ones_like(values)
        unique, inverse = torch.unique(flat, return_inverse=True)
        summed = torch.zeros(unique.numel()).index_add_(0, inverse, values)
        return unique.cpu().numpy(), summed.cpu().numpy()

    @torch.no_grad()
    def _migrate(self, keys: np.ndarray, hot_ids: np.ndarray, optimizer) -> None:
        """Copy each newly hot feature's hash row (and its optimizer state) into its hot row;
        a medium feature's medium row is added to the copied vector."""
        if keys.size == 0:
            return
        keys_t = torch.from_numpy(keys.astype(np.int64)).to(self.hash_weight.device)
        rows = torch.from_numpy(hot_ids.astype(np.int64)).to(self.hot_weight.device)
        copy_rows(optimizer, self.hash_weight, self.cold_index(keys_t), self.hot_weight, rows)
        if self.medium_weight is not None:
            self.hot_weight[rows] += self.medium_weight[hash_ids(keys_t, self.medium_rows, self.seed + 1)]

    def hot_fraction(self) -> float:
        """Fraction of the hot rows currently assigned."""
        return 1.0 - self.sketch.num_free / self.num_hot

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, hot={self.num_hot}, hash_rows={self.hash_rows}, "
                f"medium_rows={self.medium_rows}, threshold={self.sketch.threshold:g}")


class CAFEEmbedding(_SketchEmbedding):
    """CAFE (Zhang et al., SIGMOD'24): HotSketch-selected hot rows + hash rows for the rest.

    Args:
        num_embeddings, dim: the id space and vector width.
        num_hot: hot rows (= sketch buckets); hash_rows: shared rows for non-hot features.
        threshold: sketch score at which a feature becomes hot.
        decay_factor, decay_every: the sketch's periodic decay (see :class:`HotSketch`).
        medium_rows, medium_fraction: optional multi-level hash embedding.
        use_frequency: importance 1 per occurrence instead of the gradient norm.

    Build it from a byte budget with :meth:`from_ratio`.
    """

    def __init__(self, num_embeddings: int, dim: int, num_hot: int, hash_rows: int, threshold: float = 20.0,
                 decay_factor: float = 0.99, decay_every: float = 10.0, medium_rows: int = 0,
                 medium_fraction: float = 0.2, use_frequency: bool = False, init_std: float = 0.01,
                 seed: int = 0, num_buckets: Optional[int] = None, layout: Optional[FieldLayout] = None) -> None:
        self.sketch = HotSketch(num_hot if num_buckets is None else num_buckets, num_hot, threshold, decay_factor,
                                decay_every)
        super().__init__(num_embeddings, dim, num_hot, hash_rows, medium_rows, medium_fraction, use_frequency,
                         init_std, seed, layout)

    @classmethod
    def from_ratio(cls, num_embeddings: int, dim: int, ratio: float, hash_rate: Optional[float] = None,
                   threshold: Optional[float] = None, medium_rate: float = 0.0, cold: str = "shared",
                   field_dims=None, exempt_small: bool = True, **kwargs) -> "CAFEEmbedding":
        """Spend exactly the bytes of ``ratio``× compression (:func:`~sgl.embeddings.base.budget_bytes`);
        ``hash_rate``/``threshold`` default to the CAFE artifact's values for that ratio.
        ``cold="field"`` (needs ``field_dims``) gives each field its own cold table as the artifact
        does; the fields it keeps whole are paid first, the formula splits the rest.

        >>> emb = CAFEEmbedding.from_ratio(20_100, 8, ratio=10, cold="field", field_dims=[20_000, 100])
        >>> emb.layout.rows[1], emb.memory_bytes() == 2_010 * 8 * 4      # the 100-id field kept whole
        (100, True)
        """
        budget, whole = budget_bytes(num_embeddings, dim, ratio), None
        if cold == "field":
            budget, whole = _field_split(num_embeddings, dim, ratio, field_dims, exempt_small)
        elif cold != "shared":
            raise EmbeddingError(f"cold must be 'shared' or 'field', got {cold!r}")
        paper_threshold, paper_rate = paper_hyperparameters(ratio)
        hot, buckets, _, hash_rows, medium_rows = split_budget(
            budget, dim, paper_rate if hash_rate is None else hash_rate, medium_rate=medium_rate)
        layout = None
        if whole is not None:
            layout = _field_layout(field_dims, whole, hash_rows)
            hash_rows = layout.total_rows
        return cls(num_embeddings, dim, hot, hash_rows, threshold=paper_threshold if threshold is None else threshold,
                   medium_rows=medium_rows, num_buckets=buckets, layout=layout, **kwargs)

    def after_backward(self, optimizer: Optional[torch.optim.Optimizer] = None) -> None:
        found = self.importance()
        if found is None:
            return
        keys, hot_ids = self.sketch.insert(*found)
        self.sketch.pop_released()  # demoted features simply go back to their hash rows
        self._migrate(keys, hot_ids, optimizer)


class CAFEPlusEmbedding(_SketchEmbedding):
    """CAFE+ : :class:`~sgl.embeddings.hotsketch_plus.HotSketchPlus` (LRU filter, automatic
    threshold, global time decay) + multi-level hash embedding for medium features.

    Example:
        >>> emb = CAFEPlusEmbedding.from_ratio(100_000, 16, ratio=100)
        >>> emb.memory_bytes() == 1_000 * 16 * 4, emb.medium_rows > 0
        (True, True)
    """

    def __init__(self, num_embeddings: int, dim: int, num_hot: int, hash_rows: int, num_filter_buckets: int,
                 medium_rows: int = 0, threshold: float = 1.0, alpha: float = 1.0005, adjust_every: int = 10,
                 medium_fraction: float = 0.2, use_frequency: bool = False, init_std: float = 0.01,
                 seed: int = 0, layout: Optional[FieldLayout] = None) -> None:
        self.sketch = HotSketchPlus(num_hot, num_hot, num_filter_buckets, threshold, alpha, adjust_every,
                                    promote_fraction=medium_fraction)
        super().__init__(num_embeddings, dim, num_hot, hash_rows, medium_rows, medium_fraction, use_frequency,
                         init_std, seed, layout)

    @classmethod
    def from_ratio(cls, num_embeddings: int, dim: int, ratio: float, hash_rate: Optional[float] = None,
                   medium_rate: float = 0.5, filter_fraction: float = 1 / 9, cold: str = "shared",
                   field_dims=None, exempt_small: bool = True, **kwargs) -> "CAFEPlusEmbedding":
        """Exactly the bytes of ``ratio``× compression; ``hash_rate`` defaults to the artifact's
        value for that ratio, of which ``medium_rate`` goes to the medium table; ``cold`` as in
        :meth:`CAFEEmbedding.from_ratio`."""
        budget, whole = budget_bytes(num_embeddings, dim, ratio), None
        if cold == "field":
            budget, whole = _field_split(num_embeddings, dim, ratio, field_dims, exempt_small)
        elif cold != "shared":
            raise EmbeddingError(f"cold must be 'shared' or 'field', got {cold!r}")
        rate = paper_hyperparameters(ratio)[1] if hash_rate is None else hash_rate
        hot, _, filters, hash_rows, medium_rows = split_budget(budget, dim, rate, filter_fraction, medium_rate)
        layout = None
        if whole is not None:
            layout = _field_layout(field_dims, whole, hash_rows)
            hash_rows = layout.total_rows
        return cls(num_embeddings, dim, hot, hash_rows, filters, medium_rows, layout=layout, **kwargs)

    def _effective(self, score: np.ndarray) -> np.ndarray:
        return score / np.float32(self.sketch.scale)

    def after_backward(self, optimizer: Optional[torch.optim.Optimizer] = None) -> None:
        found = self.importance()
        if found is None:
            return
        keys, hot_ids = self.sketch.insert(*found)
        promoted, promoted_ids, _, _ = self.sketch.step()
        self._migrate(np.concatenate([keys, promoted]), np.concatenate([hot_ids, promoted_ids]), optimizer)
