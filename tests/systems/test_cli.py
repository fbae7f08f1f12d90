import json

import pytest

from sgl.cli import main
from sgl.errors import PlanError
from sgl.cli.plan import parse_memory_gb


def test_plan_search_show_round_trip(capsys, tmp_path):
    out = tmp_path / "plan.json"
    assert main(["plan", "search", "--model", "llama-7b", "--devices", "8", "--memory", "40GB",
                 "--batch-sizes", "8,16", "--granularity", "64", "--baselines", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "predicted iteration" in text and "baseline sdp" in text and "searched/baseline" in text
    data = json.loads(out.read_text())
    assert data["pp_deg"] >= 1 and len(data["tp_sizes_enc"].split(",")) == 32
    assert main(["plan", "show", str(out), "--model", "llama-7b"]) == 0
    shown = capsys.readouterr().out
    assert f"{data['sgl_predicted_samples_per_s']:.2f} samples/s" in shown


@pytest.mark.parametrize("argv,message", [
    (["plan", "search", "--devices", "6"], "power of two"),
    (["plan", "search", "--model", "llama-13b", "--devices", "8", "--memory", "20GB", "--granularity", "64"],
     "smallest feasible budget"),
    (["plan", "search", "--devices", "8", "--memory", "lots"], "cannot read memory budget"),
    (["plan", "search", "--devices", "4", "--devices-per-node", "8"], "not divisible"),
])
def test_plan_errors_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err


def test_show_rejects_malformed(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert main(["plan", "show", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_parse_memory():
    # one convention everywhere (sgl._checks.parse_bytes): MB = 10^6 bytes, MiB = 2^20; budgets are GiB
    assert parse_memory_gb("80GiB") == 80 and parse_memory_gb("24 GiB") == 24
    assert parse_memory_gb("512MiB") == 0.5 and parse_memory_gb("40") == 40
    assert parse_memory_gb("80GB") == 80e9 / 2**30 and parse_memory_gb("512MB") == 512e6 / 2**30
    with pytest.raises(PlanError):
        parse_memory_gb("-3GB")
