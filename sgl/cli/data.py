"""``sgl data pack``: pack a corpus into context windows (DataSculpt or a baseline).

    sgl data pack --corpus ../shared/datasets/wikitext2 --window 4096 --method datasculpt --out packed/
    sgl data pack --corpus my_jsonl_folder --window 2048 --method bfd --out packed_bfd/ --chunk-size 50000

``--corpus`` is a folder of ``*.jsonl`` (``{"text": ...}`` per line) and/or ``*.txt`` files (one
document each), or a WikiText-2 folder (its training sections). It is read ``--chunk-size``
documents at a time; the embeddings, the cluster index and the result are written to ``--out``:
``windows.jsonl`` (one window per line: ``[doc, start, length]`` segments), ``report.json``
(the metrics), ``embeddings.f32``, ``lengths.npy``, ``centroids.faiss``, ``clusters.npy``.
Token counts are whitespace words. The library side is :func:`sgl.systems.data.pack_stream`.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any

__all__ = ["register", "cmd_pack"]

_METHODS = ("datasculpt", "bfd", "random", "iclm")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("data", help="data organisation for LLM training (DataSculpt packing)")
    sub = parser.add_subparsers(dest="data_command", required=True)
    pack = sub.add_parser("pack", help="pack documents into context windows and report fill/truncation/similarity")
    pack.add_argument("--corpus", required=True, help="folder of *.jsonl / *.txt documents, or a WikiText-2 folder")
    pack.add_argument("--format", default="auto", choices=("auto", "files", "jsonl", "txt", "wikitext2"),
                      help="how to read --corpus (default: detect)")
    pack.add_argument("--window", type=int, default=4096, help="tokens per context window (default 4096)")
    pack.add_argument("--method", default="datasculpt", choices=_METHODS,
                      help="datasculpt (clusters + greedy), bfd (best-fit decreasing), random (concatenate and "
                           "cut), iclm (similarity chain, concatenate and cut)")
    pack.add_argument("--clustering", default="kmeans", choices=("kmeans", "isodata"))
    pack.add_argument("--clusters", type=int, default=None, help="number of clusters (default documents / 256)")
    pack.add_argument("--dim", type=int, default=64, help="embedding width (TF-IDF + SVD)")
    pack.add_argument("--overlong", default="split", choices=("split", "truncate", "error"),
                      help="documents longer than the window: split into windows (default), keep the first "
                           "window's worth, or stop with an error")
    pack.add_argument("--chunk-size", type=int, default=10_000, help="documents read at a time")
    pack.add_argument("--seed", type=int, default=0)
    pack.add_argument("--out", required=True, help="output folder")
    pack.add_argument("--no-progress", action="store_true", help="no progress bars")
    pack.set_defaults(handler=cmd_pack, library_names={"window": "window", "clusters": "num_clusters",
                                                      "chunk_size": "chunk_size"})


def cmd_pack(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sgl.cli.paths import check_output_path
    from sgl.errors import ConfigError

    out = check_output_path(args.out, "dir", "--out")
    corpus = Path(args.corpus).expanduser()
    if not corpus.is_dir():
        raise ConfigError(f"--corpus {args.corpus} is not a folder; give a folder of *.jsonl / *.txt documents")
    from sgl.systems.data import PackConfig, pack_stream

    config = PackConfig(window=args.window, method=args.method, clustering=args.clustering,
                        num_clusters=args.clusters, dim=args.dim, overlong=args.overlong, seed=args.seed,
                        progress=not args.no_progress)
    started = time.perf_counter()
    result = pack_stream(corpus, out, config, chunk_size=args.chunk_size, fmt=args.format)
    m = result.metrics
    print(f"packed {m['documents']:,} documents into {m['windows']:,} windows of {m['capacity']} tokens "
          f"({args.method}) in {time.perf_counter() - started:.1f} s")
    summary = {k: m[k] for k in ("fill_rate", "docs_truncated", "dropped_tokens", "padding_tokens",
                                 "intra_window_similarity", "homogeneity", "greedy_docs_per_s") if k in m}
    print(json.dumps(summary, default=float))
    print(f"wrote {out / 'windows.jsonl'} and {out / 'report.json'}")
    return 0
