"""DataSculpt vs its baselines on WikiText-2, and the packed-LM perplexity study (issue 21).

Parts (``--part``, default all that are built):

* ``pack`` — DataSculpt (k-means and ISODATA) vs random concatenation, ICLM similarity chain
  and best-fit decreasing on the 3,522 WikiText-2 training sections (words as tokens): fill
  rate, documents truncated, mean intra-window cosine, article homogeneity, and throughput
  (documents/s of the greedy stage alone and of the whole packing, encoding excluded).
  Timings are wall-clock on whatever machine runs it.
* ``lobra`` — LobRA's static replica MILP + per-step dispatch vs the best homogeneous scheme on
  all GPUs, replaying three mixes of three tasks' real length distributions (FlexSP's Wikipedia lengths, WikiText-2
  sections, SST-2 sentences) through the sequence module's Hydraulis 7B/A100 cost model with
  LoRA capacities (``--lobra-pool lora``, default; ``full`` = full fine-tuning capacities)
  (modelled GPU-seconds, not timings), beside the any-plan lower bound (perfect balance, every
  sequence on its cheapest scheme, no bubbles), the ceiling it gives, the best static replica
  set in hindsight and the static-plan LP bound (any static replica set, any dispatch);
  token-packed and per-bucket micro-batches; ``--devices 16,32,64`` (sequences per step scaled
  with the GPUs unless ``--lobra-fixed-batch``).
* ``lobra-oracle`` — every static replica set replayed with the greedy dispatch on the replayed
  steps (the best static set in hindsight) beside the real- and integer-count static bounds;
  ``--devices 32 --lobra-mixes mostly-short`` takes ~8 min (2,804 sets).
* ``spindle`` — Spindle's wavefront plan vs one big pipeline and an even split per task on a
  synthetic 4-task multi-modal DAG, 8–64 GPUs (modelled seconds from the operators' curves);
  P2P seconds of the exact, greedy and first-fit device mappings, and greedy vs exact on small
  random DAGs.
* ``lobra --measure`` / ``spindle --measure`` — the plans executed on ``--measure-world`` processes
  (:func:`sgl.systems.data.lobra_measure.measure_lobra`, :func:`sgl.systems.data.spindle_measure.measure_spindle`):
  measured step time of each plan against the static / baseline plans on the same batches, the
  measured and the modelled ratio, and predicted vs measured step time per plan with the cost
  model calibrated on this machine (about a minute each on 2 cores); ``--arch hf-llama`` (default) runs
  LobRA's adapters on a Hugging Face Llama base and Spindle with a Llama LM tower, ``--arch tiny`` the
  TinyLM paths; ``--measure-dynamic`` adds LobRA's dynamic plan executed step by step.
* ``lm`` — one tiny Llama (``transformers``, from scratch) per (method, seed) trained on the
  sections packed into ``--window`` BPE-token contexts for the same number of real tokens;
  validation perplexity at positions >= ``--long-from`` of whole articles and on short
  sections (< 512 tokens) alone; mean ± std over ``--seeds``.

    python benchmarks/bench_data.py --root ../shared/datasets --part pack
    python benchmarks/bench_data.py --root ../shared/datasets --part lm --seeds 3 --train-tokens 150000
    python benchmarks/bench_data.py --root ../shared/datasets --json data_bench.json
    python benchmarks/bench_data.py --root ../shared/datasets --part lobra --measure --arch hf-llama --measure-dynamic
    python benchmarks/bench_data.py --part spindle --measure --arch hf-llama
    # one study split over processes (seeds or methods each), rows saved after every run, then merged:
    python benchmarks/bench_data.py --part lm --seeds 1 --seed-start 2 --lm-json s2.json ...
    python benchmarks/bench_data.py --lm-tables s0.json,s1.json,s2.json
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


def lm_table(rows: list, long_from: int) -> str:
    """Markdown table: mean ± sample std over seeds per method, and the paired difference vs random."""
    lines = [f"| method | seeds | fill rate | docs truncated | ppl at positions >= {long_from} | ppl positions < "
             f"{long_from} | ppl short docs | long Δ vs random (paired) | short Δ vs random (paired) | "
             f"final train loss |", "|---|---|---|---|---|---|---|---|---|---|"]
    by_seed = {(r["method"], r["seed"]): r for r in rows}

    def stat(values, digits=2):
        values = np.asarray(values, dtype=float)
        std = values.std(ddof=1) if values.size > 1 else float("nan")
        return f"{values.mean():.{digits}f} ± {std:.{digits}f}"

    for method in dict.fromkeys(r["method"] for r in rows):
        part = sorted((r for r in rows if r["method"] == method), key=lambda r: r["seed"])
        deltas = {}
        for key in ("ppl_long", "ppl_short"):
            pairs = [(r[key], by_seed[("random", r["seed"])][key]) for r in part if ("random", r["seed"]) in by_seed]
            deltas[key] = (stat([100 * (a / b - 1) for a, b in pairs], 1) + " %") if pairs and method != "random" \
                else "–"
        lines.append(f"| {method} | {len(part)} | {part[0]['fill_rate']:.4f} | {part[0]['docs_truncated']} | "
                     f"{stat([r['ppl_long'] for r in part])} | {stat([r['ppl_early'] for r in part])} | "
                     f"{stat([r['ppl_short'] for r in part])} | {deltas['ppl_long']} | {deltas['ppl_short']} | "
                     f"{stat([r['final_loss'] for r in part], 3)} |")
    return "\n".join(lines)


def bench_lm(root: str, args) -> list:
    from dataclasses import asdict

    from sgl.fileio import atomic_write
    from sgl.systems.data.lm_eval import LMTrainConfig
    from sgl.systems.data.lm_study import packing_lm_study

    train = LMTrainConfig(hidden=args.hidden, layers=args.layers, heads=args.heads, intermediate=args.hidden * 11 // 4,
                          batch_size=args.batch_size, lr=args.lr, train_tokens=args.train_tokens,
                          device=args.device)
    settings = {"train": asdict(train), "window": args.window_lm, "long_from": args.long_from, "vocab": args.vocab,
                "eval_blocks": args.eval_blocks, "methods": args.methods, "seeds": args.seeds,
                "seed_start": args.seed_start}
    done = []
    if args.lm_json and Path(args.lm_json).exists():  # resume an interrupted study with the same settings
        saved = json.loads(Path(args.lm_json).read_text())
        if saved.get("settings") != settings:
            raise SystemExit(f"{args.lm_json} holds a study with other settings; remove it or pick another path")
        done = saved["rows"]
        print(f"resuming: {len(done)} runs already in {args.lm_json}", flush=True)
    rows_so_far = list(done)

    def save(row: dict) -> None:
        rows_so_far.append(row)
        if args.lm_json:
            with atomic_write(args.lm_json, "w") as handle:
                json.dump({"settings": settings, "rows": rows_so_far}, handle, indent=1, default=float)

    seeds = range(args.seed_start, args.seed_start + args.seeds)
    rows = packing_lm_study(root, methods=args.methods.split(","), seeds=seeds, window=args.window_lm,
                            long_from=args.long_from, vocab_size=args.vocab, train=train,
                            max_eval_blocks=args.eval_blocks, log=lambda s: print(s, flush=True),
                            on_row=save, done=done)
    print(f"\nSame {args.train_tokens:,} real training tokens per run, seeds {seeds[0]}..{seeds[-1]} for every method, "
          f"context {args.window_lm}, model {args.layers}x{args.hidden} ({args.vocab} BPE vocab); mean ± sample "
          "std over seeds; Δ = ppl / ppl(random, same seed) − 1\n")
    print(lm_table(rows, args.long_from))
    return rows


LOBRA_MIXES = {"long-heavy": {"wikipedia": 16, "wikitext2": 16, "sst2": 64},
               "short-heavy": {"wikipedia": 4, "wikitext2": 16, "sst2": 256},
               "mostly-short": {"wikipedia": 1, "wikitext2": 8, "sst2": 512}}  # sequences per step on 16 GPUs


def _lobra_tasks(root: str) -> dict:
    """The three tasks' real lengths: FlexSP Wikipedia tokens, WikiText-2 sections and SST-2 sentences in words."""
    from sgl.systems.data import wikitext2_sections
    from sgl.systems.seq import read_lengths
    from sgl.systems.text import load_sst2

    return {"wikipedia": read_lengths(Path(root) / "seqlen" / "wikipedia.txt"),
            "wikitext2": np.array([len(t.split()) for t in wikitext2_sections(root, "train")[0]]),
            "sst2": np.array([max(1, len(t.split())) for t in load_sst2(root, "train")[0]])}


