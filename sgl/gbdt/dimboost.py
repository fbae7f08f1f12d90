"""DimBoost: sparse, low-precision histograms and a parameter-server split finder.

Rows are split over workers (horizontal) and stored as sparse bins
(:class:`~sgl.gbdt.SparseBins`); features are sharded over the same workers, each
acting as the *server* of one contiguous feature shard.  For every node a worker

1. builds a histogram from its stored entries only (cells of implicit zeros stay empty);
2. sends each server the non-empty cells of that server's shard: ``int32`` cell ids and
   the gradient/hessian sums at ``precision`` -- ``"fp64"``, ``"fp32"``, ``"fp16"`` or
   ``"int8"`` (symmetric, one float32 scale per piece for gradients and one for hessians);
3. the server adds the pieces, fills each feature's zero bin from the node totals, finds
   its shard's best split, and the best is agreed by an all-gather.

``dense_bytes`` counts what a dense fp64 histogram all-reduce (:mod:`sgl.gbdt.vero`'s
horizontal-row) would send for the same nodes: ``features × bins × 2 × 8`` each;
``dense_bytes_per_feature_bins`` the same with each feature's own bin count (a ragged
dense histogram, the fairer baseline when most features are one-hot).
With ``precision="fp64"`` the trees equal the dense ones up to float rounding.

>>> import numpy as np, scipy.sparse as sp
>>> from sgl.gbdt import GBDTConfig
>>> X = sp.csr_matrix(np.eye(6)[[0, 1, 0, 1, 2, 3]])
>>> out = fit_dimboost(X, np.array([1.0, 0, 1, 0, 0, 0]), GBDTConfig(num_trees=2, max_depth=1,
...                    min_child_weight=0.0, max_bins=4), precision="int8")
>>> int(out["trees"][0].feature[0])
0
>>> ids, vals = decode_cells(encode_cells(np.array([3, 9]), np.array([[0.5, 1.0], [-1.0, 2.0]]),
...                                       "int8"), "int8")
>>> ids.tolist(), np.round(vals, 1).tolist()
([3, 9], [[0.5, 1.0], [-1.0, 2.0]])
"""
from __future__ import annotations

import numpy as np
import torch

from sgl import comm
from sgl.datasets.tabular import split_columns
from sgl.errors import ConfigError
from sgl.gbdt.boosting import boost
from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.histogram import _hist_csr, _rows
from sgl.gbdt.layout import CSRLayout
from sgl.gbdt.meter import CommMeter
from sgl.gbdt.sparse import SparseBins
from sgl.gbdt.split import SplitInfo, find_best_split
from sgl.gbdt.vero import _Horizontal, _timed, agree_split

__all__ = ["PRECISIONS", "encode_cells", "decode_cells", "DimBoostLayout", "fit_dimboost"]

PRECISIONS = {"fp64": np.float64, "fp32": np.float32, "fp16": np.float16, "int8": np.int8}


def encode_cells(ids: np.ndarray, vals: np.ndarray, precision: str) -> np.ndarray:
    """Pack cell ids (int32) and ``[k, 2]`` gradient/hessian sums into one uint8 buffer."""
    k = np.array([ids.size], dtype=np.int64).view(np.uint8)
    ids = ids.astype(np.int32).view(np.uint8)
    if precision == "int8":
        scale = np.maximum(np.abs(vals).max(axis=0), 1e-300) / 127.0 if vals.size else np.ones(2)
        q = np.clip(np.rint(vals / scale), -127, 127).astype(np.int8)
        body = [scale.astype(np.float32).view(np.uint8), q.reshape(-1).view(np.uint8)]
    else:
        body = [vals.astype(PRECISIONS[precision]).reshape(-1).view(np.uint8)]
    return np.concatenate([k, ids, *body])


