"""`sgl train --procs N`: N local processes, or torchrun's world; rank 0 reports; bad input is a clear error.

The first run starts the fork server (SGL imported once); later runs in this session fork from it.
"""
from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch

import sgl.comm as comm
from sgl.cli import main
from sgl.tasks.dist_run import rank_start_method

BASE = ["train", "--dataset", "karate", "--seeds", "2", "--epochs", "10", "--no-progress"]
SMALL = ["--dataset", "synthetic", "--dataset-option", "num_nodes=60", "--dataset-option", "num_features=4",
         "--dataset-option", "num_val=10", "--dataset-option", "num_test=10"]


def _metrics(text):
    return [line for line in text.splitlines() if "±" in line and "accuracy" in line]


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("procs") / "run.json"
    with contextlib.redirect_stdout(io.StringIO()) as text:
        assert main(BASE + ["--procs", "2", "--out", str(out)]) == 0
    return out, text.getvalue()


def test_procs_2_reports_once_and_matches_one_process(two_process_run, capsys):
    out, text = two_process_run
    assert text.count("test accuracy:") == 1 and "processes: 2 (gloo)" in text
    record = json.loads(out.read_text())
    assert record["world_size"] == 2 and record["backend"] == "gloo"
    assert record["config"]["procs"] == 2 and record["config"]["distributed"]["precompute"] == "local"
    assert all(run["world_size"] == 2 and run["num_shards"] == 2 for run in record["runs"])
    # whole shards in one batch: the global batch is every training node, as in one process
    assert main(BASE) == 0
    assert _metrics(capsys.readouterr().out) == _metrics(text)


def test_a_procs_record_replays_on_as_many_processes(two_process_run, tmp_path):
    out, text = two_process_run
    again = tmp_path / "again.json"
    with contextlib.redirect_stdout(io.StringIO()) as replay:
        assert main(["train", "--config", str(out), "--no-progress", "--out", str(again)]) == 0
    assert json.loads(again.read_text())["config"] == json.loads(out.read_text())["config"]
    assert _metrics(replay.getvalue()) == _metrics(text)


def test_more_processes_than_training_nodes_is_a_clear_error(capsys):
    # two classes, one training node each: three processes cannot each train on one
    assert main(["train", "--procs", "3", "--epochs", "1", "--seeds", "1", "--no-progress", *SMALL,
                 "--dataset-option", "train_per_class=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 3 processes but the graph has only 2 training node(s)") and "Traceback" not in err


def _torchrun_rank(rank: int, world: int, out: str) -> dict:
    """One rank of a torchrun-like job: sgl.comm.spawn set RANK/WORLD_SIZE, as torchrun does."""
    results = {}
    for name, argv in (("mismatch", BASE + ["--procs", "3"]),
                       ("run", BASE + ["--seeds", "1", "--precompute", "distributed", "--out", out])):
        with contextlib.redirect_stdout(io.StringIO()) as stdout, contextlib.redirect_stderr(io.StringIO()) as stderr:
            code = main(argv)
        results[name] = (code, stdout.getvalue(), stderr.getvalue())
    return results


def test_under_torchrun_sgl_train_joins_the_world_and_rank_0_reports(tmp_path):
    out = tmp_path / "run.json"
    by_rank = comm.spawn(_torchrun_rank, 2, str(out), timeout=120.0, comm_timeout=30.0,
                         start_method=rank_start_method())
    for code, stdout, stderr in (r["mismatch"] for r in by_rank):
        assert code == 2 and "--procs 3 but this process is one of torchrun's 2 (WORLD_SIZE)" in stderr
    (code0, text0, _), (code1, text1, _) = by_rank[0]["run"], by_rank[1]["run"]
    assert code0 == code1 == 0
    assert "test accuracy:" in text0 and "halo exchange" in text0 and f"record: {out}" in text0
    assert text1 == ""  # rank 1 trains silently
    record = json.loads(out.read_text())
    assert record["world_size"] == 2 and record["config"]["procs"] == 2
    assert record["config"]["distributed"] == {"precompute": "distributed", "partition": "metis", "uneven": "pad",
                                               "timeout": 1800.0, "grad_compress": "none", "grad_bits": 4,
                                               "powersgd_rank": 1}
    hops = record["config"]["model_config"]["k"]
    assert record["halo"]["cut_edges"] > 0 and len(record["halo"]["bytes_per_hop"]) == hops


@pytest.mark.parametrize("extra, message", [
    (["--procs", "0"], "--procs (the number of processes) must be an integer >= 1, got 0"),
    (["--procs", "-3"], "--procs (the number of processes) must be an integer >= 1, got -3"),
    (["--procs", "1.5"], "--procs must be a whole number of processes (>= 1), got '1.5'"),
    (["--procs", "two"], "--procs must be a whole number of processes (>= 1), got 'two'"),
    (["--procs", "2", "--model", "gat"], "--model gat has no multi-process path"),
    (["--procs", "2", "--model", "gcmae"], "--model gcmae (self-supervised pre-training and a linear probe) has no"),
    (["--procs", "2", "--task", "cluster"], "--task cluster has no multi-process path"),
    (["--procs", "2", "--sampler", "saint-node"], "--sampler saint-node has no multi-process path"),
    (["--procs", "2", "--rlu-stages", "2,2", "--model", "gamlp"], "rlu (RLU distillation) has no multi-process"),
    (["--procs", "2", "--device", "cuda:1"], "puts every one of the 2 processes on one GPU"),
    (["--precompute", "distributed"], "--precompute='distributed' applies to runs on several processes"),
    (["--uneven", "drop"], "--uneven='drop' applies to runs on several processes"),
    (["--grad-compress", "tinyscript"], "--grad-compress='tinyscript' applies to runs on several processes"),
    (["--procs", "2", "--grad-compress", "uniform", "--grad-bits", "9"], "bits must be an integer in [1, 8]"),
    (["--procs", "2", "--grad-compress", "powersgd", "--powersgd-rank", "0"], "--powersgd-rank (the rank of PowerSGD"),
    (["--procs", "2", "--partition", "range"], "--partition='range' applies to precompute='distributed'"),
    (["--procs", "2", "--precompute", "distributed", "--partition", "fennel"], "'metis' or 'range'"),
    (["--procs", "2", "--sampler", "neighbor", "--model", "sage", "--precompute", "local"], "applies to scalable"),
])
def test_bad_procs_input_is_a_clear_error(extra, message, capsys):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("device, procs", [("cuda:7", []), ("cuda", ["--procs", "2"])])
def test_a_device_that_does_not_exist_fails_before_any_work(device, procs, capsys):
    assert main(BASE + procs + ["--device", device]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: Device '{device}'") and "torch.cuda.is_available() is False" in err
    assert "Traceback" not in err and "dataset:" not in out


def test_procs_disagreeing_with_torchrun_world_is_an_error(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert main(BASE + ["--procs", "2"]) == 2
    assert "--procs 2 but this process is one of torchrun's 4 (WORLD_SIZE)" in capsys.readouterr().err
