"""Multi-objective optimizer vs random search at equal trial budget (PaSca search engine).

For each seed, run the same number of trials with the optimizer (multi-objective TPE by
default) and with random search over the same design space, then compare the
hypervolume of (validation accuracy, inference latency) — one reference point for all
runs: accuracy 0 and 1.1x the largest latency any run measured.

    python benchmarks/bench_search.py --root ../shared/datasets/planetoid --trials 40 --seeds 3

Prints one row per seed and the mean hypervolumes with their ratio.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import sgl
from sgl.search import DesignSpace, HopCache, SearchConfig, run_search, search_train_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--root", default=None)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--optimizer", default="tpe", help="tpe or nsga2 (compared against random)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--patience", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    graph = sgl.datasets.load(args.dataset, root=args.root)
    space = DesignSpace()
    cache = HopCache(graph)  # shared: both optimizers pay the same (cached) precompute
    print(f"dataset {args.dataset}: {graph.num_nodes:,} nodes; space {space!r}; {args.trials} trials per run, "
          f"{args.seeds} seeds, objectives (validation accuracy, latency)")
    runs = {}
    for seed in range(args.seeds):
        for optimizer in (args.optimizer, "random"):
            config = SearchConfig(objectives="accuracy,latency", trials=args.trials, optimizer=optimizer, seed=seed,
                                  train=search_train_config(epochs=args.epochs, patience=args.patience),
                                  progress=True, threads=args.threads)
            start = time.perf_counter()
            result = run_search(graph, space, config, dataset=args.dataset, cache=cache)
            runs[optimizer, seed] = (result, time.perf_counter() - start)
    reference = (0.0, 1.1 * max(t["metrics"]["latency"] for result, _ in runs.values() for t in result.trials))
    print(f"\nreference point: accuracy 0, latency {reference[1]:.4f} s")
    print(f"{'seed':>4}  {'HV ' + args.optimizer:>10}  {'HV random':>10}  {'ratio':>6}  "
          f"{'best acc ' + args.optimizer:>14}  {'best acc random':>15}  {'time (s)':>14}")
    hv = {args.optimizer: [], "random": []}
    for seed in range(args.seeds):
        row = []
        for optimizer in (args.optimizer, "random"):
            result, _ = runs[optimizer, seed]
            hv[optimizer].append(result.hypervolume(reference))
            row.append(max(t["metrics"]["accuracy"] for t in result.trials))
        times = f"{runs[args.optimizer, seed][1]:.0f}/{runs['random', seed][1]:.0f}"
        print(f"{seed:>4}  {hv[args.optimizer][-1]:>10.4f}  {hv['random'][-1]:>10.4f}  "
              f"{hv[args.optimizer][-1] / hv['random'][-1]:>6.3f}  {row[0]:>14.4f}  {row[1]:>15.4f}  {times:>14}")
    mean_opt, mean_rand = statistics.fmean(hv[args.optimizer]), statistics.fmean(hv["random"])
    print(f"mean  {mean_opt:>10.4f}  {mean_rand:>10.4f}  {mean_opt / mean_rand:>6.3f}")
    print(f"\nhypervolume ratio {args.optimizer}/random = {mean_opt / mean_rand:.3f} "
          f"({'optimizer wins' if mean_opt > mean_rand else 'random wins'}) over {args.seeds} seeds")


if __name__ == "__main__":
    main()
