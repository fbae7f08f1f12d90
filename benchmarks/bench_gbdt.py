"""sgl.gbdt side by side (docs/gbdt.md): quality and time against LightGBM and XGBoost, Vero's
quadrants' bytes and time, DimBoost's histogram bytes and AUC lost.  One run prints everything.

1. Test AUC and training seconds of our GBDT, LightGBM and XGBoost at the same trees, depth,
   bins, learning rate, L2 (lambda), min_child_weight and min_data_in_leaf=1, all three on one
   thread (``n_jobs=1``; ours is single-threaded), on breast_cancer, Caravan and Default.
   No side is tuned.
2. Vero's four quadrants over 2 gloo processes: bytes sent per rank and communication/total
   seconds, on a dense set (Caravan, 85 columns) and a high-dimensional sparse one (the
   200-row Criteo sample one-hot, ~2.3k columns), with the trees checked equal to one process.
3. DimBoost on the 8,192-row Criteo sample one-hot (~40k columns), 2 processes: histogram
   bytes of sparse fp64/fp16/int8 pieces against dense fp64 histograms for the same nodes
   (F x B x 2 x 8 bytes each, computed, and with each feature's own bin count; on the
   2.3k-column sample the dense all-reduce is also measured), and the test AUC lost against fp64.

    SGL_TEST_DATA=/work/shared/datasets python benchmarks/bench_gbdt.py            # ~1-2 min
    python benchmarks/bench_gbdt.py --trees 200 --depth 6 --bins 255 --seeds 5      # heavier
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgl import comm  # noqa: E402
from sgl.datasets.tabular import load_tabular  # noqa: E402
from sgl.gbdt import GBDT, BinMapper, GBDTConfig, RowLayout, SparseBins, boost  # noqa: E402
from sgl.gbdt.dimboost import fit_dimboost  # noqa: E402
from sgl.gbdt.run import evaluate, predict_raw_codes  # noqa: E402
from sgl.gbdt.vero import QUADRANTS, fit_quadrant  # noqa: E402


def _auc(y, p):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


def compare_libraries(names, args, root) -> list:
    import lightgbm as lgb

    try:
        import xgboost as xgb
    except ImportError:  # pragma: no cover - optional
        xgb = None
    rows = []
    # load the cached numba kernels once, outside the timings (a one-off per process)
    GBDT(GBDTConfig(num_trees=1, max_depth=2, max_bins=4)).fit(np.eye(4), np.array([0, 1, 0, 1.0]))
    for name in names:
        for seed in range(args.seeds):
            d = load_tabular(name, root=root, seed=seed)
            cfg = GBDTConfig(num_trees=args.trees, max_depth=args.depth, max_bins=args.bins,
                             learning_rate=args.lr, reg_lambda=1.0, min_child_weight=1.0)
            t = time.perf_counter()
            ours = GBDT(cfg).fit(d.X_train, d.y_train)
            t_ours = time.perf_counter() - t
            a_ours = _auc(d.y_test, ours.predict_proba(d.X_test))
            Xtr = d.X_train.astype(np.float32) if hasattr(d.X_train, "astype") else d.X_train
            t = time.perf_counter()
            lm = lgb.LGBMClassifier(n_estimators=args.trees, max_depth=args.depth,
                                    num_leaves=2 ** args.depth, max_bin=args.bins,
                                    learning_rate=args.lr, reg_lambda=1.0, min_child_weight=1.0,
                                    min_child_samples=1, min_data_in_bin=1, min_split_gain=0.0,
                                    n_jobs=1, verbose=-1).fit(Xtr, d.y_train)
            t_lgb = time.perf_counter() - t
            a_lgb = _auc(d.y_test, lm.predict_proba(d.X_test)[:, 1])
            row = {"dataset": name, "seed": seed, "auc_ours": a_ours, "auc_lightgbm": a_lgb,
                   "sec_ours": t_ours, "sec_lightgbm": t_lgb}
            if xgb is not None:
                t = time.perf_counter()
                xm = xgb.XGBClassifier(n_estimators=args.trees, max_depth=args.depth,
                                       max_bin=args.bins, learning_rate=args.lr, reg_lambda=1.0,
                                       min_child_weight=1.0, tree_method="hist",
                                       grow_policy="depthwise", n_jobs=1).fit(Xtr, d.y_train)
                row["sec_xgboost"] = time.perf_counter() - t
                row["auc_xgboost"] = _auc(d.y_test, xm.predict_proba(d.X_test)[:, 1])
            rows.append(row)
            print(f"  {name:14s} seed {seed}: AUC ours {a_ours:.4f}  LightGBM {a_lgb:.4f} "
                  f"(diff {a_ours - a_lgb:+.4f})"
                  + (f"  XGBoost {row['auc_xgboost']:.4f}" if "auc_xgboost" in row else "")
                  + f" | train s ours {t_ours:.2f}  LightGBM {t_lgb:.2f}"
                  + (f"  XGBoost {row['sec_xgboost']:.2f}" if "sec_xgboost" in row else "")
                  + f"  (ours/LightGBM {t_ours / t_lgb:.2f}x)", flush=True)
    for name in names:
        rs = [r for r in rows if r["dataset"] == name]
        diffs = [r["auc_ours"] - r["auc_lightgbm"] for r in rs]
        line = (f"  {name:14s} mean over {len(rs)} seeds: AUC ours {np.mean([r['auc_ours'] for r in rs]):.4f}"
                f"  LightGBM {np.mean([r['auc_lightgbm'] for r in rs]):.4f}")
        if "auc_xgboost" in rs[0]:
            line += f"  XGBoost {np.mean([r['auc_xgboost'] for r in rs]):.4f}"
        ratio = np.sum([r["sec_ours"] for r in rs]) / np.sum([r["sec_lightgbm"] for r in rs])
        line += (f" | ours-LightGBM mean {np.mean(diffs):+.4f}, max |diff| {np.max(np.abs(diffs)):.4f}"
                 f" | train s ours/LightGBM {ratio:.2f}x")
        print(line, flush=True)
    return rows


def _dense_codes(d, bins):
    if hasattr(d.X_train, "getformat"):
        sb = SparseBins.from_csr(d.X_train, bins)
        return np.stack([sb.column(j) for j in range(sb.num_features)], 1), sb.num_bins
    bm = BinMapper().fit(d.X_train, bins)
    return bm.transform(d.X_train), bm.num_bins


def _worker(rank: int, world: int, jobs: list) -> list:
    out = []
    for job in jobs:
        cfg = GBDTConfig(**job["cfg"])
        if job["kind"] == "quadrant":
            t = time.perf_counter()
            r = fit_quadrant(job["quadrant"], job["codes"], job["y"], job["num_bins"], cfg)
            out.append({"trees": r["trees"], "meter": r["meter"], "base": r["base_score"],
                        "seconds": time.perf_counter() - t})
        else:
            t = time.perf_counter()
            r = fit_dimboost(job["X"], job["y"], cfg, precision=job["precision"])
            out.append({"trees": r["trees"], "meter": r["meter"], "base": r["base_score"],
                        "dense_bytes": r["dense_bytes"], "hists": r["num_histograms"],
                        "ragged": r["dense_bytes_per_feature_bins"],
                        "seconds": time.perf_counter() - t})
    return out


def distributed(args, root) -> dict:
    jobs, labels, single = [], [], {}
    sets = [("caravan", None)]
    if root:
        sets.append(("criteo", root))
    cfg = dict(num_trees=args.dist_trees, max_depth=args.depth, max_bins=args.bins,
               learning_rate=args.lr)
    for name, r in sets:
        d = load_tabular(name, root=r)
        codes, nb = _dense_codes(d, args.bins)
        single[name] = boost(RowLayout(codes, nb), d.y_train, GBDTConfig(**cfg)).trees
        for q in QUADRANTS:
            jobs.append({"kind": "quadrant", "quadrant": q, "codes": codes, "y": d.y_train,
                         "num_bins": nb, "cfg": cfg})
            labels.append((name, q, codes.shape))
    tests = {}
    if root:
        het = load_tabular("criteo_het", root=root)
        tests["criteo_het"] = het
        hcfg = dict(cfg, num_trees=args.dim_trees, max_bins=args.dim_bins)
        for prec in ("fp64", "fp16", "int8"):
            jobs.append({"kind": "dimboost", "precision": prec, "X": het.X_train, "y": het.y_train,
                         "cfg": hcfg})
            labels.append(("criteo_het", "dimboost-" + prec, het.X_train.shape))
        small = load_tabular("criteo", root=root)
        for prec in ("fp64", "fp16", "int8"):
            jobs.append({"kind": "dimboost", "precision": prec, "X": small.X_train,
                         "y": small.y_train, "cfg": cfg})
            labels.append(("criteo", "dimboost-" + prec, small.X_train.shape))
    t = time.perf_counter()
    res = comm.spawn(_worker, 2, jobs, timeout=args.timeout, comm_timeout=120.0)
    print(f"  (2 processes, {len(jobs)} runs, {time.perf_counter() - t:.1f} s with start-up)")
    out = {"quadrants": [], "dimboost": []}
    hr = {}
    for i, (name, what, shape) in enumerate(labels):
        r0, r1 = res[0][i], res[1][i]
        rec = {"dataset": name, "run": what, "shape": list(shape),
               "bytes_per_rank": [r0["meter"]["bytes_sent"], r1["meter"]["bytes_sent"]],
               "comm_seconds": [r0["meter"]["seconds"], r1["meter"]["seconds"]],
               "seconds": max(r0["seconds"], r1["seconds"])}
        if what in QUADRANTS:
            same = all(a.same_structure(b, atol=1e-8) for a, b in zip(single[name], r0["trees"]))
            rec["same_trees_as_one_process"] = same
            if what == "horizontal-row":
                hr[name] = sum(rec["bytes_per_rank"])
            out["quadrants"].append(rec)
            print(f"  {name:8s} {what:18s} bytes/rank {rec['bytes_per_rank']}  comm s "
                  f"{[round(s, 2) for s in rec['comm_seconds']]}  total s {rec['seconds']:.2f}  "
                  f"same trees: {same}", flush=True)
        else:
            rec["dense_bytes"] = r0["dense_bytes"] + r1["dense_bytes"]
            rec["histograms"] = r0["hists"]
            sent = sum(rec["bytes_per_rank"])
            rec["dense_over_sparse"] = rec["dense_bytes"] / max(sent, 1)
            rec["dense_per_feature_bins_bytes"] = r0["ragged"] + r1["ragged"]
            rec["ragged_dense_over_sparse"] = rec["dense_per_feature_bins_bytes"] / max(sent, 1)
            if name == "criteo_het":
                d = tests[name]
                sb = SparseBins.from_csr(d.X_train, args.dim_bins)
                used = np.unique(np.concatenate([tr.feature[tr.feature >= 0] for tr in r0["trees"]]))
                codes, fmap = sb.transform_subset(d.X_test, used)
                rec["auc"] = evaluate("logloss", d.y_test, predict_raw_codes(
                    r0["trees"], r0["base"], codes, fmap))["auc"]
            if name in hr:
                rec["measured_dense_allreduce_over_sparse"] = hr[name] / max(sent, 1)
            out["dimboost"].append(rec)
    base = {r["dataset"]: r.get("auc") for r in out["dimboost"] if r["run"] == "dimboost-fp64"}
    for rec in out["dimboost"]:
        extra = ""
        if rec.get("auc") is not None:
            rec["auc_lost_vs_fp64"] = base[rec["dataset"]] - rec["auc"]
            extra = f"  AUC {rec['auc']:.4f} (lost vs fp64 {rec['auc_lost_vs_fp64']:+.4f})"
        if "measured_dense_allreduce_over_sparse" in rec:
            extra += f"  measured dense all-reduce/sparse {rec['measured_dense_allreduce_over_sparse']:.1f}x"
        print(f"  {rec['dataset']:10s} {rec['run']:14s} {rec['shape']} hist bytes {sum(rec['bytes_per_rank']):,}"
              f" vs dense {rec['dense_bytes']:,} ({rec['dense_over_sparse']:.1f}x fewer; vs dense with "
              f"per-feature bins {rec['ragged_dense_over_sparse']:.1f}x fewer){extra}"
              f"  s {rec['seconds']:.2f}", flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", type=int, default=100)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--bins", type=int, default=63)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seeds", type=int, default=3, help="train/test split seeds per dataset")
    p.add_argument("--dist-trees", type=int, default=10, help="trees of each Vero quadrant run")
    p.add_argument("--dim-trees", type=int, default=10, help="trees of each DimBoost run")
    p.add_argument("--dim-bins", type=int, default=15, help="bins of the ~40k-column DimBoost set")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--skip", nargs="*", default=[], choices=("libraries", "distributed"))
    p.add_argument("--json", help="write all figures to this file")
    args = p.parse_args(argv)
    root = os.environ.get("SGL_TEST_DATA")
    out = {"args": vars(args)}
    if "libraries" not in args.skip:
        names = ["breast_cancer", "caravan", "default"]
        print(f"1. AUC and training time vs LightGBM / XGBoost ({args.trees} trees, depth {args.depth}, "
              f"{args.bins} bins, lr {args.lr}, 1 thread each)")
        out["libraries"] = compare_libraries(names, args, root)
    if "distributed" not in args.skip:
        print("2-3. Vero's quadrants and DimBoost over 2 gloo processes")
        out["distributed"] = distributed(args, root)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
