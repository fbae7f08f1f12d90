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
