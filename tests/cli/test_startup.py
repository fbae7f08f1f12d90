"""Issue 26 item 9 (CLI part): the parsers import no heavy library; run records carry versions and the data's hash."""
import json
import subprocess
import sys

import pytest

from sgl.cli import main

#: runs the real entry point (python -m sgl.cli) in a fresh process and lists the heavy modules it loaded
PROBE = """
import runpy, sys
sys.argv = ["sgl"] + sys.argv[1:]
try:
    runpy.run_module("sgl.cli", run_name="__main__")
except SystemExit:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "torch_geometric", "scipy", "optuna", "numpy"})
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["train", "--help"], ["search", "--help"],
                                  ["search", "show", "--help"], ["plan", "search", "--help"],
                                  ["preprocess", "--help"], ["models", "--help"]])
def test_help_and_version_import_neither_torch_nor_pyg(argv):
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    line = [l for l in out.stderr.splitlines() if l.startswith("HEAVY=")]
    assert line, out.stderr
    assert line[0] == "HEAVY=", f"`sgl {' '.join(argv)}` imported {line[0][6:]}"
    assert out.stdout.startswith("sgl ") if argv == ["--version"] else "usage: sgl" in out.stdout


def test_a_train_record_carries_versions_and_the_data_hash(tmp_path, capsys):
    import torch

    import sgl

    out = tmp_path / "run.json"
    assert main(["train", "--dataset", "karate", "--seeds", "1", "--epochs", "2", "--no-progress",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["sgl_version"] == sgl.__version__ and record["torch_version"] == torch.__version__
    from sgl.tasks.provenance import dataset_hash

    assert record["dataset_hash"] == dataset_hash(sgl.datasets.load("karate"))
    # the record still replays, and the replay reports the same data
    again = tmp_path / "again.json"
    assert main(["train", "--config", str(out), "--no-progress", "--out", str(again)]) == 0
    assert json.loads(again.read_text())["dataset_hash"] == record["dataset_hash"]
