"""Vero's four quadrants of distributed GBDT over :mod:`sgl.comm`.

{horizontal, vertical} partitioning × {row, column} storage:

* ``"horizontal-row"`` -- each worker holds a block of rows, all features, row-major.
  Node histograms are all-reduced (XGBoost/LightGBM data parallel); every worker
  finds the same split and partitions its own rows.
* ``"horizontal-column"`` -- a block of rows, stored column-major.  Histograms are
  reduce-scattered by feature blocks (an all-to-all); each worker finds the best
  split of its block and the best is agreed by an all-gather of one small record.
* ``"vertical-row"`` (Vero) / ``"vertical-column"`` -- each worker holds a block of
  columns of every row (labels are on every worker, so gradients need no traffic).
  Histograms are local; each worker finds its block's best split, the best is
  agreed, and the owner of the winning feature broadcasts a bitmap of which node
  rows go left (1 bit per row).

Every quadrant grows the same trees as one process (ties: lowest feature, then
bin).  Bin edges are agreed before training (fitted on the full data or a
sample): the layouts take bin codes.  :class:`~sgl.gbdt.meter.CommMeter` counts
each rank's bytes and seconds.  Run one rank per process (``sgl.comm.spawn`` or
``torchrun``); with one process every quadrant is the single-process trainer.

>>> import numpy as np
>>> from sgl.gbdt import GBDTConfig
>>> codes = np.array([[0, 1], [1, 0], [1, 1], [0, 0]], dtype=np.uint8)
>>> out = fit_quadrant("vertical-row", codes, np.array([0.0, 1.0, 1.0, 0.0]), 2,
...                    GBDTConfig(num_trees=2, max_depth=1, min_child_weight=0.0))
>>> out["trees"][0].feature.tolist(), out["meter"]["bytes_sent"]
([0, -1, -1], 0)
"""
from __future__ import annotations

import time

import numpy as np
import torch

from sgl import comm
from sgl.datasets.tabular import split_columns
from sgl.errors import ConfigError
from sgl.gbdt.boosting import boost
from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.layout import ColumnLayout, RowLayout
from sgl.gbdt.meter import CommMeter
from sgl.gbdt.split import SplitInfo, find_best_split

__all__ = ["QUADRANTS", "fit_quadrant", "make_layout", "agree_split", "HorizontalRowLayout",
           "HorizontalColumnLayout", "VerticalRowLayout", "VerticalColumnLayout"]

QUADRANTS = ("horizontal-row", "horizontal-column", "vertical-row", "vertical-column")


