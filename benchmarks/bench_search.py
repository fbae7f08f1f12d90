"""Search optimizers vs random search: at equal trial budget and at equal wall-clock time.

For each seed, every optimizer (multi-objective TPE by default) and random search search the
same design space; the hypervolume of (validation accuracy, inference latency) of their
completed trials is compared with one reference point for all runs: accuracy 0 and 1.1x
the largest latency any run measured. An optimizer spec is ``NAME`` or ``NAME+PRUNER``
(``tpe+halving``, ``gp+hyperband``, ``random+halving``): the pruner is the multi-fidelity
path of ``SearchConfig(pruner=...)`` (successive halving / Hyperband over epochs).

Equal trials (issue 27: trials each optimizer needs to reach random's mean final
hypervolume; <= half of random's trials is 2x sample efficiency; pruned trials count as trials)::

    python benchmarks/bench_search.py --root ../shared/datasets/planetoid --trials 60 --seeds 3 --optimizer tpe,gp

Equal wall-clock time (every run gets ``--budget-s`` seconds and its own hop cache, so it
pays the precompute its designs need; hypervolume of the trials completed by 25/50/100%
of the budget)::

    python benchmarks/bench_search.py --root ../shared/datasets/planetoid --budget-s 300 --seeds 3 \\
        --optimizer tpe,gp,tpe+halving,tpe+hyperband

The larger graph of the issue is a CSBM with 100k nodes: ``--dataset csbm --nodes 100000``.
Timings depend on the machine's load: rerun on a quiet machine for figures.
"""
from __future__ import annotations

import argparse
import statistics
import time
from datetime import datetime
from typing import Dict, List, Sequence, Tuple

import torch

import sgl
from sgl.search import DesignSpace, HopCache, SearchConfig, run_search, search_train_config
from sgl.search.objectives import hypervolume_2d

FRACTIONS = (0.25, 0.5, 1.0)


def parse_spec(spec: str) -> Tuple[str, str]:
    """``"tpe+halving"`` -> ``("tpe", "halving")``; ``"gp"`` -> ``("gp", "none")``."""
    name, _, pruner = spec.partition("+")
    return name, pruner or "none"


def _points(result) -> List[Tuple[int, float, float]]:
    """(trial number, accuracy, latency) of the completed trials, in trial order."""
    return sorted((t["number"], t["metrics"]["accuracy"], t["metrics"]["latency"]) for t in result.trials)


def trials_to_reach(result, target: float, reference) -> int:
    """Trials (completed or pruned, i.e. trial number + 1) until the hypervolume reaches ``target``; 0: never."""
    points = _points(result)
    for n in range(1, len(points) + 1):
        if hypervolume_2d([p[1:] for p in points[:n]], ("maximize", "minimize"), reference) >= target:
            return points[n - 1][0] + 1
    return 0


def hypervolume_by(result, started: datetime, seconds: float, reference) -> float:
    """Hypervolume of the trials completed within ``seconds`` of the run's start."""
    done = {t.number: t.datetime_complete for t in result.study.get_trials(deepcopy=False)}
    points = [p[1:] for p in _points(result) if (done[p[0]] - started).total_seconds() <= seconds]
    return hypervolume_2d(points, ("maximize", "minimize"), reference) if points else 0.0


