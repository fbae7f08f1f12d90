"""Shared driver of the GAMLP OGB leaderboard scripts (``gamlp_products.py``, ``gamlp_arxiv.py``,
``gamlp_papers100m.py``).

Each script is a preset — a YAML run config next to it, in the format ``sgl train --config``
reads — plus the paper's numbers. This module turns a preset and the command line into one
run: load the dataset through :func:`sgl.datasets.load`, precompute the propagated features
once, train GAMLP on every seed (with or without RLU), print the summary and write the record.

How the official flags (PKU-DAIR/GAMLP ``main.py``, README commands) map onto SGL is
tabulated in ``examples/ogb/README.md``; the short version:

* model flags become :class:`sgl.models.GAMLPConfig` fields (``--num-hops`` -> ``k``,
  ``--n-layers-2`` -> ``num_layers``, ``--n-layers-3`` -> ``label_layers``, ``--bns`` ->
  ``batch_norm`` ...), optimisation flags :class:`sgl.tasks.TrainConfig` fields, and RLU
  flags :class:`sgl.tasks.rlu.RLUConfig` fields;
* ``--alpha`` (the initial-residual weight of the official output MLP) and ``--eval-every``
  have no equivalent: SGL's output MLP is a plain Linear/PReLU stack and its trainer
  evaluates after every epoch.

Why this driver instead of :func:`sgl.tasks.run_node_classification` (which the YAML path
uses): it runs the *same* stages with the same :class:`~sgl.tasks.Trainer` and
:class:`~sgl.tasks.node_classification.Distillation` — on products and arxiv the results are
identical, which ``tests/examples`` checks — but

1. it propagates the features once per run, while ``sgl.tasks.rlu.train_rlu`` repeats the
   whole precompute at every stage of every seed (40 propagations for products' 10 x 4);
   only the label input changes between stages, so only it is recomputed here;
2. it keeps only the last label hop (``propagate_labels`` holds all ``label_hops + 1``
   ``[n, C]`` matrices: ~760 GB on papers100M);
3. on graphs with unlabelled nodes (papers100M) it trains and predicts on the labelled rows
   only, as the official code does, so RLU's confident set is drawn from validation and test
   nodes (the official rule) rather than from all ~110M non-training nodes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

import sgl
from sgl.data import Graph
from sgl.device import get_device
from sgl.errors import ConfigError
from sgl.fileio import atomic_write
from sgl.models import GAMLP, GAMLPConfig, NodeFeatures, model_config
from sgl.models.gamlp import propagate_labels, train_label_matrix
from sgl.tasks import Distillation, RLUConfig, TrainConfig, Trainer, summarize
from sgl.tasks.node_classification import peak_rss_mb

__all__ = ["PaperResult", "load_run_config", "build_parser", "run_gamlp", "run_script", "labelled_rows"]

#: The keys of an ``sgl train --config`` file (sgl/cli.py ``_train_config``).
RUN_CONFIG_KEYS = ("model", "dataset", "root", "seeds", "model_config", "dataset_options", "train", "rlu")


@dataclass(frozen=True)
class PaperResult:
    """Accuracy in percent reported by the GAMLP paper: (mean, std) over seeds."""

    val: Tuple[float, float]
    test: Tuple[float, float]
    source: str

    def describe(self) -> str:
        return f"val {self.val[0]:.2f} ± {self.val[1]:.2f}, test {self.test[0]:.2f} ± {self.test[1]:.2f}"


def load_run_config(path: Path) -> Dict[str, Any]:
    """Read a YAML run config (the ``sgl train --config`` format) and check its keys."""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping, got {type(data).__name__}")
    unknown = set(data) - set(RUN_CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"unknown key(s) {sorted(unknown)} in {path}; valid: {list(RUN_CONFIG_KEYS)}")
    if str(data.get("model", "")).lower() != "gamlp":
        raise ConfigError(f"{path} configures model {data.get('model')!r}; these scripts run GAMLP")
    return data


def build_parser(description: str, default_seeds: int) -> argparse.ArgumentParser:
    """The options every GAMLP OGB script shares."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help="folder holding the dataset folder (e.g. ogbn_products/) or the dataset "
                                       "folder itself; default $SGL_DATA or ~/.sgl/datasets")
    parser.add_argument("--seeds", type=int, default=default_seeds,
                        help=f"run seeds 0..N-1 (OGB rule; default {default_seeds})")
    parser.add_argument("--device", help="cpu, cuda, cuda:N (default: $SGL_DEVICE or auto)")
    parser.add_argument("--cache-dir", help="store the propagated feature hops here (memory-mapped, reused)")
    parser.add_argument("--no-rlu", action="store_true",
                        help="train the first stage only: the paper's 'GAMLP' row instead of 'GAMLP+RLU'")
    parser.add_argument("--out", help="write the run record (config, per-seed and per-stage metrics) as JSON")
    parser.add_argument("--max-epochs", type=int, help="cap every stage at this many epochs (smoke runs)")
    parser.add_argument("--hidden", type=int, help="override the hidden width (smoke runs)")
    parser.add_argument("--no-download", action="store_true", help="fail instead of downloading missing files")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def labelled_rows(graph: Graph) -> Optional[torch.Tensor]:
    """Ids of the nodes in the train/val/test split, or ``None`` when that is every node."""
    mask = graph.train_mask | graph.val_mask | graph.test_mask
    return None if bool(mask.all()) else mask.nonzero().flatten()


