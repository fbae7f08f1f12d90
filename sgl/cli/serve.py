"""``sgl serve bench|students``: KV-selection quality/latency and Student Parallelism runs.

    sgl serve bench --method pqcache h2o snapkv quest streaming --budget 0.05 0.1 0.2 \\
        --root ../shared/datasets --context 2048 --out kv.json
    sgl serve students --root ../shared/datasets --students 4 --teacher-layers 6 --out students.json

``bench`` trains (or reloads from ``--cache-dir``) a tiny Llama on WikiText-2, decodes long test
contexts with each method and budget, and prints recall@k vs exact top-k, attention mass,
attention-output error, next-token agreement and perplexity ratio vs full attention, and the
decode-step latency on this machine. ``students`` distils SST-2 students and prints accuracy,
batch-1 latency and a bursty-arrival replay. Library: :mod:`sgl.systems.serving`.
"""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "cmd_bench", "cmd_students"]

#: the selection methods (kept here so ``--help`` imports no torch; a test checks it matches METHODS)
METHOD_NAMES = ("exact", "pqcache", "h2o", "snapkv", "quest", "streaming", "random")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("serve", help="inference: PQCache KV retrieval, Student Parallelism")
    sub = parser.add_subparsers(dest="serve_command", required=True)

    b = sub.add_parser("bench", help="KV selection methods on long WikiText-2 contexts of a trained tiny Llama")
    b.add_argument("--method", nargs="+", choices=METHOD_NAMES, default=["pqcache"], help="one or more methods")
    b.add_argument("--budget", nargs="+", type=float, default=[0.1],
                   help="fractions of the context attended, each in (0, 1]")
    b.add_argument("--root", required=True, help="folder holding wikitext2/")
    b.add_argument("--context", type=int, default=2048, help="prompt tokens per context")
    b.add_argument("--steps", type=int, default=32, help="teacher-forced decode steps per context")
    b.add_argument("--contexts", type=int, default=2, help="contexts averaged")
    b.add_argument("--train-steps", type=int, default=300, help="training steps of the tiny Llama")
    b.add_argument("--train-seq-len", type=int, default=512)
    b.add_argument("--layers", type=int, default=2)
    b.add_argument("--hidden", type=int, default=128)
    b.add_argument("--heads", type=int, default=4)
    b.add_argument("--kv-heads", type=int, default=2)
    b.add_argument("--vocab-size", type=int, default=2048)
    b.add_argument("--documents", type=int, default=None, help="train on the first N articles only")
    b.add_argument("--subvectors", type=int, default=2, help="PQ sub-vectors per key (divides the head dim)")
    b.add_argument("--bits", type=int, default=6, help="PQ bits per sub-vector (2^bits centroids)")
    b.add_argument("--sink", type=int, default=4, help="attention-sink tokens always kept (the paper: 32)")
    b.add_argument("--recent-ratio", type=float, default=0.5, help="share of the budget given to the recent window")
    b.add_argument("--cache-blocks", type=int, default=16,
                   help="PQCache: LFU block-cache capacity per layer and KV head (0: fetch every retrieved token)")
    b.add_argument("--block-size", type=int, default=16, help="PQCache: tokens per cache block")
    b.add_argument("--cache-dir", default=None, help="cache of the trained tokenizer and model")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", default=None, help="write every figure as JSON here")
    b.set_defaults(handler=cmd_bench)

    s = sub.add_parser("students", help="Student Parallelism on SST-2: accuracy, batch-1 latency, bursts")
    s.add_argument("--root", required=True, help="folder holding sst2/")
    s.add_argument("--students", type=int, default=4)
    s.add_argument("--teacher-layers", type=int, default=6)
    s.add_argument("--student-layers", type=int, default=1)
    s.add_argument("--hidden", type=int, default=128)
    s.add_argument("--heads", type=int, default=4)
    s.add_argument("--vocab-size", type=int, default=4096)
    s.add_argument("--max-len", type=int, default=64)
    s.add_argument("--sentences", type=int, default=20000, help="SST-2 train sentences used")
    s.add_argument("--teacher-steps", type=int, default=400)
    s.add_argument("--student-steps", type=int, default=300)
    s.add_argument("--requests", type=int, default=400, help="requests replayed in the burst")
    s.add_argument("--max-batch", type=int, default=32)
    s.add_argument("--prune-step", type=int, default=16, help="drop one student per this many queued requests")
    s.add_argument("--cache-dir", default=None)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None, help="write every figure as JSON here")
    s.set_defaults(handler=cmd_students)


