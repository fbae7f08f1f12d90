"""Memory systems in one run: MEMO offload, DSA plans, TSPLIT, paged Adam, resharding checkpoints, partial-reduce.

Prints ratios measured in this run (timings on a loaded machine need a rerun on a quiet one; byte
counts do not depend on load):

1. MEMO: device-resident peak bytes of one training step (the tensor-lifetime tracer's
   sum-of-live peak; host copies are not device memory) with token-wise offload at alpha, with
   full recompute (torch checkpoint per block) and with no checkpointing, at growing sequence
   lengths; and the longest sequence each fits in a fixed budget (the no-checkpoint peak at the
   first length).
2. DSA: the bi-level MIP plan's peak vs first-fit, best-fit, the sum-of-live bound and a replay of
   the CUDA caching allocator's rules (a model on CPU); beside it the bound's own ratio to the
   caching allocator, the best ratio any plan can reach (the ceiling of the 0.8x target).
3. TSPLIT: peak bytes of the MLP (forward + backward) split into k micro-tensors vs unsplit.
4. Angel-PTM pages: steps/s of paged Adam (host cache = half the optimiser state, the rest on disk)
   vs in-memory Adam, same losses.
5. Checkpoints: DCP async save on 4 processes (TP=4) and restore on 2 (ZeRO-3) vs torch.save of the
   full state in one process; steps lost for real: a 2-process run under periodic async checkpoints,
   SIGKILLed (from outside after step k, or inside a save), resumed on 1 process from the last
   committed checkpoint, over a few kill times.
6. Partial-reduce (P=2 of 4, one rank 2x slower) vs synchronous all-reduce: time to a target loss.

    python benchmarks/bench_memory.py            # everything (several minutes on 2 cores)
    python benchmarks/bench_memory.py --quick    # smaller sizes, skips the multi-process parts
    python benchmarks/bench_memory.py --part memo,dsa
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from sgl.systems.memory import (best_fit, caching_allocator_peak, first_fit, live_lower_bound,  # noqa: E402
                                measure_offload_inputs, offload_ratio, plan_bilevel, record_lm_trace,
                                record_trace, wrap_blocks)
from sgl.systems.parallel import TransformerConfig  # noqa: E402
from sgl.systems.runtime import TinyLM, lm_loss  # noqa: E402

BENCH = TransformerConfig("bench", 4, 128, 4, 512, 256, 128)


def _model(cfg: TransformerConfig, mode: str, alpha: float = 0.5) -> TinyLM:
    torch.manual_seed(0)
    model = TinyLM(cfg)
    if mode == "recompute":
        for b in model.blocks:
            b.checkpoint = True
    elif mode == "memo":
        wrap_blocks(model, alpha)
    return model


def _peak(cfg: TransformerConfig, mode: str, seq: int, batch: int, alpha: float) -> int:
    c = dataclasses.replace(cfg, seq_length=seq)
    model = _model(c, mode, alpha)
    tokens = torch.randint(0, c.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(0))
    return live_lower_bound(record_lm_trace(model, tokens, lm_loss))


def part_memo(quick: bool) -> None:
    batch = 2
    seqs = [128, 256, 512] if quick else [128, 256, 512, 1024, 2048]
    x = torch.randn(batch, 256, BENCH.hidden_size)
    inputs = measure_offload_inputs(TinyLM(dataclasses.replace(BENCH, seq_length=256)).blocks[0], x, repeat=2)
    plan = offload_ratio(host_bytes=8 << 30, num_layers=BENCH.num_layers, **inputs)
    alpha = plan.alpha
    print(f"== MEMO: device peak of one step (hidden {BENCH.hidden_size}, {BENCH.num_layers} layers, batch {batch}) ==")
    print(f"alpha from the LP with measured B={inputs['bandwidth'] / 1e9:.1f} GB/s, T_layer={inputs['layer_time'] * 1e3:.2f} ms "
          f"-> alpha={alpha:.2f} (bound: {plan.limit})")
    print(f"{'seq':>6} {'no ckpt MB':>11} {'recompute MB':>13} {'memo MB':>9} {'memo/none':>10} {'memo/recompute':>15}")
    peaks = {}
    for s in seqs:
        peaks[s] = {m: _peak(BENCH, m, s, batch, alpha) for m in ("none", "recompute", "memo")}
        p = peaks[s]
        print(f"{s:>6} {p['none'] / 1e6:>11.2f} {p['recompute'] / 1e6:>13.2f} {p['memo'] / 1e6:>9.2f} "
              f"{p['memo'] / p['none']:>10.3f} {p['memo'] / p['recompute']:>15.3f}")
    budget = peaks[seqs[1]]["none"]
    longest = {}
    for m in ("none", "recompute", "memo"):
        fits = [s for s in seqs if peaks[s][m] <= budget]
        longest[m] = max(fits) if fits else 0
    print(f"budget {budget / 1e6:.2f} MB (no-ckpt peak at seq {seqs[1]}): longest seq that fits: "
          + ", ".join(f"{m}={v}" for m, v in longest.items())
          + f"; memo/none = {longest['memo'] / max(longest['none'], 1):.1f}x (target >= 2x)")


def part_dsa(quick: bool) -> None:
    # (layers, hidden, seq): the previous round's three shapes, then a longer sequence and more layers.
    shapes = [(4, 128, 128), (4, 256, 256)] if quick else [(4, 128, 256), (4, 256, 256), (4, 256, 512), (4, 256, 1024),
                                                            (8, 256, 512)]
    print("== DSA on recorded training steps (batch 4, 512 B alignment): ratios of peaks ==")
    print(f"{'layers':>6} {'hidden':>6} {'seq':>5} {'requests':>8} {'planned MB':>10} {'secs':>5} {'/first-fit':>10} "
          f"{'/best-fit':>9} {'/lower-bound':>12} {'/caching-model':>14} {'bound/caching':>13}  plan")
    ceilings = []
    for layers, hidden, seq in shapes:
        cfg = TransformerConfig("bench", layers, hidden, 4, 4 * hidden, 256, seq)
        torch.manual_seed(0)
        model = TinyLM(cfg)
        tokens = torch.randint(0, cfg.vocab_size, (4, seq), generator=torch.Generator().manual_seed(0))
        trace = record_lm_trace(model, tokens, lm_loss, torch.optim.Adam(model.parameters()))
        t0 = time.perf_counter()
        plan = plan_bilevel(trace, time_limit=5 if quick else 20, alignment=512)
        secs = time.perf_counter() - t0
        ff, bf, lb = first_fit(trace, 512).peak, best_fit(trace, 512).peak, live_lower_bound(trace, 512)
        cache = caching_allocator_peak(trace)
        ceilings.append((layers, hidden, seq, lb / cache, plan.peak / cache))
        print(f"{layers:>6} {hidden:>6} {seq:>5} {len(trace):>8} {plan.peak / 1e6:>10.2f} {secs:>5.0f} {plan.peak / ff:>10.3f} "
              f"{plan.peak / bf:>9.3f} {plan.peak / lb:>12.3f} {plan.peak / cache:>14.3f} {lb / cache:>13.3f}  "
              f"{plan.method} (bi-level {plan.levels['bilevel_peak'] / 1e6:.2f} MB)")
    print("target: planned / caching-allocator <= 0.8 (the caching allocator is a replay of its rules on CPU)")
    print("ceiling: the sum-of-live bound is a lower bound on the peak of ANY address plan of the trace, so "
          "planned/caching >= bound/caching; where bound/caching > 0.8 no plan can meet the target:")
    for layers, hidden, seq, bound_ratio, plan_ratio in ceilings:
        verdict = "target unreachable by any plan" if bound_ratio > 0.8 else (
            "met" if plan_ratio <= 0.8 else "reachable in principle, not met")
        print(f"  {layers} layers, hidden {hidden}, seq {seq}: best possible {bound_ratio:.3f}x, "
              f"plan {plan_ratio:.3f}x ({plan_ratio / bound_ratio:.3f} of the ceiling) -> {verdict}")


def part_tsplit(quick: bool) -> None:
    from sgl.systems.memory import TSplitBlock
    from sgl.systems.memory.offload import tokenwise_part

    torch.manual_seed(0)
    block = TinyLM(BENCH).blocks[0]
    s = 512 if quick else 2048
    xa = torch.randn(2, s, 2 * BENCH.hidden_size, requires_grad=True)
    fn = lambda t: tokenwise_part(block, t[..., :BENCH.hidden_size], t[..., BENCH.hidden_size:])  # noqa: E731
    split = TSplitBlock(block)
    peaks = {}
    for opt in ("keep", "split:2", "split:4", "split:8"):
        peaks[opt] = live_lower_bound(record_trace(lambda _: torch.autograd.grad(split._run(opt, fn, xa, 1).sum(), xa)))
    print(f"== TSPLIT: MLP forward+backward peak, {2 * s} tokens ==")
    print("  ".join(f"{k}: {v / 1e6:.2f} MB ({v / peaks['keep']:.3f}x)" for k, v in peaks.items()))


def part_pages(quick: bool) -> None:
    from sgl.systems.memory import train_in_memory, train_paged
    from sgl.systems.runtime import ExecConfig

    cfg = ExecConfig(model="cpu-small", steps=2 if quick else 4, global_bsz=2)
    state = 12 * sum(p.numel() for p in TinyLM(cfg.model_config()).parameters())
    ref = train_in_memory(cfg)
    with tempfile.TemporaryDirectory() as d:
        paged = train_paged(cfg, d, host_bytes=state / 2, page_elems=1 << 16)
    same = paged["losses"] == ref["losses"]
    print(f"== Angel-PTM pages: {cfg.model}, optimiser state {state / 1e6:.1f} MB, host cache {state / 2e6:.1f} MB ==")
    print(f"paged {cfg.steps / paged['seconds']:.2f} steps/s vs in-memory {cfg.steps / ref['seconds']:.2f} steps/s: "
          f"throughput ratio {ref['seconds'] / paged['seconds']:.3f}; same losses: {same}; "
          f"{paged['stats']['ssd_reads']} page reads, {paged['stats']['ssd_writes']} page writes")


def part_ckpt(quick: bool) -> None:
    from sgl import comm
    from sgl.systems.memory import replan, restore_worker, save_worker
    from sgl.systems.runtime import ExecConfig, build_tiny_lm

    cfg = ExecConfig(model="cpu-small", global_bsz=12)  # divisible by 4, 3 and 2 data-parallel ranks
    with tempfile.TemporaryDirectory() as d:
        saved = comm.spawn(save_worker, 4, "tp", d, cfg.__dict__, 3, timeout=600)  # a checkpoint after each step
        restored = comm.spawn(restore_worker, 2, "sdp", d, cfg.__dict__, timeout=600)
        searched = replan(3, model=cfg.model, batch_sizes=(cfg.global_bsz,), executable=True)  # the plan search
        restored3 = comm.spawn(restore_worker, searched["devices_used"], searched["plan"], d, cfg.__dict__, timeout=600)
        model = build_tiny_lm(cfg)
        opt = torch.optim.Adam(model.parameters())
        lm_loss(model(torch.zeros(1, 8, dtype=torch.long)), torch.zeros(1, 8, dtype=torch.long)).backward()
        opt.step()
        t0 = time.perf_counter()
        torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, Path(d) / "plain.pt")
        plain_save = time.perf_counter() - t0
        t0 = time.perf_counter()
        torch.load(Path(d) / "plain.pt")
        plain_load = time.perf_counter() - t0
    same = all(torch.equal(saved[0]["full"][k], restored[0]["full"][k]) for k in saved[0]["full"])
    save_s = max(r["save_s"] for r in saved)
    issue = max(r["save_issue_s"] for r in saved)
    restore_s = max(r["restore_s"] for r in restored)
    same3 = all(torch.equal(saved[0]["full"][k], restored3[0]["full"][k]) for k in saved[0]["full"])
    print("== Checkpoints: DCP on 4 processes (TP=4) -> restored on 2 (ZeRO-3), cpu-small, third save ==")
    print(f"async save: {issue:.3f} s blocking of {save_s:.3f} s total; restore {restore_s:.3f} s; "
          f"torch.save {plain_save:.3f} s / torch.load {plain_load:.3f} s; "
          f"save/torch.save {save_s / plain_save:.2f}x, restore/torch.load {restore_s / plain_load:.2f}x; bit-equal: {same}")
    layout = searched["layout"]
    print(f"re-planned for 3 devices by the plan search: {sorted(set(layout['layers']))} on "
          f"{searched['devices_used']} processes (excluded: {sorted(searched['excluded'])}); restore "
          f"{max(r['restore_s'] for r in restored3):.3f} s, bit-equal: {same3}")
    part_steps_lost(quick)


def part_steps_lost(quick: bool) -> None:
    """SIGKILL a rank of a run under periodic async checkpoints; resume on fewer processes; count the steps lost."""
    import math

    from sgl.systems.memory.recovery import kill_and_resume
    from sgl.systems.runtime import ExecConfig
    from sgl.systems.runtime.executor import train_reference

    steps, every = (8, 2) if quick else (12, 2)
    cfg = ExecConfig(model="tiny" if quick else "cpu-small", global_bsz=12, steps=steps)
    ref = train_reference(cfg)
    # (processes before -> after, kind of kill, step)
    kills = [((2, 1), "after", 3), ((2, 1), "save", 4)] if quick else [
        ((2, 1), "after", 3), ((2, 1), "after", 5), ((2, 1), "after", 8), ((2, 1), "save", 6), ((4, 3), "save", 6)]
    print(f"== Steps lost: {cfg.model}, global batch {cfg.global_bsz}, async DCP checkpoint every {every} steps, "
          f"SIGKILL of rank 1, resumed on the plan search's plan for the processes left ==")
    print(f"{'procs':>6} {'kill':>16} {'plan after':>10} {'last step':>9} {'ckpt step':>9} {'lost':>4} {'bound':>5} "
          f"{'uncommitted at kill':>19} {'resumed at':>10} {'steps ok':>8} {'max rel diff':>12} {'restore s':>9}")
    total = []
    for (before, after), kind, at in kills:
        with tempfile.TemporaryDirectory() as d:
            kw = {"kill_after": at} if kind == "after" else {"kill_in_save": at}
            r = kill_and_resume(d, cfg, world=before, world_after=after, steps=steps, every=every, timeout=900, **kw)
        resumed = r["resumed_losses"]
        ok = (sorted(resumed) == list(range(r["checkpoint_step"] + 1, steps + 1))
              and r["resumed_start"] == r["checkpoint_step"])
        diff = max(abs(resumed[s] - ref[s - 1]) / abs(ref[s - 1]) for s in resumed)
        t_save = sum(r["save_s"]) / max(len(r["save_s"]), 1)
        t_step = sum(r["step_s"]) / max(len(r["step_s"]), 1)
        bound = every - 1 + min(math.ceil(t_save / t_step), every)
        in_flight = r["in_flight_at_kill"] if kind == "after" else r["uncommitted_after_kill"]
        label = f"after step {at}" if kind == "after" else f"inside save {at}"
        total.append(r["steps_lost"])
        plan_label = ",".join(sorted(set(r["plan"]["layers"])))
        procs = f"{before}->{r['devices_used']}"
        print(f"{procs:>6} {label:>16} {plan_label:>10} {r['last_step']:>9} {r['checkpoint_step']:>9} "
              f"{r['steps_lost']:>4} {bound:>5} {str(in_flight):>19} {r['resumed_start']:>10} {str(ok):>8} {diff:>12.2e} {r['restore_s']:>9.3f}")
    print(f"mean steps lost {sum(total) / len(total):.2f} over {len(total)} kills (a step is lost when it finished "
          "after the last committed checkpoint; 'bound' = every - 1 + min(ceil(t_save / t_step), every) with the "
          "resumed run's save and step times; an uncommitted save is never loaded)")


def part_preduce(quick: bool) -> None:
    from sgl import comm
    from sgl.systems.memory import preduce_worker, regression_problem, sync_worker

    steps, delays = 60, [0.01, 0.01, 0.01, 0.02]
    x, y = regression_problem(0)
    target = 0.01 * float((y ** 2).mean())
    pr = comm.spawn(preduce_worker, 4, 2, steps, delays, 0.05, 0, None, 0, "group", timeout=600)
    pr_store = comm.spawn(preduce_worker, 4, 2, steps, delays, 0.05, 0, None, 0, "store", timeout=600)
    sync = comm.spawn(sync_worker, 4, steps, delays, timeout=600)

    def time_to(curves):
        times = [next((t for t, loss in c["curve"] if loss <= target), float("inf")) for c in curves]
        return min(times)

    tp, tk, ts = time_to(pr), time_to(pr_store), time_to(sync)
    print("== Partial-reduce (P=2 of 4, rank 3 slowed 2x) vs synchronous all-reduce, linear regression ==")
    print(f"time to loss {target:.4f}: partial-reduce on process groups {tp:.3f} s, all-reduce {ts:.3f} s, "
          f"speed-up {ts / tp:.2f}x (the paper: 1.21-2x); partial-reduce with parameters through the "
          f"TCPStore {tk:.3f} s ({ts / tk:.2f}x)")


PARTS = {"memo": part_memo, "dsa": part_dsa, "tsplit": part_tsplit, "pages": part_pages, "ckpt": part_ckpt,
         "preduce": part_preduce}
EXTRA = {"lost": part_steps_lost}   # the steps-lost study alone (also run by ckpt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default=",".join(PARTS),
                        help="comma-separated parts: " + ", ".join(PARTS) + " (lost: the steps-lost study alone)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes; skips ckpt and preduce")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.part.split(","):
        if args.quick and name in ("ckpt", "preduce") and args.part == ",".join(PARTS):
            continue
        {**PARTS, **EXTRA}[name](args.quick)


if __name__ == "__main__":
    main()