def _rows_graph(graph: Graph, rows: torch.Tensor) -> Graph:
    """An edge-free graph over ``rows`` carrying their labels and split: what the trainer needs
    once the features are propagated (propagation itself always runs on the full graph)."""
    n = rows.numel()
    sub = Graph(torch.zeros(n + 1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), num_nodes=n,
                y=graph.y[rows], train_mask=graph.train_mask[rows], val_mask=graph.val_mask[rows],
                test_mask=graph.test_mask[rows], name=graph.name)
    sub.ogb_name = getattr(graph, "ogb_name", None)
    return sub


def run_gamlp(graph: Graph, config: GAMLPConfig, train_config: TrainConfig, rlu_config: Optional[RLUConfig],
              seeds: Sequence[int], cache_dir: Optional[str] = None) -> Dict[str, Any]:
    """Precompute once, then train GAMLP on every seed — all RLU stages when ``rlu_config`` is set.

    Returns a record shaped like :func:`sgl.tasks.run_node_classification`'s (``runs``,
    metric summaries, times, peak memory), plus ``stage_summary`` (metrics per RLU stage
    over seeds; stage 0 is the paper's "GAMLP" row) and ``label_propagation_time_s``.
    """
    seeds = list(seeds)
    if not seeds:
        raise ConfigError("need at least one seed")
    if rlu_config is not None and config.label_hops < 1:
        raise ConfigError("RLU feeds confident predictions back through the label input; set label_hops >= 1")
    stages = list(rlu_config.stages) if rlu_config is not None else [train_config.epochs]

    start = time.perf_counter()
    # Feature hops only (label_hops=0): the label input is built below, once per stage.
    hops_model = GAMLP(graph.num_features, graph.num_classes, dataclasses.replace(config, label_hops=0))
    feature_hops = list(hops_model.precompute(graph, cache_dir=cache_dir, progress=train_config.progress).data)
    rows = labelled_rows(graph)
    work = graph if rows is None else _rows_graph(graph, rows)
    if rows is not None:
        # Only these rows are ever trained on or predicted (the official code keeps [train; val; test]).
        feature_hops = [hop[rows] for hop in feature_hops]
    precompute_time = time.perf_counter() - start

    label_seconds = 0.0

    def label_rows(seed_matrix: torch.Tensor) -> List[torch.Tensor]:
        nonlocal label_seconds
        if config.label_hops < 1:
            return []
        start = time.perf_counter()
        out = propagate_labels(graph, seed_matrix, config.label_hops)
        label_seconds += time.perf_counter() - start
        return [out if rows is None else out[rows]]

    first_label = label_rows(train_label_matrix(graph))
    device = get_device(train_config.device)
    runs: List[Dict[str, Any]] = []
    for seed in seeds:
        labels, distillation = first_label, None
        history: List[Dict[str, Any]] = []
        for stage, epochs in enumerate(stages):
            trainer = Trainer(dataclasses.replace(train_config, epochs=epochs))
            model = GAMLP(graph.num_features, graph.num_classes, config)  # a fresh model every stage
            features = NodeFeatures(feature_hops + labels)
            result = trainer.fit(model, features, work, seed=seed, distillation=distillation)
            history.append({**result, "stage": stage,
                            "confident_nodes": 0 if distillation is None else int(distillation.index.numel())})
            if stage == len(stages) - 1:
                break
            # RLU: the teacher's softened predictions on confident non-training nodes seed the
            # next stage's label input and its distillation loss (sgl.tasks.rlu, GAMLP eq. 12-15).
            probs = torch.softmax(trainer.predict_all(model, features, work, device) / rlu_config.temperature, dim=1)
            confident = (probs.max(dim=1).values > rlu_config.threshold) & ~work.train_mask
            index = confident.nonzero().flatten()
            seed_matrix = train_label_matrix(graph)
            seed_matrix[index if rows is None else rows[index]] = probs[index]
            labels = label_rows(seed_matrix)
            distillation = Distillation(index, probs[index], rlu_config.gamma) if index.numel() else None
        runs.append({**result, "stages": history} if rlu_config is not None else result)

    def stage_runs(run: Dict[str, Any]) -> List[Dict[str, Any]]:
        return run.get("stages", [run])

    record: Dict[str, Any] = {
        "seeds": seeds,
        "runs": runs,
        "precompute_time_s": precompute_time,
        "label_propagation_time_s": label_seconds,
        "train_time_s": sum(s["train_time_s"] for run in runs for s in stage_runs(run)),
        "peak_rss_mb": peak_rss_mb(),
        "trained_rows": work.num_nodes,
    }
    metrics = ("train_acc", "val_acc", "test_acc", "test_macro_f1") + (
        ("ogb_test_acc",) if "ogb_test_acc" in runs[0] else ())
    for key in metrics:
        record[key] = summarize([run[key] for run in runs])
    record["stage_summary"] = [
        {"stage": stage, "epochs": epochs,
         **{key: summarize([stage_runs(run)[stage][key] for run in runs]) for key in metrics}}
        for stage, epochs in enumerate(stages)]
    return record


