"""``sgl search``: run, show and export PaSca searches (:mod:`sgl.search`).

    sgl search --dataset cora --root DIR --objectives accuracy,latency --trials 100 --timeout 600
    sgl search show study.db [--all]
    sgl search export study.db --trial N > best.yaml

The front/trials tables and the plot go to ``--out``, by default ``search-<study>/`` beside
the SQLite study file (the current folder only without a study file); the storage file, the
results folder and ``--root`` are checked before the dataset is loaded.
"""
from __future__ import annotations

import argparse
import sys

from sgl.cli.paths import check_input_folder, check_output_path, check_storage, search_results_folder

__all__ = ["register"]

_TRAIN_FLAGS = ("lr", "weight_decay", "epochs", "patience", "device")


def register(sub) -> None:
    search = sub.add_parser("search", help="multi-objective search over scalable GNN designs (PaSca)",
                            description="Search the SGAP design space; `sgl search show|export STUDY` read a study.")
    search.add_argument("--dataset", default="cora", help="dataset name (default cora)")
    search.add_argument("--root", help="folder holding the dataset's files")
    search.add_argument("--dataset-option", action="append", metavar="KEY=VALUE", help="dataset loader option")
    search.add_argument("--objectives", default="accuracy,latency",
                        help="two or more of accuracy, epoch_time, train_time, latency, memory")
    search.add_argument("--trials", type=int, default=60, help="completed trials to reach (across restarts)")
    search.add_argument("--timeout", type=float, help="stop starting trials after this many seconds")
    search.add_argument("--optimizer", default="tpe",
                        help="tpe (multi-objective TPE), gp (Gaussian process, log-EHVI), nsga2 or random")
    search.add_argument("--seed", type=int, default=0)
    search.add_argument("--storage", help="study file (SQLite) or optuna RDB URL; resumable, shareable")
    search.add_argument("--study", dest="study_name", help="study name inside the storage (default sgl-DATASET)")
    search.add_argument("--n-jobs", type=int, default=1, help="parallel trials in this process")
    # training of every trial: defaults are sgl.search.SEARCH_TRAIN_DEFAULTS (one definition)
    search.add_argument("--epochs", type=int, help="epochs per trial (default 200)")
    search.add_argument("--patience", type=int, help="early stopping per trial (default 50)")
    search.add_argument("--lr", type=float, help="learning rate (default 0.01)")
    search.add_argument("--weight-decay", type=float, help="weight decay (default 5e-4)")
    search.add_argument("--pruner", default="none", choices=("none", "halving", "hyperband"),
                        help="multi-fidelity: stop unpromising trials early by their validation accuracy per "
                             "epoch (successive halving or Hyperband over epochs; default none)")
    search.add_argument("--min-epochs", type=int, default=10,
                        help="the pruner's first rung: judge trials after this many epochs (default 10)")
    search.add_argument("--space", help="JSON/YAML file narrowing the design space (keys of DesignSpace)")
    search.add_argument("--variants", help="deployment variants the search may pick: comma-separated of plain, "
                                           "int8, pruned, distilled (e.g. with --objectives accuracy,latency,"
                                           "model_bytes); default plain")
    search.add_argument("--device", help="cpu, cuda, cuda:N")
    search.add_argument("--threads", type=int, help="torch intra-op threads (1 is fastest on small graphs)")
    search.add_argument("--out", help="folder for front.csv/json, trials.csv and pareto.png (default "
                                      "search-<study name> beside the --storage file, else in the current folder)")
    search.add_argument("--no-progress", action="store_true")
    search.set_defaults(handler=cmd_search)
    actions = search.add_subparsers(dest="search_command")
    show = actions.add_parser("show", help="print the Pareto front of a stored study")
    show.add_argument("study_file", help="study file or storage URL")
    show.add_argument("--study", dest="show_study", help="study name (needed when the storage holds several)")
    show.add_argument("--all", action="store_true", help="list every completed trial, not only the front")
    show.add_argument("--out", dest="show_out", help="also write front/trials CSV/JSON and the plot here")
    show.set_defaults(handler=cmd_show)
    export = actions.add_parser("export", help="print a trial as a `sgl train --config` YAML file")
    export.add_argument("study_file", help="study file or storage URL")
    export.add_argument("--trial", type=int, required=True, help="trial number (see `sgl search show`)")
    export.add_argument("--study", dest="show_study")
    export.add_argument("--seeds", type=int, default=5, help="seeds in the exported run config (default 5)")
    export.set_defaults(handler=cmd_export)