def decode_cells(buf: np.ndarray, precision: str) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`encode_cells`: ``(ids int64, vals float64 [k, 2])``."""
    buf = np.ascontiguousarray(buf, dtype=np.uint8)
    k = int(buf[:8].view(np.int64)[0])
    ids = buf[8:8 + 4 * k].view(np.int32).astype(np.int64)
    rest = buf[8 + 4 * k:]
    if precision == "int8":
        scale = rest[:8].view(np.float32).astype(np.float64)
        vals = rest[8:8 + 2 * k].view(np.int8).astype(np.float64).reshape(k, 2) * scale
    else:
        vals = rest.view(PRECISIONS[precision]).astype(np.float64).reshape(k, 2)
    return ids, vals


class DimBoostLayout(_Horizontal, CSRLayout):
    """This worker's sparse rows; it serves (finds splits for) one shard of the features."""

    def __init__(self, sparse_bins: SparseBins, precision: str = "fp16") -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {tuple(PRECISIONS)}; got {precision!r}")
        super().__init__(sparse_bins)
        self.precision = precision
        self.meter = CommMeter()
        self.blocks = split_columns(sparse_bins.num_features, comm.get_world_size(), allow_empty=True)
        self.mine = self.blocks[comm.get_rank()]
        self.num_histograms = 0

    def histogram(self, rows, totals):
        sb, nb = self.sb, self.num_bins
        local = np.zeros((sb.num_features, nb, 2))
        _hist_csr(sb.indptr, sb.indices, sb.codes, _rows(rows), self.grad, self.hess, local)
        flat = local.reshape(-1, 2)
        me, world = comm.get_rank(), comm.get_world_size()
        payloads = []
        for b in self.blocks:
            lo, hi = (int(b[0]) * nb, (int(b[-1]) + 1) * nb) if b.size else (0, 0)
            cells = lo + np.flatnonzero(flat[lo:hi, 1] != 0)
            payloads.append(encode_cells(cells - lo, flat[cells], self.precision))
        self.num_histograms += 1
        if world > 1:
            nbytes = sum(p.size for i, p in enumerate(payloads) if i != me)
            got = _timed(self.meter, "all_to_all", nbytes, comm.all_to_all,
                         [torch.from_numpy(p) for p in payloads])
            got = [g.cpu().numpy() for g in got]
        else:
            got = [payloads[0]]
        shard = np.zeros((self.mine.size * nb, 2))
        for piece in got:  # rank order
            ids, vals = decode_cells(piece, self.precision)
            np.add.at(shard, ids, vals)
        shard = shard.reshape(self.mine.size, nb, 2)
        stored = shard.sum(axis=1)
        f = np.arange(self.mine.size)
        zb = sb.zero_bin[self.mine]
        shard[f, zb, 0] += totals[0] - stored[:, 0]
        shard[f, zb, 1] += totals[1] - stored[:, 1]
        return shard

    def best_split(self, hist, totals, config):
        local = find_best_split(hist[:, :, 0], hist[:, :, 1], reg_lambda=config.reg_lambda,
                                min_child_weight=config.min_child_weight,
                                min_split_gain=config.min_split_gain)
        if local is not None:
            local = SplitInfo(int(self.mine[local.feature]), local.bin, local.gain, local.left_grad,
                              local.left_hess, local.right_grad, local.right_hess)
        return agree_split(local, self.meter)


def fit_dimboost(X, y: np.ndarray, config: GBDTConfig, precision: str = "fp16",
                 sparse_bins: SparseBins | None = None) -> dict:
    """Train on this rank's block of the rows of the scipy sparse ``X`` (bins fitted on all of it).

    Returns trees, base score, the meter, ``dense_bytes`` (what dense fp64 histograms would
    have sent for the same nodes), seconds, this rank's rows and the bin mapper.
    """
    config.validate()
    sb = sparse_bins or SparseBins.from_csr(X, config.max_bins, config.missing)
    world = comm.get_world_size()
    part = np.array_split(np.arange(sb.num_rows), world)[comm.get_rank()]
    layout = DimBoostLayout(_rows_of(sb, part), precision)
    res = boost(layout, np.asarray(y, dtype=np.float64)[part], config)
    dense = layout.num_histograms * sb.num_features * sb.num_bins * 2 * 8 if world > 1 else 0
    per_feature = int(np.sum(sb.offset + 1 + np.array([e.size for e in sb.edges_])))
    ragged = layout.num_histograms * per_feature * 2 * 8 if world > 1 else 0
    return {"trees": res.trees, "base_score": res.base_score, "meter": layout.meter.as_dict(),
            "dense_bytes": int(dense), "dense_bytes_per_feature_bins": int(ragged),
            "num_histograms": layout.num_histograms, "seconds": res.seconds, "rows": part, "bins": sb}


def _rows_of(sb: SparseBins, part: np.ndarray) -> SparseBins:
    """A row block of ``sb`` with the same bin edges (so every worker shares the bins)."""
    starts, ends = sb.indptr[part], sb.indptr[part + 1]
    indptr = np.zeros(part.size + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=indptr[1:])
    take = np.repeat(starts - indptr[:-1], ends - starts) + np.arange(indptr[-1])
    return SparseBins(indptr, sb.indices[take], sb.codes[take], sb.zero_bin, sb.edges_, part.size,
                      sb.missing)
