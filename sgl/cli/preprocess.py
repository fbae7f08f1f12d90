"""``sgl preprocess --dataset X --out DIR``: write a dataset as a disk-backed store.

Graph datasets become a graph/feature store (:mod:`sgl.samplers.store`); the text CTR datasets
(``criteo``, ``avazu``) become a memory-mapped CTR store under ``DIR``
(:mod:`sgl.datasets.ctr_store`), which ``sgl train --task ctr --dataset-option store=DIR`` maps.
``--out`` (and ``--root``) are checked before the dataset is read.
"""
from __future__ import annotations

import argparse
from typing import Any

from sgl.errors import ConfigError
from sgl.cli.options import key_values
from sgl.cli.paths import check_input_folder, check_output_path

__all__ = ["register", "cmd_preprocess"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("preprocess", help="write a dataset as a disk-backed graph/feature store "
                                                        "(or a CTR store for criteo/avazu)")
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

    options = key_values(args.dataset_option, "--dataset-option")
    out = check_output_path(args.out, "dir", "--out")
    if sgl.datasets.dataset_task(args.dataset) == "ctr":
        return _preprocess_ctr(args, options)
    check_input_folder(args.root, "--root")
    if out.exists() and not args.overwrite:
        raise ConfigError(f"--out {args.out} already exists; pass --overwrite to replace it (atomically, once the "
                          f"new store is complete) or choose another folder")
    graph = sgl.datasets.load(args.dataset, root=args.root, **options)
    if not hasattr(graph, "indptr"):
        raise ConfigError(f"dataset {args.dataset!r} is not a single graph; `sgl preprocess` stores node datasets")
    path = write_store(graph, args.out, feature_dtype=args.feature_dtype, overwrite=args.overwrite,
                       progress=not args.no_progress, log=print)
    store = open_store(path)
    size = sum(entry["bytes"] for entry in store.meta["arrays"].values())
    print(f"store: {path} ({store.num_nodes:,} nodes, {store.num_edges:,} edges, {store.num_features} "
          f"{store.feature_dtype} features, {size / 2**20:.1f} MiB, checksums verified)")
    return 0


def _preprocess_ctr(args: argparse.Namespace, options: dict) -> int:
    import sgl.datasets

    name = args.dataset.lower()
    if name not in ("criteo", "avazu"):
        raise ConfigError(f"dataset {args.dataset!r} is not read from a text file; `sgl preprocess` builds CTR "
                          f"stores for criteo and avazu")
    data = sgl.datasets.load(name, root=args.root, store=args.out, progress=not args.no_progress, **options)
    if not getattr(data, "is_mapped", False):
        raise ConfigError(f"{args.root} holds arrays, not a text file: there is nothing to encode into a store")
    print(f"CTR store under {args.out}: {len(data):,} rows, {data.num_fields} fields, {data.num_dense} dense, "
          f"{data.num_embeddings:,} ids; train with --dataset {name} --root {args.root} "
          f"--dataset-option store={args.out}")
    return 0