def _written(paths: dict) -> str:
    folder = next(iter(paths.values())).parent.resolve()
    return f"wrote {', '.join(p.name for p in paths.values())} to {folder}"


def cmd_search(args: argparse.Namespace) -> int:
    check_input_folder(args.root, "--root")
    check_storage(args.storage, "--storage")
    study_name = args.study_name or f"sgl-{args.dataset}"   # run_search's default name
    out = check_output_path(search_results_folder(args.out, args.storage, study_name), "dir", "--out")
    import sgl.datasets
    from sgl.cli.options import key_values, read_config
    from sgl.search import DesignSpace, SearchConfig, run_search, search_train_config
    from sgl.search.report import format_front, write_results

    config = SearchConfig(objectives=args.objectives, trials=args.trials, timeout=args.timeout,
                          optimizer=args.optimizer, seed=args.seed, storage=args.storage,
                          study_name=args.study_name, n_jobs=args.n_jobs,
                          train=search_train_config(**{key: getattr(args, key) for key in _TRAIN_FLAGS
                                                       if getattr(args, key) is not None}),
                          progress=not args.no_progress, threads=args.threads, pruner=args.pruner,
                          min_epochs=args.min_epochs)
    from sgl.search.hetero import search_parts, space_from_dict

    space = space_from_dict(read_config(args.space)) if args.space else DesignSpace()
    if args.variants:
        variants = [v.strip() for v in args.variants.split(",") if v.strip()]
        space = DesignSpace.from_dict({**space.to_dict(), "variants": variants})
    options = key_values(args.dataset_option, "--dataset-option")
    graph = sgl.datasets.load(args.dataset, root=args.root, **options)
    print(f"dataset: {args.dataset} ({graph.num_nodes:,} nodes, {graph.num_edges:,} edges)")
    space = search_parts(graph, space)[0]          # a heterogeneous graph searches the heterogeneous space
    print(f"space: {space!r}; objectives: {config.objectives}; optimizer: {config.optimizer}")
    result = run_search(graph, space, config, dataset=args.dataset, root=args.root, dataset_options=options)
    cache = result.cache
    print(f"completed trials: {len(result.trials)}"
          + (f"; pruned: {len(result.pruned)}" if args.pruner != "none" else "")
          + f"; Pareto front: {len(result.front)} designs"
          + (f"; hops computed {cache.propagations}x, reused {cache.hits}x" if cache else ""))
    print(format_front(result))
    if result.study.study_name != study_name:
        out = search_results_folder(args.out, args.storage, result.study.study_name)
    print(_written(write_results(result, out)))
    if args.storage:
        print(f"study: {args.storage} (resume with the same command; `sgl search show {args.storage}`)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from sgl.search import load_result
    from sgl.search.report import format_front, write_results

    if args.show_out:
        check_output_path(args.show_out, "dir", "--out")
    result = load_result(check_storage(args.study_file, "STUDY_FILE", must_exist=True), args.show_study)
    print(f"study {result.study.study_name}: {len(result.trials)} completed trials, "
          + (f"{len(result.pruned)} pruned, " if result.pruned else "")
          + f"{len(result.front)} on the Pareto front ({', '.join(o.name for o in result.objectives)})")
    print(format_front(result, all_trials=args.all))
    if args.show_out:
        print(_written(write_results(result, args.show_out)))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from sgl.search import export_config, open_study
    from sgl.search.study import dumps_config

    study = open_study(check_storage(args.study_file, "STUDY_FILE", must_exist=True), args.show_study)
    sys.stdout.write(dumps_config(export_config(study, args.trial, seeds=args.seeds)))
    return 0
