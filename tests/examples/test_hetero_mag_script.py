"""examples/ogb/ogbn_mag.py end to end on a small fake ogbn-mag written in OGB's heterogeneous layout."""
import importlib
import json

import pytest

from sgl.cli import main as cli_main
from sgl.datasets import synthetic_mag, write_ogb_hetero_layout
from sgl.errors import DatasetError

SMOKE = ["--seeds", "1", "--max-epochs", "2", "--hidden", "16", "--k", "2", "--num-subsets", "3", "--no-progress",
         "--device", "cpu"]


@pytest.fixture
def mag_root(tmp_path):
    write_ogb_hetero_layout(synthetic_mag(scale=0.0004, num_classes=5, num_features=16, seed=0),
                            tmp_path / "ogb" / "ogbn_mag")
    return tmp_path / "ogb"


@pytest.fixture
def script(examples_path):
    yield importlib.import_module("ogbn_mag")


def test_preset_is_the_official_command(script):
    p = script.PRESET
    assert p["model"] == "hetero-gamlp" and p["dataset"] == "ogbn-mag" and p["seeds"] == 10
    m = p["model_config"]
    assert (m["attention"], m["k"], m["hidden"], m["num_layers"], m["jk_layers"], m["label_hops"]) == \
        ("jk", 5, 512, 4, 4, 3)
    assert (m["input_dropout"], m["att_dropout"], m["dropout"], m["act"]) == (0.1, 0.0, 0.5, "leaky_relu")
    assert m["pre_process"] and m["residual"] and m["batch_norm"]
    assert p["train"] == {"lr": 0.001, "weight_decay": 0.0, "epochs": 250, "batch_size": 10000, "patience": 300}
    assert p["rlu"] == {"stages": [250, 200, 200, 200], "threshold": 0.4, "temperature": 1.0, "gamma": 10.0}


def test_script_end_to_end_with_rlu(script, mag_root, run_main, tmp_path):
    pytest.importorskip("ogb.nodeproppred")
    out = tmp_path / "record.json"
    record, lines = run_main(script.main, ["--root", str(mag_root), *SMOKE, "--out", str(out)])
    assert lines[0].startswith("dataset: ogbn-mag (") and lines[1].startswith("model: HeteroGAMLP(")
    test_line = next(line for line in lines if line.startswith("ogb test accuracy:"))
    assert "(1 seeds, GAMLP+RLU, paper GAMLP+RLU 55.90" in test_line
    assert len(record["runs"]) == 1 and all(len(r["stages"]) == 4 for r in record["runs"])
    assert json.loads(out.read_text())["config"]["model"] == "hetero-gamlp"


def test_print_config_feeds_sgl_train(script, mag_root, run_main, tmp_path):
    _, lines = run_main(script.main, ["--print-config", "--no-rlu", *SMOKE])
    config = tmp_path / "mag.json"
    config.write_text("\n".join(lines))
    assert json.loads(config.read_text())["model_config"]["num_subsets"] == 3
    assert cli_main(["train", "--config", str(config), "--root", str(mag_root), "--seeds", "1",
                     "--out", str(tmp_path / "run.json")]) == 0
    assert json.loads((tmp_path / "run.json").read_text())["runs"][0]["epochs_run"] == 2


def test_missing_root_is_a_dataset_error(script, tmp_path):
    with pytest.raises(DatasetError, match="no ogbn-mag files"):
        script.main(["--root", str(tmp_path), *SMOKE])
