"""Neighbour-sampling throughput (sampled edges per second): SGL vs DGL vs PyG.

Each sampler draws the same number of batches of random seed nodes with the same fan-outs
(SGL/PyG order: hop next to the seeds first; DGL takes the reversed list) and produces the
per-layer blocks a GNN consumes (SGL: :class:`sgl.samplers.MiniBatch`; DGL:
``NeighborSampler.sample_blocks`` -> ``DGLBlock`` s, relabelled). Graph construction and a
warm-up batch are excluded; timing is the best of ``--repeats`` rounds. Peers:

* DGL's ``dgl.dataloading.NeighborSampler`` (DGL 2.1 imported through ``sgl.data.dgl_interop``,
  which stubs the missing graphbolt library);
* torch_geometric's ``NeighborLoader`` when ``pyg-lib`` or ``torch-sparse`` is importable
  (on our machines neither is, so it is reported as unavailable).

Threads: ``--threads`` sets ``OMP_NUM_THREADS`` before anything loads, torch's intra-op
threads, DGL's OpenMP threads (``dgl.utils.set_num_threads``, printed back) and SGL's
``NeighborSampler(threads=...)``; each sampler's CPU/wall ratio is printed beside its rate.

    python benchmarks/bench_sampler.py                       # Cora (if present) + 1M nodes / 10M edges
    python benchmarks/bench_sampler.py --nodes 200000 --edges 2000000 --threads 2
    python benchmarks/bench_sampler.py --stages              # + where SGL's time goes, per kernel
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    parser.add_argument("--fanouts", default="15,10")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="threads for every library (OMP/torch/numba)")
    parser.add_argument("--cora-root", default=None)
    parser.add_argument("--stages", action="store_true",
                        help="also profile the 1-thread parallel path per stage (cProfile)")
    return parser.parse_args()


ARGS = _args()
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)  # before numpy/torch/dgl load their thread pools

import numpy as np  # noqa: E402
import torch  # noqa: E402

from sgl.data import Graph  # noqa: E402
from sgl.samplers import NeighborSampler  # noqa: E402


def _rounds(fns, seeds_list, repeats):
    """Time every sampler on the same batches, rounds interleaved (sampler A, B, C, then A, B, C
    again) so that a load change on a shared machine hits all of them alike.

    Returns ``{name: (edges/s of the best round, edges per round, CPU time / wall time)}``;
    CPU time is the whole process's, so ~2 means two busy threads."""
    for fn in fns.values():
        fn(seeds_list[0])  # warm-up (compilation, lazy formats, allocations)
    best = {name: (float("inf"), 0, 0.0) for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            cpu, start = time.process_time(), time.perf_counter()
            edges = sum(fn(seeds) for seeds in seeds_list)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            if wall < best[name][0]:
                best[name] = (wall, edges, cpu / wall)
    return {name: (edges / wall, edges, util) for name, (wall, edges, util) in best.items()}


def _stages(sampler, seeds_list) -> None:
    """Where one sampler's time goes: cProfile's own time per function over the batches
    (the compiled kernels are the stages: slot offsets, draw + gather, relabel, map reset)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    for i, seeds in enumerate(seeds_list):
        sampler.sample(seeds, seed=i)
    profile.disable()
    stats = pstats.Stats(profile).stats
    total = sum(entry[2] for entry in stats.values())
    rows = sorted(((entry[2], f"{Path(func[0]).name}:{func[2]}") for func, entry in stats.items()), reverse=True)
    print(f"    stages of {sampler!r} (own time per call site, {len(seeds_list)} batches, "
          f"{total / len(seeds_list) * 1e3:.2f} ms per batch under the profiler):")
    for own, where in rows[:8]:
        print(f"      {own / len(seeds_list) * 1e3:7.3f} ms/batch {own / total * 100:5.1f} %  {where}")


def bench(graph: Graph, name: str, fanouts, args) -> None:
    rng = np.random.default_rng(0)
    seeds_list = [torch.from_numpy(rng.choice(graph.num_nodes, args.batch_size, replace=False))
                  for _ in range(args.batches)]
    counter = iter(range(10**9))
    ours = NeighborSampler(graph, fanouts)
    # the parallel path on --threads threads (same seeded output for any thread count)
    par = NeighborSampler(graph, fanouts, threads=args.threads)
    fns = {"sgl": lambda s: ours.sample(s, seed=next(counter)).num_sampled_edges,
           "sgl-par": lambda s: par.sample(s, seed=next(counter)).num_sampled_edges}
    dgl_threads = None
    try:
        from sgl.data.dgl_interop import import_dgl

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dgl = import_dgl()
        dgl.utils.set_num_threads(args.threads)
        dgl_threads = dgl.utils.get_num_threads()
        dgl_graph = dgl.graph((graph.indices, graph.destinations()), num_nodes=graph.num_nodes)
        dgl_graph.create_formats_()
        sampler = dgl.dataloading.NeighborSampler(list(reversed(fanouts)))

        def run_dgl(seeds):  # relabelled blocks, as ours: sample_neighbors + to_block per layer
            _, _, blocks = sampler.sample_blocks(dgl_graph, seeds)
            return sum(int(b.num_edges()) for b in blocks)

        fns["dgl"] = run_dgl
    except Exception as exc:  # report, never hide, why the peer did not run
        print(f"  DGL unavailable: {type(exc).__name__}: {exc}")
    pyg_ok = False
    for module in ("pyg_lib", "torch_sparse"):
        try:
            __import__(module)
            pyg_ok = True
        except ImportError:
            pass
    if pyg_ok:
        from torch_geometric.loader import NeighborLoader

        data = graph.to_pyg()

        def run_pyg(seeds):
            loader = NeighborLoader(data, num_neighbors=list(fanouts), input_nodes=seeds, batch_size=seeds.numel())
            batch = next(iter(loader))
            return int(batch.edge_index.size(1))

        fns["pyg"] = run_pyg
    else:
        print("  PyG NeighborLoader unavailable: neither pyg-lib nor torch-sparse is importable")
    results = _rounds(fns, seeds_list, args.repeats)
    ours_rate = max(results["sgl"][0], results["sgl-par"][0])
    print(f"  {name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, fan-outs {fanouts}, "
          f"{args.batches} batches x {args.batch_size} seeds, {args.threads} thread(s) "
          f"(DGL's OpenMP threads: {dgl_threads}); best of {args.repeats} interleaved rounds")
    for peer, (rate, edges, util) in results.items():
        ratio = "" if peer.startswith("sgl") else f"   best sgl/{peer} = {ours_rate / rate:.2f}x"
        print(f"    {peer:7s} {rate / 1e6:7.2f} M sampled edges/s  ({edges:,} edges per round, "
              f"CPU/wall {util:.2f}){ratio}")
    if "dgl" in results:
        ratio = ours_rate / results["dgl"][0]
        print(f"    acceptance (issue 27): best SGL >= 2x DGL, both on {args.threads} thread(s): {ratio:.2f}x "
              f"{'MET' if ratio >= 2 else 'not met'}" + ("" if args.threads == 2 else " (the target is at 2 threads)"))
    if args.stages:
        _stages(NeighborSampler(graph, fanouts, threads=1), seeds_list)


def main() -> None:
    args = ARGS
    torch.set_num_threads(args.threads)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    root = args.cora_root
    if root is None:
        shared = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "planetoid"
        root = str(shared) if shared.exists() else None
    if root:
        import sgl.datasets

        bench(sgl.datasets.load("cora", root=root), "cora", fanouts, args)
    rng = np.random.default_rng(1)
    # 80 % of edges end at uniform nodes, 20 % at power-law hubs: most rows have a few
    # neighbours (below the fan-out) and some have thousands (above it)
    hubs = (rng.pareto(1.2, args.edges) * 10).astype(np.int64) % args.nodes
    dst = np.where(rng.random(args.edges) < 0.8, rng.integers(0, args.nodes, args.edges), hubs)
    src = rng.integers(0, args.nodes, args.edges)
    graph = Graph.from_edge_index(torch.from_numpy(np.stack([src, dst])), num_nodes=args.nodes)
    bench(graph, "synthetic", fanouts, args)


if __name__ == "__main__":
    main()
