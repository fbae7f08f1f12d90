"""Modelled step time of FlexSP and Hydraulis vs the best homogeneous static strategy.

    SGL_TEST_DATA=../shared/datasets python benchmarks/bench_seqplan.py [--steps 4] [--devices 16,32,64]

Real lengths (FlexSP's wikipedia.txt sample), the papers' constants (FlexSP: LLaMA-7B, A100-80GB,
ZeRO-3; Hydraulis: its 10-strategy 7B/A100-40GB pool). Ratios are modelled (cost-model outputs);
solver seconds are wall-clock timings on this machine.
"""
import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

from sgl.systems.seq import (FlexSPPlanner, GlobalBatchSampler, HydraulisPlanner, flexsp_cost_model, hydraulis_pool,
                             read_lengths)


def flexsp_row(lengths, n, steps, tokens_per_device, time_limit):
    pool = flexsp_cost_model(n, 80).sp_pool()
    longest = min(max(p.capacity for p in pool), 256 * 1024)
    batches = GlobalBatchSampler(lengths, tokens_per_step=n * tokens_per_device, seed=0,
                                 max_length=longest).batches(steps)
    planner = FlexSPPlanner(pool, n, time_limit=time_limit)
    sp, homo = planner.best_homogeneous(batches)
    t0 = time.perf_counter()
    plans = [planner.plan(b) for b in batches]
    solve = (time.perf_counter() - t0) / steps
    for b, p in zip(batches, plans):
        p.validate(b, n)
    base, ours = sum(h.time for h in homo), sum(p.time for p in plans)
    return f"sp{sp}", base / steps, ours / steps, solve


def hydraulis_row(lengths, n, steps, seqs_per_device, time_limit):
    pool = hydraulis_pool(n)
    longest = max(p.capacity for p in pool)
    sampler = GlobalBatchSampler(lengths, batch_size=n * seqs_per_device, seed=0, max_length=longest)
    batches = sampler.batches(steps)
    planner = HydraulisPlanner(pool, n, time_limit=time_limit, shuffles=4)
    planner.build_replicas(sampler.pool[:200_000], n * seqs_per_device)
    t0 = time.perf_counter()
    plans = [planner.plan(b) for b in batches]
    solve = (time.perf_counter() - t0) / steps
    for b, p in zip(batches, plans):
        p.validate(b, n)
    top = max(int(b.max()) for b in batches)
    base = min((sum(planner.homogeneous(b, c).time for b in batches), c.label) for c in pool if c.capacity >= top)
    return base[1], base[0] / steps, sum(p.time for p in plans) / steps, solve


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--devices", default="16,32,64")
    ap.add_argument("--time-limit", type=float, default=0.5)
    args = ap.parse_args()
    root = Path(os.environ.get("SGL_TEST_DATA", "../shared/datasets"))
    lengths = read_lengths(root / "seqlen" / "wikipedia.txt")
    warnings.simplefilter("ignore", RuntimeWarning)
    print("| method | devices | best static | static ms/step | planned ms/step | ratio | solver s/step |")
    print("|---|---|---|---|---|---|---|")
    for n in map(int, args.devices.split(",")):
        for name, fn, size in (("FlexSP", flexsp_row, 16384), ("Hydraulis", hydraulis_row, 8)):
            label, base, ours, solve = fn(lengths, n, args.steps, size, args.time_limit)
            print(f"| {name} | {n} | {label} | {base:.0f} | {ours:.0f} | {base / ours:.3f} | {solve:.2f} |", flush=True)


if __name__ == "__main__":
    main()
