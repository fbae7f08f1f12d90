"""Modelled step time of FlexSP, the dynamic DP×CP mesh, per-step switching, Hydraulis and Malleus.

    SGL_TEST_DATA=../shared/datasets python benchmarks/bench_seqplan.py [--steps 3] [--devices 16,32,64]

Real lengths (FlexSP's wikipedia.txt sample, 1M sequences), the papers' constants (FlexSP: LLaMA-7B,
A100-80GB, ZeRO-3, its all-to-all table; Hydraulis: its 10-strategy 7B/A100-40GB pool; Malleus: the
same 7B layer costs). Ratios are modelled (cost-model outputs); solver seconds are wall-clock
timings of this machine (a loaded 2-core box: rerun on a quiet machine for figures).

Table 1 (``sequence plans``): the static baseline is the best homogeneous strategy (TP x Ulysses SP
and ring CP, with and without checkpointing) that holds the run's max length. ``paper`` rows use
FlexSP's evaluation max lengths (192K and 384K tokens, where the cluster holds them);
``oracle-static`` repeats the old setting where the static strategy only had to hold the longest
sequence of the sampled steps (which is why the first version reported ~1.0x).
Table 2: Hydraulis (its pool caps sequences at its longest supported length). Table 3: Malleus vs
the straggler-oblivious plan, with the model-state volume moved when re-planning from no straggler.

``--measure`` runs the plans instead (:func:`sgl.systems.seq.measure.measure_planners`): the same
Wikipedia lengths scaled so the longest fits this machine, a per-device token budget that makes
long sequences need SP, 2 gloo processes (``--processes 4`` where cores allow), Hugging Face
``LlamaForCausalLM`` (``--arch tiny``: TinyLM with the same shapes), the cost
model calibrated on this machine by timing the executor, and, per planner, the measured step time
against the best *measured* static strategy, the modelled ratio beside it, and predicted vs
measured time of every executed plan with the median relative error:

    SGL_TEST_DATA=../shared/datasets python benchmarks/bench_seqplan.py --measure [--measure-steps 3] \
        [--arch hf-llama|tiny] [--malleus-layouts ""] [--malleus-only]

The Malleus rows (one 2x straggler against the straggler-oblivious plan, layouts dp, pp, tp, auto) run on
``--arch``'s model too (``auto``: both plans chosen over every layout, the oblivious one for uniform rates);
``--malleus-only`` runs just them with the brute-force oracle ceiling of the dp / pp rows (about 2 minutes).
"""
import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np

from sgl.systems.seq import GlobalBatchSampler, MalleusModel, MalleusPlanner, hydraulis_pool, read_lengths
from sgl.systems.seq.compare import compare
from sgl.systems.seq.cost import flexsp_cost_model, longest_supported
from sgl.systems.seq.straggler import straggler_setting

PAPER_MAX = (196_608, 393_216)          # FlexSP's 192K and 384K evaluation context lengths
TOKENS_PER_DEVICE = 16_384


def seq_rows(lengths, devices, steps, time_limit, tokens_per_device=TOKENS_PER_DEVICE):
    for n in devices:
        top = longest_supported(flexsp_cost_model(n, 80).sp_pool())
        settings = [("paper", m) for m in PAPER_MAX if m <= top] + [("oracle-static", None)]
        for name, max_len in settings:
            cap = max_len or min(top, 256 * 1024)
            batches = GlobalBatchSampler(lengths, tokens_per_step=n * tokens_per_device, seed=0,
                                         max_length=cap).batches(steps)
            # mesh: the shipped planner (cheaper of ring/Ulysses per size, may fall back to the best static
            # strategy for a step) and the paper's pure ring DP x CP mesh as an ablation
            methods = [("flexsp", "ring", True), ("mesh", "best", True), ("mesh", "ring", False),
                       ("switch", "ring", True)]
            if max_len is None:
                methods = methods[:1]
            for method, groups, fallback in methods:
                res = compare(method, batches, n, 80.0, max_length=max_len, time_limit=time_limit,
                              mesh_groups=groups, mesh_fallback=fallback)
                label = method if method != "mesh" else ("mesh" if fallback else f"mesh-{groups} (pure)")
                own = [x.split(": ")[1] for x in res.notes if x.startswith("vs the static DP x CP mesh")]
                steady = [x.rsplit(" ", 1)[1] for x in res.notes if "ratio without it" in x]
                yield (label, n, name, max_len or max(int(b.max()) for b in batches), res,
                       own[0] if own else "", steady[0] if steady else "")


