"""Malleus measured: the straggler-aware plan vs the straggler-oblivious plan, one rank injected 2x slower.

    python benchmarks/bench_malleus.py --measure [--world 2] [--factor 2] [--layouts dp,pp,tp,auto] [--steps 2] \
        [--rounds 3] [--arch tiny|hf-llama] [--pin]

Each layout runs ``--world`` local gloo processes training ``BENCH_MODEL`` (a 6-layer TinyLM,
hidden 128, 128 tokens, 12 micro-batches of 2) with rank 0 slowed ``--factor`` times by a busy-wait
proportional to its measured compute (:func:`sgl.systems.seq.straggler.inject_straggler`).
Training starts on the oblivious plan (``dp``: one-device pipelines with equal micro-batches;
``pp``: one pipeline of one-device stages with equal layers; ``tp``: one TP group of all ranks,
which Malleus may regroup; ``auto``: both sides chosen over every layout, the oblivious one for
uniform rates).  Its step timings (or, with ``--rates probe``, a layer probe on every
rank at once) give the rates; Malleus re-plans and migrates the parameters and Adam states live,
and training continues on the aware plan; then the plans alternate in ABBA order for ``--rounds``
pairs.  For the dp and pp rows a brute-force oracle over every micro-batch / layer split, fed with
this run's measured per-rank compute, prints the best ratio reachable (the ceiling).  Both sides
run in the same processes, the same run and the same number of steps; the table prints the median
measured step times, the measured ratio, the planner's modelled ratio (at the measured and at the
injected rates) and predicted vs measured step time per plan.  Figures from a loaded shared
machine are noisy: rerun on a quiet one.
"""
import argparse
import time

from sgl.systems.seq.malleus_measure import measure_malleus

TARGET = 1.3


def _row(name, out):
    o, a = out["oblivious"], out["aware"]
    err = [abs(p["predicted_ms"] - p["measured_ms"]) / p["measured_ms"] for p in (o, a)]
    print(f"{name:<4} {o['measured_ms']:>10.1f} {a['measured_ms']:>9.1f} {out['measured_ratio']:>8.2f}x "
          f"{out['modelled_ratio']:>8.2f}x {out['modelled_ratio_injected']:>8.2f}x "
          f"{o['predicted_ms']:>8.1f}/{a['predicted_ms']:<8.1f} {f'{100 * err[0]:.0f}%/{100 * err[1]:.0f}%':>16} "
          f"{out['migration']['received_mb']:>7.2f}  {out['measured_rates']}")
    print(f"     rates from the layer probe {out['probe_rates']}, from the oblivious steps {out['step_rates']}; "
          f"re-plan used {out['rates_from']}")
    print(f"     oblivious (tp, pp) {o['layout']}: micro-batches {o['micro_batches']} layers {o['layers']}; aware "
          f"{a['layout']}: pipelines {a['pipelines']} micro-batches {a['micro_batches']} layers {a['layers']}; "
          f"per-round ratios {[round(x, 3) for x in out['paired_ratios']]}")
    orc = out["oracle"]
    if orc:
        print(f"     oracle ({orc['kind']}): best split {orc['best']} -> ceiling {orc['ceiling']:.2f}x; ours "
              f"{orc['ours']} -> {orc['ours_at_residue']:.2f}x (residue {orc['residue_ms']:.0f} ms/step)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true", help="run the measured comparison (the only mode)")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--factor", type=float, default=2.0)
    parser.add_argument("--layouts", default="dp,pp,tp,auto")
    parser.add_argument("--arch", choices=("tiny", "hf-llama"), default="tiny")
    parser.add_argument("--pin", action="store_true", help="pin rank r to core r mod cores")
    parser.add_argument("--steps", type=int, default=2, help="measured steps per plan per round")
    parser.add_argument("--rounds", type=int, default=3, help="oblivious/aware alternations (live migrations)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rates", choices=("probe", "steps"), default="steps",
                        help="rates for the re-plan: the oblivious steps' compute timings, or a layer probe "
                             "on every rank at once")
    args = parser.parse_args(argv)
    if not args.measure:
        parser.error("pass --measure (this benchmark only measures)")
    print(f"Malleus, {args.world} processes, rank 0 injected {args.factor:g}x slower (measured on this machine)")
    print(f"{'lay':<4} {'oblivious':>10} {'aware':>9} {'measured':>9} {'modelled':>9} {'inj.mod':>9} "
          f"{'pred ms obl/aware':>17} {'|pred-meas|/meas':>13} {'mig MB':>7}  measured rates")
    ratios = {}
    for layout in args.layouts.split(","):
        started = time.perf_counter()
        out = measure_malleus(args.world, args.factor, 0, layout=layout, steps=args.steps,
                              warmup=args.warmup, rounds=args.rounds, rates_from=args.rates, arch=args.arch,
                              pin=args.pin)
        _row(layout, out)
        obl_ms = [round(x) for x in out["oblivious"]["all_ms"]]
        aware_ms = [round(x) for x in out["aware"]["all_ms"]]
        print(f"     ({time.perf_counter() - started:.0f} s; layer {out['layer_ms']:.1f} ms; migration "
              f"{1e3 * out['migration']['migration_s']:.0f} ms; steps ms obl {obl_ms} aware {aware_ms})")
        ratios[layout] = (out["measured_ratio"], out["modelled_ratio"])
    for layout, (measured, modelled) in ratios.items():
        verdict = "meets" if measured >= TARGET else "FALLS SHORT of"
        print(f"{layout}: measured {measured:.2f}x {verdict} the {TARGET}x target (modelled {modelled:.2f}x)")


if __name__ == "__main__":
    main()