def cmd_bench(args: argparse.Namespace) -> int:
    from sgl.cli.paths import check_input_folder, check_output_path
    from sgl.cli.report import write_record
    from sgl.systems.serving.kv import KVBenchConfig, run_kv_bench
    from sgl.systems.serving.lm import TinyLlamaSpec

    if args.out:
        check_output_path(args.out, "file")
    check_input_folder(args.root)
    spec = TinyLlamaSpec(vocab_size=args.vocab_size, hidden_size=args.hidden, layers=args.layers, heads=args.heads,
                         kv_heads=args.kv_heads, intermediate_size=2 * args.hidden)
    cfg = KVBenchConfig(args.root, methods=args.method, budgets=args.budget, context=args.context, steps=args.steps,
                        contexts=args.contexts, train_steps=args.train_steps, train_seq_len=args.train_seq_len,
                        documents=args.documents, spec=spec, num_subvectors=args.subvectors, bits=args.bits,
                        sink=args.sink, recent_ratio=args.recent_ratio, cache_blocks=args.cache_blocks,
                        block_size=args.block_size, cache_dir=args.cache_dir, seed=args.seed)
    res = run_kv_bench(cfg)
    print(f"full attention: ppl {res['ppl_full']:.2f}, decode step {res['full_step_ms']:.2f} ms (this CPU)")
    print(f"{'budget':>6} {'method':>9} {'recall@k':>8} {'mass':>6} {'out_err':>8} {'agree':>6} {'ppl/full':>8} "
          f"{'step_ms':>8}")
    for r in res["rows"]:
        print(f"{r['budget']:>6.3f} {r['method']:>9} {r['recall']:>8.3f} {r['mass']:>6.3f} {r['output_error']:>8.4f} "
              f"{r['agreement']:>6.3f} {r['ppl'] / r['ppl_full']:>8.4f} {r['step_ms']:>8.2f}"
              + (f"  LFU hit rate {r['lfu_hit_rate']:.3f}, slow-tier KV {r['bytes_per_step'] / 1e3:.1f} kB/step "
                 f"(no cache {r['bytes_per_step_no_cache'] / 1e3:.1f})" if "lfu_hit_rate" in r else ""))
    write_record(args.out, res)
    return 0


def cmd_students(args: argparse.Namespace) -> int:
    from sgl.cli.paths import check_input_folder, check_output_path
    from sgl.cli.report import write_record
    from sgl.systems.serving.students import StudentsConfig, run_students

    if args.out:
        check_output_path(args.out, "file")
    check_input_folder(args.root)
    cfg = StudentsConfig(args.root, num_students=args.students, teacher_layers=args.teacher_layers,
                         student_layers=args.student_layers, hidden=args.hidden, heads=args.heads,
                         vocab_size=args.vocab_size, max_len=args.max_len, train_sentences=args.sentences,
                         teacher_steps=args.teacher_steps, student_steps=args.student_steps, requests=args.requests,
                         max_batch=args.max_batch, prune_step=args.prune_step, seed=args.seed,
                         cache_dir=args.cache_dir)
    res = run_students(cfg)
    acc = res["students_accuracy"]
    print(f"teacher accuracy: {100 * res['teacher_accuracy']:.2f} % ({args.teacher_layers} layers)")
    print("students accuracy: " + ", ".join(f"k={k}: {100 * a:.2f} %" for k, a in acc.items()))
    lat = res["latency_ms_batch1"]
    print(f"batch-1 latency: teacher {lat['teacher']:.2f} ms, students {lat['students']:.2f} ms (this CPU)")
    for name, r in res["burst"].items():
        print(f"burst {name}: mean {r['mean_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['throughput']:.1f} req/s, "
              f"accuracy {100 * r['accuracy']:.2f} %, students used {r['mean_active']:.2f}")
    write_record(args.out, res)
    return 0
