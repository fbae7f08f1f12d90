"""``train_gbdt``: load a tabular set, train (one process, a Vero quadrant or DimBoost), evaluate.

The one library call behind ``sgl gbdt train``.  Distributed runs start
``workers`` local gloo processes with :func:`sgl.comm.spawn`; bin edges are
fitted on the training split once and shared by every worker.  The report holds
the test AUC (logloss) or RMSE (squared loss), training seconds and, for
distributed runs, each rank's bytes sent and communication seconds.

>>> from sgl.gbdt import GBDTConfig
>>> rep = train_gbdt("breast_cancer", GBDTConfig(num_trees=3, max_depth=2, max_bins=16))
>>> rep["dataset"], rep["trees"], rep["auc"] > 0.9
('breast_cancer', 3, True)
"""
from __future__ import annotations

import time

import numpy as np

from sgl import comm
from sgl.errors import ConfigError
from sgl.gbdt.binning import BinMapper
from sgl.gbdt.config import GBDTConfig
from sgl.gbdt.dimboost import PRECISIONS, fit_dimboost
from sgl.gbdt.loss import check_labels, sigmoid
from sgl.gbdt.model import GBDT
from sgl.gbdt.sparse import SparseBins, is_sparse
from sgl.gbdt.vero import QUADRANTS, fit_quadrant

__all__ = ["train_gbdt", "predict_raw_codes", "evaluate"]

#: the largest dense code matrix a quadrant run builds from a sparse set (bytes)
_MAX_DENSE = 256 * 2**20


def predict_raw_codes(trees, base_score: float, codes: np.ndarray, feature_map=None) -> np.ndarray:
    raw = np.full(codes.shape[0], float(base_score))
    for t in trees:
        raw += t.value[t.leaf_index(codes, feature_map)]
    return raw


def evaluate(loss: str, y: np.ndarray, raw: np.ndarray) -> dict:
    if loss == "logloss":
        from sklearn.metrics import roc_auc_score

        if np.unique(y).size < 2:
            return {"auc": float("nan")}
        return {"auc": float(roc_auc_score(y, sigmoid(raw)))}
    return {"rmse": float(np.sqrt(np.mean((raw - y) ** 2)))}


def _quadrant_worker(rank: int, world: int, quadrant: str, codes, y, num_bins, cfg: dict) -> dict:
    out = fit_quadrant(quadrant, codes, y, num_bins, GBDTConfig(**cfg))
    return {k: out[k] for k in ("trees", "base_score", "meter", "seconds")}


def _dimboost_worker(rank: int, world: int, X, y, cfg: dict, precision: str) -> dict:
    out = fit_dimboost(X, y, GBDTConfig(**cfg), precision=precision)
    return {k: out[k] for k in ("trees", "base_score", "meter", "seconds", "dense_bytes",
                                 "num_histograms")}


def train_gbdt(dataset: str, config: GBDTConfig, *, root=None, quadrant: str | None = None,
               dimboost: str | None = None, workers: int = 1, seed: int = 0,
               test_size: float = 0.3, timeout: float = 600.0) -> dict:
    """Train on ``dataset`` (see :mod:`sgl.datasets.tabular`) and report test quality and costs.

    ``quadrant`` (one of :data:`~sgl.gbdt.vero.QUADRANTS`) or ``dimboost`` (a histogram
    precision, :data:`~sgl.gbdt.dimboost.PRECISIONS`) run over ``workers`` processes;
    neither runs :class:`~sgl.gbdt.GBDT` in this process.
    """
    from sgl.datasets.tabular import load_tabular

    config.validate()
    if quadrant is not None and dimboost is not None:
        raise ConfigError("choose either a Vero quadrant or DimBoost, not both")
    if quadrant is not None and quadrant not in QUADRANTS:
        raise ConfigError(f"quadrant must be one of {QUADRANTS}; got {quadrant!r}")
    if dimboost is not None and dimboost not in PRECISIONS:
        raise ConfigError(f"dimboost precision must be one of {tuple(PRECISIONS)}; got {dimboost!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an int >= 1; got {workers!r}")
    if workers > 1 and quadrant is None and dimboost is None:
        raise ConfigError("workers > 1 needs a quadrant or dimboost; one process trains GBDT alone")
    data = load_tabular(dataset, root=root, test_size=test_size, seed=seed)
    ytr = check_labels(config.loss, data.y_train, data.X_train.shape[0])
    report = {"dataset": dataset, "rows": int(data.X_train.shape[0]), "features": data.num_features,
              "trees": config.num_trees, "quadrant": quadrant, "dimboost": dimboost,
              "workers": workers}
    start = time.perf_counter()
    if quadrant is None and dimboost is None:
        model = GBDT(config).fit(data.X_train, ytr)
        report["seconds"] = time.perf_counter() - start
        report.update(evaluate(config.loss, data.y_test, model.predict_raw(data.X_test)))
        return report
    cfg = config.to_dict()
    if quadrant is not None:
        Xtr, Xte = data.X_train, data.X_test
        if is_sparse(Xtr):
            if Xtr.shape[0] * Xtr.shape[1] > _MAX_DENSE:
                raise ConfigError(f"{dataset} has {Xtr.shape[1]} sparse features: too wide for dense "
                                  "quadrant storage here; use --dimboost")
            sb = SparseBins.from_csr(Xtr, config.max_bins, config.missing)
            codes = np.stack([sb.column(j) for j in range(sb.num_features)], axis=1)
            test_codes, fmap = sb.transform_subset(Xte, np.arange(sb.num_features))
            num_bins = sb.num_bins
        else:
            bm = BinMapper(config.missing).fit(Xtr, config.max_bins)
            codes, test_codes, fmap, num_bins = bm.transform(Xtr), bm.transform(Xte), None, bm.num_bins
        outs = (comm.spawn(_quadrant_worker, workers, quadrant, codes, ytr, num_bins, cfg,
                           timeout=timeout) if workers > 1
                else [_quadrant_worker(0, 1, quadrant, codes, ytr, num_bins, cfg)])
    else:
        import scipy.sparse as sp

        Xtr = data.X_train if is_sparse(data.X_train) else sp.csr_matrix(data.X_train)
        sb = SparseBins.from_csr(Xtr, config.max_bins, config.missing)
        outs = (comm.spawn(_dimboost_worker, workers, Xtr, ytr, cfg, dimboost, timeout=timeout)
                if workers > 1 else [_dimboost_worker(0, 1, Xtr, ytr, cfg, dimboost)])
        Xte = data.X_test if is_sparse(data.X_test) else sp.csr_matrix(data.X_test)
        used = np.unique(np.concatenate([t.feature[t.feature >= 0] for t in outs[0]["trees"]]
                                        + [np.empty(0, dtype=np.int64)]))
        test_codes, fmap = sb.transform_subset(Xte, used)
        report["dense_bytes"] = [o["dense_bytes"] for o in outs]
        report["histograms"] = outs[0]["num_histograms"]
    report["seconds"] = time.perf_counter() - start
    report["train_seconds"] = max(o["seconds"] for o in outs)
    report["bytes_sent"] = [o["meter"]["bytes_sent"] for o in outs]
    report["comm_seconds"] = [o["meter"]["seconds"] for o in outs]
    raw = predict_raw_codes(outs[0]["trees"], outs[0]["base_score"], test_codes, fmap)
    report.update(evaluate(config.loss, data.y_test, raw))
    return report
