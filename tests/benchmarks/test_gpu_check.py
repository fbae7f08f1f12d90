"""``benchmarks/gpu_check.py``: without CUDA it says so and exits 0; its checks run (on the CPU with
``--cpu``) and a failing check is a FAIL row and exit status 1, not a crash."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import gpu_check  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the script would run its checks")
def test_without_cuda_it_says_so_and_exits_0(capsys):
    assert gpu_check.main([]) == 0
    assert "no CUDA device is visible" in capsys.readouterr().out


def test_checks_run_on_the_cpu_and_write_their_table(tmp_path, capsys):
    out = tmp_path / "table.json"
    assert gpu_check.main(["--cpu", "--only", "graph_to,propagate_streamed", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "graph_to             PASS" in text and "2/2 passed" in text
    import json

    rows = json.loads(out.read_text())["rows"]
    assert [r["check"] for r in rows] == ["graph_to", "propagate_streamed"] and all(r["ok"] for r in rows)


def test_a_failing_check_is_a_fail_row(monkeypatch, capsys):
    def broken(device):
        raise RuntimeError("cuSPARSE said no")

    monkeypatch.setitem(gpu_check.CHECKS, "graph_to", broken)
    assert gpu_check.main(["--cpu", "--only", "graph_to"]) == 1
    out = capsys.readouterr().out
    assert "graph_to             FAIL" in out and "cuSPARSE said no" in out and "failed: graph_to" in out


def test_unknown_check_is_refused():
    with pytest.raises(SystemExit):
        gpu_check.main(["--only", "nope"])
