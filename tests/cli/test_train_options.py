"""`sgl train`: every option the chosen path does not read is an error naming it; records replay."""
import json

import pytest

from sgl.cli import main

BASE = ["train", "--seeds", "1", "--epochs", "1", "--no-progress"]


@pytest.mark.parametrize("path, extra, flag", [
    (["--sampler", "neighbor"], ["--k", "3"], "--k"),
    (["--sampler", "neighbor"], ["--rlu-stages", "2,1"], "rlu"),
    (["--sampler", "neighbor"], ["--structure", "knn"], "structure"),
    (["--sampler", "neighbor"], ["--cache-dir", "c"], "cache_dir"),
    (["--sampler", "neighbor"], ["--memory-budget", "1MB"], "--memory-budget"),
    ([], ["--fanouts", "5,5"], "--fanouts"),
    ([], ["--memory-budget", "1MB"], "--memory-budget"),
    ([], ["--link-val-ratio", "0.1"], "--link-val-ratio"),
    ([], ["--ctr-compression", "10"], "--ctr-compression"),
    ([], ["--graph-folds", "3"], "--graph-folds"),
    (["--task", "ctr"], ["--k", "2"], "--k"),
    (["--task", "ctr"], ["--sampler", "neighbor"], "--sampler"),
    (["--task", "ctr"], ["--rlu-gamma", "0.2"], "--rlu-gamma"),
    (["--task", "ctr"], ["--cluster-n-init", "2"], "--cluster-n-init"),
    (["--task", "link"], ["--batch-size", "4"], "--batch-size"),
    (["--task", "link"], ["--patience", "4"], "--patience"),
    (["--task", "cluster"], ["--structure", "rwgsl"], "--structure"),
    (["--task", "graph"], ["--cache-dir", "c"], "--cache-dir"),
    (["--task", "graph"], ["--ctr-embedding", "hash"], "--ctr-embedding"),
])
def test_an_option_the_path_ignores_is_an_error_naming_it(path, extra, flag, capsys):
    assert main(BASE + path + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and flag in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["--sampler", "neighbor", "--fanouts", "3,3", "--batch-size", "8"],
    ["--task", "ctr", "--dataset-option", "num_rows=400", "--dataset-option", "ids_per_field=50",
     "--ctr-embedding", "hash", "--ctr-compression", "2"],
    ["--task", "cluster", "--dataset", "karate", "--model-option", "epochs=2", "--cluster-n-init", "2"],
])
def test_sgl_train_config_replays_a_record(argv, tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["train", "--seeds", "1", "--no-progress", *argv, "--out", str(first)]) == 0
    out1 = capsys.readouterr().out
    assert main(["train", "--config", str(first), "--no-progress", "--out", str(second)]) == 0
    out2 = capsys.readouterr().out
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert a["config"] == b["config"]
    metric = [line for line in out1.splitlines() if ":" in line and "±" in line]
    assert metric and metric == [line for line in out2.splitlines() if ":" in line and "±" in line]
