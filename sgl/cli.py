"""The ``sgl`` command line.

    sgl train --model sgc --dataset cora --root ~/data/planetoid --seeds 10
    sgl train --config run.json                 # reproduce a run (a config or a result record)
    sgl datasets list
    sgl models

Every command that reads a dataset takes ``--root DIR``; results are printed on lines that
start with the metric's name (``test accuracy: 81.0 ± 0.3 (10 seeds)``). Errors from bad
input are printed as one ``error:`` line with exit status 2, never as a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any, Dict, List, Optional

from sgl.errors import ConfigError, SGLError
from sgl.options import key_values as _key_values
from sgl.options import read_config as _read_config

__all__ = ["main", "build_parser"]

# Subcommands that live with their subpackage: each module defines
# ``register(subparsers)``, adding its parser(s) with ``set_defaults(handler=fn)``
# where ``fn(args) -> int``.
_COMMAND_MODULES = ("sgl.search.cli", "sgl.samplers.cli", "sgl.systems.cli")

# ``sgl train --task NAME``: "node" (node classification) is built in; every other task
# lives in its module, which defines ``add_train_arguments(group)`` (flags only that
# task reads) and ``cli_train(args) -> int``.
_TASK_MODULES = {
    "link": "sgl.tasks.link_prediction",
    "cluster": "sgl.tasks.clustering",
    "graph": "sgl.tasks.graph_classification",
    "ctr": "sgl.tasks.ctr",
}


def _optional_module(name: str):
    """Import a plug-in module; None when that subpackage is not part of this build."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    from sgl import __version__

    parser = argparse.ArgumentParser(prog="sgl", description="SGL — Scalable Graph Learning")
    parser.add_argument("--version", action="version", version=f"sgl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a model on a dataset and report accuracy over seeds")
    train.add_argument("--config", help="JSON/YAML run config (or a result record from --out) to reproduce")
    train.add_argument("--model", help="model name (see `sgl models`); default sgc")
    train.add_argument("--dataset", help="dataset name (see `sgl datasets list`); default karate")
    train.add_argument("--root", help="folder holding the dataset's files (downloaded there when absent)")
    train.add_argument("--seeds", type=int, help="number of seeds 0..N-1 (default 10)")
    train.add_argument("--k", type=int, help="propagation hops")
    train.add_argument("--hidden", type=int, help="hidden width of the base model")
    train.add_argument("--dropout", type=float, help="dropout of the base model")
    train.add_argument("--lr", type=float)
    train.add_argument("--weight-decay", type=float)
    train.add_argument("--epochs", type=int)
    train.add_argument("--batch-size", type=int)
    train.add_argument("--patience", type=int)
    train.add_argument("--device", help="cpu, cuda, cuda:N (default: $SGL_DEVICE or auto)")
    train.add_argument("--model-option", action="append", metavar="KEY=VALUE", help="model config field")
    train.add_argument("--dataset-option", action="append", metavar="KEY=VALUE", help="dataset loader option")
    train.add_argument("--rlu-stages", help="GAMLP RLU: comma-separated epochs per stage, e.g. 200,100,100")
    train.add_argument("--rlu-threshold", type=float, help="RLU confidence threshold (default 0.85)")
    train.add_argument("--rlu-gamma", type=float, help="RLU distillation weight (default 0.1)")
    train.add_argument("--rlu-temperature", type=float, help="RLU softmax temperature (default 1)")
    train.add_argument("--cache-dir", help="cache propagated features here (keyed by graph, features, operator)")
    train.add_argument("--out", help="write the result record (config, per-seed metrics, timings) as JSON")
    train.add_argument("--no-progress", action="store_true", help="hide progress bars")
    train.add_argument("--structure", help="learn the graph structure before training: rwgsl or knn "
                                           "(graph structure learning, see docs/gsl_ssl.md)")
    train.add_argument("--structure-option", action="append", metavar="KEY=VALUE",
                       help="structure learner option, e.g. high=1.5 or exponents=[1,1,4]")
    train.add_argument("--structure-pseudo", metavar="MODEL",
                       help="rwgsl: pseudo-labels from an ensemble of this zoo model (e.g. gamlp) trained on the "
                            "training labels, instead of the built-in logistic regression")
    train.add_argument("--structure-pseudo-seeds", type=int, metavar="N",
                       help="models in the --structure-pseudo ensemble (default 5)")
    train.add_argument("--threads", type=int, help="torch intra-op threads (1 is fastest for small graphs on a "
                                                   "busy machine; default: torch's choice)")
    train.add_argument("--sampler", help="mini-batch training of sage/gcn on sampled subgraphs: neighbor, "
                                         "saint-node, saint-edge, saint-rw, cluster; out of core from "
                                         "--dataset store:DIR: lru, ginex, outre (see docs/samplers.md)")
    train.add_argument("--fanouts", help="neighbours per hop, hop next to the seeds first (default 15,10)")
    train.add_argument("--memory-budget", help="byte budget for all caches of out-of-core training, e.g. 512MB")
    tasks = {"node": None, **{k: _optional_module(v) for k, v in _TASK_MODULES.items()}}
    tasks = {k: v for k, v in tasks.items() if k == "node" or v is not None}
    train.add_argument("--task", default="node", choices=sorted(tasks),
                       help="node (node classification, default)" + "".join(
                           f", {k}" for k in sorted(tasks) if k != "node"))
    for name, module in sorted(tasks.items()):
        if module is not None and hasattr(module, "add_train_arguments"):
            module.add_train_arguments(train.add_argument_group(f"--task {name}"))
    train.set_defaults(handler=cmd_train)

    datasets = sub.add_parser("datasets", help="dataset registry")
    datasets_sub = datasets.add_subparsers(dest="datasets_command", required=True)
    datasets_sub.add_parser("list", help="list registered datasets")
    datasets.set_defaults(handler=cmd_datasets)

    sub.add_parser("models", help="list available models").set_defaults(handler=cmd_models)
    for name in _COMMAND_MODULES:
        module = _optional_module(name)
        if module is not None:
            module.register(sub)
    return parser


