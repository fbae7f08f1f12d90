"""`sgl train --sampler ... --fanouts ...` and `sgl preprocess`."""
import json

import pytest

from sgl.cli import main


def test_train_with_neighbor_sampler_writes_a_record(tmp_path, capsys):
    out = tmp_path / "rec.json"
    assert main(["train", "--sampler", "neighbor", "--fanouts", "5,5", "--dataset", "karate", "--seeds", "2",
                 "--epochs", "5", "--batch-size", "4", "--no-progress", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "test accuracy:" in text and "fanouts [5, 5]" in text
    record = json.loads(out.read_text())
    assert record["config"]["sampler"]["fanouts"] == [5, 5] and len(record["runs"]) == 2


@pytest.mark.parametrize("argv", [["--fanouts", "15,0"], ["--fanouts", "a,b"], ["--model", "sgc2"],
                                  ["--sampler", "bogus"], ["--model-option", "heads=2"]])
def test_train_bad_sampler_options_exit_2(argv, capsys):
    base = ["train", "--sampler", "neighbor", "--dataset", "karate", "--seeds", "1", "--epochs", "1", "--no-progress"]
    args = base + argv
    assert main(args) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_train_out_of_core_from_a_store(tmp_path, capsys):
    store = tmp_path / "karate"
    assert main(["preprocess", "--dataset", "karate", "--out", str(store), "--no-progress"]) == 0
    out = tmp_path / "rec.json"
    argv = ["train", "--sampler", "ginex", "--dataset", f"store:{store}", "--memory-budget", "200KB",
            "--fanouts", "3,3", "--batch-size", "4", "--epochs", "2", "--seeds", "1", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "storage reads per epoch" in text and "test accuracy" in text
    record = json.loads(out.read_text())
    assert record["runs"][0]["peak_budget_bytes"] <= 200_000


def test_train_outre_takes_its_settings_as_model_options(tmp_path, capsys):
    store = tmp_path / "karate"
    assert main(["preprocess", "--dataset", "karate", "--out", str(store), "--no-progress"]) == 0
    out = tmp_path / "rec.json"
    argv = ["train", "--sampler", "outre", "--dataset", f"store:{store}", "--memory-budget", "1MB",
            "--fanouts", "3,3", "--batch-size", "4", "--epochs", "2", "--seeds", "1", "--no-progress", "--out", str(out),
            "--model-option", "staleness=7", "--model-option", "group_csr=true", "--model-option", "num_parts=2",
            "--model-option", "group_size=1", "--model-option", "embedding_top=0.5",
            "--model-option", "reset_caches=true", "--model-option", "partition_passes=5"]
    assert main(argv) == 0
    run = json.loads(out.read_text())["runs"][0]
    assert run["epochs"][-1]["bytes_read"] > 0
    assert main(argv[:-2] + ["--model-option", "stalenes=7"]) == 2
    assert "staleness" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--sampler", "outre", "--dataset", "karate", "--memory-budget", "1MB"],          # not a store
    ["--sampler", "outre", "--dataset", "store:/nonexistent", "--memory-budget", "1MB"],
    ["--sampler", "neighbor", "--dataset", "karate", "--memory-budget", "1MB"],       # budget needs a store
])
def test_out_of_core_bad_input_exit_2(argv, capsys):
    assert main(["train", *argv, "--seeds", "1", "--epochs", "1", "--no-progress"]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_out_of_core_needs_a_budget(tmp_path, capsys):
    store = tmp_path / "k"
    main(["preprocess", "--dataset", "karate", "--out", str(store), "--no-progress"])
    assert main(["train", "--sampler", "lru", "--dataset", f"store:{store}", "--seeds", "1", "--no-progress"]) == 2
    assert "--memory-budget" in capsys.readouterr().err