def load_graph(args):
    if args.dataset == "csbm":
        return sgl.datasets.load("synthetic", num_nodes=args.nodes, num_classes=args.classes,
                                 num_features=args.features, feature_signal=args.feature_signal,
                                 homophily=args.homophily, seed=0)
    return sgl.datasets.load(args.dataset, root=args.root)


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora", help="a registry name, or csbm (see --nodes)")
    parser.add_argument("--root", default=None)
    parser.add_argument("--nodes", type=int, default=100_000, help="CSBM nodes (--dataset csbm)")
    parser.add_argument("--classes", type=int, default=5, help="CSBM classes (--dataset csbm)")
    parser.add_argument("--features", type=int, default=128, help="CSBM feature dimension (--dataset csbm)")
    parser.add_argument("--feature-signal", type=float, default=0.08,
                        help="CSBM class-mean scale (--dataset csbm): weak features, so propagation matters "
                             "(the generator's default 1.0 makes every design ~100%% accurate)")
    parser.add_argument("--homophily", type=float, default=0.8, help="CSBM edge homophily (--dataset csbm)")
    parser.add_argument("--trials", type=int, default=40, help="trials per run (equal-trials mode)")
    parser.add_argument("--budget-s", type=float, help="equal wall-clock mode: seconds per run")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--optimizer", default="tpe",
                        help="specs NAME[+PRUNER], comma-separated: tpe,gp,nsga2,tpe+halving (each vs random)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--patience", type=int, default=30)
    parser.add_argument("--min-epochs", type=int, default=5, help="the pruners' first rung (epochs)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    graph = load_graph(args)
    space = DesignSpace()
    specs = [s for s in args.optimizer.split(",") if s and s != "random"]
    shared = HopCache(graph)  # equal trials: all optimizers pay the same (cached) precompute
    mode = f"{args.budget_s:g} s per run" if args.budget_s else f"{args.trials} trials per run"
    print(f"dataset {args.dataset}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges; space {space!r}; "
          f"{mode}, {args.seeds} seeds, objectives (validation accuracy, latency)")
    # warm-up, not recorded: JIT-compiled kernels and lazy imports must not land on the first timed run
    run_search(graph, DesignSpace(k=(1, 2), num_layers=(1, 1)), SearchConfig(
        trials=2, optimizer="random", progress=False, threads=args.threads,
        train=search_train_config(epochs=2, patience=None)), cache=HopCache(graph))
    runs: Dict[Tuple[str, int], tuple] = {}
    for seed in range(args.seeds):
        for spec in specs + ["random"]:
            name, pruner = parse_spec(spec)
            config = SearchConfig(objectives="accuracy,latency", optimizer=name, seed=seed, progress=True,
                                  trials=100_000 if args.budget_s else args.trials, timeout=args.budget_s,
                                  train=search_train_config(epochs=args.epochs, patience=args.patience),
                                  threads=args.threads, pruner=pruner, min_epochs=args.min_epochs)
            started, start = datetime.now(), time.perf_counter()
            result = run_search(graph, space, config, dataset=args.dataset,
                                cache=HopCache(graph) if args.budget_s else shared)
            runs[spec, seed] = (result, time.perf_counter() - start, started)
            if args.budget_s:
                result.cache = None  # this run's own hops: free them before the next run builds its own
            print(f"  {spec} seed {seed}: {len(result.trials)} completed + {len(result.pruned)} pruned trials in "
                  f"{runs[spec, seed][1]:.0f} s", flush=True)
    reference = (0.0, 1.1 * max(t["metrics"]["latency"] for result, _, _ in runs.values() for t in result.trials))
    print(f"\nreference point: accuracy 0, latency {reference[1]:.4f} s")
    if args.budget_s:
        equal_time(specs, runs, reference, args)
        return
    for spec in specs:
        compare(spec, runs, reference, args)
    target = statistics.fmean(runs["random", seed][0].hypervolume(reference) for seed in range(args.seeds))
    print(f"\ntrials to reach random's mean {args.trials}-trial hypervolume {target:.4f} (0 = not reached)")
    for spec in specs:
        needed = [trials_to_reach(runs[spec, seed][0], target, reference) for seed in range(args.seeds)]
        reached = [n for n in needed if n]
        mean = statistics.fmean(reached) if len(reached) == len(needed) else float("nan")
        print(f"  {spec:<14} per seed {needed}, mean {mean:.1f}: "
              f"{'MET' if mean <= args.trials / 2 else 'not met'} (target <= {args.trials // 2})")


def equal_time(specs: List[str], runs, reference, args) -> None:
    """Hypervolume reached by 25/50/100% of the budget, mean over seeds, and its ratio to random's."""
    heads = "  ".join(f"{'HV@' + format(f * args.budget_s, 'g') + 's':>10}" for f in FRACTIONS)
    print(f"\n{'optimizer':<18}  {'trials':>7}  {'pruned':>7}  {heads}  {'vs random':>9}")
    rows = {}
    for spec in ["random"] + specs:
        per_seed = [runs[spec, seed] for seed in range(args.seeds)]
        hv = [statistics.fmean(hypervolume_by(r, started, f * args.budget_s, reference) for r, _, started in per_seed)
              for f in FRACTIONS]
        finished = statistics.fmean(len(r.trials) + len(r.pruned) for r, _, _ in per_seed)
        pruned = statistics.fmean(len(r.pruned) for r, _, _ in per_seed)
        ratio = hv[-1] / rows["random"][2][-1] if spec != "random" and rows["random"][2][-1] else 1.0
        rows[spec] = (finished, pruned, hv, ratio)
        cells = "  ".join(f"{v:>10.4f}" for v in hv)
        print(f"{spec:<18}  {finished:>7.1f}  {pruned:>7.1f}  {cells}  {ratio:>9.3f}")
    print("\nhypervolume at equal wall-clock time, ratio to random: "
          + ", ".join(f"{spec} {rows[spec][3]:.3f}" for spec in specs)
          + " (timings under load: rerun on a quiet machine)")


def compare(spec: str, runs, reference, args) -> None:
    print(f"\n{'seed':>4}  {'HV ' + spec:>10}  {'HV random':>10}  {'ratio':>6}  "
          f"{'best acc ' + spec:>14}  {'best acc random':>15}  {'time (s)':>14}")
    hv = {spec: [], "random": []}
    for seed in range(args.seeds):
        row = []
        for name in (spec, "random"):
            result = runs[name, seed][0]
            hv[name].append(result.hypervolume(reference))
            row.append(max(t["metrics"]["accuracy"] for t in result.trials))
        times = f"{runs[spec, seed][1]:.0f}/{runs['random', seed][1]:.0f}"
        print(f"{seed:>4}  {hv[spec][-1]:>10.4f}  {hv['random'][-1]:>10.4f}  "
              f"{hv[spec][-1] / hv['random'][-1]:>6.3f}  {row[0]:>14.4f}  {row[1]:>15.4f}  {times:>14}")
    mean_opt, mean_rand = statistics.fmean(hv[spec]), statistics.fmean(hv["random"])
    print(f"mean  {mean_opt:>10.4f}  {mean_rand:>10.4f}  {mean_opt / mean_rand:>6.3f}")
    print(f"\nhypervolume ratio {spec}/random = {mean_opt / mean_rand:.3f} "
          f"({'optimizer wins' if mean_opt > mean_rand else 'random wins'}) over {args.seeds} seeds")


if __name__ == "__main__":
    main()