def _leaderboard(values: Sequence[float]) -> Dict[str, float]:
    """Mean and *unbiased* std in percent — what the OGB leaderboard asks for (torch.std);
    ``sgl.tasks.summarize`` reports the population std."""
    values = [100 * v for v in values]
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def _fmt(stat: Dict[str, float]) -> str:
    return f"{stat['mean']:.2f} ± {stat['std']:.2f}"


def _apply_overrides(config: Dict[str, Any], args: argparse.Namespace) -> Dict[str, Any]:
    config = json.loads(json.dumps(config))  # deep copy, plain types only
    if args.root is not None:
        config["root"] = args.root
    if args.seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {args.seeds}")
    config["seeds"] = list(range(args.seeds))
    if args.hidden is not None:
        config["model_config"]["hidden"] = args.hidden
    train = config.setdefault("train", {})
    if args.device is not None:
        train["device"] = args.device
    rlu = config.get("rlu")
    if args.no_rlu and rlu:
        # The paper's "GAMLP" row is the first RLU stage alone.
        train["epochs"] = rlu["stages"][0]
        config["rlu"] = rlu = None
    if args.max_epochs is not None:
        if args.max_epochs < 1:
            raise ConfigError(f"--max-epochs must be at least 1, got {args.max_epochs}")
        train["epochs"] = min(train.get("epochs", args.max_epochs), args.max_epochs)
        if rlu:
            rlu["stages"] = [min(e, args.max_epochs) for e in rlu["stages"]]
    return config


