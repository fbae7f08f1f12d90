"""`sgl train` on heterogeneous datasets: synthetic-mag (no files) and ACM (real files)."""
import json

import pytest

from sgl.cli.main import main


def test_train_hetero_model_on_synthetic_mag(tmp_path, capsys):
    out = tmp_path / "run.json"
    code = main(["train", "--model", "nars-sign", "--dataset", "synthetic-mag", "--dataset-option", "scale=0.0003",
                 "--model-option", "hidden=16", "--model-option", "k=2", "--epochs", "3", "--seeds", "1",
                 "--out", str(out)])
    assert code == 0
    record = json.loads(out.read_text())
    assert record["config"]["model"] == "nars-sign" and len(record["runs"]) == 1
    assert "test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--model", "sgc", "--dataset", "synthetic-mag"], "is heterogeneous; model 'sgc' is not"),
    (["--model", "sehgnn", "--dataset", "karate"], "needs a heterogeneous"),
    (["--model", "sehgnn", "--dataset", "synthetic-mag", "--model-option", "heads=2"], "unknown option"),
])
def test_mismatches_are_one_line_errors(argv, message, capsys):
    assert main(["train", *argv, "--dataset-option", "scale=0.0003", "--epochs", "1"]
                if "synthetic-mag" in argv else ["train", *argv, "--epochs", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("error:")


def test_train_on_real_acm(data_path, tmp_path):
    out = tmp_path / "acm.json"
    assert main(["train", "--model", "sehgnn", "--dataset", "acm", "--root", str(data_path("hetero")),
                 "--model-option", "hidden=32", "--model-option", "k=1", "--epochs", "3", "--seeds", "1",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    run = record["runs"][0]
    assert run["epochs_run"] == 3 and 0.0 <= run["test_acc"] <= 1.0 and "test_macro_f1" in run
    assert len(record["dataset_hash"]) == 32   # HeteroGraph.content_hash (tests/data: it covers every array)
    assert record["config"]["model_config"]["k"] == 1
