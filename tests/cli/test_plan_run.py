"""``sgl plan run``: a uniform or saved plan executed on local processes, checked against 1 process."""
from __future__ import annotations

import re

from sgl.cli import main


def test_plan_run_executes_and_checks_against_one_process(tmp_path, capsys):
    assert main(["plan", "run", "--kind", "sdp", "--procs", "2", "--arch", "tiny", "--steps", "2", "--check"]) == 0
    text = capsys.readouterr().out
    assert "2 processes (gloo)" in text and "1-1-2f" in text        # the ZeRO-3 strategy, as format_plan writes it
    gap = float(re.search(r"largest \|difference\| ([0-9.e+-]+)", text).group(1))
    assert gap < 1e-4
    assert len(re.findall(r"^\s+[01]\s+[0-9.]+\s+[0-9.]+\s+\d", text, re.M)) == 2    # one row per rank


def test_plan_run_bad_input(capsys):
    assert main(["plan", "run", "--kind", "dp", "--arch", "tiny"]) == 2
    assert "--procs" in capsys.readouterr().err
    # a plan the executor cannot run is refused before any process starts, naming the dimension
    assert main(["plan", "run", "--kind", "tp", "--procs", "3", "--arch", "tiny"]) == 2
    assert "not divisible by tensor-parallel degree 3" in capsys.readouterr().err