def _train_config(args: argparse.Namespace) -> Dict[str, Any]:
    config: Dict[str, Any] = {"model": "sgc", "dataset": "karate", "root": None, "seeds": 10,
                              "model_config": {}, "dataset_options": {}, "train": {}, "rlu": None,
                              "structure": None, "structure_options": {}, "structure_pseudo": None,
                              "structure_pseudo_seeds": 5}
    if args.config:
        loaded = _read_config(args.config)
        unknown = set(loaded) - set(config)
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)} in {args.config}; valid: {sorted(config)}")
        config.update(loaded)
    for key in ("model", "dataset", "root", "seeds"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    if isinstance(config["seeds"], int):
        if config["seeds"] < 1:
            raise ConfigError(f"--seeds must be at least 1, got {config['seeds']}")
        config["seeds"] = list(range(config["seeds"]))
    config["model_config"] = {**config["model_config"], **_key_values(args.model_option, "--model-option")}
    for key in ("k", "hidden", "dropout"):
        if getattr(args, key) is not None:
            config["model_config"][key] = getattr(args, key)
    config["dataset_options"] = {**config["dataset_options"], **_key_values(args.dataset_option, "--dataset-option")}
    train = dict(config["train"])
    for key in ("lr", "weight_decay", "epochs", "batch_size", "patience", "device"):
        if getattr(args, key) is not None:
            train[key] = getattr(args, key)
    config["train"] = train
    rlu = dict(config["rlu"] or {})
    if args.rlu_stages:
        try:
            rlu["stages"] = [int(e) for e in args.rlu_stages.split(",")]
        except ValueError as exc:
            raise ConfigError(f"--rlu-stages expects comma-separated integers, got {args.rlu_stages!r}") from exc
    for key in ("threshold", "gamma", "temperature"):
        if getattr(args, f"rlu_{key}") is not None:
            rlu[key] = getattr(args, f"rlu_{key}")
    config["rlu"] = rlu or None
    if args.structure:
        config["structure"] = args.structure
    config["structure_options"] = {**(config["structure_options"] or {}),
                                   **_key_values(args.structure_option, "--structure-option")}
    if config["structure_options"] and not config["structure"]:
        raise ConfigError("--structure-option needs --structure rwgsl|knn")
    if args.structure_pseudo is not None:
        config["structure_pseudo"] = args.structure_pseudo
    if args.structure_pseudo_seeds is not None:
        config["structure_pseudo_seeds"] = args.structure_pseudo_seeds
    if config["structure_pseudo"] and str(config["structure"]).lower() != "rwgsl":
        raise ConfigError("--structure-pseudo sets RWGSL's pseudo-labels: it needs --structure rwgsl")
    if not isinstance(config["structure_pseudo_seeds"], int) or config["structure_pseudo_seeds"] < 1:
        raise ConfigError(f"--structure-pseudo-seeds must be a positive integer, got {config['structure_pseudo_seeds']!r}")
    return config


def _fmt(stat: Dict[str, float], seeds: int) -> str:
    return f"{100 * stat['mean']:.1f} ± {100 * stat['std']:.1f} ({seeds} seed{'s' if seeds != 1 else ''})"


def cmd_train(args: argparse.Namespace) -> int:
    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be a positive integer, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    import sgl.datasets
    from sgl.fileio import atomic_write
    from sgl.models import build_model, default_train_config, model_config
    from sgl.tasks import TrainConfig, run_node_classification

    if args.task != "node":
        return importlib.import_module(_TASK_MODULES[args.task]).cli_train(args)
    config = _train_config(args)
    if getattr(args, "sampler", None):
        from sgl.tasks.minibatch import cli_train_minibatch

        return cli_train_minibatch(args, config)
    model_cfg = model_config(config["model"], **config["model_config"])
    try:
        train_cfg = TrainConfig(**{**default_train_config(config["model"]), **config["train"],
                                   "progress": not args.no_progress})
    except TypeError as exc:
        raise ConfigError(f"bad training option: {exc}") from exc
    task = sgl.datasets.dataset_task(config["dataset"]) or "node"
    if str(config["dataset"]).lower().startswith("tu:"):
        task = "graph"
    if task != "node":
        kind = {"graph": "graph-classification", "ctr": "CTR (click-through-rate)"}.get(task, task)
        raise ConfigError(f"dataset {config['dataset']!r} is a {kind} dataset; `sgl train` runs node "
                          f"classification unless you pass --task {task}")
    graph = sgl.datasets.load(config["dataset"], root=config["root"], **config["dataset_options"])
    print(f"dataset: {config['dataset']} ({graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
          f"{graph.num_features} features, {graph.num_classes} classes, split {'/'.join(map(str, graph.split_sizes()))})")
    if config["structure"]:
        from sgl.models.rwgsl import structure_learner

        learner = structure_learner(config["structure"], progress=not args.no_progress, **config["structure_options"])
        before = graph.num_edges
        pseudo, how = None, ""
        if config["structure_pseudo"]:
            from sgl.tasks.pseudo_labels import model_pseudo_labels

            pseudo = model_pseudo_labels(graph, config["structure_pseudo"], config["structure_pseudo_seeds"],
                                         device=config["train"].get("device"))
            how = f" with {config['structure_pseudo']} x{config['structure_pseudo_seeds']} pseudo-labels"
        graph = learner.learn(graph, pseudo_labels=pseudo)
        print(f"structure: {config['structure']} {config['structure_options'] or ''}{how} -> {graph.num_edges:,} edges "
              f"(was {before:,})")

    def factory():
        return build_model(config["model"], graph.num_features, graph.num_classes, model_cfg)

    print(f"model: {factory()!r}")
    rlu_cfg = None
    if config["rlu"]:
        from sgl.tasks.rlu import RLUConfig

        try:
            rlu_cfg = RLUConfig(**config["rlu"])
        except TypeError as exc:
            raise ConfigError(f"bad RLU option: {exc}") from exc
    record = run_node_classification(factory, graph, config["seeds"], train_cfg, cache_dir=args.cache_dir,
                                     rlu_config=rlu_cfg)
    n = len(config["seeds"])
    record_config = {**config, "model_config": model_cfg.to_dict(), "train": {**train_cfg.to_dict()}}
    record_config["train"].pop("progress", None)
    record = {"config": record_config, **record}
    print(f"test accuracy: {_fmt(record['test_acc'], n)}")
    print(f"validation accuracy: {_fmt(record['val_acc'], n)}")
    print(f"test macro-F1: {_fmt(record['test_macro_f1'], n)}")
    if "ogb_test_acc" in record:
        print(f"ogb test accuracy: {_fmt(record['ogb_test_acc'], n)}")
    print(f"time: precompute {record['precompute_time_s']:.2f} s, training {record['train_time_s']:.2f} s "
          f"({n} seeds), peak memory {record['peak_rss_mb']:.0f} MB")
    if args.out:
        with atomic_write(args.out, "w") as handle:
            json.dump(record, handle, indent=2)
        print(f"record: {args.out}")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    import sgl.datasets

    rows = sgl.datasets.list_datasets()
    width = max(len(name) for name, _, _ in rows)
    for name, description, task in rows:
        print(f"{name:<{width}}  {task:<6}  {description}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from sgl.models import CTR_MODELS, MODELS

    print("graph models (sgl train --model NAME):")
    for name, (_, _, description) in sorted(MODELS.items()):
        print(f"  {name:<9} {description}")
    print("CTR models (sgl train --task ctr --model NAME):")
    for name, entry in sorted(CTR_MODELS.items()):
        print(f"  {name:<9} {entry[-1]}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except SGLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
