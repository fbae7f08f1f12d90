"""Start-up time of the command line against the cost of importing torch (issue 26 item 9).

Each command runs in a fresh Python process, ``--repeats`` times, interleaved (one round of
every command, then the next round), so that a busy machine slows them alike; the table gives
the median wall time of each and its ratio to ``python -c "import torch"``. The targets:
``sgl --help`` / ``sgl --version`` / ``sgl datasets list`` under 1 s and importing neither torch
nor torch_geometric; a subcommand's ``--help`` at most what importing torch costs (ratio <= 1).
The ``imports`` column lists which of torch / torch_geometric each command loaded.

    python benchmarks/bench_cli.py                 # 7 rounds
    python benchmarks/bench_cli.py --repeats 15 --json cli_startup.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

ROOT = Path(__file__).resolve().parents[1]

#: the sgl entry point in a fresh process, reporting on stderr which heavy modules it loaded
_SGL = """
import runpy, sys
sys.argv = ["sgl"] + sys.argv[1:]
try:
    runpy.run_module("sgl.cli", run_name="__main__")
except SystemExit:
    pass
print("IMPORTED=" + ",".join(sorted({m.split(".")[0] for m in sys.modules} & {"torch", "torch_geometric"})),
      file=sys.stderr)
"""

COMMANDS: Dict[str, List[str]] = {
    'python -c "import torch"': [sys.executable, "-c", "import torch"],
    "sgl --help": [sys.executable, "-c", _SGL, "--help"],
    "sgl --version": [sys.executable, "-c", _SGL, "--version"],
    "sgl train --help": [sys.executable, "-c", _SGL, "train", "--help"],
    "sgl search --help": [sys.executable, "-c", _SGL, "search", "--help"],
    "sgl datasets list": [sys.executable, "-c", _SGL, "datasets", "list"],
}
BASELINE = 'python -c "import torch"'


def time_once(argv: Sequence[str]) -> tuple:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    started = time.perf_counter()
    done = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=300)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:2])} ... failed ({done.returncode}): {done.stderr[-500:]}")
    imported = [l[len("IMPORTED="):] for l in done.stderr.splitlines() if l.startswith("IMPORTED=")]
    return seconds, (imported[0] or "none") if imported else "torch"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh processes per command (median reported)")
    parser.add_argument("--json", help="also write the medians here")
    args = parser.parse_args()
    times: Dict[str, List[float]] = {name: [] for name in COMMANDS}
    imports: Dict[str, str] = {}
    for name, argv in COMMANDS.items():  # warm the file cache once, untimed
        imports[name] = time_once(argv)[1]
    for _ in range(args.repeats):
        for name, argv in COMMANDS.items():
            times[name].append(time_once(argv)[0])
    base = statistics.median(times[BASELINE])
    print(f"start-up, median of {args.repeats} fresh processes (load average {os.getloadavg()[0]:.1f})")
    print(f"{'command':<28} {'median s':>9} {'min s':>7} {'vs import torch':>16}  imports")
    rows = {}
    for name in COMMANDS:
        median = statistics.median(times[name])
        rows[name] = {"median_s": median, "min_s": min(times[name]), "ratio_to_import_torch": median / base,
                      "imports": imports[name]}
        print(f"{name:<28} {median:>9.3f} {min(times[name]):>7.3f} {median / base:>15.2f}x  {imports[name]}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