def run_script(yaml_path: Path, paper: Dict[str, PaperResult], description: str,
               argv: Optional[List[str]] = None, default_seeds: int = 10,
               print_fn: Callable[[str], None] = print) -> Dict[str, Any]:
    """Parse ``argv``, run the preset in ``yaml_path`` and print/write the result; returns the record.

    ``paper`` maps ``"GAMLP"`` (first stage only) and ``"GAMLP+RLU"`` to the published numbers
    (empty when none are published).
    """
    args = build_parser(description, default_seeds).parse_args(argv)
    config = _apply_overrides(load_run_config(yaml_path), args)
    cfg = model_config("gamlp", **config["model_config"])
    train_cfg = TrainConfig(**{**config.get("train", {}), "progress": not args.no_progress})
    rlu_cfg = RLUConfig(**config["rlu"]) if config.get("rlu") else None

    graph = sgl.datasets.load(config["dataset"], root=config.get("root"), download=not args.no_download,
                              **config.get("dataset_options", {}))
    print_fn(f"dataset: {config['dataset']} ({graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
             f"{graph.num_features} features, {graph.num_classes} classes, "
             f"split {'/'.join(map(str, graph.split_sizes()))})")
    print_fn(f"model: {GAMLP(graph.num_features, graph.num_classes, cfg)!r}")
    record = run_gamlp(graph, cfg, train_cfg, rlu_cfg, config["seeds"], cache_dir=args.cache_dir)

    n = len(config["seeds"])
    row = "GAMLP+RLU" if rlu_cfg is not None else "GAMLP"
    train_dict = train_cfg.to_dict()
    train_dict.pop("progress", None)
    # "config" replays through `sgl train --config record.json` (sgl/cli.py reads record["config"]).
    record = {
        "config": {**{k: config.get(k) for k in RUN_CONFIG_KEYS}, "model_config": cfg.to_dict(),
                   "train": train_dict, "rlu": None if rlu_cfg is None else rlu_cfg.to_dict()},
        "script": {"preset": str(Path(yaml_path).name), "paper_row": row,
                   "paper": {k: dataclasses.asdict(v) for k, v in paper.items()},
                   "no_rlu": bool(args.no_rlu), "max_epochs": args.max_epochs},
        **record,
    }
    test_key = "ogb_test_acc" if "ogb_test_acc" in record["runs"][0] else "test_acc"
    board = {"test": _leaderboard([r[test_key] for r in record["runs"]]),
             "val": _leaderboard([r["val_acc"] for r in record["runs"]]),
             "test_metric": test_key, "std": "unbiased (n-1), as the OGB leaderboard requires"}
    record["leaderboard"] = board
    published = paper.get(row)
    reference = f"; paper {row}: {published.test[0]:.2f} ± {published.test[1]:.2f}" if published else ""
    seeds_text = f"{n} seed{'s' if n != 1 else ''}"
    label = "ogb test accuracy" if test_key == "ogb_test_acc" else "test accuracy"
    print_fn(f"{label}: {_fmt(board['test'])} ({seeds_text}, {row}{reference})")
    val_reference = f"; paper {row}: {published.val[0]:.2f} ± {published.val[1]:.2f}" if published else ""
    print_fn(f"validation accuracy: {_fmt(board['val'])} ({seeds_text}{val_reference})")
    if len(record["stage_summary"]) > 1:
        per_stage = " / ".join(f"{100 * s[test_key]['mean']:.2f}" for s in record["stage_summary"])
        first = paper.get("GAMLP")
        note = f"; stage 0 is the GAMLP row, paper {first.test[0]:.2f}" if first else "; stage 0 is the GAMLP row"
        print_fn(f"stage {label}: {per_stage} (mean over seeds per RLU stage{note})")
    print_fn(f"precompute time: {record['precompute_time_s']:.2f} s (feature hops, once; "
             f"label propagation {record['label_propagation_time_s']:.2f} s in all)")
    stages = len(record["stage_summary"])
    stages_text = f"{stages} stage{'s' if stages != 1 else ''}"
    print_fn(f"training time: {record['train_time_s']:.2f} s ({seeds_text} x {stages_text})")
    print_fn(f"peak memory: {record['peak_rss_mb']:.0f} MB")
    if args.out:
        with atomic_write(args.out, "w") as handle:
            json.dump(record, handle, indent=2)
        print_fn(f"record: {args.out}")
    return record


def run_cli(main: Callable[[], Any]) -> None:
    """Entry point of the scripts: bad input becomes one readable line, as in `sgl train`."""
    import sys

    from sgl.errors import SGLError

    try:
        main()
    except SGLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
