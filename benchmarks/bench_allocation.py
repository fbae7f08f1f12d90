"""How the hops' memory is allocated, side by side: ``propagate_hops`` end to end with each strategy.

``sgl.ops.allocation`` allocates each hop either as huge pages faulted in by the kernel's own
threads (``touch``), huge pages populated at once (``populate``) or plain 4 KiB pages
(``plain``), and by default uses the one this machine measured fastest (a 32 MiB calibration
through the kernel, once per boot, cached). This script times ``Graph.from_edge_index`` +
``propagate_hops`` (k hops of ``Â = D^-1/2 A D^-1/2``, fused kernel, float32) with the default
and with every strategy forced, beside ``kernel="aten"``. Each run is a fresh process, as a
user's script is (within one long process, memory freed by the previous run is recycled, which
hides what new memory costs), and the rounds are interleaved so machine load hits all alike.

    python benchmarks/bench_allocation.py --nodes 200000 --edges 2000000 --features 128 --threads 2
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VARIANTS = {"default": "auto", "touch": "touch", "populate": "populate", "plain": "plain", 'kernel="aten"': "auto"}


def worker(variant: str, folder: Path, k: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from sgl.data import Graph
    from sgl.ops import NormalizedAdjacency, propagate_hops
    from sgl.ops.allocation import allocation_cache_path, allocation_strategy, machine_fingerprint

    edge_index = torch.from_numpy(np.load(folder / "edge_index.npy"))
    x = torch.from_numpy(np.load(folder / "x.npy"))
    propagate_hops(Graph.from_edge_index(torch.tensor([[0], [1]])), torch.ones(2, 1), 1)  # compiled kernel loaded
    strategy = allocation_strategy()  # calibrates on this machine's first run, untimed
    kernel = "aten" if variant == 'kernel="aten"' else "auto"
    start = time.perf_counter()
    graph = Graph.from_edge_index(edge_index, num_nodes=x.shape[0])
    propagate_hops(graph, x, k, NormalizedAdjacency(self_loops=False), kernel=kernel)
    seconds = time.perf_counter() - start
    entry = {}
    if variant == "default":
        try:
            entry = json.loads(allocation_cache_path().read_text())["machines"][machine_fingerprint()]
        except (OSError, ValueError, KeyError):
            pass
    return {"seconds": seconds, "strategy": strategy, "calibration": entry}


def allocation_study(folder: Path, k: int, threads: int, repeats: int = 3) -> dict:
    """Best and median seconds per variant (fresh process each), from ``folder``'s ``edge_index.npy``/``x.npy``."""
    runs = {name: [] for name in VARIANTS}
    info = {}
    for _ in range(repeats):
        for name, env in VARIANTS.items():
            environ = dict(os.environ, SGL_HUGE_PAGES=env, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
            out = subprocess.run([sys.executable, __file__, "--worker", name, "--folder", str(folder), "--k", str(k),
                                  "--threads", str(threads)], env=environ, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise RuntimeError(f"{name} worker failed:\n{out.stderr}")
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs[name].append(result["seconds"])
            if name == "default":
                info = result
    n, d = np.load(folder / "x.npy", mmap_mode="r").shape
    edges = np.load(folder / "edge_index.npy", mmap_mode="r").shape[1]
    print(f"\nhop allocation: graph build + propagate_hops, {n:,} nodes, {edges:,} edges, {d} features, k={k}, "
          f"{threads} threads, fresh process per run, {repeats} interleaved rounds")
    cal = info.get("calibration", {})
    if cal.get("seconds"):
        print(f"  this machine's calibration ({cal.get('bytes', 0) / 2**20:.0f} MiB through the kernel, slowest of 3): "
              + ", ".join(f"{s} {t * 1e3:.1f} ms" for s, t in sorted(cal["seconds"].items()))
              + f" -> {cal.get('strategy')} (measured {cal.get('measured', '?')})")
    print(f"  default strategy: {info.get('strategy')}")
    ref, aten = min(runs["default"]), min(runs['kernel="aten"'])
    print(f"  {'variant':<16} {'best s':>8} {'median s':>9} {'x default':>10} {'aten / it':>10}")
    for name, values in runs.items():
        best = min(values)
        print(f"  {name:<16} {best:8.3f} {statistics.median(values):9.3f} {best / ref:10.2f} {aten / best:10.2f}")
    return {"default": info.get("strategy"), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--edges", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, Path(args.folder), args.k, args.threads)))
        return
    with tempfile.TemporaryDirectory(prefix="sgl_alloc_") as tmp:
        folder = Path(tmp)
        rng = np.random.default_rng(0)
        np.save(folder / "edge_index.npy", rng.integers(0, args.nodes, size=(2, args.edges), dtype=np.int64))
        np.save(folder / "x.npy", rng.standard_normal((args.nodes, args.features), dtype=np.float32))
        allocation_study(folder, args.k, args.threads, args.repeats)


if __name__ == "__main__":
    main()
