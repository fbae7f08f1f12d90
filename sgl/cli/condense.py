"""``sgl condense --dataset cora --nodes 70 --out cora70.pt``: a small synthetic graph that trains like the real one.

    sgl condense --dataset cora --root DIR --nodes 70 --out cora70.pt               # GCond
    sgl condense --dataset cora --nodes 70 --method doscond --out cora70.pt         # one-step DosCond
    sgl condense --dataset cora --nodes 70 --method kmeans --out cora70.pt          # training-free
    sgl train --model gcn --dataset file:cora70.pt --root DIR    # trains on it, validates/tests on Cora

``--out`` is checked before any work and written atomically (:meth:`sgl.data.Graph.save`).
"""
from __future__ import annotations

import argparse
from typing import Any

from sgl.cli.options import key_values
from sgl.cli.paths import check_input_folder, check_output_path

__all__ = ["register", "cmd_condense"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("condense", help="condense a node-classification graph to a few synthetic nodes "
                                               "(GCond, DosCond, k-means; see docs/acceleration.md)")
    p.add_argument("--dataset", required=True, help="dataset name (see `sgl datasets list`)")
    p.add_argument("--root", help="folder holding the dataset's files")
    p.add_argument("--nodes", type=int, required=True, help="size of the condensed graph (>= number of classes)")
    p.add_argument("--out", required=True, help="file to write the condensed Graph to (e.g. cora70.pt)")
    p.add_argument("--method", choices=("gcond", "doscond", "kmeans"), default="gcond",
                   help="gcond (gradient matching, default), doscond (one-step), kmeans (training-free)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, help="matching epochs (gcond/doscond; default 600, GCond's Cora script)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="CondenseConfig field, e.g. outer=20 inner=15 lr_feat=1e-4 threshold=0.05")
    p.add_argument("--dataset-option", action="append", metavar="KEY=VALUE", help="dataset loader option")
    p.set_defaults(handler=cmd_condense)


def cmd_condense(args: argparse.Namespace) -> int:
    import sgl.datasets
    from sgl.errors import ConfigError
    from sgl.tasks.condense import CondenseConfig, condense

    out = check_output_path(args.out, "file", "--out")
    check_input_folder(args.root, "--root")
    options = key_values(args.option, "--option")
    if args.epochs is not None:
        options["epochs"] = args.epochs
    try:
        config = CondenseConfig(method=args.method, **options)
    except TypeError as exc:
        raise ConfigError(f"bad --option: {exc}") from None
    dataset_options = key_values(args.dataset_option, "--dataset-option")
    graph = sgl.datasets.load(args.dataset, root=args.root, **dataset_options)
    if not hasattr(graph, "indptr"):
        raise ConfigError(f"dataset {args.dataset!r} is not a single graph; condensation needs node "
                          f"classification data")
    source = {"dataset": args.dataset, **({"root": str(args.root)} if args.root else {})}
    small = condense(graph, args.nodes, seed=args.seed, config=config, source=source)
    small.save(out)
    info = small.condensed_from
    print(f"condensed {args.dataset} ({graph.num_nodes:,} nodes, {graph.num_edges:,} edges) -> {out}: "
          f"{small.num_nodes} nodes, {small.num_edges} edges, {args.method}, {info['condense_time_s']:.1f} s")
    return 0
