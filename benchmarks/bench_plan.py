"""Galvatron-style plan search: searched plans vs pure DP / ZeRO-3 / TP / Megatron 3D, and a
CPU/gloo calibration of the cost model against real 2-process runs.

Part 1 (A100 what-if): with Galvatron's published A100 profiles (shipped in
sgl/systems/profiles, provenance in its README) for LLaMA-7B and LLaMA-13B (seq 2048, bf16)
on 8 (1x8) and 16 (2x8) GPUs at 24/40/80 GB per GPU, it prints the predicted throughput of
the searched plan and of the best pure DP, pure SDP (ZeRO-3), pure TP and Megatron-style 3D
plan under the same cost model (each optimised over the same batch sizes and micro-batch
counts), the ratios searched/baseline, and the search wall time. These are cost-model
predictions, not GPU measurements.

Part 2 (CPU/gloo calibration): profiles the `cpu-small` Transformer and the local gloo links
(`sgl.systems.runtime.profiler`), predicts step time and per-device memory of DDP, ZeRO-3 (FSDP2),
TP=2 (DTensor) and PP=2 (1F1B) plans with that profile, then runs those plans in 2 gloo
processes (`sgl.systems.runtime.executor`) and prints predicted vs measured. Memory measured =
model states actually held (parameters, gradients, Adam moments) + peak bytes saved for
backward; RSS is printed too (it includes the torch runtime).

    python benchmarks/bench_plan.py                  # both parts
    python benchmarks/bench_plan.py --part search --granularity 64
    python benchmarks/bench_plan.py --part cpu --steps 6
    python benchmarks/bench_plan.py --part gpu       # on a CUDA machine: bf16 layer profile vs A100 file
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgl.errors import PlanError  # noqa: E402
from sgl.systems.parallel import BASELINES, PlanSearchConfig, PlanSearcher, format_plan  # noqa: E402


def part_search(granularity: float, show_plans: bool) -> None:
    print(f"== A100 what-if (Galvatron's published profiles), DP granularity {granularity:g} MB ==")
    print("throughput = predicted samples/s (seq 2048); ratio = searched / baseline; '-' = baseline infeasible")
    header = f"{'model':<10} {'GPUs':>4} {'GB':>3} | {'searched':>8} {'plan':<22} {'search s':>8} |"
    for name in BASELINES:
        header += f" {name:>6} {'ratio':>6} |"
    print(header)
    ratios = []
    total_time = 0.0
    for model in ("llama-7b", "llama-13b"):
        for nodes in (1, 2):
            searcher = PlanSearcher(PlanSearchConfig(model=model, num_nodes=nodes, devices_per_node=8, memory_gb=80,
                                                     granularity_mb=granularity))
            for memory in (24, 40, 80):
                started = time.perf_counter()
                try:
                    result = searcher.search(memory)
                except PlanError as exc:
                    print(f"{model:<10} {nodes * 8:>4} {memory:>3} | infeasible for every plan: "
                          f"{str(exc).split('; ')[-1]}")
                    continue
                seconds = time.perf_counter() - started
                total_time += seconds
                plan = result.plan
                kinds = sorted({s.label.split("-", 1)[1] for s in plan.strategies})
                summary = f"B{plan.global_bsz} c{plan.chunks} pp{plan.pp} " + ("mixed" if len(kinds) > 1 else kinds[0])
                line = f"{model:<10} {nodes * 8:>4} {memory:>3} | {plan.throughput:8.2f} {summary:<22} {seconds:8.2f} |"
                for name in BASELINES:
                    try:
                        base = searcher.search(memory, baseline=name).plan
                        ratio = plan.throughput / base.throughput
                        ratios.append(ratio)
                        line += f" {base.throughput:6.2f} {ratio:6.3f} |"
                    except PlanError:
                        line += f" {'-':>6} {'-':>6} |"
                print(line, flush=True)
                if show_plans:
                    print(format_plan(plan))
    print(f"ratios: min {min(ratios):.3f}, max {max(ratios):.3f} over {len(ratios)} feasible comparisons; "
          f"total search time {total_time:.1f} s")

    print("\n== OSDP mode (per-layer replicate / shard / shard with 2- or 4-way operator splitting, pp = tp = 1) "
          "vs plain ZeRO-3, same cost model ==")
    print(f"{'model':<10} {'GPUs':>4} {'GB':>3} | {'OSDP':>7} {'ZeRO-3':>7} {'ratio':>6} | {'search s':>8} | layer strategies")
    for model in ("llama-7b", "llama-13b"):
        for nodes in (1, 2):
            searcher = PlanSearcher(PlanSearchConfig(model=model, num_nodes=nodes, devices_per_node=8, memory_gb=80,
                                                     granularity_mb=granularity, mode="osdp"))
            for memory in (24, 40, 80):
                try:
                    result = searcher.search(memory)
                    base = searcher.search(memory, baseline="sdp").plan
                except PlanError as exc:
                    print(f"{model:<10} {nodes * 8:>4} {memory:>3} | infeasible: {str(exc).split('; ')[-1]}")
                    continue
                plan = result.plan
                used = sorted({s.label for s in plan.strategies})
                print(f"{model:<10} {nodes * 8:>4} {memory:>3} | {plan.throughput:7.2f} {base.throughput:7.2f} "
                      f"{plan.throughput / base.throughput:6.3f} | {result.seconds:8.2f} | {' '.join(used)}")


def part_cpu(steps: int, threads: int) -> None:
    from sgl.systems.runtime import ExecConfig, make_plan, profile_to_dir, run_plans

    print("== CPU/gloo calibration (cpu-small model, 2 gloo processes on this machine; NOT GPU figures) ==")
    cfg = ExecConfig(model="cpu-small", steps=steps, global_bsz=8, chunks=2, threads=threads)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        profile_to_dir(folder, model="cpu-small", world_size=2, batch_size=4, repeats=5, threads=threads)
        print(f"profiled in {time.perf_counter() - started:.1f} s")
        searcher = PlanSearcher(PlanSearchConfig(model="cpu-small", num_nodes=1, devices_per_node=2, memory_gb=64,
                                                 profile_dir=folder, bytes_per_value=4, batch_sizes=(8,)))
        kinds = ("dp", "sdp", "tp", "pp")
        plans = [make_plan(k, 2, cfg) for k in kinds]
        predicted = [searcher.evaluate(p) for p in plans]
        started = time.perf_counter()
        measured = run_plans(plans, cfg, timeout=600)
        print(f"ran {len(plans)} plans x {steps} steps in {time.perf_counter() - started:.1f} s "
              f"(global batch {cfg.global_bsz}, {cfg.chunks} micro-batches, Adam, fp32, {threads} thread(s)/process)")
        print(f"{'plan':<5} | {'pred ms':>8} {'meas ms':>8} {'meas/pred':>9} | {'pred MB':>8} {'meas MB':>8} "
              f"{'meas/pred':>9} | {'RSS MB':>7}")
        search = searcher.search()
        for kind, (t_pred, mem_pred), reports in zip(kinds, predicted, measured):
            t_meas = max(r["step_ms"] for r in reports)
            mem_meas = max(r["model_state_mb"] + r["activation_peak_mb"] for r in reports)
            rss = max(r["rss_peak_mb"] for r in reports)
            print(f"{kind:<5} | {t_pred:8.1f} {t_meas:8.1f} {t_meas / t_pred:9.2f} | {max(mem_pred):8.2f} "
                  f"{mem_meas:8.2f} {mem_meas / max(mem_pred):9.2f} | {rss:7.0f}")
        print("searched plan for this CPU profile (64 GB budget):")
        print(format_plan(search.plan))


def part_gpu(repeats: int) -> None:
    """Profile LLaMA-7B/13B layers in bf16 on a GPU next to Galvatron's published A100 profile."""
    import torch

    from sgl.systems.parallel import load_builtin_profiles
    from sgl.systems.runtime import profile_model

    if not torch.cuda.is_available():
        print("== GPU profile: no CUDA device here, skipped ==")
        return
    name = torch.cuda.get_device_name()
    print(f"== GPU profile on {name} (bf16, our TransformerBlock: LayerNorm + SDPA, no RoPE) "
          "vs Galvatron's published A100 profile (Megatron LLaMA layer) ==")
    for model in ("llama-7b", "llama-13b"):
        ours = profile_model(model, batch_size=4, repeats=repeats, device="cuda", dtype=torch.bfloat16, threads=4)
        ref, _ = load_builtin_profiles(model)
        # backward / forward time ratio (Galvatron assumes bct_fct_coe = 2)
        from sgl.systems.parallel import get_model_config
        from sgl.systems.runtime import TransformerBlock

        cfg = get_model_config(model)
        block = TransformerBlock(cfg).to("cuda", torch.bfloat16)
        x = torch.randn(4, cfg.seq_length, cfg.hidden_size, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3):
            block(x).sum().backward()
        torch.cuda.synchronize()
        f_times, b_times = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            y = block(x)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            y.sum().backward()
            torch.cuda.synchronize()
            f_times.append(t1 - t0)
            b_times.append(time.perf_counter() - t1)
        ratio = sorted(b_times)[len(b_times) // 2] / sorted(f_times)[len(f_times) // 2]
        print(f"{model}: parameter_size MB ours {ours.param_mb:.1f} vs A100 file {ref.param_mb:.1f}; "
              f"forward ms/sample ours {ours.fwd_ms:.3f} ({name}) vs {ref.fwd_ms:.3f} (A100); "
              f"backward/forward {ratio:.2f} (cost model uses 2.0)")
        for tp in sorted(ours.act_mb):
            print(f"   activation MB/sample tp={tp}: ours {ours.act_mb[tp]:8.2f}   A100 file {ref.act_mb.get(tp, float('nan')):8.2f}")
        print(f"   activation MB/sample checkpoint: ours {ours.ckpt_act_mb:8.2f}   A100 file {ref.ckpt_act_mb:8.2f}")
        del block, x
        torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "search", "cpu", "gpu"), default="all")
    parser.add_argument("--granularity", type=float, default=16.0, help="DP memory unit (MB)")
    parser.add_argument("--show-plans", action="store_true")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.part in ("all", "search"):
        part_search(args.granularity, args.show_plans)
    if args.part in ("all", "cpu"):
        part_cpu(args.steps, args.threads)
    if args.part in ("all", "gpu"):
        part_gpu(repeats=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
