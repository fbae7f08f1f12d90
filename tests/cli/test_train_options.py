"""`sgl train`: every option the chosen path does not read is an error naming it; records replay."""
import json

import pytest

from sgl.cli import main
from sgl.errors import ConfigError
from sgl.tasks import RunConfig, TrainConfig, run

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


def test_config_file_keys_that_do_not_apply_are_errors():
    with pytest.raises(ConfigError, match="rlu"):
        RunConfig.from_dict({"task": "ctr", "rlu": {"stages": [3]}})
    with pytest.raises(ConfigError, match="structure"):
        RunConfig.from_dict({"sampler": "neighbor", "structure": "knn"})
    with pytest.raises(ConfigError, match="train"):
        RunConfig.from_dict({"task": "link", "train": {"lr": 0.1}})
    with pytest.raises(ConfigError, match="unknown key"):
        RunConfig.from_dict({"modle": "sgc"})
    with pytest.raises(ConfigError, match="task option"):
        RunConfig.from_dict({"task": "cluster", "task_options": {"folds": 3}})


def test_run_config_is_typed_and_round_trips():
    config = RunConfig.from_dict({"model": "gamlp", "dataset": "karate", "seeds": 3, "train": {"epochs": 7},
                                  "rlu": {"stages": [3, 2]}, "structure": "knn", "structure_options": {"k": 5}})
    assert isinstance(config.train, TrainConfig) and config.train.epochs == 7
    assert config.train.lr == 0.01          # GAMLP's own default under the override
    assert config.rlu.stages == [3, 2] and config.structure.options == {"k": 5} and config.seeds == [0, 1, 2]
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    ctr = RunConfig.from_dict({"task": "ctr", "compression": 10, "embedding": "hash"})
    assert ctr.ctr.compression == 10.0 and ctr.train.batch_size == 1024       # the CTR ratio is a typed field
    assert RunConfig.from_dict(ctr.to_dict()) == ctr


def test_run_returns_a_record_that_replays_exactly():
    config = RunConfig.from_dict({"dataset": "karate", "seeds": 2, "model_config": {"k": 2},
                                  "train": {"epochs": 15}})
    first = run(config, progress=False)
    second = run(RunConfig.from_dict(first["config"]), progress=False)
    assert first["config"] == second["config"]
    assert [r["test_acc"] for r in first["runs"]] == [r["test_acc"] for r in second["runs"]]


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
