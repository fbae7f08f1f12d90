"""``sgl preprocess --dataset X --out DIR``: write any dataset as a disk-backed store."""
from __future__ import annotations

import argparse
from typing import Any

from sgl.errors import ConfigError
from sgl.options import key_values

__all__ = ["register", "cmd_preprocess"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("preprocess", help="write a dataset as a disk-backed graph/feature store")
    parser.add_argument("--dataset", required=True, help="dataset name (see `sgl datasets list`)")
    parser.add_argument("--root", help="folder holding the dataset's files")
    parser.add_argument("--out", required=True, help="store folder to create")
    parser.add_argument("--feature-dtype", default="float32", choices=("float32", "float16"))
    parser.add_argument("--dataset-option", action="append", metavar="KEY=VALUE", help="dataset loader option")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing store (atomically)")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(handler=cmd_preprocess)


def cmd_preprocess(args: argparse.Namespace) -> int:
    import sgl.datasets
    from sgl.samplers.store import open_store, write_store

    graph = sgl.datasets.load(args.dataset, root=args.root, **key_values(args.dataset_option, "--dataset-option"))
    if not hasattr(graph, "indptr"):
        raise ConfigError(f"dataset {args.dataset!r} is not a single graph; `sgl preprocess` stores node datasets")
    path = write_store(graph, args.out, feature_dtype=args.feature_dtype, overwrite=args.overwrite,
                       progress=not args.no_progress)
    store = open_store(path)
    size = sum(entry["bytes"] for entry in store.meta["arrays"].values())
    print(f"store: {path} ({store.num_nodes:,} nodes, {store.num_edges:,} edges, {store.num_features} "
          f"{store.feature_dtype} features, {size / 2**20:.1f} MiB, checksums verified)")
    return 0
