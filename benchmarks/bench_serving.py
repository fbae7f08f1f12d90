"""sgl.systems.serving in one run: KV selection, Student Parallelism, LoRA-Inlaid, the serving MILP.

    SGL_TEST_DATA=../shared/datasets python benchmarks/bench_serving.py --root ../shared/datasets
    python benchmarks/bench_serving.py --root ../shared/datasets --quick      # minutes, smaller models
    python benchmarks/bench_serving.py --root ../shared/datasets --only kv --sink 32   # the paper's sinks
    python benchmarks/bench_serving.py --root ../shared/datasets --only kv --kv-train-steps 500 --train-attention sdpa
    python benchmarks/bench_serving.py --root ../shared/datasets --quick --only kvmem lora   # the memory effects
    python benchmarks/bench_serving.py --root ../shared/datasets --only hetero-exec   # a serving plan executed

Prints ratios measured in this one run. Latencies are wall-clock on this machine (labelled
"CPU calibration"): rerun on a quiet machine before quoting them. MILP figures are modelled
(roofline tables from GPU datasheets), not measured; ``hetero-exec`` executes a plan (one process
per replica, GPU types emulated by calibrated slowdowns) and prints measured beside modelled.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sgl.systems.serving.hetero import (DeployConfig, GPUType, ServingProblem, Workload, best_homogeneous,
                                        cheapest_feasible_budget, plan_min_cost, plan_serving, run_serving_plan)
from sgl.systems.serving.hetero.tables import GPUSpec, ModelSpec, roofline_problem
from sgl.systems.serving.kv import METHODS, KVBenchConfig, kv_memory, run_kv_bench
from sgl.systems.serving.lm import TinyLlamaSpec
from sgl.systems.serving.lora import LoRABenchConfig, run_lora_bench
from sgl.systems.serving.students import StudentsConfig, run_students

#: datasheet figures (memory GB, HBM GB/s, dense bf16 TFLOP/s) and indicative on-demand $/h
GPUS = [GPUSpec("L4", 24, 300, 121, 0.80, 8), GPUSpec("A10G", 24, 600, 70, 1.01, 8),
        GPUSpec("A100", 80, 2039, 312, 3.67, 8), GPUSpec("H100", 80, 3350, 989, 7.50, 8)]
#: Llama-2-7B-like / 13B-like decoders: KV bytes/token = 2 (K,V) * layers * kv_heads * head_dim * 2 bytes
MODELS = [ModelSpec("llama-7b", 6.7, 2 * 32 * 32 * 128 * 2), ModelSpec("llama-13b", 13.0, 2 * 40 * 40 * 128 * 2)]
#: workload types: (input tokens, output tokens, requests in the hour)
WORKLOADS = {"chat": (256, 256, 40000), "summarise": (2048, 128, 8000), "generate": (128, 1024, 4000)}


def kv_section(args, spec, out):
    train_steps = args.kv_train_steps or args.train_steps
    cfg = KVBenchConfig(args.root, methods=METHODS, budgets=(0.05, 0.1, 0.2), context=args.context,
                        steps=args.decode_steps, contexts=args.contexts, train_steps=train_steps,
                        # trained on windows as long as prompt + decode: every position RoPE sees is in range
                        train_seq_len=args.context + args.decode_steps, train_batch=1, spec=spec,
                        cache_dir=args.cache_dir, sink=args.sink, recent_ratio=args.recent_ratio,
                        cache_blocks=args.cache_blocks, train_attention=args.train_attention)
    res = run_kv_bench(cfg)
    out["kv"] = res
    print(f"\n## KV selection: tiny Llama ({spec.layers} layers, {spec.heads} q / {spec.kv_heads} kv heads, "
          f"{train_steps} steps of {args.context + args.decode_steps} tokens on WikiText-2), "
          f"{args.contexts} contexts of {args.context} tokens, {args.decode_steps} teacher-forced decode steps, "
          f"sink {args.sink}, recent ratio {args.recent_ratio}; full-attention ppl {res['ppl_full']:.1f}")
    print(f"{'budget':>6} {'method':>9} {'recall@k':>8} {'mass':>6} {'out err':>8} {'agree':>6} "
          f"{'ppl/full':>8} {'step ms (CPU calib.)':>20}")
    for r in res["rows"]:
        print(f"{r['budget']:>6.2f} {r['method']:>9} {r['recall']:>8.3f} {r['mass']:>6.3f} {r['output_error']:>8.4f} "
              f"{r['agreement']:>6.3f} {r['ppl'] / r['ppl_full']:>8.4f} {r['step_ms']:>20.2f}")
    print(f"full attention decode step: {res['full_step_ms']:.2f} ms (CPU calibration)")
    print(f"\nPQCache slow tier (host) -> fast tier through the LFU block cache ({args.cache_blocks} blocks of "
          f"{cfg.block_size} tokens per layer and KV head); KV bytes fetched per decode step, all layers and heads:")
    for r in (r for r in res["rows"] if r["method"] == "pqcache"):
        none = r["bytes_per_step_no_cache"]
        print(f"  budget {r['budget']:.2f}: hit rate {r['lfu_hit_rate']:.3f}; no cache {none / 1e3:7.1f} kB/step; "
              f"cache {r['bytes_per_step'] / 1e3:7.1f} kB/step ({r['bytes_per_step'] / none:.3f}x) over all steps, "
              f"{r['bytes_per_step_late'] / 1e3:7.1f} kB/step ({r['bytes_per_step_late'] / none:.3f}x) over the "
              f"second half (cache warm)")
    print("\noutput error ceiling: a top-k retriever at recall 1 attends the exact top-k (the oracle)")
    for budget in cfg.budgets:
        rows = {r["method"]: r for r in res["rows"] if r["budget"] == budget}
        base = min((r for m, r in rows.items() if m not in ("pqcache", "exact")), key=lambda r: r["output_error"])
        pq, ex = rows["pqcache"]["output_error"], rows["exact"]["output_error"]
        best = min(rows.values(), key=lambda r: r["output_error"])
        print(f"  budget {budget:.2f}: pqcache / oracle {pq / ex:.3f}; oracle / best baseline ({base['method']}) "
              f"{ex / base['output_error']:.3f}; pqcache / best baseline {pq / base['output_error']:.3f}; "
              f"lowest = {best['method']} ({best['output_error']:.4f})")


def kv_memory_section(args, spec, out):
    from sgl.systems.serving.lm import train_tiny_llama, wikitext_ids

    train_steps = args.kv_train_steps or args.train_steps
    model, tok = train_tiny_llama(args.root, spec=spec, steps=train_steps, seq_len=args.context + args.decode_steps,
                                  batch_size=1, cache_dir=args.cache_dir, train_attention=args.train_attention)
    ids = wikitext_ids(args.root, "test", tok)[: args.context]
    rows = kv_memory(model, ids, budgets=(0.05, 0.1, 0.2), steps=args.decode_steps, sink=args.sink,
                     recent_ratio=args.recent_ratio)
    out["kv_memory"] = rows
    print(f"\n## PQCache device memory: PQKVCache (sink + recent window + codes on the device, middle KV on the "
          f"host) vs the full DynamicCache, greedy generate() of {args.decode_steps} tokens after a "
          f"{args.context}-token WikiText-2 prompt; bytes from the storages of the tensors each cache holds")
    for r in rows:
        print(f"  budget {r['budget']:.2f}: device {r['device_bytes'] / 1e3:8.1f} kB vs full {r['full_bytes'] / 1e3:8.1f} kB"
              f" -> {r['ratio']:.3f}x; host tier {r['host_bytes'] / 1e3:8.1f} kB; ids equal to today's selection: "
              f"{r['equal']}; generate {r['tiered_s']:.2f} s vs {r['full_cache_s']:.2f} s (CPU calibration)")


def students_section(args, out):
    cfg = StudentsConfig(args.root, num_students=4, teacher_layers=6, student_layers=1, hidden=128,
                         train_sentences=args.sst2_sentences, teacher_steps=args.teacher_steps,
                         student_steps=args.student_steps, cache_dir=args.cache_dir, requests=400)
    res = run_students(cfg)
    out["students"] = res
    acc_t, acc_s = res["teacher_accuracy"], res["students_accuracy"]
    lat = res["latency_ms_batch1"]
    print(f"\n## Student Parallelism: 6-layer teacher vs 4 one-layer students (SST-2 dev)")
    print(f"teacher accuracy {100 * acc_t:.1f} %; students k=1..4: "
          + ", ".join(f"{100 * a:.1f} %" for a in acc_s.values())
          + f"; loss at k=4: {100 * (acc_t - acc_s[max(acc_s)]):.1f} points")
    print(f"batch-1 latency (CPU calibration): teacher {lat['teacher']:.2f} ms, students {lat['students']:.2f} ms "
          f"-> {lat['teacher'] / lat['students']:.2f}x lower")
    b = res["burst"]
    for name, r in b.items():
        print(f"burst {name:>17}: mean {r['mean_ms']:8.1f} ms, p99 {r['p99_ms']:8.1f} ms, {r['throughput']:7.1f} req/s, "
              f"accuracy {100 * r['accuracy']:.1f} %, students used {r['mean_active']:.2f}")
    print(f"burst mean latency teacher / students+pruning: {b['teacher']['mean_ms'] / b['students+pruning']['mean_ms']:.2f}x")


def lora_section(args, spec, out):
    cfg = LoRABenchConfig(args.root, spec=spec, train_steps=args.train_steps, train_seq_len=args.train_seq_len,
                          train_batch=4, adapter_steps=args.adapter_steps, cache_dir=args.cache_dir)
    res = run_lora_bench(cfg)
    out["lora"] = res
    print("\n## LoRA-Inlaid: 3 tasks (WikiText-2, SST-2 positive, SST-2 negative), 4-bit group-32 GPTQ base")
    acc = res["accuracy"]
    print(f"{'task':>9} " + " ".join(f"{k:>14}" for k in acc))
    for t in acc["float"]:
        print(f"{t:>9} " + " ".join(f"{100 * acc[k][t]:>13.2f}%" for k in acc))
    m = res["memory_bytes"]
    print(f"memory: one shared quantized base {m['shared_quantized'] / 1e6:.3f} MB vs one per task "
          f"{m['per_task_quantized'] / 1e6:.3f} MB ({m['per_task_quantized'] / m['shared_quantized']:.1f}x); "
          f"fp16 base {m['float16_base'] / 1e6:.3f} MB")
    pk = res["packed_int4"]
    layout = {"fp16": "fp16 scale + int4 zero", "log12": "uint16 (12-bit log scale code + int4 zero), 2 fp32 per layer"}
    print(f"packed int4 base (Int4Linear: 2 codes per byte; per group of {pk['group_size']}: the format's scale "
          f"and zero; bytes measured from the buffers' storages); KL(float || packed) on held-out blocks:")
    for fmt, r in pk["formats"].items():
        print(f"  {fmt:>5} [{layout[fmt]}]: {r['bytes'] / 1e6:.4f} MB vs bf16 {r['bf16_bytes'] / 1e6:.4f} MB "
              f"-> {r['bf16_bytes'] / r['bytes']:.3f}x smaller; logits equal to the dequantized base: "
              f"{r['logits_equal']}; KL " + ", ".join(f"{t} {v:.4e}" for t, v in r["kl_vs_float"].items()))
    f16, l12 = pk["formats"]["fp16"], pk["formats"]["log12"]
    print(f"  log12 / fp16: bytes ratio {(f16['bytes'] / l12['bytes']):.3f}x smaller, KL ratio "
          + ", ".join(f"{t} {l12['kl_vs_float'][t] / f16['kl_vs_float'][t]:.3f}" for t in l12["kl_vs_float"]))
    for g, rs in pk.get("other_groups", {}).items():
        print(f"  group {g}: " + "; ".join(
            f"{fmt} {r['bf16_bytes'] / r['bytes']:.3f}x smaller, KL "
            + ", ".join(f"{t} {v:.4e}" for t, v in r["kl_vs_float"].items()) for fmt, r in rs.items()))
    kl = res["kl_vs_float"]
    print("mean per-token KL(float || quantized) on held-out blocks: " + "; ".join(
        f"{k}: " + ", ".join(f"{t} {v:.3e}" for t, v in d.items()) for k, d in kl.items()))
    s = res["scheduler"]
    print(f"scheduler costs measured here: {json.dumps({k: round(v, 6) for k, v in s['costs'].items()})}; "
          f"mixed-adapter batch: {json.dumps({k: round(v, 6) for k, v in s['mixed_costs'].items()})}")
    for rate, runs in s.items():
        if not rate.startswith("rate="):
            continue
        for p in ("fcfs", "inlaid", "mixed"):
            r = runs[p]
            print(f"{rate:>9} {p:>7}: {r['throughput']:.2f} req/s, SLO attainment {100 * r['slo_attainment']:.1f} %, "
                  f"mean {r['mean_latency_s']:.2f} s, {r['switches']} switches")
        print(f"{rate:>9} throughput inlaid / fcfs {runs['inlaid']['throughput'] / runs['fcfs']['throughput']:.2f}x, "
              f"mixed / fcfs {runs['mixed']['throughput'] / runs['fcfs']['throughput']:.2f}x, "
              f"mixed / inlaid {runs['mixed']['throughput'] / runs['inlaid']['throughput']:.2f}x")


def milp_section(out):
    print("\n## Serving MILP (modelled roofline tables from GPU datasheets; not measured)")
    out["milp"] = {}
    for model in MODELS:
        prob = roofline_problem(GPUS, model, WORKLOADS)
        floor = cheapest_feasible_budget(prob)
        for budget in (30.0, 60.0):
            mixed = plan_serving(prob, budget)
            gpu, homo = best_homogeneous(prob, budget)
            out["milp"][f"{model.name}@{budget:g}$/h"] = {"mixed": mixed.to_dict(), "homogeneous_gpu": gpu,
                                                          "homogeneous": homo.to_dict()}
            print(f"{model.name:>9} budget {budget:4.0f} $/h: mixed {mixed.replicas} makespan {mixed.makespan_s:6.0f} s"
                  f" | best homogeneous ({gpu}) {homo.makespan_s:6.0f} s -> throughput "
                  f"{homo.makespan_s / mixed.makespan_s:.3f}x")
        for hours in (1.0, 0.25):
            T = 3600.0 * hours
            mixed = plan_min_cost(prob, T)
            gpu, homo = best_homogeneous(prob, makespan_s=T)
            out["milp"][f"{model.name}@{T:g}s"] = {"mixed": mixed.to_dict(), "homogeneous_gpu": gpu,
                                                   "homogeneous": homo.to_dict()}
            print(f"{model.name:>9} within {T:5.0f} s: mixed {mixed.replicas} ${1e3 * mixed.cost_per_request:.4f}/1k req"
                  f" | best homogeneous ({gpu}) ${1e3 * homo.cost_per_request:.4f}/1k req -> cost per request "
                  f"{mixed.cost_per_request / homo.cost_per_request:.3f}x")
        print(f"{model.name:>9} cheapest feasible budget {floor:.2f} $/h")


#: a 2-GPU-type problem where a mixed fleet wins in the model: "small" is cheap but poor on long
#: requests (an illustrative table, not a profiled one); requests are per unit of the workload
HETERO_EXEC = dict(gpus=[("big", 3.0, 1), ("small", 1.0, 2)],
                   throughput={"big": {"short": 20.0, "long": 10.0}, "small": {"short": 10.0, "long": 1.0}},
                   workloads={"short": 60, "long": 20}, budget=4.0,
                   shapes={"short": (32, 8), "long": (128, 16)})


def hetero_exec_section(args, out):
    print("\n## Heterogeneous serving plan executed (one process per replica; GPU types emulated by "
          "calibrated slowdowns of a real tiny-Llama forward on this CPU)")
    cfg = HETERO_EXEC
    prob = ServingProblem([GPUType(*g) for g in cfg["gpus"]],
                          [DeployConfig(g, {g: 1}, thr) for g, thr in cfg["throughput"].items()],
                          [Workload(w, r) for w, r in cfg["workloads"].items()])
    mixed = plan_serving(prob, cfg["budget"])
    gpu, homo = best_homogeneous(prob, cfg["budget"])
    names = {"mixed": mixed, f"homogeneous-{gpu}": homo}
    runs, calibrated = {name: [] for name in names}, None
    for rep in range(args.hetero_repeats):
        for name, plan in names.items():
            # the first run calibrates; the rest reuse it, so every run has the same emulated machine
            run = run_serving_plan(plan, prob, requests=args.hetero_requests, shapes=cfg["shapes"], batch_size=4,
                                   wait=args.hetero_wait, request_time_s=calibrated)
            calibrated = run.request_time_s
            runs[name].append(run)
            per = ", ".join(f"{r.replica} {r.makespan_s:.2f} s ({sum(map(len, r.served.values()))} req, "
                            f"{r.compute_s:.2f} s real compute)" for r in run.replicas)
            print(f"[{rep}] {name:>18} {plan.replicas}: measured makespan {run.makespan_s:.2f} s [{per}] | "
                  f"modelled here {run.modelled_s:.2f} s (the planner's {plan.makespan_s:.3f} table-s x "
                  f"{args.hetero_requests}/{sum(cfg['workloads'].values())} requests x K={run.scale_s * 1e3:.1f} ms)")
    med = {name: float(np.median([r.makespan_s for r in rs])) for name, rs in runs.items()}
    m, h = med["mixed"], med[f"homogeneous-{gpu}"]
    first = runs["mixed"][0]
    print(f"requests {first.requests}, calibrated real s/request "
          f"{ {w: round(t * 1e3, 2) for w, t in first.request_time_s.items()} } ms (one calibration for all runs)")
    per_rep = [rh.makespan_s / rm.makespan_s for rm, rh in zip(runs["mixed"], runs[f"homogeneous-{gpu}"])]
    print(f"speed-up of the mixed fleet over the best single type ({gpu}): measured {h / m:.3f}x (median of "
          f"{args.hetero_repeats} runs each; per repeat {', '.join(f'{x:.3f}' for x in per_rep)}) | modelled "
          f"{homo.makespan_s / mixed.makespan_s:.3f}x")
    print(f"median measured / modelled makespan: mixed {m / first.modelled_s:.3f}, "
          f"{gpu} {h / runs[f'homogeneous-{gpu}'][0].modelled_s:.3f}")
    out["hetero_exec"] = {name: [r.to_dict() for r in rs] for name, rs in runs.items()}
    out["hetero_exec"]["ratio_measured"] = h / m
    out["hetero_exec"]["ratio_modelled"] = homo.makespan_s / mixed.makespan_s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", required=True)
    p.add_argument("--quick", action="store_true", help="small models and contexts (a smoke run)")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "sgl-serving"))
    p.add_argument("--only", nargs="+", choices=("kv", "kvmem", "students", "lora", "milp", "hetero-exec"),
                   default=("kv", "students", "lora", "milp", "hetero-exec"))
    p.add_argument("--json", help="also write every figure to this JSON file")
    p.add_argument("--sink", type=int, default=4, help="KV selection: sink tokens (the paper: 32)")
    p.add_argument("--recent-ratio", type=float, default=0.5, help="KV selection: recent share of the budget")
    p.add_argument("--cache-blocks", type=int, default=16, help="PQCache LFU block cache capacity (blocks)")
    p.add_argument("--kv-train-steps", type=int, default=None,
                   help="KV selection: train the decoder this many steps instead (a longer-trained model)")
    p.add_argument("--train-attention", choices=("eager", "sdpa"), default="eager",
                   help="attention kernel the decoder trains with (sdpa: faster)")
    p.add_argument("--hetero-requests", type=int, default=960,
                   help="hetero-exec: requests executed per plan (split over types as the workload)")
    p.add_argument("--hetero-repeats", type=int, default=3,
                   help="hetero-exec: runs of each plan (alternating); the median makespans are compared")
    p.add_argument("--hetero-wait", choices=("sleep", "busy"), default="busy",
                   help="hetero-exec: emulated slowdown sleeps (a GPU of its own) or busy-waits (holds the core)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.quick:
        spec = TinyLlamaSpec(vocab_size=1024, hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128)
        args.context, args.decode_steps, args.contexts, args.train_steps, args.train_seq_len = 512, 12, 1, 60, 128
        args.sst2_sentences, args.teacher_steps, args.student_steps, args.adapter_steps = 3000, 60, 40, 20
    else:
        spec = TinyLlamaSpec(vocab_size=2048, hidden_size=128, layers=2, heads=4, kv_heads=2, intermediate_size=256)
        args.context, args.decode_steps, args.contexts, args.train_steps, args.train_seq_len = 2048, 32, 2, 250, 512
        args.sst2_sentences, args.teacher_steps, args.student_steps, args.adapter_steps = 10000, 300, 200, 100
    out = {}
    started = time.perf_counter()
    for name in args.only:
        t0 = time.perf_counter()
        {"kv": lambda: kv_section(args, spec, out), "kvmem": lambda: kv_memory_section(args, spec, out),
         "students": lambda: students_section(args, out),
         "lora": lambda: lora_section(args, spec, out), "milp": lambda: milp_section(out),
         "hetero-exec": lambda: hetero_exec_section(args, out)}[name]()
        print(f"[{name}: {time.perf_counter() - t0:.0f} s]", flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
