"""``sgl secagg bench``: secure distributed counting with KVSAgg over ``sgl.comm`` processes.

    sgl secagg bench --root ../shared/datasets --clients 8 --ngram 2     # WikiText-2 bigrams, 8 clients
    sgl secagg bench --text corpus.txt --clients 4 --ngram 1 --top 20 --out counts.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["register", "cmd_bench"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("secagg", help="secure aggregation of key-value sets (KVSAgg)")
    sub = parser.add_subparsers(dest="secagg_command", required=True)
    bench = sub.add_parser("bench", help="count words or bigrams of a text over N client processes with KVSAgg; "
                                         "check the sum against plain counting and print bytes and times")
    bench.add_argument("--text", help="a text file (default: wikitext2/train.txt under --root)")
    bench.add_argument("--root", help="folder holding wikitext2/ (the shared datasets folder)")
    bench.add_argument("--clients", type=int, default=8, help="client processes, each holding a slice (default 8)")
    bench.add_argument("--ngram", type=int, default=2, choices=(1, 2), help="count words (1) or bigrams (2, default)")
    bench.add_argument("--top", type=int, default=100, help="report the top-k keys of the sum (default 100)")
    bench.add_argument("--expected-keys", type=int, help="distinct keys to size the table for (default: the sum of "
                                                         "every client's distinct keys, an upper bound)")
    bench.add_argument("--timeout", type=float, default=600.0, help="seconds the clients may wait for each other")
    bench.add_argument("--out", help="also write the record as JSON")
    bench.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from sgl.cli.paths import check_output_path
    from sgl.errors import ConfigError
    from sgl.tasks.secagg import read_tokens, secure_count

    if args.out:
        check_output_path(args.out, "file", "--out")
    if args.text is None and args.root is None:
        raise ConfigError("give --text PATH or --root (a folder holding wikitext2/train.txt)")
    path = Path(args.text) if args.text else Path(args.root) / "wikitext2" / "train.txt"
    ids, vocab = read_tokens(path)
    r = secure_count(ids, len(vocab), clients=args.clients, ngram=args.ngram, top=args.top,
                     expected_keys=args.expected_keys, timeout=args.timeout)
    what = "words" if args.ngram == 1 else "bigrams"
    print(f"{path}: {len(ids):,} tokens, {len(vocab):,} words; {r['clients']} clients count {what}")
    print(f"sum: {r['distinct_keys']:,} distinct keys of {r['key_space']:,}; decoded={r['decoded']}, "
          f"exact={r['exact']}, top-{args.top} exact={r['top_exact']}")
    names = [f"{vocab[k]}" if args.ngram == 1 else f"{vocab[k // len(vocab)]} {vocab[k % len(vocab)]}"
             for k in r["top_keys"][:5]]
    print("top 5: " + ", ".join(f"{n!r} {c:,}" for n, c in zip(names, r["top_counts"][:5])))
    kv, dense, plain = r["bytes_per_client"], r["dense_bytes"], r["plain_sparse_bytes"]
    print(f"bytes per client: KVSAgg {kv:,} ({r['table_cells']:,} cells) | dense masked over the key space "
          f"{dense:,} ({f'{dense / kv:.1f}x KVSAgg' if dense >= kv else f'{kv / dense:.1f}x smaller than KVSAgg'}; "
          f"computed) | plain insecure sparse {plain:,.0f} "
          f"(KVSAgg {kv / plain:.2f}x)")
    print(f"time: aggregation {r['aggregate_s']:.2f} s (slowest client, decode included), all processes "
          f"{r['wall_s']:.2f} s")
    if args.out:
        from sgl.fileio import atomic_write

        with atomic_write(args.out, "w") as fh:
            json.dump(r, fh, indent=1)
    return 0 if r["exact"] else 1
