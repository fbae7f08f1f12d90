"""``sgl vend build|query|bench``: VEND codes in front of an on-disk SQLite edge store.

    sgl vend build --dataset edges:facebook_combined.txt --k 5 --out fb.db
    sgl vend build --dataset cora --root ~/data/planetoid --k 2 --out cora.db
    sgl vend query fb.db 0 1 0 4000            # pairs (0, 1) and (0, 4000)
    sgl vend query fb.db --pairs pairs.txt     # one "u v" pair per line
    sgl vend bench fb.db --queries 100000      # certified share and throughput, with and without codes
"""
from __future__ import annotations

import argparse
from typing import Any

from sgl.errors import ConfigError

__all__ = ["register", "cmd_build", "cmd_query", "cmd_bench"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("vend", help="VEND edge non-existence codes over an on-disk edge store")
    sub = parser.add_subparsers(dest="vend_command", required=True)

    build = sub.add_parser("build", help="build an SQLite edge store with VEND codes for a graph")
    build.add_argument("--dataset", required=True, help="a dataset name (see `sgl datasets list`) or edges:PATH "
                                                        "(text edge list or .npy (E, 2) array)")
    build.add_argument("--root", help="folder holding the dataset's files")
    build.add_argument("--k", type=int, default=5, help="64-bit words per vertex (default 5)")
    build.add_argument("--codes", default="vend", choices=("vend", "vend-one-hash", "vertex-bloom", "range"),
                       help="code kind: VEND (default; per-vertex optimal bitmap hash count), the paper's "
                            "one-hash VEND, or a baseline at the same bits")
    build.add_argument("--out", required=True, help="store file to create (SQLite)")
    build.add_argument("--overwrite", action="store_true", help="replace an existing store (atomically)")
    build.add_argument("--no-progress", action="store_true")
    build.set_defaults(handler=cmd_build)

    query = sub.add_parser("query", help="ask a store whether vertex pairs are edges")
    query.add_argument("db", help="store file built by `sgl vend build`")
    query.add_argument("ids", nargs="*", type=int, metavar="U V", help="vertex pairs, flattened: U1 V1 U2 V2 ...")
    query.add_argument("--pairs", help="file with one 'U V' pair per line (instead of ids)")
    query.set_defaults(handler=cmd_query)

    bench = sub.add_parser("bench", help="certified share and edge-query throughput with and without VEND")
    bench.add_argument("db", help="store file built by `sgl vend build`")
    bench.add_argument("--queries", type=int, default=100_000, help="queries in the mix (default 100000)")
    bench.add_argument("--non-edge-share", type=float, default=0.9, help="share of non-edges (default 0.9)")
    bench.add_argument("--repeats", type=int, default=3, help="timed runs per path; the median counts")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--out", help="also write the result as a JSON record")
    bench.set_defaults(handler=cmd_bench)


def cmd_build(args: argparse.Namespace) -> int:
    from sgl.analytics.vend.pipeline import VENDBuildConfig, build_vend_store
    from sgl.cli.paths import check_output_path

    check_output_path(args.out, "file", "--out")
    config = VENDBuildConfig(dataset=args.dataset, out=args.out, root=args.root, k=args.k, codes=args.codes,
                             overwrite=args.overwrite, progress=not args.no_progress)
    result = build_vend_store(config)
    kinds = ", ".join(f"{name} {count:,}" for name, count in result.kinds.items())
    per_million = result.code_seconds / max(result.num_edges, 1) * 1e6
    print(f"store: {result.path} ({result.num_nodes:,} vertices, {result.num_edges:,} edges, "
          f"{result.file_bytes / 2**20:.1f} MiB)")
    print(f"codes: {result.codes}, k={result.k} words per vertex ({result.code_bytes / 2**20:.2f} MiB in memory); "
          f"{kinds}")
    print(f"build time: codes {result.code_seconds:.2f} s ({per_million:.2f} s per million edges), store "
          f"{result.store_seconds:.2f} s, reading the graph {result.load_seconds:.2f} s")
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    import numpy as np

    from sgl.analytics.edgelist import read_edge_list
    from sgl.analytics.vend.pipeline import query_pairs

    if args.pairs and args.ids:
        raise ConfigError("give pairs either as ids on the command line or with --pairs FILE, not both")
    if args.pairs:
        pairs, _ = read_edge_list(args.pairs)
    else:
        if not args.ids or len(args.ids) % 2:
            raise ConfigError(f"give vertex pairs as an even number of ids (U V [U V ...]), got {len(args.ids)} ids")
        pairs = np.asarray(args.ids, dtype=np.int64).reshape(-1, 2)
    answers = query_pairs(args.db, pairs)
    for (u, v), edge, certified in zip(answers.pairs.tolist(), answers.is_edge.tolist(), answers.certified.tolist()):
        how = "certified by VEND" if certified else "store"
        print(f"{u} {v}: {'edge' if edge else 'no edge'} ({how})")
    stats = answers.stats
    print(f"queries: {stats.queries:,}; certified non-edges: {stats.certified:,} "
          f"({100 * stats.certified_share:.1f}%); store lookups: {stats.store_queries:,}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from sgl.analytics.vend.evaluate import benchmark_store
    from sgl.cli.report import write_record

    result = benchmark_store(args.db, queries=args.queries, non_edge_share=args.non_edge_share,
                             repeats=args.repeats, seed=args.seed)
    print(f"store: {result.path} ({result.num_nodes:,} vertices, {result.num_edges:,} edges; "
          f"{result.kind}, k={result.k}; opened in {result.open_seconds:.2f} s)")
    print(f"certified non-edges: {100 * result.certified_fraction:.2f}% of {result.queries:,} queries' non-edges "
          f"({100 * result.non_edge_share:.0f}% of the mix)")
    print(f"store lookups with VEND: {100 * result.store_share:.1f}% of the queries")
    print(f"throughput: store {result.store_qps:,.0f} queries/s, with VEND {result.vend_qps:,.0f} queries/s "
          f"({result.speedup:.2f}x)")
    if result.mismatches:
        print(f"WARNING: {result.mismatches} answers differ between the two paths")
    write_record(args.out, result.to_dict())
    return 0 if result.mismatches == 0 else 1