def _timed(meter: CommMeter, op: str, nbytes: int, fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    meter.add(op, nbytes, time.perf_counter() - t)
    return out


def agree_split(local: SplitInfo | None, meter: CommMeter) -> SplitInfo | None:
    """All workers agree on the best of their local splits (max gain, then lowest feature, bin)."""
    rec = np.full(7, -np.inf) if local is None else np.array(
        [local.gain, local.feature, local.bin, local.left_grad, local.left_hess,
         local.right_grad, local.right_hess], dtype=np.float64)
    if comm.get_world_size() == 1:
        recs = rec[None]
    else:
        t = torch.from_numpy(rec)
        recs = torch.stack(_timed(meter, "all_gather", t.numel() * 8, comm.all_gather, t)).cpu().numpy()
    valid = np.isfinite(recs[:, 0])
    if not valid.any():
        return None
    recs = recs[valid]
    best = recs[np.lexsort((recs[:, 2], recs[:, 1], -recs[:, 0]))[0]]
    return SplitInfo(int(best[1]), int(best[2]), *(float(v) for v in best[[0, 3, 4, 5, 6]]))


def _sharded_best_split(hist, mine: np.ndarray, meter: CommMeter, config) -> SplitInfo | None:
    """The best split over every worker's feature shard: this worker's best on ``hist`` (its features
    ``mine``), renumbered to the global feature, then agreed over the workers (:func:`agree_split`)."""
    local = find_best_split(hist[:, :, 0], hist[:, :, 1], reg_lambda=config.reg_lambda,
                            min_child_weight=config.min_child_weight, min_split_gain=config.min_split_gain)
    if local is not None:
        local = SplitInfo(int(mine[local.feature]), *[getattr(local, k) for k in (
            "bin", "gain", "left_grad", "left_hess", "right_grad", "right_hess")])
    return agree_split(local, meter)


class _Horizontal:
    """Mix-in: rows are split over workers; sums and histograms are reduced."""

    meter: CommMeter

    def allsum(self, x: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.array(x, dtype=np.float64))
        return _timed(self.meter, "all_reduce", t.numel() * 8, comm.all_reduce, t).cpu().numpy()


class HorizontalRowLayout(_Horizontal, RowLayout):
    """Rows split over workers, row store; node histograms are all-reduced."""

    def __init__(self, codes: np.ndarray, num_bins: int) -> None:
        super().__init__(codes, num_bins)
        self.meter = CommMeter()

    def histogram(self, rows, totals):
        t = torch.from_numpy(self._local_histogram(rows))
        return _timed(self.meter, "all_reduce", t.numel() * 8, comm.all_reduce, t).cpu().numpy()


class HorizontalColumnLayout(_Horizontal, ColumnLayout):
    """Rows split over workers, column store; histograms reduce-scattered by feature block."""

    def __init__(self, codes: np.ndarray, num_bins: int) -> None:
        super().__init__(codes, num_bins)
        self.meter = CommMeter()
        self.blocks = split_columns(self.codes_t.shape[0], comm.get_world_size(), allow_empty=True)
        self.mine = self.blocks[comm.get_rank()]

    def histogram(self, rows, totals):
        local = self._local_histogram(rows)
        pieces = [torch.from_numpy(np.ascontiguousarray(local[b])) for b in self.blocks]
        me = comm.get_rank()
        nbytes = sum(p.numel() * 8 for i, p in enumerate(pieces) if i != me)
        got = _timed(self.meter, "all_to_all", nbytes, comm.all_to_all, pieces)
        out = got[0].cpu().numpy().copy()
        for piece in got[1:]:  # rank order, like a sum all-reduce
            out += piece.cpu().numpy()
        return out

    def best_split(self, hist, totals, config):
        return _sharded_best_split(hist, self.mine, self.meter, config)


class _Vertical:
    """Mix-in: columns are split over workers; the owner of a split broadcasts its bitmap."""

    meter: CommMeter
    blocks: list
    mine: np.ndarray

    def allsum(self, x):
        return np.asarray(x, dtype=np.float64)

    def best_split(self, hist, totals, config):
        return _sharded_best_split(hist, self.mine, self.meter, config)

    def partition(self, rows, split):
        owner = int(self.owner_of[split.feature])
        nbits = (rows.size + 7) // 8
        if owner == comm.get_rank():
            local_f = int(np.searchsorted(self.mine, split.feature))
            bits = np.packbits(self._column(local_f)[rows] <= split.bin)
        else:
            bits = np.zeros(nbits, dtype=np.uint8)
        if comm.get_world_size() > 1:
            t = torch.from_numpy(bits)
            sent = nbits * (comm.get_world_size() - 1) if owner == comm.get_rank() else 0
            bits = _timed(self.meter, "broadcast", sent, comm.broadcast, t, src=owner).cpu().numpy()
        go_left = np.unpackbits(bits, count=rows.size).astype(bool)
        return rows[go_left], rows[~go_left]


    def _own(self, blocks: list) -> None:
        self.meter, self.blocks, self.mine = CommMeter(), blocks, blocks[comm.get_rank()]
        self.owner_of = np.concatenate([np.full(len(b), r) for r, b in enumerate(blocks)])[
            np.argsort(np.concatenate(blocks), kind="stable")]


class VerticalRowLayout(_Vertical, RowLayout):
    """Columns split over workers, row store (Vero); the split owner broadcasts a bitmap."""

    def __init__(self, codes: np.ndarray, num_bins: int, blocks: list) -> None:
        super().__init__(codes, num_bins)
        self._own(blocks)


class VerticalColumnLayout(_Vertical, ColumnLayout):
    """Columns split over workers, column store; the split owner broadcasts a bitmap."""

    def __init__(self, codes: np.ndarray, num_bins: int, blocks: list) -> None:
        super().__init__(codes, num_bins)
        self._own(blocks)


def make_layout(quadrant: str, codes: np.ndarray, num_bins: int):
    """This rank's layout over the *full* binned matrix ``codes`` (it keeps its own part)."""
    if quadrant not in QUADRANTS:
        raise ConfigError(f"quadrant must be one of {QUADRANTS}; got {quadrant!r}")
    rank, world = comm.get_rank(), comm.get_world_size()
    if quadrant.startswith("horizontal"):
        if codes.shape[0] < world:
            raise ConfigError(f"{codes.shape[0]} rows cannot be split over {world} workers")
        part = np.array_split(np.arange(codes.shape[0]), world)[rank]
        cls = HorizontalRowLayout if quadrant.endswith("row") else HorizontalColumnLayout
        return cls(codes[part], num_bins), part
    blocks = split_columns(codes.shape[1], world)
    cls = VerticalRowLayout if quadrant.endswith("row") else VerticalColumnLayout
    return cls(codes[:, blocks[rank]], num_bins, blocks), np.arange(codes.shape[0])


def fit_quadrant(quadrant: str, codes: np.ndarray, y: np.ndarray, num_bins: int,
                 config: GBDTConfig) -> dict:
    """Train on this rank's part of ``codes``/``y``; returns trees, base score, meter, seconds."""
    config.validate()
    layout, rows = make_layout(quadrant, np.asarray(codes), int(num_bins))
    res = boost(layout, np.asarray(y, dtype=np.float64)[rows], config)
    return {"trees": res.trees, "base_score": res.base_score, "meter": layout.meter.as_dict(),
            "seconds": res.seconds, "rows": rows, "raw": res.raw}
