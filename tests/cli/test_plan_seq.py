"""``sgl plan seq`` and ``sgl plan straggler``: JSON plans, tables, PNGs, bad input as one error line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgl.cli import main

PROBE = ("import runpy, sys\nsys.argv = ['sgl'] + sys.argv[1:]\ntry:\n    runpy.run_module('sgl.cli', run_name='__main__')\n"
         "except SystemExit:\n    pass\nheavy = {m.split('.')[0] for m in sys.modules} & {'torch', 'scipy', 'numpy'}\n"
         "print('HEAVY=' + ','.join(sorted(heavy)), file=sys.stderr)")


@pytest.fixture(scope="module")
def _wiki_lines():
    root = os.environ.get("SGL_TEST_DATA")
    path = Path(root or "/nonexistent") / "seqlen" / "wikipedia.txt"
    if not root or not path.exists():
        pytest.skip(f"{path} is not available")
    lines = path.read_text().split()
    longest = max(lines, key=int)
    return lines[:20000] + [longest]          # real lengths, including the file's longest (1.8M tokens)


@pytest.fixture
def wiki(_wiki_lines, tmp_path):
    """A 20K-line slice of FlexSP's wikipedia length list plus its longest line (reading 1M lines per call is slow)."""
    path = tmp_path / "wikipedia_slice.txt"
    path.write_text("\n".join(_wiki_lines) + "\n")
    return str(path)


@pytest.mark.parametrize("method", ["flexsp", "hydraulis", "mesh", "switch"])
def test_plan_seq_writes_json_table_and_png(wiki, tmp_path, capsys, method):
    out, png = tmp_path / "plan.json", tmp_path / "load.png"
    argv = ["plan", "seq", "--lengths", wiki, "--devices", "8", "--method", method, "--steps", "2",
            "--max-length", "60000", "--tokens-per-step", "40000", "--time-limit", "0.1", "--out", str(out),
            "--png", str(png)]
    if method == "hydraulis":
        argv[argv.index("--tokens-per-step"):argv.index("--tokens-per-step") + 2] = ["--batch-size", "24"]
        argv[argv.index("--max-length") + 1] = "16000"
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "ratio" in text and "static baseline" in text and f"wrote {out}" in text
    data = json.loads(out.read_text())
    assert data["method"] == method and len(data["steps"]) == 2
    if method == "mesh":           # ring-CP groups can lose to the best static Ulysses / TP strategy ...
        own = [n for n in data["notes"] if n.startswith("vs the static DP x CP mesh")]
        assert float(own[0].rsplit(" ", 1)[1].rstrip("x")) >= 0.99     # ... never to the static 2-D mesh
    else:
        assert data["ratio"] >= 0.99
    seen = sorted(i for step in data["steps"][:1] for phase in step["phases"] for g in phase
                  for mb in g["sequence_ids"] for i in mb)
    assert seen == list(range(len(seen)))                              # every sequence exactly once
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plan_seq_bad_input(wiki, tmp_path, capsys, a_file):
    argv = ["plan", "seq", "--lengths", wiki, "--devices", "8", "--steps", "1"]
    assert main(argv) == 2                                               # 1.8M-token sequence in the file
    err = capsys.readouterr().err
    assert err.startswith("error:") and "longest supported length" in err and "--max-length" in err
    assert main(argv + ["--max-length", "1000", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert main(["plan", "seq", "--lengths", str(empty), "--devices", "8"]) == 2
    assert "error:" in capsys.readouterr().err
    assert main(["plan", "seq", "--lengths", wiki, "--devices", "8", "--memory", "1GiB", "--max-length", "1000"]) == 2
    assert "memory" in capsys.readouterr().err


def test_plan_seq_with_a_cost_model_calibrated_here(wiki, capsys):
    assert main(["plan", "seq", "--lengths", wiki, "--devices", "2", "--memory", "1GiB", "--method", "switch",
                 "--steps", "1", "--max-length", "2000", "--batch-size", "8", "--calibrate", "tiny"]) == 0
    text = capsys.readouterr().out
    assert "calibrated on this machine (tiny)" in text and "ratio" in text
    assert main(["plan", "seq", "--lengths", wiki, "--devices", "2", "--method", "hydraulis",
                 "--calibrate", "tiny", "--max-length", "2000"]) == 2
    assert "--calibrate" in capsys.readouterr().err


def test_plan_straggler_and_replan(tmp_path, capsys):
    out, png = tmp_path / "m.json", tmp_path / "m.png"
    assert main(["plan", "straggler", "--devices", "16", "--tp", "4", "--pp", "2", "--setting", "one-5x",
                 "--out", str(out), "--png", str(png)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["ratio"] >= 1.5 and "straggler-oblivious" in text
    assert sum(data["malleus"]["micro_batches"]) == 64 and png.read_bytes()[:4] == b"\x89PNG"
    rates = ",".join(["1"] * 15 + ["3"])
    assert main(["plan", "straggler", "--devices", "16", "--tp", "4", "--pp", "2", "--rates", rates,
                 "--previous-rates", ",".join(["1"] * 16), "--amortize-steps", "5"]) == 0
    assert "MB of model states move" in capsys.readouterr().out


@pytest.mark.parametrize("rates,message", [("1,1,0,1", "> 0"), ("1,-1,1,1", "> 0"), ("1,1", "one per device"),
                                           ("1,x,1,1", "comma-separated")])
def test_plan_straggler_bad_rates(capsys, rates, message):
    assert main(["plan", "straggler", "--devices", "4", "--tp", "2", "--rates", rates]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err


def test_parsers_import_no_heavy_library():
    res = subprocess.run([sys.executable, "-c", PROBE, "plan", "seq", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert "HEAVY=\n" in res.stderr + "\n" and "--method" in res.stdout
