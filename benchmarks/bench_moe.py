"""MoE systems in one run: NetMoE, LSH-MoE, FlexMoE/LAER balancing, and a 2-process gloo calibration.

Traces:
  (i)  routing traces of the WikiText-2 MoE LM trained here (64 experts, top-2, so 8–64 EP devices
       divide the experts; the last ``--trace-steps`` training steps of the run);
  (ii) synthetic traces with a tunable per-sample expert affinity (``--affinities``);
  (iii) for balancing only, LAER-MoE's measured per-rank loads (per-*device* loads, split evenly
       over each static-EP rank's local experts: the artifact has no per-expert counts).

Printed (ratios are method / baseline; every time below is *modelled* with the α–β all-to-all
model and LAER's iteration-time model, except the last table, measured on this CPU):
  1. NetMoE: combine all-to-all time and inter-node bytes vs the original placement, solver ms/layer,
     and the ceiling of any placement (an LP / MILP bound on the same modelled time);
  2. LSH-MoE: transmitted rows vs uncompressed for 1..N hash functions on the LM's real MoE inputs,
     relative expert-output error with and without residual compensation, and the validation loss
     of the 2-process LM trained the same steps with LSH (hashes nearest a 20 % rate) vs EP, and
     the oracle of centroid compression (per-expert k-means at 20 % of the rows) on both;
  3. balancing: max/mean device load and modelled iteration time, static EP / FlexMoE / LAER;
  4. measured 2-process gloo step time of ep / padded / lsh / fsep (a CPU calibration);
  5. ``precision`` (measured): a converted tiny Hugging Face Mixtral (64 experts) trained on WikiText-2
     for the same steps in fp32 and under bf16 autocast (fp32 master weights): step-time ratio and
     validation loss after the same steps;
  6. ``experts`` (measured): one expert bank's forward+backward, grouped GEMM / padded bmm vs the
     per-expert loop, at equal dtype (fp32 and bf16).

    python benchmarks/bench_moe.py --root ../shared/datasets
    python benchmarks/bench_moe.py --root ../shared/datasets --quick       # minutes, smaller everything
    python benchmarks/bench_moe.py --root ../shared/datasets --tables precision experts --mix-steps 40
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TOPOLOGIES = ((8, 2), (16, 4), (32, 4), (64, 8))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=str(HERE.parent.parent / "shared" / "datasets"))
    p.add_argument("--trace-train-steps", type=int, default=30, help="steps of the 64-expert trace LM")
    p.add_argument("--trace-steps", type=int, default=6, help="last steps of it used as traces")
    p.add_argument("--lm-steps", type=int, default=150, help="steps of the 2-process LSH vs EP comparison")
    p.add_argument("--calib-steps", type=int, default=8, help="steps per dispatch in the step-time table")
    p.add_argument("--exact-limit", type=float, default=2.0,
                   help="seconds per layer for the exact (MILP) placement on the WikiText trace")
    p.add_argument("--refine-rounds", type=int, default=64, help="swap rounds of the refined NetMoE column")
    p.add_argument("--affinities", type=float, nargs="+", default=[0.3, 0.6, 0.9])
    p.add_argument("--mix-steps", type=int, default=60, help="training steps of the fp32 vs bf16 Mixtral runs")
    p.add_argument("--mix-hidden", type=int, default=256, help="hidden size of the tiny Mixtral (precision table)")
    p.add_argument("--mix-ffn", type=int, default=512, help="expert ffn size of the tiny Mixtral")
    p.add_argument("--mix-batch", type=int, default=16, help="global batch (sequences of 64 tokens)")
    p.add_argument("--ceiling-steps", type=int, default=4, help="fp32 steps profiled for the bf16 ceiling")
    p.add_argument("--tables", nargs="+", choices=("netmoe", "lsh", "balance", "precision", "experts"),
                   default=["netmoe", "lsh", "balance", "precision", "experts"],
                   help="tables to run (default all; 'lsh' also runs the 2-process calibration)")
    p.add_argument("--no-oracle-lm", action="store_true", help="skip the k-means oracle's two LM runs")
    p.add_argument("--quick", action="store_true", help="small sizes (for a smoke run)")
    p.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "sgl-bench-moe"))
    p.add_argument("--json", help="write every figure here")
    a = p.parse_args()
    if a.quick:
        a.trace_train_steps, a.trace_steps, a.lm_steps, a.calib_steps = 6, 2, 10, 3
    return a


def trace_lm(args):
    from sgl.systems.moe import WikiTextMoEConfig, load_trace, run_wikitext_moe

    cfg = WikiTextMoEConfig(steps=args.trace_train_steps, batch_size=64, num_experts=64, ffn_hidden_size=64,
                            val_batches=0, lr=3e-3)
    path = Path(args.cache_dir) / f"trace-e64-{args.trace_train_steps}.npz"
    t0 = time.perf_counter()
    s = run_wikitext_moe(args.root, cfg, procs=1, trace_out=path, cache_dir=args.cache_dir, progress=True)
    tr = load_trace(path)
    tr.counts = tr.counts[-args.trace_steps:]
    print(f"trace LM: {cfg.steps} steps, loss {s['first_loss']:.3f} -> {s['final_loss']:.3f} "
          f"({time.perf_counter() - t0:.0f} s); traces {tr.shape} (steps, layers, samples, experts)")
    return tr


def netmoe_table(real, args, out):
    from sgl.systems.moe import Topology, synthetic_trace
    from sgl.systems.moe.plan import netmoe_report

    print("\n## 1. NetMoE: combine all-to-all, NetMoE / original placement (modelled)")
    print("   'res' = the moved samples' residual rows counted in objective and volume; 'no res' = not counted")
    print("   columns: combine time / inter-node bytes (res), combine time / inter bytes (no res), "
          "dispatch+combine time (res), solver ms")
    print("   ceiling: the lowest combine time ANY balanced placement can reach (LP relaxation of the exact")
    print("   min-max placement problem, raised to the MILP's dual bound on the WikiText trace, where 'opt'")
    print("   is the best integral placement the MILP found and 'solved' the share of layers proven optimal);")
    print("   'ceil no res' ignores the residual rows, so it bounds every start and accounting; 'relax B':")
    print("   inter-node bytes with every sample on its cheapest node and no slot capacity (res); 'swap':")
    print("   NetMoE + min-max swap refinement (netmoe_refine), combine time (res) and solver ms per layer")
    print(f"{'trace':22s} {'devices':>7s} {'nodes':>5s} {'time res':>8s} {'inter B':>8s} {'time no res':>11s} "
          f"{'inter B':>8s} {'a2a res':>8s} {'solver ms':>9s} {'ceil res':>8s} {'ceil no res':>11s} "
          f"{'relax B':>7s} {'opt res':>7s} {'opt no res':>10s} {'solved':>6s} {'swap res':>8s} {'swap ms':>7s}")
    traces = [("wikitext LM", real)] + [
        (f"synthetic aff={a}", synthetic_trace(args.trace_steps, 2, 64, 64, 64, 2, a, seed=0)) for a in args.affinities]
    for name, tr in traces:
        for d, n in TOPOLOGIES:
            limit = args.exact_limit if name == "wikitext LM" else None
            r = netmoe_report(tr, Topology.of(d, n), bytes_per_token=2 * 64, bounds=True, exact_time_limit=limit)
            q = netmoe_report(tr, Topology.of(d, n), bytes_per_token=2 * 64, count_residual=False)
            w = netmoe_report(tr, Topology.of(d, n), bytes_per_token=2 * 64, refine=args.refine_rounds)
            out.setdefault("netmoe", []).append({"trace": name, "devices": d, "nodes": n, "residual": r, "no_residual": q, "refined": w})
            print(f"{name:22s} {d:7d} {n:5d} {r['time_ratio']:8.3f} {r['inter_bytes_ratio']:8.3f} "
                  f"{q['time_ratio']:11.3f} {q['inter_bytes_ratio']:8.3f} {r['a2a_time_ratio']:8.3f} "
                  f"{r['solver_ms_per_layer']:9.2f} {r['bound_time_ratio']:8.3f} {r['bound_nores_time_ratio']:11.3f} "
                  f"{r['relaxed_inter_bytes_ratio']:7.3f} "
                  + (f"{r['best_time_ratio']:7.3f} {r['best_nores_time_ratio']:10.3f} {r['exact_solved']:6.2f}"
                     if limit is not None else f"{'-':>7s} {'-':>10s} {'-':>6s}")
                  + f" {w['time_ratio']:8.3f} {w['solver_ms_per_layer']:7.1f}")


def balance_table(real, args, out):
    import numpy as np

    from sgl.systems.moe import CostParams, Topology, load_laer_loads, synthetic_trace
    from sgl.systems.moe.plan import balance_report, trace_balance_report
    from sgl.cli.moe import _laer_expert_loads

    print("\n## 3. Balancing: max/mean device load and modelled iteration time (ratio to static EP)")
    print(f"{'trace':26s} {'D':>3s} {'static':>14s} {'flexmoe':>20s} {'laer':>20s}")
    cost = CostParams()

    def row(name, d, r):
        s, f, l = r["static"], r["flexmoe"], r["laer"]
        out.setdefault("balance", []).append({"trace": name, "devices": d, **{k: v for k, v in r.items()}})
        ok = l["time_s"] <= f["time_s"] * (1 + 1e-9) and f["time_s"] <= s["time_s"] * (1 + 1e-9)
        print(f"{name:26s} {d:3d} {s['imbalance']:6.2f} {1.0:6.3f}  {f['imbalance']:6.2f} "
              f"{f['time_s'] / s['time_s']:6.3f} ({f['planner_ms']:4.1f}ms) {l['imbalance']:6.2f} "
              f"{l['time_s'] / s['time_s']:6.3f} ({l['planner_ms']:4.1f}ms) {'ok' if ok else 'ORDER VIOLATED'}")

    zipf = [("wikitext LM", real)]
    rng = np.random.default_rng(0)
    for a in args.affinities:
        tr = synthetic_trace(2, 2, 64, 64, 64, 2, a, seed=1)
        pop = rng.lognormal(0.0, 1.0, 64)  # skewed expert popularity on top of the affinity
        tr.counts = (tr.counts * (pop / pop.mean())[None, None, None, :]).astype(np.int64)
        tr.tokens_per_sample = int(tr.counts.sum(-1).max())
        zipf.append((f"synthetic aff={a} skew", tr))
    for name, tr in zipf:
        for d, n in ((8, 2), (32, 4), (64, 8)):
            row(name, d, trace_balance_report(tr, Topology.of(d, n), max(2, 2 * 64 // d), cost))
    csv = Path(args.root) / "moe_traces" / "token_analysis_backup.csv"
    if csv.is_file():
        for model, experts in (("mixtral-8x7b-e8k2", 8), ("mixtral-8x7b-e16k4", 16)):
            full = load_laer_loads(csv, model, "FSDP")  # [iters, layers, ranks]
            per = _laer_expert_loads(full.reshape(-1, full.shape[-1]), experts, experts // 4)
            topo = Topology(4, 8)
            acc = {}
            for layer in per:
                for m, vals in balance_report(layer, topo, experts // 4, cost).items():  # the artifact: E/4 per rank
                    for k, v in vals.items():
                        acc.setdefault(m, {}).setdefault(k, 0.0)
                        acc[m][k] += v / len(per)
            row(f"LAER artifact {model[-5:]}", 32, acc)
            meas = {m: float((lambda x: (x.max(-1) / x.mean(-1)).mean())(load_laer_loads(csv, model, m).astype(float)))
                    for m in ("FSDP", "FLEX", "LAER")}
            out.setdefault("artifact_measured_imbalance", {})[model] = meas
            print(f"   artifact's own measured max/mean rank load: " + ", ".join(f"{k} {v:.3f}" for k, v in meas.items()))


def lsh_tables(args, out):
    import torch

    from sgl import comm
    from sgl.systems.moe import CrossPolytopeLSH, TrainSpec, WikiTextMoEConfig, lsh_compress, moe_layers, wikitext_batches
    from sgl.systems.moe.train import build_moe_lm
    from sgl.systems.moe.workload import _worker

    cfg = WikiTextMoEConfig(steps=args.lm_steps, batch_size=16, val_batches=4)
    train, val = wikitext_batches(args.root, cfg, args.cache_dir)
    # Real MoE inputs: run the (single-process) LM for the same steps, capture layer inputs on validation.
    torch.manual_seed(0)
    model = build_moe_lm(cfg.model(), cfg.moe())
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    from sgl.systems.moe.train import _loss, SampleContext
    from sgl.systems.moe import moe_aux_loss

    ctx = SampleContext()
    for b in train[: min(len(train), 60)]:
        _, loss = _loss(model, b, 0, 1, ctx)
        opt.zero_grad()
        (loss + moe_aux_loss(model)).backward()
        opt.step()
    captured = []
    layer = next(moe_layers(model))
    hook = layer.register_forward_pre_hook(lambda m, a: captured.append(a[0].detach().reshape(-1, a[0].shape[-1])))
    with torch.no_grad():
        model(val[0][:, :-1])
    hook.remove()
    x = captured[0]
    with torch.no_grad():
        a, _ = layer.router(x)
        rows = x[a.token]
        ref = layer.experts(rows, a.counts.tolist())
    print("\n## 2. LSH-MoE on the LM's real MoE-layer inputs (validation batch, layer 0, per expert)")
    print(f"{'hashes':>6s} {'proj':>4s} {'rate':>6s} {'rel.err comp':>12s} {'rel.err none':>12s}")
    best, best_gap = (1, None), 9.0
    half, half_gap = (1, None), 9.0
    for n, r in [(n, r) for n in (1, 2, 4, 6) for r in (2, 4, 8, 16, 64)]:
        c, cc, bucket = lsh_compress(rows, a.expert, CrossPolytopeLSH(x.shape[1], n, seed=0, proj_dim=r),
                                     layer.cfg.num_experts)
        with torch.no_grad():
            ec = layer.experts(c, cc.tolist())[bucket]
        rate = c.shape[0] / rows.shape[0]
        e_comp = float((ec + rows - c[bucket] - ref).norm() / ref.norm())
        e_none = float((ec - ref).norm() / ref.norm())
        out.setdefault("lsh_error", []).append({"hashes": n, "proj_dim": r, "rate": rate, "err_comp": e_comp,
                                                "err_none": e_none})
        print(f"{n:6d} {r:4d} {rate:6.3f} {e_comp:12.4f} {e_none:12.4f}")
        if abs(rate - 0.2) < best_gap - 1e-9:
            best, best_gap = (n, r), abs(rate - 0.2)
        if abs(rate - 0.5) < half_gap - 1e-9:
            half, half_gap = (n, r), abs(rate - 0.5)
    from sgl.systems.moe.oracle import kmeans_compress

    for rate in (0.2, 0.5):  # the oracle: per-expert k-means at a fixed share of the rows
        c, cc, bucket = kmeans_compress(rows, a.expert, rate, layer.cfg.num_experts, seed=0)
        with torch.no_grad():
            ec = layer.experts(c, cc.tolist())[bucket]
        e_comp = float((ec + rows - c[bucket] - ref).norm() / ref.norm())
        e_none = float((ec - ref).norm() / ref.norm())
        out.setdefault("kmeans_error", []).append({"rate": c.shape[0] / rows.shape[0], "err_comp": e_comp,
                                                   "err_none": e_none})
        print(f"{'k-means oracle':>11s} {c.shape[0] / rows.shape[0]:6.3f} {e_comp:12.4f} {e_none:12.4f}")
    print(f"(hashes, proj_dim) nearest a 20 % rate: {best}, nearest 50 %: {half}")
    runs = {}
    lsh_kw = {"lsh_hashes": best[0], "lsh_proj_dim": best[1]}
    lsh50_kw = {"lsh_hashes": half[0], "lsh_proj_dim": half[1]}
    for name, kw in (("ep", {}), ("lsh", lsh_kw), ("lsh-nocomp", {**lsh_kw, "lsh_compensate": False}),
                     ("lsh-50", lsh50_kw), ("kmeans", {"kmeans_rate": 0.2}),
                     ("kmeans-nocomp", {"kmeans_rate": 0.2, "lsh_compensate": False}), ("padded", {}), ("fsep", {})):
        if name.startswith("kmeans") and args.no_oracle_lm:
            continue
        steps = args.lm_steps if name.startswith(("ep", "lsh", "kmeans")) else args.calib_steps
        spec = TrainSpec(cfg.model(), cfg.moe(), train[:steps], lr=cfg.lr, dispatch=name.split("-")[0],
                         val_batches=val, timeout=600.0, **kw)
        t0 = time.perf_counter()
        res = comm.spawn(_worker, 2, spec, timeout=3600)
        runs[name] = res
        print(f"  2-process {name}: {steps} steps in {time.perf_counter() - t0:.0f} s, val loss {res[0]['val_loss']:.4f}")
    ep, lsh, nocomp = runs["ep"][0], runs["lsh"][0], runs["lsh-nocomp"][0]
    sent = {k: sum(r["sent_rows"] for r in v) for k, v in runs.items()}
    routed = {k: sum(r["routed_rows"] for r in v) for k, v in runs.items()}
    print(f"  evaluated with exact dispatch (the same trained weights): LSH {lsh['val_loss_exact']:.4f} "
          f"(x{lsh['val_loss_exact'] / ep['val_loss']:.4f}), LSH without compensation {nocomp['val_loss_exact']:.4f} "
          f"(x{nocomp['val_loss_exact'] / ep['val_loss']:.4f})")
    print(f"LM validation loss after {args.lm_steps} steps: EP {ep['val_loss']:.4f}, LSH{best} {lsh['val_loss']:.4f} "
          f"(x{lsh['val_loss'] / ep['val_loss']:.4f}), LSH without compensation {nocomp['val_loss']:.4f} "
          f"(x{nocomp['val_loss'] / ep['val_loss']:.4f}); LSH transmitted {sent['lsh'] / routed['lsh']:.3f} of the rows")
    l50 = runs["lsh-50"][0]
    print(f"  at the ~50 % setting {half}: val loss {l50['val_loss']:.4f} (x{l50['val_loss'] / ep['val_loss']:.4f}), "
          f"{sent['lsh-50'] / routed['lsh-50']:.3f} of the rows transmitted")
    if "kmeans" in runs:
        km, kn = runs["kmeans"][0], runs["kmeans-nocomp"][0]
        print(f"  oracle (per-expert k-means, {sent['kmeans'] / routed['kmeans']:.3f} of the rows): val loss "
              f"{km['val_loss']:.4f} (x{km['val_loss'] / ep['val_loss']:.4f}), without compensation "
              f"{kn['val_loss']:.4f} (x{kn['val_loss'] / ep['val_loss']:.4f}); evaluated with exact dispatch "
              f"{km['val_loss_exact']:.4f} (x{km['val_loss_exact'] / ep['val_loss']:.4f})")
        out["kmeans_lm"] = {"val": km["val_loss"], "nocomp_val": kn["val_loss"], "val_exact": km["val_loss_exact"],
                            "rate": sent["kmeans"] / routed["kmeans"]}
    out["lsh_lm"] = {"hashes": best, "ep_val": ep["val_loss"], "lsh_val": lsh["val_loss"],
                     "lsh_val_exact": lsh["val_loss_exact"], "lsh_nocomp_val_exact": nocomp["val_loss_exact"],
                     "lsh_nocomp_val": nocomp["val_loss"], "rate": sent["lsh"] / routed["lsh"],
                     "lsh50": half, "lsh50_val": l50["val_loss"], "lsh50_rate": sent["lsh-50"] / routed["lsh-50"]}
    print("\n## 4. Measured 2-process gloo step time on this CPU (calibration; modelled dispatch rows beside it)")
    print(f"{'dispatch':>8s} {'step ms':>8s} {'x ep':>6s} {'rows sent/step':>14s}")
    def step_ms(res):
        import statistics

        return 1e3 * statistics.median(res[0]["step_time"][1:] or res[0]["step_time"])
    base_ms = step_ms(runs["ep"])
    for name, res in runs.items():
        steps = len(res[0]["step_time"])
        ms = step_ms(res)
        out.setdefault("calibration", []).append({"dispatch": name, "step_ms": ms, "rows_per_step": sent[name] / steps})
        print(f"{name:>8s} {ms:8.1f} {ms / base_ms:6.2f} {sent[name] / steps:14.0f}")


def _mixtral_config(args) -> dict:
    from transformers import MixtralConfig

    return MixtralConfig(vocab_size=4096, hidden_size=args.mix_hidden, intermediate_size=args.mix_ffn,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, num_local_experts=64,
                         num_experts_per_tok=2, max_position_embeddings=128).to_dict()


def precision_table(args, out):
    """fp32 vs bf16-autocast training of the converted tiny Mixtral, same data, seed and steps."""
    from sgl.systems.moe import WikiTextMoEConfig, run_wikitext_moe

    cfg = WikiTextMoEConfig(steps=args.mix_steps, batch_size=args.mix_batch, val_batches=4, lr=3e-3)
    hf = _mixtral_config(args)
    res = {}
    for precision in ("fp32", "bf16"):
        res[precision] = run_wikitext_moe(args.root, cfg, procs=1, cache_dir=args.cache_dir, hf_config=hf,
                                          precision=precision)
    f, b = res["fp32"], res["bf16"]
    speed = f["mean_step_s"] / b["mean_step_s"]
    dval = (b["val_loss"] - f["val_loss"]) / f["val_loss"]
    print(f"\nprecision: converted HF Mixtral (64 experts, top-2, hidden {args.mix_hidden}, ffn {args.mix_ffn}, "
          f"2 layers), WikiText-2, {cfg.steps} steps of {cfg.batch_size}x{cfg.seq_len} tokens, 1 process")
    print(f"{'':>6s} {'step ms':>8s} {'val loss':>9s}")
    for name, r in res.items():
        print(f"{name:>6s} {r['mean_step_s'] * 1e3:8.1f} {r['val_loss']:9.4f}")
    print(f"bf16 step speed-up x{speed:.2f} (fp32 ms / bf16 ms); validation loss bf16 vs fp32 {dval * 100:+.2f} %")
    out["precision"] = {"fp32_step_ms": f["mean_step_s"] * 1e3, "bf16_step_ms": b["mean_step_s"] * 1e3,
                        "speedup": speed, "fp32_val_loss": f["val_loss"], "bf16_val_loss": b["val_loss"],
                        "val_loss_rel_diff": dval, "steps": cfg.steps}


#: the GEMMs of a step (``_grouped_mm`` on the CPU is a loop of ``aten::mm`` calls, counted there)
_GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm")
#: fused attention kernels: the oracle makes them free
_ATTENTION_OPS = ("aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_flash_attention_for_cpu_backward")


def _gemm_ratio(op: str, shapes: list, repeats: int = 5) -> float:
    """Best bf16 time / fp32 time of one GEMM at these shapes, over the layouts of its operands."""
    import time

    import torch

    def best(fn):
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    mats = [list(x) for x in shapes if len(x) >= 2]        # mm(a, b), addmm(bias, a, b, ...), bmm(a, b)
    (m, k), (_, n) = mats[-2][-2:], mats[-1][-2:]
    lead = tuple(mats[-2][:-2])
    out = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(*lead, m, k, dtype=dtype), torch.randn(*lead, k, n, dtype=dtype)
        at, bt = a.transpose(-1, -2).contiguous().transpose(-1, -2), b.transpose(-1, -2).contiguous().transpose(-1, -2)
        out[dtype] = [best(lambda x=x, y=y: torch.matmul(x, y)) for x, y in ((a, b), (a, bt), (at, b))]
    return min(1.0, min(out[torch.bfloat16]) / max(min(out[torch.float32]), 1e-9))


def precision_ceiling(args, out):
    """An upper bound on bf16 autocast's step speed-up, from a profile of the fp32 step (an oracle).

    The fp32 step (same model, data, fused AdamW, 1 thread) is split by torch.profiler into GEMMs
    (by shape), fused attention, the optimizer (``Optimizer.step``), every other op, and the rest of
    the wall time (Python, dispatch, autograd bookkeeping). The oracle bf16 step keeps the optimizer
    (fp32 master weights) and the rest, halves every other op (half the bytes), makes attention free,
    runs every GEMM at the best bf16/fp32 ratio measured for its shape over operand layouts, and
    pays only the one unavoidable cast of each weight to bf16 per step (measured)::

        speed-up <= T / (T_opt + T_rest + T_other / 2 + sum_gemm T_gemm * r(shape) + T_cast)
    """
    import time

    import torch

    from dataclasses import replace

    from sgl.systems.moe import WikiTextMoEConfig
    from sgl.systems.moe.train import TrainSpec, build_model, train_moe_lm
    from sgl.systems.moe.workload import wikitext_batches

    torch.set_num_threads(1)
    hf = _mixtral_config(args)
    cfg = replace(WikiTextMoEConfig(steps=args.ceiling_steps, batch_size=args.mix_batch, val_batches=1, lr=3e-3),
                  vocab_size=int(hf["vocab_size"]))
    train, _ = wikitext_batches(args.root, cfg, args.cache_dir)
    spec = TrainSpec(None, None, train, lr=cfg.lr, dispatch="local", hf_config=hf, precision="fp32", seed=cfg.seed)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        train_moe_lm(0, 1, spec)
    events = prof.events()
    steps = sorted((e for e in events if e.name == "sgl.moe.step"), key=lambda e: e.time_range.start)[1:]  # warm-up
    parts = {"total": 0.0, "gemm": 0.0, "attention": 0.0, "optimizer": 0.0, "other_ops": 0.0}
    gemms = {}
    for st in steps:
        lo, hi = st.time_range.start, st.time_range.end
        inside = [e for e in events if e.thread == st.thread and lo <= e.time_range.start and e.time_range.end <= hi
                  and e is not st]
        opt = [e for e in inside if e.name.startswith("Optimizer.step#")]
        parts["total"] += st.cpu_time_total
        parts["optimizer"] += sum(o.cpu_time_total for o in opt)
        for e in inside:
            if not e.name.startswith("aten::") or any(o.time_range.start <= e.time_range.start <= o.time_range.end
                                                       for o in opt):
                continue
            if e.name in _GEMM_OPS:
                parts["gemm"] += e.self_cpu_time_total
                key = (e.name, str(e.input_shapes))
                gemms[key] = gemms.get(key, (e.input_shapes, 0.0))[0], gemms.get(key, (None, 0.0))[1] + e.self_cpu_time_total
            elif e.name in _ATTENTION_OPS:
                parts["attention"] += e.self_cpu_time_total
            else:
                parts["other_ops"] += e.self_cpu_time_total
    n = max(len(steps), 1)
    ms = {k: v / n / 1e3 for k, v in parts.items()}
    # the step's wall time without the profiler's own overhead: a second, unprofiled run
    plain = train_moe_lm(0, 1, spec)["step_time"][1:]
    ms["total"] = float(sorted(plain)[len(plain) // 2]) * 1e3
    rest = max(0.0, ms["total"] - sum(ms[k] for k in ("gemm", "attention", "optimizer", "other_ops")))
    gemm_oracle = sum(t * _gemm_ratio(op, shapes) for (op, _), (shapes, t) in gemms.items()) / n / 1e3
    model = build_model(spec)
    t0 = time.perf_counter()
    for p in model.parameters():
        p.detach().to(torch.bfloat16)
    cast = (time.perf_counter() - t0) * 1e3
    oracle = ms["optimizer"] + rest + ms["other_ops"] / 2 + gemm_oracle + cast
    bound = ms["total"] / oracle
    print(f"\nprecision ceiling: fp32 step profiled ({len(steps)} steps after a warm-up, fused AdamW, 1 thread)")
    print(f"  fp32 step {ms['total']:.1f} ms = GEMM {ms['gemm']:.1f} + attention {ms['attention']:.1f} + optimizer "
          f"{ms['optimizer']:.1f} + other ops {ms['other_ops']:.1f} + Python/dispatch {rest:.1f}")
    print(f"  oracle bf16 step {oracle:.1f} ms = optimizer {ms['optimizer']:.1f} + Python/dispatch {rest:.1f} + other "
          f"ops / 2 {ms['other_ops'] / 2:.1f} + GEMM at the best measured bf16 ratio per shape {gemm_oracle:.1f} "
          f"(x{ms['gemm'] / max(gemm_oracle, 1e-9):.2f}) + one cast of the weights {cast:.1f} + attention 0")
    print(f"  bound on the bf16 step speed-up: x{bound:.2f} (target x2.0; {len(gemms)} GEMM shapes replayed)")
    out["precision_ceiling"] = dict(ms, rest=rest, gemm_oracle=gemm_oracle, cast=cast, oracle=oracle, bound=bound,
                                    steps=len(steps), gemm_shapes=len(gemms))


def experts_table(args, out):
    """One expert bank's forward+backward: grouped GEMM / padded bmm / loop at equal dtype."""
    import torch

    from sgl.systems.moe.experts import run_experts

    e, h, f, rows = 64, args.mix_hidden, args.mix_ffn, args.mix_batch * 64 * 2
    gen = torch.Generator().manual_seed(0)
    counts = torch.multinomial(torch.ones(e), rows, replacement=True, generator=gen).bincount(minlength=e).tolist()
    print(f"\nexperts: {e} experts, hidden {h}, ffn {f}, {rows} routed rows, 1 thread "
          "(the loop's backward writes a full [E, ...] zero gradient per expert slice: its fwd+bwd cost)")
    print(f"{'dtype':>9s} {'pass':>8s} {'loop ms':>8s} {'grouped':>8s} {'x loop':>7s} {'padded':>8s} {'x loop':>7s}")
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(rows, h, generator=gen).to(dtype).requires_grad_()
        ws = [(torch.randn(e, a, b, generator=gen) / a ** 0.5).to(dtype).requires_grad_()
              for a, b in ((h, f), (h, f), (f, h))]
        for kind in ("forward", "fwd+bwd"):
            ms = {}
            for impl in ("loop", "grouped", "padded"):
                def once():
                    if kind == "forward":
                        with torch.no_grad():
                            run_experts(x, counts, *ws, impl=impl)
                    else:
                        run_experts(x, counts, *ws, impl=impl).float().square().mean().backward()
                once()
                reps = 2 if (args.quick or (impl == "loop" and kind != "forward")) else 10
                t0 = time.perf_counter()
                for _ in range(reps):
                    once()
                ms[impl] = (time.perf_counter() - t0) / reps * 1e3
            name = str(dtype).split(".")[-1]
            print(f"{name:>9s} {kind:>8s} {ms['loop']:8.1f} {ms['grouped']:8.1f} {ms['loop'] / ms['grouped']:7.2f} "
                  f"{ms['padded']:8.1f} {ms['loop'] / ms['padded']:7.2f}")
            out.setdefault("experts", []).append({"dtype": name, "pass": kind, **{f"{k}_ms": v for k, v in ms.items()}})


def main() -> int:
    import torch

    torch.set_num_threads(1)
    args = _args()
    out: dict = {}
    real = trace_lm(args) if {"netmoe", "balance"} & set(args.tables) else None
    if "netmoe" in args.tables:
        netmoe_table(real, args, out)
    if "lsh" in args.tables:
        lsh_tables(args, out)
    if "balance" in args.tables:
        balance_table(real, args, out)
    if "precision" in args.tables:
        precision_table(args, out)
        precision_ceiling(args, out)
    if "experts" in args.tables:
        experts_table(args, out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