def hydraulis_rows(lengths, devices, steps, time_limit):
    for n in devices:
        pool = hydraulis_pool(n)
        longest = max(p.capacity for p in pool)
        sampler = GlobalBatchSampler(lengths, batch_size=n * 8, seed=0, max_length=longest)
        for ilp in (True, False):
            res = compare("hydraulis", sampler.batches(steps), n, 40536 * 2**20 / 2**30, max_length=longest,
                          time_limit=time_limit, sample=sampler.pool[:200_000], hydraulis_ilp=ilp)
            yield ("hydraulis" if ilp else "hydraulis (greedy packing)"), n, longest, res


def malleus_rows(devices):
    layouts = {16: (4, 2), 32: (8, 2), 64: (8, 4)}
    for n in devices:
        tp, pp = layouts.get(n, (8, max(1, n // 16)))
        planner = MalleusPlanner(MalleusModel(), n, tp, pp)
        healthy = planner.plan(np.ones(n))
        for name in ("one-2x", "one-5x", "one-8x", "four-3x", "node-2x", "mixed"):
            rates = straggler_setting(name, n)
            t0 = time.perf_counter()
            plan = planner.replan(healthy, rates)
            seconds = time.perf_counter() - t0
            yield n, tp, pp, name, planner.oblivious(rates).step_ms, plan, seconds


#: hook for other runtimes' measured rows (e.g. Malleus with an injected straggler): callables
#: ``fn(args, lengths) -> iterable of (name, measured ms/step, baseline name, baseline ms/step, modelled ratio)``
EXTRA_MEASURES = []
#: (predicted ms, measured ms) of the plans EXTRA_MEASURES executed, for the overall median error
EXTRA_ERRORS = []


#: per executed Malleus layout: the full :func:`measure_malleus` result (oracle, paired ratios, plans)
MALLEUS_RESULTS = {}


def malleus_measured_rows(args, lengths):
    """Malleus with one 2x straggler (rank 0) against the straggler-oblivious plan, per layout, on
    ``--arch``'s model (HF LlamaForCausalLM or TinyLM with BENCH_MODEL's shapes); ``auto`` lets both
    sides choose over every layout (oblivious: the planner's choice for uniform rates)."""
    from sgl.systems.seq.malleus_measure import measure_malleus

    for layout in [x.strip() for x in args.malleus_layouts.split(",") if x.strip()]:
        out = measure_malleus(args.processes, 2.0, 0, layout=layout, arch=args.arch, rounds=args.malleus_rounds,
                              pin=args.malleus_pin)
        MALLEUS_RESULTS[layout] = out
        o, a = out["oblivious"], out["aware"]
        EXTRA_ERRORS.extend([(o["predicted_ms"], o["measured_ms"]), (a["predicted_ms"], a["measured_ms"])])
        paired = sorted(out["paired_ratios"])
        print(f"malleus-{layout} on {args.arch}: rates {out['measured_rates']} (layer {out['layer_ms']:.1f} ms, "
              f"embedding {out['embed_ms']:.2f} ms, head+loss {out['head_ms']:.2f} ms per micro-batch); oblivious "
              f"(tp, pp) {o['layout']} pipelines {o['pipelines']} mb {o['micro_batches']} layers {o['layers']}; aware "
              f"{a['layout']} pipelines {a['pipelines']} mb {a['micro_batches']} layers {a['layers']}; migration "
              f"{out['migration']['received_mb']:.2f} MB in {out['migration']['migration_s']:.2f} s; modelled at the "
              f"injected 2x {out['modelled_ratio_injected']:.3f}; per-round ratios {[round(x, 3) for x in paired]}; "
              f"compute ms/step per rank obl {o['compute_ms']} aware {a['compute_ms']}", flush=True)
        orc = out["oracle"]
        if orc:
            print(f"  oracle ({orc['kind']}, brute force over every split, this run's measured per-rank compute, "
                  f"residue {orc['residue_ms']:.0f} ms/step): best {orc['best']} -> ceiling {orc['ceiling']:.3f}x; "
                  f"ours {orc['ours']} -> {orc['ours_at_residue']:.3f}x", flush=True)
        yield (f"malleus-{layout} {args.arch} (2x straggler)", a["measured_ms"], "straggler-oblivious",
               o["measured_ms"], out["modelled_ratio"])


EXTRA_MEASURES.append(malleus_measured_rows)


def malleus_main(args, lengths):
    """``--measure --malleus-only``: the Malleus rows alone, with predicted against measured step time."""
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    print(f"Malleus measured on {args.processes} gloo processes (1 thread each{', pinned' if args.malleus_pin else ''}"
          f"), {'TinyLM' if args.arch == 'tiny' else 'HF LlamaForCausalLM'} with BENCH_MODEL's shapes, "
          f"{args.malleus_rounds} ABBA rounds; load average {os.getloadavg()[0]:.2f}")
    rows = list(malleus_measured_rows(args, lengths))
    print("\n| layout | oblivious ms/step | Malleus ms/step | measured ratio | per-round median | modelled ratio "
          "| oracle ceiling | Malleus' split | oracle's split |")
    print("|---|---|---|---|---|---|---|---|---|")
    for layout, (name, ms, base, base_ms, modelled) in zip(MALLEUS_RESULTS, rows):
        out = MALLEUS_RESULTS[layout]
        orc = out["oracle"]
        ceiling = f"{orc['ceiling']:.3f}" if orc else "n/a"
        print(f"| {layout} | {base_ms:.0f} | {ms:.0f} | {base_ms / ms:.3f} | {np.median(out['paired_ratios']):.3f} "
              f"| {modelled:.3f} | {ceiling} | {orc['ours'] if orc else ''} | {orc['best'] if orc else ''} |")
    errors = sorted(abs(p - m) / m for p, m in EXTRA_ERRORS)
    print(f"\npredicted vs measured (Malleus predicts layers, embedding and head; not the optimiser / all-reduce): "
          f"{[f'{p:.0f}/{m:.0f}' for p, m in EXTRA_ERRORS]} ms, median abs error "
          f"{errors[len(errors) // 2]:.3f}; wall {time.perf_counter() - t0:.0f} s; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    load, cores = max(load0, os.getloadavg()[0]), os.cpu_count() or 1
    if load > cores:
        print(f"WARNING: load average {load:.1f} on {cores} cores: other processes held the cores, so these "
              f"wall-clock ratios are not those of the plans; rerun on an idle machine", flush=True)


def measure_main(args, lengths):
    if args.malleus_only:
        malleus_main(args, lengths)
        return
    from sgl.systems.seq.measure import MeasureSetup, measure_planners

    setup = MeasureSetup(devices=args.processes, steps=args.measure_steps, max_length=args.max_length,
                         budget=args.budget, tokens_per_step=args.tokens_per_step, repeats=args.repeats,
                         arch=args.arch)
    t0 = time.perf_counter()
    from sgl.systems.seq.profile import MachineProfile

    profile = MachineProfile.load(args.profile) if args.profile else None
    res = measure_planners(lengths, setup, profile=profile)
    impl = "TinyLM" if setup.arch == "tiny" else "HF LlamaForCausalLM"
    print(f"measured on {setup.devices} gloo processes (1 thread each), {impl} '{setup.model}', "
          f"{setup.steps} steps of ~{setup.tokens_per_step} tokens, lengths x{setup.scale:.4f} "
          f"(cap {setup.source_max} -> {setup.max_length}), budget {setup.budget} tokens/device; "
          f"steps per batch: {[len(b) for b in res.lengths]}, longest: {[max(b) for b in res.lengths]}; "
          f"cost model: {'profile ' + args.profile if args.profile else 'fitted on the executor (this run)'}")
    print("\n| calibrated strategy | degree | a ms/token^2 | b ms/token | c ms/micro-batch | o ms/step |")
    print("|---|---|---|---|---|---|")
    for f in res.fits:
        print(f"| {f['strategy']} | {f['degree']} | {f['a']:.3g} | {f['b']:.3g} | {f['c']:.3g} | {f['o']:.3g} |")
    best, model_best = res.best_static(), res.best_static(False)
    steps = setup.steps
    print("\n| planner | measured ms/step | best static (measured) | static ms/step | measured ratio "
          "| modelled ratio | predicted ms/step |")
    print("|---|---|---|---|---|---|---|")
    for name, row in res.planners.items():
        print(f"| {name} | {row.total / steps:.0f} | {best.name} | {best.total / steps:.0f} | {res.ratio(name):.3f} "
              f"| {res.modelled_ratio(name):.3f} (vs {model_best.name}) | {row.predicted_total / steps:.0f} |")
    for fn in EXTRA_MEASURES:
        for name, ms, base, base_ms, modelled in fn(args, lengths):
            print(f"| {name} | {ms:.0f} | {base} | {base_ms:.0f} | {base_ms / ms:.3f} | {modelled:.3f} | |")
    print("\n| same-window re-calibration | degree | a ms/token^2 | b ms/token | c ms/micro-batch | o ms/step |")
    print("|---|---|---|---|---|---|")
    for f in res.window_fits:
        print(f"| {f['strategy']} | {f['degree']} | {f['a']:.3g} | {f['b']:.3g} | {f['c']:.3g} | {f['o']:.3g} |")
    print("\n| executed plan | step | groups | predicted ms | same-window predicted ms | measured ms "
          "| abs(pred-meas)/meas | same-window |")
    print("|---|---|---|---|---|---|---|---|")
    for row in list(res.planners.values()) + list(res.statics.values()):
        for step, (p, w, m, label) in enumerate(zip(row.predicted_ms, row.window_ms, row.measured_ms, row.labels)):
            print(f"| {row.name} | {step} | {label} | {p:.0f} | {w:.0f} | {m:.0f} | {abs(p - m) / m:.3f} "
                  f"| {abs(w - m) / m:.3f} |")
    print(f"\nmedian abs(predicted - measured) / measured over {len(res.errors())} executed plans: "
          f"{res.median_error:.3f} with the planning calibration, {res.median_error_window:.3f} with the "
          f"same-window re-calibration (target <= 0.20); FlexSP measured ratio {res.ratio('flexsp'):.3f} "
          f"(target >= 1.1); wall {time.perf_counter() - t0:.0f} s", flush=True)
    if EXTRA_ERRORS:
        errors = sorted(list(res.errors()) + [abs(p - m) / m for p, m in EXTRA_ERRORS])
        print(f"median abs(predicted - measured) / measured over all {len(errors)} executed plans, Malleus' "
              f"{len(EXTRA_ERRORS)} included: {errors[len(errors) // 2]:.3f} (Malleus predicts layer compute only)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--devices", default="16,32,64")
    ap.add_argument("--time-limit", type=float, default=0.1, help="MILP time limit per micro-batch (s)")
    ap.add_argument("--tokens-per-device", type=int, default=TOKENS_PER_DEVICE,
                    help="token budget per step and device (the paper's global batch was not verified)")
    ap.add_argument("--skip", default="", help="comma list of tables to skip: seq,hydraulis,malleus")
    ap.add_argument("--measure", action="store_true", help="execute the plans on processes and measure them")
    ap.add_argument("--processes", type=int, default=2, help="--measure: gloo processes (devices)")
    ap.add_argument("--measure-steps", type=int, default=3, help="--measure: global batches")
    ap.add_argument("--repeats", type=int, default=2, help="--measure: timed repeats per plan (fastest counts)")
    ap.add_argument("--max-length", type=int, default=2048, help="--measure: scaled longest sequence")
    ap.add_argument("--budget", type=int, default=1024, help="--measure: tokens per device and micro-batch")
    ap.add_argument("--tokens-per-step", type=int, default=6144, help="--measure: scaled tokens per step")
    ap.add_argument("--arch", default="hf-llama", choices=("tiny", "hf-llama"),
                    help="--measure: the executor's model, HF LlamaForCausalLM or TinyLM (same shapes; an HF "
                    "Llama step measured about as fast as TinyLM's, so it is the default)")
    ap.add_argument("--malleus-layouts", default="dp,pp,tp,auto", help="--measure: Malleus layouts to execute "
                    "with a 2x straggler on --arch's model (comma list of dp, pp, tp, auto; empty: none)")
    ap.add_argument("--malleus-rounds", type=int, default=3, help="--measure: ABBA rounds of the Malleus rows")
    ap.add_argument("--malleus-pin", action="store_true", help="--measure: pin each Malleus rank to one core")
    ap.add_argument("--malleus-only", action="store_true", help="--measure: run only the Malleus rows (skip the "
                    "sequence planners and their calibration)")
    ap.add_argument("--profile", default=None, help="--measure: plan with this `sgl plan calibrate` profile file "
                    "instead of fitting the executor in this run")
    args = ap.parse_args()
    root = Path(os.environ.get("SGL_TEST_DATA", "../shared/datasets"))
    lengths = read_lengths(root / "seqlen" / "wikipedia.txt")
    if args.measure:
        measure_main(args, lengths)
        return
    devices = [int(x) for x in args.devices.split(",")]
    skip = set(args.skip.split(","))
    warnings.simplefilter("ignore", RuntimeWarning)
    compare("flexsp", [lengths[:64]], 8, 80.0)          # compile the greedy loops once (numba), untimed
    if "seq" not in skip:
        print("| method | devices | setting | max length | best static | static ms/step | planned ms/step | ratio "
              "| w/o one-time comms | vs static DPxCP mesh | solver s/step | saved ms/step |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for label, n, name, top, res, own, steady in seq_rows(lengths, devices, args.steps, args.time_limit,
                                                      args.tokens_per_device):
            steps = len(res.planned_ms)
            print(f"| {label} | {n} | {name} | {top} | {res.static_label} | {sum(res.static_ms) / steps:.0f} | "
                  f"{sum(res.planned_ms) / steps:.0f} | {res.ratio:.3f} | {steady} | {own} | "
                  f"{np.mean(res.solver_seconds):.2f} | {res.saved_ms_per_step:.0f} |", flush=True)
    if "hydraulis" not in skip:
        print("\n| Hydraulis | devices | max length | best static | static ms/step | planned ms/step | ratio "
              "| solver s/step | saved ms/step |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, n, top, res in hydraulis_rows(lengths, devices, args.steps, args.time_limit):
            steps = len(res.planned_ms)
            print(f"| {label} | {n} | {top} | {res.static_label} | {sum(res.static_ms) / steps:.0f} | "
                  f"{sum(res.planned_ms) / steps:.0f} | {res.ratio:.3f} | {np.mean(res.solver_seconds):.3f} | "
                  f"{res.saved_ms_per_step:.0f} |", flush=True)
    if "malleus" not in skip:
        print("\n| Malleus | devices | tp x pp | setting | oblivious ms | Malleus ms | ratio | idle | plan s "
              "| migration MB |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n, tp, pp, name, base, plan, seconds in malleus_rows(devices):
            print(f"| malleus | {n} | {tp}x{pp} | {name} | {base:.0f} | {plan.step_ms:.0f} | "
                  f"{base / plan.step_ms:.2f} | {plan.idle} | {seconds:.2f} | {plan.migration_mb:.0f} |", flush=True)


if __name__ == "__main__":
    main()
