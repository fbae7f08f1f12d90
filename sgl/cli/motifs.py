"""``sgl motifs count|embed``: exact motif counts and motif-based vertex embeddings of a dataset.

    sgl motifs count --dataset facebook --root ../shared/datasets --out fb_counts.npz
    sgl motifs count --dataset cora --root ~/data/planetoid --directed --out cora_motifs.csv
    sgl motifs embed --dataset facebook --root ../shared/datasets --method walks --dim 64 --out fb.npy
    sgl motifs embed --dataset karate --method features --out karate_features.pt

``count`` writes the per-vertex counts (``.npz`` or ``.csv``, one row per vertex) and prints the
graph's totals; ``embed`` writes a ``[num_nodes, dim]`` float32 array (``.npy`` or ``.pt``). The
library side is :mod:`sgl.analytics.motifs` (``run_motif_count``, ``run_motif_embedding``).
"""
from __future__ import annotations

import argparse
import time
from typing import Any

__all__ = ["register", "cmd_count", "cmd_embed"]

_METHODS = ("walks", "deepwalk", "spectral", "features")
#: embed options passed to MotifEmbeddingConfig under the same name (None = the method's default)
_EMBED_OPTIONS = ("motif", "dim", "mix", "walk_length", "walks_per_node", "window", "negatives", "epochs",
                  "batch_size", "lr", "device")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("motifs", help="motif counts, centralities and motif-based embeddings")
    sub = parser.add_subparsers(dest="motifs_command", required=True)

    count = sub.add_parser("count", help="exact per-vertex counts of the size-2 and size-3 motifs")
    _dataset_options(count)
    count.add_argument("--directed", action="store_true",
                       help="count the 13 directed 3-node motifs M1..M13 (default: edges, wedges, triangles)")
    count.add_argument("--out", required=True, help="per-vertex counts file (.npz or .csv)")
    count.add_argument("--engine", choices=("numba", "scipy"), default="numba",
                       help="masked products without output matrices (numba) or SciPy SpGEMM")
    count.set_defaults(handler=cmd_count)

    embed = sub.add_parser("embed", help="motif-based vertex embeddings (or DeepWalk as the baseline)")
    _dataset_options(embed)
    embed.add_argument("--method", choices=_METHODS, default="walks",
                       help="walks on the motif-weighted graph, deepwalk (plain graph), spectral, features")
    embed.add_argument("--motif", help="motif that weights the graph (default triangle)")
    embed.add_argument("--dim", type=int, help="embedding width (default 64; not for --method features)")
    embed.add_argument("--mix", type=float, help="weight of the plain graph in λ·A + (1-λ)·W_M (default 0.5)")
    embed.add_argument("--walk-length", type=int, help="steps per walk (default 20)")
    embed.add_argument("--walks-per-node", type=int, help="walks started from every vertex (default 10)")
    embed.add_argument("--window", type=int, help="skip-gram context size (default 5)")
    embed.add_argument("--negatives", type=int, help="negative samples per pair (default 5)")
    embed.add_argument("--epochs", type=int, help="passes over the walks (default 1)")
    embed.add_argument("--batch-size", type=int, help="walks per training step (default 256)")
    embed.add_argument("--lr", type=float, help="Adam step size (default 0.01)")
    embed.add_argument("--device", help="where skip-gram trains: cpu, cuda, auto (default cpu)")
    embed.add_argument("--directed", action="store_true", default=None,
                       help="features: add the directed motif counts")
    embed.add_argument("--seed", type=int, default=0)
    embed.add_argument("--out", required=True, help="embedding file (.npy or .pt)")
    embed.set_defaults(handler=cmd_embed)


def _dataset_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="dataset name (see `sgl datasets list`), e.g. facebook")
    parser.add_argument("--root", help="folder holding the dataset's files")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def cmd_count(args: argparse.Namespace) -> int:
    from sgl.analytics.motifs import MotifCountJob, run_motif_count

    job = MotifCountJob(args.dataset, root=args.root, directed=args.directed, out=args.out, engine=args.engine,
                        progress=not args.no_progress)
    started = time.perf_counter()
    counts = run_motif_count(job)
    seconds = time.perf_counter() - started
    print(f"dataset: {args.dataset} ({counts.num_vertices:,} vertices, "
          f"{'directed' if counts.directed else 'undirected'} motifs)")
    width = max(len(name) for name in counts.names)
    for name in counts.names:
        print(f"{name + ':':<{width + 1}} {counts.totals[name]:,}")
    print(f"counted in {seconds:.2f} s (loading included)")
    print(f"wrote {args.out} ({counts.num_vertices:,} rows: vertex, {', '.join(counts.names)})")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from sgl.analytics.motifs import MotifEmbedJob, MotifEmbeddingConfig, run_motif_embedding

    options = {name: getattr(args, name) for name in _EMBED_OPTIONS}
    config = MotifEmbeddingConfig(method=args.method, directed=args.directed, seed=args.seed, **options)
    job = MotifEmbedJob(args.dataset, root=args.root, out=args.out, embedding=config,
                        progress=not args.no_progress)
    started = time.perf_counter()
    embedding = run_motif_embedding(job)
    print(f"embedding: {embedding.shape[0]:,} x {embedding.shape[1]} ({args.method}) in "
          f"{time.perf_counter() - started:.1f} s")
    print(f"wrote {args.out}")
    return 0
