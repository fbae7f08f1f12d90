"""Multi-hop propagation: SGL's ``propagate_hops`` against torch_geometric's ``SIGN`` transform.

Both compute ``[X, ÂX, Â²X, Â³X]`` with ``Â = D^-1/2 A D^-1/2`` (PyG's SIGN adds no
self-loops, so SGL runs ``NormalizedAdjacency(self_loops=False)``: the same matrix, and
the outputs are checked to agree). Each method runs in its own fresh process, starting
from the same ``edge_index`` and ``x`` loaded from ``.npy`` files, so peak memory is not
polluted by the other method. Timed: everything from ``edge_index``/``x`` to the hops
(PyG: ``Data`` + ``SIGN(k)``; SGL: ``Graph.from_edge_index`` + ``propagate_hops``).
Memory: the process's peak RSS (``VmHWM``) and the peak increase over the RSS right
after loading the inputs (reset through ``/proc/self/clear_refs``).

    python benchmarks/bench_propagate.py                 # Cora (if available) + 1M/10M/128
    python benchmarks/bench_propagate.py --nodes 200000 --edges 2000000 --threads 2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from procmem import reset_peak, status_kb  # noqa: E402


def worker(method: str, folder: Path, k: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    edge_index = torch.from_numpy(np.load(folder / "edge_index.npy"))
    x = torch.from_numpy(np.load(folder / "x.npy"))
    num_nodes = x.shape[0]
    import torch_geometric  # noqa: F401  (import cost outside the timed region for both)
    import sgl.ops  # noqa: F401

    rss_loaded = status_kb("VmRSS")
    reset_peak()
    start = time.perf_counter()
    if method == "pyg":
        from torch_geometric.data import Data
        from torch_geometric.transforms import SIGN

        data = SIGN(k)(Data(x=x, edge_index=edge_index, num_nodes=num_nodes))
        hops = [data.x] + [data[f"x{i}"] for i in range(1, k + 1)]
    else:
        from sgl.data import Graph
        from sgl.ops import NormalizedAdjacency, propagate_hops

        graph = Graph.from_edge_index(edge_index, num_nodes=num_nodes)
        out_dir = tempfile.mkdtemp(prefix="sgl_hops_", dir=folder) if method == "sgl-disk" else None
        hops = propagate_hops(graph, x, k, NormalizedAdjacency(self_loops=False), out_dir=out_dir)
    elapsed = time.perf_counter() - start
    peak = status_kb("VmHWM")
    # a fingerprint of the last hop, to check both methods computed the same thing
    last = hops[-1]
    rows = torch.arange(0, num_nodes, max(1, num_nodes // 1000))
    sample = last[rows].double().sum().item()
    return {"method": method, "seconds": elapsed, "peak_rss_mb": peak / 1024,
            "peak_increase_mb": (peak - rss_loaded) / 1024, "fingerprint": sample}


def run_worker(method: str, folder: Path, k: int, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = subprocess.run(
        [sys.executable, __file__, "--worker", method, "--folder", str(folder), "--k", str(k),
         "--threads", str(threads)],
        env=env, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{method} worker failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def make_random(folder: Path, nodes: int, edges: int, features: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    np.save(folder / "edge_index.npy", rng.integers(0, nodes, size=(2, edges), dtype=np.int64))
    np.save(folder / "x.npy", rng.standard_normal((nodes, features), dtype=np.float32))


def make_cora(folder: Path) -> bool:
    root = os.environ.get("SGL_TEST_DATA")
    try:
        import sgl.datasets

        kwargs = {"root": str(Path(root) / "planetoid")} if root else {}
        graph = sgl.datasets.load("cora", **kwargs)
    except Exception as exc:  # no files and no network: skip Cora, keep the synthetic run
        print(f"(skipping Cora: {exc})")
        return False
    np.save(folder / "edge_index.npy", graph.edge_index.numpy())
    np.save(folder / "x.npy", graph.x.numpy().astype(np.float32))
    return True


def compare(name: str, folder: Path, k: int, threads: int, repeats: int) -> None:
    results = {}
    for method in ("pyg", "sgl", "sgl-disk"):
        runs = [run_worker(method, folder, k, threads) for _ in range(repeats)]
        best = min(runs, key=lambda r: r["seconds"])
        best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
        best["peak_increase_mb"] = max(r["peak_increase_mb"] for r in runs)
        results[method] = best
    ref = results["pyg"]
    print(f"\n{name}  (k={k}, {threads} threads, best of {repeats})")
    print(f"{'method':<10} {'time s':>8} {'peak RSS MB':>12} {'peak incr MB':>13} {'speedup':>8} "
          f"{'RSS ratio':>9} {'incr ratio':>10}")
    for method, r in results.items():
        agree = abs(r["fingerprint"] - ref["fingerprint"]) <= 1e-3 * max(1.0, abs(ref["fingerprint"]))
        print(f"{method:<10} {r['seconds']:8.2f} {r['peak_rss_mb']:12.0f} {r['peak_increase_mb']:13.0f} "
              f"{ref['seconds'] / r['seconds']:8.2f} {r['peak_rss_mb'] / ref['peak_rss_mb']:9.2f} "
              f"{r['peak_increase_mb'] / ref['peak_increase_mb']:10.2f}" + ("" if agree else "  OUTPUT MISMATCH"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-cora", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, Path(args.folder), args.k, args.threads)))
        return
    with tempfile.TemporaryDirectory(prefix="sgl_bench_") as tmp:
        folder = Path(tmp)
        if not args.skip_cora and make_cora(folder):
            compare("Cora (2,708 nodes, 10,556 edges, 1,433 features)", folder, args.k, args.threads, 3)
        make_random(folder, args.nodes, args.edges, args.features)
        compare(f"random graph ({args.nodes:,} nodes, {args.edges:,} edges, {args.features} features)",
                folder, args.k, args.threads, args.repeats)


if __name__ == "__main__":
    main()
