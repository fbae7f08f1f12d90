"""Issue 44's benchmark in one run: which parties, which rows, and trees.

    SGL_TEST_DATA=../shared/datasets python benchmarks/bench_federated_data.py [--parts gbdt,vf2boost,select]

Runs, one after the other in this process, and prints each section's table:

* ``gbdt`` (``bench_gbdt.py``): our histogram GBDT's AUC and training time beside LightGBM and
  XGBoost at equal trees, depth and bins; Vero's four quadrants (bytes and time, trees equal one
  process) on a dense and a high-dimensional sparse set; DimBoost's sparse low-precision
  histograms (bytes against dense, AUC lost);
* ``vf2boost`` (``bench_vf2boost.py``): VF2Boost against its SecureBoost mode at 1024-bit keys
  (decryptions, ciphertext bytes, time, the same trees);
* ``select`` (``bench_fed_select.py``): VFPS-SM against VF-PS, PS-MI against exact Shapley, HaCore
  against k-medoids on the raw features.

Each section's own script takes its options (run it alone for them).
"""
from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECTIONS = {"gbdt": "bench_gbdt.py", "vf2boost": "bench_vf2boost.py", "select": "bench_fed_select.py"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default=",".join(SECTIONS), help=f"comma-separated sections of {list(SECTIONS)}")
    args = p.parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = [x for x in parts if x not in SECTIONS]
    if unknown:
        p.error(f"unknown parts {unknown}; choose from {list(SECTIONS)}")
    sys.path.insert(0, str(HERE.parent))
    for name in parts:
        print(f"\n===== {name} ({SECTIONS[name]}) =====", flush=True)
        start, saved = time.perf_counter(), sys.argv
        sys.argv = [SECTIONS[name]]
        try:
            runpy.run_path(str(HERE / SECTIONS[name]), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (0, None):
                print(f"{name}: exited with {exc.code}")
        finally:
            sys.argv = saved
        print(f"===== {name}: {time.perf_counter() - start:.1f} s =====", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
