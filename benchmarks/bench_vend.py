"""VEND (issue 25): certified non-edges vs Bloom and range filters at equal bits, store throughput, build time.

On SNAP ego-Facebook (``../shared/datasets/snap_facebook_combined``, or ``--facebook PATH``) and a
synthetic power-law graph (Chung–Lu, ``--powerlaw-nodes`` vertices, mean degree ``--powerlaw-degree``,
exponent ``--powerlaw-exponent``), for every ``K`` in ``--ks`` (64-bit words per vertex):

1. the share of ``--pairs`` uniform random non-edges (and of as many two-hop non-edges, pairs with a
   common neighbour) that each filter certifies: VEND (bitmaps with a per-vertex optimal hash count);
   VEND/1-hash (the paper's one-hash bitmaps); a Bloom filter per vertex (exact lists for low
   degrees) with one hash and with the optimal hash count; one Bloom filter over all edges; VEND's range codes without
   bitmap. All spend ``64 K`` bits per vertex. Target: VEND >= Bloom at every K;
2. the time to compute each filter from the neighbour lists, per million edges (median of
   ``--repeats``), and the time to load the SQLite store;
3. edge-query throughput of the SQLite store (``EdgeStore.has_edges``, one batched index join)
   vs the same store behind the VEND codes (``VENDStore.has_edges``) on ``--queries`` queries,
   ``--non-edge-share`` of them non-edges (median of ``--repeats``; answers checked equal).
   Target: >= 3x with VEND.

    .venv/bin/python benchmarks/bench_vend.py                                   # full run
    .venv/bin/python benchmarks/bench_vend.py --ks 2 --pairs 20000 --queries 20000 --powerlaw-nodes 20000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sgl.analytics.edgelist import read_edge_list  # noqa: E402
from sgl.analytics.vend import (EdgeBloomFilter, MemoryAdjacency, OneHashBloomFilter,  # noqa: E402
                                OneHashVENDCodes, RangeFilter, VENDCodes, VENDStore, VertexBloomFilter)
from sgl.analytics.vend.adjacency import undirected_csr  # noqa: E402
from sgl.analytics.vend.evaluate import (benchmark_store, certified_fraction, sample_non_edges,  # noqa: E402
                                         sample_two_hop_non_edges)
from sgl.datasets.powerlaw import chung_lu_edges  # noqa: E402

SHARED = ROOT.parent / "shared" / "datasets" / "snap_facebook_combined" / "facebook_combined.txt"
FILTERS = {"VEND": VENDCodes, "VEND/1-hash": OneHashVENDCodes, "Bloom/1-hash": OneHashBloomFilter, "Bloom/vertex": VertexBloomFilter,
           "Bloom/edges": EdgeBloomFilter, "range": RangeFilter}


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def certification(name: str, edges: np.ndarray, n: int, args: argparse.Namespace) -> list:
    indptr, indices = undirected_csr(edges, n)
    adj = MemoryAdjacency.from_csr(indptr, indices)
    random_pairs = sample_non_edges(adj.has_edges, n, args.pairs, seed=args.seed)
    two_hop = sample_two_hop_non_edges(adj, args.pairs, seed=args.seed)
    millions = adj.num_edges / 1e6
    rows = []
    print(f"\n{name}: {n:,} vertices, {adj.num_edges:,} edges; certified share of {args.pairs:,} random / two-hop "
          f"non-edges, build seconds per million edges")
    for k in args.ks:
        row = {"graph": name, "k": k}
        for label, cls in FILTERS.items():
            def build():
                return cls.from_csr(indptr, indices, k)

            seconds = _median_time(build, args.repeats)
            codes = build()
            u, v = np.divmod(adj._keys, n)
            false = int(np.count_nonzero(codes.test_batch(u, v) == 2))
            row[label] = {"random": certified_fraction(codes, random_pairs), "two_hop": certified_fraction(codes, two_hop),
                          "build_s_per_medge": seconds / millions, "false_non_neighbors": false}
        cells = "  ".join(f"{label} {row[label]['random']:.4f}/{row[label]['two_hop']:.4f} "
                          f"({row[label]['build_s_per_medge']:.2f} s)" for label in FILTERS)
        bloom = max(row[label]["random"] for label in FILTERS if label.startswith("Bloom"))
        verdict = "yes" if row["VEND"]["random"] >= bloom else "NO"
        print(f"  K={k:<2}  {cells}  VEND >= Bloom: {verdict}")
        assert all(row[label]["false_non_neighbors"] == 0 for label in FILTERS), "a false NonNeighbor"
        rows.append(row)
    return rows


def throughput(name: str, edges: np.ndarray, n: int, args: argparse.Namespace, folder: str) -> list:
    rows = []
    print(f"\n{name}: edge queries, {args.queries:,} per batch, {args.non_edge_share:.0%} non-edges")
    for k in args.ks:
        path = os.path.join(folder, f"{name}-{k}.db")
        started = time.perf_counter()
        with VENDStore.build(path, edges, k, num_nodes=n, overwrite=True) as db:
            store_seconds = db.build_seconds["store"]
        total = time.perf_counter() - started
        result = benchmark_store(path, queries=args.queries, non_edge_share=args.non_edge_share,
                                 repeats=args.repeats, seed=args.seed)
        print(f"  K={k:<2}  store {result.store_qps:12,.0f} q/s   with VEND {result.vend_qps:12,.0f} q/s   "
              f"{result.speedup:5.2f}x   ({100 * result.store_share:.1f}% of queries reach the store; "
              f"store load {store_seconds:.2f} s, build total {total:.2f} s)   target >= 3x: "
              f"{'yes' if result.speedup >= 3 else 'NO'}")
        assert result.mismatches == 0
        rows.append({"graph": name, **result.to_dict(), "store_load_s": store_seconds})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facebook", default=str(SHARED), help="SNAP facebook_combined.txt (skipped if absent)")
    parser.add_argument("--powerlaw-nodes", type=int, default=200_000)
    parser.add_argument("--powerlaw-degree", type=float, default=10.0)
    parser.add_argument("--powerlaw-exponent", type=float, default=2.5)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--pairs", type=int, default=200_000, help="non-edges for the certified share")
    parser.add_argument("--queries", type=int, default=100_000, help="queries per throughput batch")
    parser.add_argument("--non-edge-share", type=float, default=0.9)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write all rows as JSON")
    args = parser.parse_args(argv)
    print(f"bench_vend: numpy {np.__version__}, pid {os.getpid()}")
    graphs = []
    if os.path.isfile(args.facebook):
        graphs.append(("facebook",) + read_edge_list(args.facebook))
    else:
        print(f"SNAP Facebook skipped: {args.facebook} not found")
    edges = chung_lu_edges(args.powerlaw_nodes, args.powerlaw_degree, args.powerlaw_exponent, seed=args.seed)
    graphs.append((f"powerlaw-{args.powerlaw_nodes // 1000}k", edges, args.powerlaw_nodes))
    rows = {"certification": [], "throughput": []}
    with tempfile.TemporaryDirectory(prefix="bench_vend.") as folder:
        for name, edges, n in graphs:
            rows["certification"] += certification(name, edges, n, args)
            rows["throughput"] += throughput(name, edges, n, args, folder)
    print("\n| graph | K | " + " | ".join(FILTERS) + " | VEND build s/M edges | store q/s | VEND q/s | speedup |")
    print("|---" * (len(FILTERS) + 6) + "|")
    for cert, thr in zip(rows["certification"], rows["throughput"]):
        print(f"| {cert['graph']} | {cert['k']} | " + " | ".join(f"{cert[label]['random']:.4f}" for label in FILTERS)
              + f" | {cert['VEND']['build_s_per_medge']:.2f} | {thr['store_qps']:,.0f} | {thr['vend_qps']:,.0f} | "
              f"{thr['speedup']:.2f}x |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
