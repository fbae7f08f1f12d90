"""Structure learning at scale: RWGSL against the faiss kNN-graph baseline.

Both methods start from the same seeded CSBM graph (``sgl.datasets.csbm``: ``--degree``
average degree, ``--features`` Gaussian features, 5 classes, the planetoid-style split that
the pseudo-label model trains on). Each (method, size) runs in its own fresh process so
peak memory is not polluted by the other run. Timed: ``learn_structure(learner, graph)`` only (RWGSL:
its pseudo-label model, label propagation, candidate generation, scoring and edits;
kNN: index build and search, symmetrisation). Memory: the process's peak RSS (``VmHWM``)
and the peak increase over the RSS right after the graph was built (reset through
``/proc/self/clear_refs``).

    python benchmarks/bench_gsl.py                          # 100k and 1M nodes
    python benchmarks/bench_gsl.py --nodes 100000 --rounds 3 --threads 2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from procmem import reset_peak, status_kb  # noqa: E402


def worker(method: str, nodes: int, args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(HERE.parent))
    import sgl
    from sgl.models.gsl import RWGSL, KNNGraph, KNNGraphConfig, RWGSLConfig
    from sgl.tasks.structure_learning import learn_structure

    graph = sgl.datasets.csbm(num_nodes=nodes, num_classes=5, avg_degree=args.degree, num_features=args.features,
                              homophily=0.7, seed=0)
    if method == "rwgsl":
        learner = RWGSL(RWGSLConfig(rounds=args.rounds, walk_length=args.walk_length,
                                    num_samples=tuple(args.num_samples), high=1.3, low=0.6,
                                    scheme=args.scheme), seed=0)
    else:
        import faiss  # noqa: F401  (import cost outside the timed region)

        learner = KNNGraph(KNNGraphConfig(k=args.k))
    rss_loaded = status_kb("VmRSS")
    reset_peak()
    start = time.perf_counter()
    out = learn_structure(learner, graph)
    elapsed = time.perf_counter() - start
    peak = status_kb("VmHWM")
    return {"method": method, "nodes": nodes, "edges_in": graph.num_edges, "edges_out": out.num_edges,
            "time_s": elapsed, "peak_rss_mb": peak / 1024, "peak_extra_mb": (peak - rss_loaded) / 1024,
            "history": learner.history}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--walk-length", type=int, default=5)
    parser.add_argument("--num-samples", type=int, nargs="+", default=[10, 10])
    parser.add_argument("--scheme", choices=["official", "joint"], default="official",
                        help="RWGSL candidate scheme (RWGSLConfig.scheme)")
    parser.add_argument("--k", type=int, default=10, help="kNN baseline neighbours per node")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=["rwgsl", "knn"])
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "NODES"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help="write all results as JSON")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args)))
        return
    passthrough = [a for a in sys.argv[1:] if a not in ("--out",)]
    if args.out:
        i = passthrough.index(args.out)
        passthrough.pop(i)
    results = []
    print(f"CSBM graphs, avg degree {args.degree}, {args.features} features; RWGSL rounds={args.rounds}, "
          f"walk_length={args.walk_length}, num_samples={args.num_samples}, scheme={args.scheme}; kNN k={args.k}; "
          f"{args.threads} torch threads")
    for nodes in args.nodes:
        row = {}
        for method in args.methods:
            cmd = [sys.executable, str(Path(__file__).resolve()), *passthrough, "--worker", method, str(nodes)]
            proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
            if proc.returncode != 0:
                print(f"{method} at {nodes:,} nodes failed:\n{proc.stderr[-2000:]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            row[method] = r
            results.append(r)
            print(f"{nodes:>9,} nodes {method:6s}: {r['time_s']:7.1f} s, peak RSS {r['peak_rss_mb']:7.0f} MB "
                  f"(+{r['peak_extra_mb']:.0f} MB over the loaded graph), edges {r['edges_in']:,} -> {r['edges_out']:,}",
                  flush=True)
        if "rwgsl" in row and "knn" in row:
            a, b = row["rwgsl"], row["knn"]
            print(f"{nodes:>9,} nodes ratio RWGSL/kNN: time {a['time_s'] / b['time_s']:.2f}x, "
                  f"peak extra memory {a['peak_extra_mb'] / max(b['peak_extra_mb'], 1e-9):.2f}x", flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
