"""DataSculpt vs its baselines on WikiText-2, and the packed-LM perplexity study (issue 21).

Parts (``--part``, default all that are built):

* ``pack`` — DataSculpt (k-means and ISODATA) vs random concatenation, ICLM similarity chain
  and best-fit decreasing on the 3,522 WikiText-2 training sections (words as tokens): fill
  rate, documents truncated, mean intra-window cosine, article homogeneity, and throughput
  (documents/s of the greedy stage alone and of the whole packing, encoding excluded).
  Timings are wall-clock on whatever machine runs it.
* ``lobra`` — LobRA's static replica MILP + per-step dispatch vs the best homogeneous scheme on
  all GPUs, replaying three mixes of three tasks' real length distributions (FlexSP's Wikipedia lengths, WikiText-2
  sections, SST-2 sentences) through the sequence module's Hydraulis 7B/A100 cost model
  (modelled GPU-seconds, not timings).
* ``spindle`` — Spindle's wavefront plan vs one big pipeline and an even split per task on a
  synthetic 4-task multi-modal DAG, 8–64 GPUs (modelled seconds from the operators' curves).
* ``lm`` — one tiny Llama (``transformers``, from scratch) per (method, seed) trained on the
  sections packed into ``--window`` BPE-token contexts for the same number of real tokens;
  validation perplexity at positions >= ``--long-from`` of whole articles and on short
  sections (< 512 tokens) alone; mean ± std over ``--seeds``.

    python benchmarks/bench_data.py --root ../shared/datasets --part pack
    python benchmarks/bench_data.py --root ../shared/datasets --part lm --seeds 3 --train-tokens 150000
    python benchmarks/bench_data.py --root ../shared/datasets --json data_bench.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def bench_pack(root: str, window: int, repeats: int) -> list:
    from sgl.systems.data import PackConfig, TfidfSvdEncoder, pack_arrays, packing_metrics, wikitext2_sections

    texts, articles = wikitext2_sections(root, "train")
    lengths = np.array([len(t.split()) for t in texts], dtype=np.int64)
    started = time.perf_counter()
    embeddings = TfidfSvdEncoder(64, seed=0).fit(texts).encode(texts)
    print(f"{len(texts)} sections, {int(lengths.sum()):,} words; TF-IDF+SVD embeddings in "
          f"{time.perf_counter() - started:.1f} s; window {window}")
    rows = []
    for method, clustering in (("datasculpt", "kmeans"), ("datasculpt", "isodata"), ("bfd", "kmeans"),
                               ("random", "kmeans"), ("iclm", "kmeans")):
        best = None
        for _ in range(repeats):  # best of `repeats` for the throughput; the packing itself is identical
            result = pack_arrays(lengths, embeddings, PackConfig(window=window, method=method,
                                                                 clustering=clustering))
            if best is None or result.timings["pack"] < best.timings["pack"]:
                best = result
        result = best
        m = result.metrics
        m["article_homogeneity"] = packing_metrics(result.packing, None, articles)["homogeneity"]
        name = method if method != "datasculpt" else f"datasculpt-{clustering}"
        rows.append({"method": name, **{k: m[k] for k in ("windows", "fill_rate", "docs_truncated",
                                                          "intra_window_similarity", "article_homogeneity",
                                                          "pack_docs_per_s")},
                     "greedy_docs_per_s": m.get("greedy_docs_per_s", float("nan"))})
    print(f"\n| method | windows | fill rate | docs truncated | intra-window cosine | article homogeneity | "
          f"greedy docs/s | pack docs/s |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['windows']} | {r['fill_rate']:.4f} | {r['docs_truncated']} | "
              f"{r['intra_window_similarity']:.3f} | {r['article_homogeneity']:.3f} | "
              f"{r['greedy_docs_per_s']:,.0f} | {r['pack_docs_per_s']:,.0f} |")
    return rows


def bench_lm(root: str, args) -> list:
    from sgl.systems.data.lm_eval import LMTrainConfig
    from sgl.systems.data.lm_study import packing_lm_study

    train = LMTrainConfig(hidden=args.hidden, layers=args.layers, heads=args.heads, intermediate=args.hidden * 11 // 4,
                          batch_size=args.batch_size, lr=args.lr, train_tokens=args.train_tokens,
                          device=args.device)
    rows = packing_lm_study(root, methods=args.methods.split(","), seeds=range(args.seeds), window=args.window_lm,
                            long_from=args.long_from, vocab_size=args.vocab, train=train,
                            max_eval_blocks=args.eval_blocks, log=lambda s: print(s, flush=True))
    print(f"\nSame {args.train_tokens:,} real training tokens per run, {args.seeds} seeds, context "
          f"{args.window_lm}, model {args.layers}x{args.hidden} ({args.vocab} BPE vocab)\n")
    print(f"| method | fill rate | docs truncated | ppl at positions >= {args.long_from} | ppl positions < "
          f"{args.long_from} | ppl short docs | final train loss |\n|---|---|---|---|---|---|---|")
    for method in dict.fromkeys(r["method"] for r in rows):
        part = [r for r in rows if r["method"] == method]

        def stat(key):
            values = np.array([r[key] for r in part])
            return f"{values.mean():.2f} ± {values.std():.2f}"

        print(f"| {method} | {part[0]['fill_rate']:.4f} | {part[0]['docs_truncated']} | {stat('ppl_long')} | "
              f"{stat('ppl_early')} | {stat('ppl_short')} | {stat('final_loss')} |")
    return rows


def bench_lobra(root: str, steps: int, devices: int) -> dict:
    from sgl.systems.data import wikitext2_sections
    from sgl.systems.data.lobra_study import lobra_compare
    from sgl.systems.seq import hydraulis_pool, read_lengths
    from sgl.systems.text import load_sst2

    pool = hydraulis_pool(devices)
    tasks = {"wikipedia": read_lengths(Path(root) / "seqlen" / "wikipedia.txt"),
             "wikitext2": np.array([len(t.split()) for t in wikitext2_sections(root, "train")[0]]),
             "sst2": np.array([max(1, len(t.split())) for t in load_sst2(root, "train")[0]])}
    mixes = {"long-heavy": {"wikipedia": 16, "wikitext2": 16, "sst2": 64},
             "short-heavy": {"wikipedia": 4, "wikitext2": 16, "sst2": 256},
             "mostly-short": {"wikipedia": 1, "wikitext2": 8, "sst2": 512}}
    print(f"\nLobRA on {devices} GPUs (Hydraulis 7B A100-40GB pool, modelled), {steps} replayed steps per mix; "
          "lengths: FlexSP Wikipedia tokens, WikiText-2 sections and SST-2 sentences in words\n")
    print("| mix (sequences per step) | best homogeneous scheme | GPU-s | LobRA replicas | GPU-s | saved | "
          "compute-term ceiling |\n|---|---|---|---|---|---|---|")
    out = {}
    for name, mix in mixes.items():
        r = lobra_compare(pool, devices, tasks, mix, steps)
        out[name] = r
        print(f"| {name} ({', '.join(f'{n} {k}' for k, n in mix.items())}) | {r['homogeneous']['replicas']} | "
              f"{r['homogeneous']['gpu_seconds']:.1f} | {r['lobra']['replicas']} | {r['lobra']['gpu_seconds']:.1f} | "
              f"{100 * r['saving']:.1f} % | {100 * r['compute_ceiling']:.1f} % |", flush=True)
    return out


def bench_spindle(devices_list=(8, 16, 32, 64)) -> dict:
    from sgl.systems.data.spindle import SpindleConfig, compare_baselines
    from sgl.systems.data.spindle_dag import mtmm_dag

    dag = mtmm_dag()
    print(f"\nSpindle on the synthetic 4-task multi-modal DAG ({len(dag.ops)} operators, Amdahl curves; modelled "
          "seconds per step, 8 GPUs per node, 150/12.5 GB/s links)\n")
    print("| GPUs | spindle | lower bound | one big pipeline | even split | vs big pipeline | vs even split | "
          "P2P s (p2p map / first fit) | plan s |\n|---|---|---|---|---|---|---|---|---|")
    out = {}
    for n in devices_list:
        started = time.perf_counter()
        r = compare_baselines(dag, SpindleConfig(devices=n))
        r["plan_seconds"] = time.perf_counter() - started
        out[n] = r
        print(f"| {n} | {r['spindle']:.3f} | {r['lower_bound']:.3f} | {r['big_pipeline']:.3f} | "
              f"{r['even_split']:.3f} | "
              f"{100 * r['faster_than_big_pipeline']:.1f} % | {100 * r['faster_than_even_split']:.1f} % | "
              f"{r['p2p_seconds']:.4f} / {r['p2p_seconds_first_fit']:.4f} | {r['plan_seconds']:.2f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--part", default="all", choices=("all", "pack", "lm", "lobra", "spindle"))
    parser.add_argument("--lobra-steps", type=int, default=10)
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--window", type=int, default=2048, help="pack part: tokens (words) per window")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window-lm", type=int, default=1024, help="lm part: BPE tokens per context")
    parser.add_argument("--long-from", type=int, default=512)
    parser.add_argument("--methods", default="datasculpt,random,iclm,bfd")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--train-tokens", type=int, default=150_000)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--eval-blocks", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = {}
    if args.part in ("all", "pack"):
        out["pack"] = bench_pack(args.root, args.window, args.repeats)
    if args.part in ("all", "lm"):
        out["lm"] = bench_lm(args.root, args)
    if args.part in ("all", "lobra"):
        out["lobra"] = bench_lobra(args.root, args.lobra_steps, args.devices)
    if args.part in ("all", "spindle"):
        out["spindle"] = bench_spindle()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
