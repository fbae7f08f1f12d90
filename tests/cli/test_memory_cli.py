"""``sgl memory`` and ``sgl ckpt`` through sgl.cli.main.main: JSON outputs, resume, one-line errors."""
import json
import os

import pytest

from sgl.cli.main import main


def _json(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_trace_then_plan(tmp_path, capsys):
    trace = tmp_path / "trace.json"
    assert main(["memory", "trace", "--batch", "2", "--out", str(trace)]) == 0
    recorded = _json(capsys)
    assert recorded["requests"] > 100 and recorded["phases"] == 8
    assert main(["memory", "plan", "--trace", str(trace), "--time-limit", "1", "--out", str(tmp_path / "p.json")]) == 0
    plan = _json(capsys)
    assert plan["live_lower_bound"] <= plan["planned_peak"] <= plan["first_fit_peak"]
    assert plan["bound_vs_caching_model"] <= plan["planned_vs_caching_model"]
    assert len(json.loads((tmp_path / "p.json").read_text())["address"]) == plan["requests"]


def test_train_paged_resumes(tmp_path, capsys):
    ssd = tmp_path / "ssd"
    args = ["memory", "train", "--batch", "2", "--offload-ratio", "0.5", "--ssd", str(ssd), "--page-budget", "1MB"]
    assert main(args + ["--steps", "2"]) == 0
    first = _json(capsys)
    assert first["first_step"] == 1 and sorted(first["losses"]) == ["1", "2"] and first["alpha"] == 0.5
    assert main(args + ["--steps", "3"]) == 0
    again = _json(capsys)
    assert again["first_step"] == 3 and list(again["losses"]) == ["3"]


def test_train_auto_ratio_in_memory(capsys):
    assert main(["memory", "train", "--batch", "2", "--steps", "1", "--offload-ratio", "auto",
                 "--host-budget", "100MB"]) == 0
    out = _json(capsys)
    assert 0.0 <= out["alpha"] <= 1.0 and out["alpha_plan"]["host_bytes"] == 100e6


@pytest.mark.parametrize("argv,message", [
    (["memory", "train", "--offload-ratio", "1.5"], "--offload-ratio must be a number in [0.0, 1.0]"),
    (["memory", "train", "--offload-ratio", "half"], "--offload-ratio must be a number"),
    (["memory", "train", "--offload-ratio", "auto", "--host-budget", "10"], "minimum working set"),
    (["memory", "train", "--ssd", "SSD", "--page-budget", "100kB", "--page-elems", "16384"], "minimum working set"),
])
def test_train_errors(tmp_path, capsys, argv, message):
    argv = [a.replace("SSD", str(tmp_path / "ssd")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and len(err.strip().splitlines()) == 1


def test_plan_rejects_bad_traces(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"events": [["malloc", 1, 64], ["free", 2]]}))
    assert main(["memory", "plan", "--trace", str(bad)]) == 2
    assert "before its malloc" in capsys.readouterr().err
    assert main(["memory", "plan", "--trace", str(tmp_path / "missing.json")]) == 2


def test_reshard_errors(tmp_path, capsys, a_file):
    assert main(["ckpt", "reshard", "--from", str(a_file), "--devices", "2"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["ckpt", "reshard", "--from", str(tmp_path), "--devices", "2"]) == 2
    assert "not an SGL sharded checkpoint" in capsys.readouterr().err
    assert main(["ckpt", "reshard", "--from", str(tmp_path), "--devices", "0"]) == 2
    assert main(["ckpt", "reshard", "--from", str(tmp_path), "--devices", "9"]) == 2   # the profiled node has 8
    assert "--devices must be an integer in [1, 8]" in capsys.readouterr().err
    meta = {"model": "tiny", "shapes": {}, "step": 1, "world": 4, "layout": "tp", "config": {"global_bsz": 12}}
    (tmp_path / "sgl-model.json").write_text(json.dumps(meta))
    assert main(["ckpt", "reshard", "--from", str(tmp_path), "--devices", "5", "--layout", "dp"]) == 2
    assert "global batch 12 does not split over 5" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="spawns 4 then 6 processes; SGL_SLOW_TESTS=1")
def test_save_on_four_reshard_on_six_through_the_plan_search(tmp_path, capsys):
    assert main(["ckpt", "save", "--devices", "4", "--layout", "tp", "--out", str(tmp_path / "c4")]) == 0
    saved = _json(capsys)
    assert main(["ckpt", "reshard", "--from", str(tmp_path / "c4"), "--devices", "6", "--out", str(tmp_path / "c6")]) == 0
    out = _json(capsys)
    # The plan search on 6 devices for the tiny model (4 heads) and the checkpoint's global batch 12.
    assert out["devices_used"] == 6 and out["plan"]["pp"] == 1 and out["saved_on"] == 4 and out["step"] == 1
    assert {tuple(x.split("-")[1:]) for x in out["plan"]["layers"]} <= {("2", "3"), ("1", "6"), ("1", "6f")}
    assert "tp=3" in out["plan"]["excluded"] and "num_heads=4" in out["plan"]["excluded"]["tp=3"]
    assert out["next_loss"] == pytest.approx(saved["next_loss"], rel=1e-6)
    assert (tmp_path / "c6" / "sgl-model.json").exists()