def _lobra_mixes(devices: int, scale_batch: bool = True, only=None) -> dict:
    """:data:`LOBRA_MIXES` (or the ``only`` ones), scaled to the same sequences per GPU on a larger cluster."""
    unknown = set(only or ()) - set(LOBRA_MIXES)
    if unknown:
        raise SystemExit(f"unknown LobRA mix {sorted(unknown)}; available: {', '.join(LOBRA_MIXES)}")
    scale = max(1, devices // 16) if scale_batch else 1
    return {name: {k: n * scale for k, n in mix.items()} for name, mix in LOBRA_MIXES.items()
            if only is None or name in only}


def bench_lobra_oracle(root: str, steps: int, devices: int, mixes_only=None, rank: int = 16) -> dict:
    """Every static replica set replayed with the greedy dispatch on the replayed steps (the best one in
    hindsight), beside the real-count and integer-count static bounds; modelled GPU-seconds."""
    from sgl.systems.data.lobra import homogeneous_replicas
    from sgl.systems.data.lobra_pool import lobra_pool
    from sgl.systems.data.lobra_search import greedy_ms
    from sgl.systems.data.lobra_study import replayed_steps, replica_sets, static_plan_bound

    tasks = _lobra_tasks(root)
    pool = lobra_pool("lora", devices, rank=rank, adapters=len(tasks))
    label = lambda rep: ", ".join(f"{r}x {pool[s].label}" for s, r in sorted(rep.items()))  # noqa: E731
    print(f"\nLobRA static oracle on {devices} GPUs, {steps} replayed steps, greedy (longest-first) dispatch\n\n"
          "| mix | sets | homogeneous GPU-s | best static set in hindsight | GPU-s | saved | static LP (real counts) | "
          "integer counts | static ceiling | seconds |\n|---|---|---|---|---|---|---|---|---|---|")
    out = {}
    for name, mix in _lobra_mixes(devices, True, mixes_only).items():
        started = time.perf_counter()
        kept, batches = replayed_steps(pool, tasks, mix, steps, 0)  # the steps lobra_compare replays (seed 0)
        longest = int(max(np.max(v) for k, v in kept.items() if mix.get(k, 0) > 0))
        bound = static_plan_bound(pool, devices, batches, longest, limit=1, integer=True)
        homo = homogeneous_replicas(pool, devices, longest)
        base = greedy_ms(pool, homo, batches) * devices / 1000.0
        sets = replica_sets(pool, devices, longest, limit=10 ** 6)
        best_ms, best = min((greedy_ms(pool, rep, batches), k) for k, rep in enumerate(sets))
        best_s = best_ms * devices / 1000.0
        tight = max(bound["continuous_gpu_seconds"], bound["integer_gpu_seconds"])
        out[name] = {"sets": len(sets), "homogeneous_gpu_seconds": base, "oracle_gpu_seconds": best_s,
                     "oracle_replicas": label(sets[best]), "saving": 1.0 - best_s / base, "static_bound": bound,
                     "static_ceiling": 1.0 - tight / base, "seconds": time.perf_counter() - started}
        print(f"| {name} | {len(sets):,} | {base:.2f} | {label(sets[best])} | {best_s:.2f} | "
              f"{100 * out[name]['saving']:.1f} % | {bound['continuous_gpu_seconds']:.2f} | "
              f"{bound['integer_gpu_seconds']:.2f} | {100 * out[name]['static_ceiling']:.1f} % | "
              f"{out[name]['seconds']:.0f} |", flush=True)
        assert tight <= best_s * (1 + 2e-3)
    return out


def bench_lobra(root: str, steps: int, devices: int, search: int = 64, microbatches=("tokens", "bucket"),
                pool_kind: str = "lora", rank: int = 16, bound_sets: int = 256, scale_batch: bool = True,
                local_search: int = 300, local_keep: int = 6, dynamic_top: int = 0,
                bandwidth_gbps: float = 150.0, mixes_only=None, lpt: bool = False,
                integer_bound: bool = False) -> dict:
    from sgl.systems.data.lobra_dynamic import lobra_dynamic_compare
    from sgl.systems.data.lobra_pool import lobra_pool
    from sgl.systems.data.lobra_study import lobra_compare, static_floor

    tasks = _lobra_tasks(root)
    pool = lobra_pool(pool_kind, devices, rank=rank, adapters=len(tasks))
    mixes = _lobra_mixes(devices, scale_batch, mixes_only)
    memory = (f"LoRA memory model: frozen bf16 base, {len(tasks)} rank-{rank} adapters" if pool_kind == "lora"
              else "full fine-tuning memory model")
    print(f"\nLobRA on {devices} GPUs (Hydraulis 7B A100-40GB schemes, {memory}; profiled full fine-tuning times; "
          f"modelled), {steps} replayed steps per mix; "
          "lengths: FlexSP Wikipedia tokens, WikiText-2 sections and SST-2 sentences in words. Static plan chosen on "
          f"3 calibration steps of another seed among the MILP's candidates and every replica set (search {search}; "
          f"where there are more sets, the {local_keep} best of a hill climb over at most {local_search} sets scored "
          "by a greedy-dispatch replay of the calibration steps, from the rounded static-LP counts and the MILP's "
          "candidates; * = the chosen set came from it); "
          "micro-batches per bucket (LobRA's dispatcher) or token-packed (first-fit decreasing across buckets)"
          + ("; every step also dispatched greedily (longest first to the replica finishing it earliest), the faster "
             "of the two kept (baseline too). " if lpt else ". ") +
          "Lower bound: no plan on this cost model can cost fewer GPU-seconds on these steps (perfect balance, "
          "cheapest scheme per sequence, no bubbles); ceiling = 1 - bound / homogeneous; oracle = the best static "
          "replica set in hindsight (all sets replayed on the replayed steps); static LP = the fewest GPU-seconds "
          f"any static replica set with any dispatch can take (per-set LPs when at most {bound_sets} sets, else "
          "real-valued replica counts"
          + ("; integer = integer replica counts re-chosen every step, a bound on every static set" if integer_bound
             else "") + "), static ceiling = 1 - static LP / homogeneous"
          + (f"; dynamic = the replica set re-chosen every step among the {dynamic_top} best calibration candidates "
             f"(step time + re-shard of the changed replicas' model state at {bandwidth_gbps:g} GB/s per GPU), "
             "'as static' = LobRA's set priced from the same dispatches" if dynamic_top else "") + "\n")
    extra = " dynamic GPU-s | as static | dynamic saved | switches | re-shard s |" if dynamic_top else ""
    print("| mix (sequences per step) | micro-batches | homogeneous | GPU-s | LobRA replicas | GPU-s | saved | "
          "oracle static GPU-s | lower bound GPU-s | ceiling | static LP GPU-s | static ceiling |" + extra + "\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * extra.count("|"))
    out = {}
    for name, mix in mixes.items():
        for microbatch in microbatches:
            started = time.perf_counter()
            kw = dict(microbatch=microbatch, search=search, bound_sets=bound_sets, local_search=local_search,
                      local_keep=local_keep, lpt=lpt, integer_bound=integer_bound)
            r = (lobra_dynamic_compare(pool, devices, tasks, mix, steps, top=dynamic_top, bandwidth_gbps=bandwidth_gbps,
                                       rank=rank, **kw) if dynamic_top else lobra_compare(pool, devices, tasks, mix,
                                                                                           steps, **kw))
            d = r.get("dynamic")
            more = (f" {d['gpu_seconds']:.1f} | {d['static_gpu_seconds'][0]:.1f} | {100 * d['saving']:.1f} % | "
                    f"{d['switches']} | {d['reconfig_s']:.2f} |" if d else "")
            r["seconds"] = time.perf_counter() - started
            out[f"{name}/{microbatch}"] = r
            oracle, static = r["oracle_static"], r["static_bound"]
            lp = static_floor(static)
            kind = ("" if static["gpu_seconds"] is not None else
                    " (integer counts)" if static.get("integer_gpu_seconds") is not None else " (real counts)")
            print(f"| {name} ({', '.join(f'{n} {k}' for k, n in mix.items())}) | {microbatch} | "
                  f"{r['homogeneous']['replicas']} | {r['homogeneous']['gpu_seconds']:.1f} | "
                  f"{r['lobra']['replicas']}{' *' if r['lobra']['replicas'] in r['local_candidates'] else ''} | "
                  f"{r['lobra']['gpu_seconds']:.1f} | {100 * r['saving']:.1f} % | "
                  f"{'–' if oracle is None else format(oracle['gpu_seconds'], '.1f')} | "
                  f"{r['lower_bound_gpu_seconds']:.1f} | {100 * r['ceiling']:.1f} % | "
                  f"{lp:.1f}{kind} | "
                  f"{100 * r['static_ceiling']:.1f} % |{more}", flush=True)
            assert r["lower_bound_gpu_seconds"] <= min(r["lobra"]["gpu_seconds"], r["homogeneous"]["gpu_seconds"])
            assert lp <= r["lobra"]["gpu_seconds"] * (1 + 1e-9)
    return out


def bench_spindle(devices_list=(8, 16, 32, 64)) -> dict:
    from sgl.systems.data.spindle import SpindleConfig, compare_baselines
    from sgl.systems.data.spindle_dag import mtmm_dag

    dag = mtmm_dag()
    print(f"\nSpindle on the synthetic 4-task multi-modal DAG ({len(dag.ops)} operators, Amdahl curves; modelled "
          "seconds per step, 8 GPUs per node, 150/12.5 GB/s links)\n")
    print("| GPUs | spindle | lower bound | one big pipeline | even split | vs big pipeline | vs even split | "
          "P2P s (exact / greedy / first fit) | mapping used | plan s (3 mappings) |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    out = {}
    for n in devices_list:
        started = time.perf_counter()
        r = compare_baselines(dag, SpindleConfig(devices=n))
        r["plan_seconds"] = time.perf_counter() - started
        by = r["p2p_seconds_by_mapping"]
        out[n] = r
        print(f"| {n} | {r['spindle']:.3f} | {r['lower_bound']:.3f} | {r['big_pipeline']:.3f} | "
              f"{r['even_split']:.3f} | "
              f"{100 * r['faster_than_big_pipeline']:.1f} % | {100 * r['faster_than_even_split']:.1f} % | "
              f"{by['exact']:.4f} / {by['p2p']:.4f} / {by['first_fit']:.4f} | {r['mapping_used']} | "
              f"{r['plan_seconds']:.2f} |")
    out["small_random"] = mapping_vs_greedy()
    return out


def bench_lobra_measured(root: str, world: int, steps: int, max_len: int, mixes_only=None, arch: str = "hf-llama",
                         dynamic: bool = False) -> dict:
    """LobRA's plan executed on ``world`` processes (issue 39): measured vs predicted, against every static set."""
    from sgl.systems.data.lobra_measure import measure_lobra

    base = {"tiny": "TinyLM 2x64", "hf-llama": "Hugging Face LlamaForCausalLM 2x64 (q_proj/v_proj adapted)"}[arch]

    tasks = _lobra_tasks(root)
    mixes = {name: {k: max(1, n * world // 16) for k, n in mix.items()} for name, mix in LOBRA_MIXES.items()
             if mixes_only is None or name in mixes_only}
    print(f"\nLobRA measured on {world} processes (gloo, 1 thread each; {base} + 3 rank-8 LoRA adapters, "
          f"frozen base; packed micro-batches), {steps} timed steps per plan after a warm-up (plans interleaved, "
          f"median step); real lengths drawn per step and scaled so the longest drawn is {max_len} tokens (min 4). "
          "Cost model calibrated on this machine: the workers time LoRA fwd+bwd micro-batches at once and fit "
          "t = a·ΣL² + b·ΣL + c (ms); a d-process replica is priced a/d, b/d; predicted = the planner's step_time "
          "+ α per collective (α = a measured small all-reduce). LobRA's replicas: its MILP on 3 calibration "
          "steps of another seed."
          + (" Plan 'dynamic': the replica set re-chosen before every step (greedy, free switches) among every "
             "static set, starting from LobRA's." if dynamic else "")
          + " Timings under whatever load the machine has.\n")
    print("| mix (per step) | plan | LobRA | homogeneous | predicted ms | measured ms | \\|pred − meas\\| / meas |\n"
          "|---|---|---|---|---|---|---|")
    out = {}
    for name, mix in mixes.items():
        r = measure_lobra(tasks, mix, steps=steps, world=world, max_len=max_len, arch=arch, dynamic=dynamic)
        out[name] = r
        for label, v in r["plans"].items():
            print(f"| {name} ({', '.join(f'{n} {k}' for k, n in mix.items())}) | {label} | "
                  f"{'yes' if v['lobra'] else ''} | {'yes' if v['homogeneous'] else ''} | {v['predicted_ms']:.1f} | "
                  f"{v['measured_ms']:.1f} | {100 * v['error']:.0f} % |", flush=True)
        c = r["cost_ms"]
        print(f"\n{name}: scale {r['scale']:.4f}; a={c['a']:.3g} ms/token², b={c['b']:.3g} ms/token, c={c['c']:.3g} "
              f"ms/micro-batch, α={c['alpha']:.3g} ms; LobRA vs homogeneous: measured {r['measured_ratio']:.3f}x, "
              f"modelled {r['modelled_ratio']:.3f}x; LobRA vs best static set measured: {r['vs_best_static']:.3f}x "
              f"(best: {r['best_static']}); median |pred − meas| / meas {100 * r['median_error']:.0f} %\n")
    return out


def bench_spindle_measured(world: int, steps: int, rows: int, arch: str = "hf-llama") -> dict:
    """Spindle's plan executed on ``world`` processes (issue 39) vs one big pipeline and an even split."""
    from sgl.systems.data.spindle_measure import measure_spindle

    r = measure_spindle(world=world, rows=rows, steps=steps, arch=arch)
    tower = {"tiny": "2-layer Transformer encoder backbone",
             "hf-llama": "2-layer Hugging Face Llama LM tower (LlamaDecoderLayer, rotary, causal)"}[arch]
    print(f"\nSpindle measured on {world} processes (gloo, 1 thread each): tasks vqa (vision conv + text "
          f"Transformer encoders) and asr (1-D conv audio encoder), each with a {tower} and a "
          f"head; {rows} rows per task; {steps} timed steps per plan after a warm-up (plans interleaved, median "
          f"step). Curves calibrated on this machine (every operator's fwd+bwd on ⌈B/g⌉ rows, all workers at "
          f"once), link {r['link_gbps'] * 1e3:.0f} MB/s (one operator output sent between workers), "
          f"α {r['alpha_ms']:.2f} ms; "
          "predicted = the planner's replayed makespan + the closing all-reduces (gradient, timed at its size; "
          "loss, α). Timings under whatever load the machine has.\n")
    print("| plan | predicted ms | measured ms | \\|pred − meas\\| / meas | baseline / spindle measured | "
          "modelled |\n|---|---|---|---|---|---|")
    for label, v in r["plans"].items():
        ratio = (f"{v['measured_ratio']:.3f}x | {v['modelled_ratio']:.3f}x" if "measured_ratio" in v else "– | –")
        print(f"| {label} | {v['predicted_ms']:.1f} | {v['measured_ms']:.1f} | {100 * v['error']:.0f} % | {ratio} |")
    print(f"\nspindle placement: {r['plans']['spindle']['devices']}; curves (ms on 1, 2, ... devices): "
          f"{r['curves_ms']}; median |pred − meas| / meas {100 * r['median_error']:.0f} %")
    return r


def mapping_vs_greedy(trials: int = 40, seed: int = 3) -> dict:
    """Greedy vs exact device mapping (total P2P s) on small random DAGs: 4 GPUs (2 per node) and 8 (4 per node)."""
    from sgl.systems.data.spindle import SpindleConfig, SpindlePlanner
    from sgl.systems.data.spindle_dag import random_dag

    rng = np.random.default_rng(seed)
    ratios, equal, cases, used = [], 0, 0, set()
    for _ in range(trials):
        for devices, per_node in ((4, 2), (8, 4)):
            dag = random_dag(rng, devices)
            planner = SpindlePlanner(dag, SpindleConfig(devices=devices, devices_per_node=per_node))
            exact = planner.plan().schedule.p2p_seconds
            used.add(planner.mapping_used)
            greedy = SpindlePlanner(dag, SpindleConfig(devices=devices, devices_per_node=per_node,
                                                       mapping="p2p")).plan().schedule.p2p_seconds
            cases += 1
            equal += abs(greedy - exact) <= 1e-12
            if exact > 0:
                ratios.append(greedy / exact)
    worst = max(ratios) if ratios else 1.0
    print(f"\nDevice mapping on {cases} small random DAGs (3-6 operators; 4 GPUs in 2-GPU nodes, 8 in 4-GPU nodes), "
          f"mapping used: {', '.join(sorted(used))}: greedy = exact in {equal}; worst greedy/exact P2P {worst:.2f}x")
    return {"cases": cases, "greedy_optimal": equal, "worst_ratio": worst, "used": sorted(used)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=str(ROOT.parent / "shared" / "datasets"))
    parser.add_argument("--part", default="all", choices=("all", "pack", "lm", "lobra", "lobra-oracle", "spindle"))
    parser.add_argument("--lobra-steps", type=int, default=10)
    parser.add_argument("--lobra-search", type=int, default=64,
                        help="replica sets tried exhaustively when at most this many")
    parser.add_argument("--lobra-microbatch", default="tokens,bucket", help="micro-batch models to compare")
    parser.add_argument("--lobra-pool", default="lora", choices=("lora", "full"),
                        help="scheme capacities: LoRA on a frozen base (LobRA's setting) or full fine-tuning")
    parser.add_argument("--lobra-rank", type=int, default=16, help="LoRA rank of the memory model")
    parser.add_argument("--lobra-bound-sets", type=int, default=256,
                        help="static LP bound per replica set when there are at most this many")
    parser.add_argument("--lobra-fixed-batch", action="store_true",
                        help="keep 16 GPUs' sequences per step on larger clusters (default: scale with --devices)")
    parser.add_argument("--lobra-local-search", type=int, default=300,
                        help="hill-climb evaluations when the replica sets are too many to enumerate (0 = off)")
    parser.add_argument("--lobra-local-keep", type=int, default=6, help="best hill-climb sets kept as candidates")
    parser.add_argument("--lobra-lpt", action="store_true",
                        help="also dispatch every step greedily (longest first) and keep the faster dispatch")
    parser.add_argument("--lobra-dynamic-top", type=int, default=0,
                        help="re-choose the replica set every step among this many calibration candidates (0 = static)")
    parser.add_argument("--lobra-bandwidth", type=float, default=150.0,
                        help="GB/s per GPU for re-sharding model state in the dynamic plan")
    parser.add_argument("--lobra-mixes", default=None,
                        help="comma-separated subset of long-heavy,short-heavy,mostly-short (default all)")
    parser.add_argument("--lobra-integer-bound", action="store_true",
                        help="also bound every static set with integer replica counts (one MILP bisection per step)")
    parser.add_argument("--measure", action="store_true",
                        help="lobra / spindle parts: execute the plans on processes and time them (issue 39) "
                             "instead of the modelled replay")
    parser.add_argument("--measure-world", type=int, default=2, help="--measure: processes")
    parser.add_argument("--measure-steps", type=int, default=5, help="--measure: timed steps per plan")
    parser.add_argument("--measure-max-len", type=int, default=256,
                        help="--measure lobra: the longest drawn sequence is scaled to this many tokens")
    parser.add_argument("--measure-rows", type=int, default=64, help="--measure spindle: rows per task")
    parser.add_argument("--arch", default="hf-llama", choices=("tiny", "hf-llama"),
                        help="--measure: the LoRA base (lobra) / the shared LM tower (spindle)")
    parser.add_argument("--measure-dynamic", action="store_true",
                        help="--measure lobra: also execute the dynamic plan (replica set re-chosen every step)")
    parser.add_argument("--devices", default="16", help="lobra part: GPUs, comma-separated (e.g. 16,32,64)")
    parser.add_argument("--window", type=int, default=2048, help="pack part: tokens (words) per window")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window-lm", type=int, default=1024, help="lm part: BPE tokens per context")
    parser.add_argument("--long-from", type=int, default=512)
    parser.add_argument("--methods", default="datasculpt,random,iclm,bfd")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed-start", type=int, default=0, help="lm part: seeds seed_start .. seed_start+seeds-1")
    parser.add_argument("--lm-tables", default=None,
                        help="print the lm table of saved --lm-json files (comma-separated, same settings) and exit")
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
    parser.add_argument("--lm-json", default=None, help="lm part: rows saved after every run; resumes from it")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.lm_tables:  # several processes may each run some seeds of one study: merge their rows
        saved = [json.loads(Path(f).read_text()) for f in args.lm_tables.split(",")]
        per_run = ("seeds", "seed_start", "methods")  # what may differ between the processes of one study
        keys = [{k: v for k, v in d["settings"].items() if k not in per_run} for d in saved]
        if any(k != keys[0] for k in keys):
            raise SystemExit("the --lm-tables files hold studies with different settings")
        rows = list({(r["method"], r["seed"]): r for d in saved for r in d["rows"]}.values())
        print(lm_table(rows, saved[0]["settings"]["long_from"]))
        return
    out = {}
    if args.part in ("all", "pack"):
        out["pack"] = bench_pack(args.root, args.window, args.repeats)
    if args.part in ("all", "lm"):
        out["lm"] = bench_lm(args.root, args)
    if args.measure:  # the executed, timed plans (issue 39); the modelled parts stay as they are
        mixes = None if args.lobra_mixes is None else args.lobra_mixes.split(",")
        if args.part in ("all", "lobra"):
            out["lobra_measured"] = bench_lobra_measured(args.root, args.measure_world, args.measure_steps,
                                                         args.measure_max_len, mixes or ["long-heavy"], args.arch,
                                                         args.measure_dynamic)
        if args.part in ("all", "spindle"):
            out["spindle_measured"] = bench_spindle_measured(args.measure_world, args.measure_steps,
                                                             args.measure_rows, args.arch)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=float))
        return
    if args.part in ("all", "lobra"):
        mixes = None if args.lobra_mixes is None else args.lobra_mixes.split(",")
        out["lobra"] = {n: bench_lobra(args.root, args.lobra_steps, int(n), args.lobra_search,
                                       args.lobra_microbatch.split(","), args.lobra_pool, args.lobra_rank,
                                       args.lobra_bound_sets, not args.lobra_fixed_batch,
                                       local_search=args.lobra_local_search, local_keep=args.lobra_local_keep,
                                       dynamic_top=args.lobra_dynamic_top, bandwidth_gbps=args.lobra_bandwidth,
                                       mixes_only=mixes, lpt=args.lobra_lpt, integer_bound=args.lobra_integer_bound)
                        for n in args.devices.split(",")}
    if args.part == "lobra-oracle":  # minutes per mix at 32 GPUs (2,804 sets): never part of "all"
        mixes = None if args.lobra_mixes is None else args.lobra_mixes.split(",")
        out["lobra_oracle"] = {n: bench_lobra_oracle(args.root, args.lobra_steps, int(n), mixes, args.lobra_rank)
                               for n in args.devices.split(",")}
    if args.part in ("all", "spindle"):
        out["spindle"] = bench_spindle()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
