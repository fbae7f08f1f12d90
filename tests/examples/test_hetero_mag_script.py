"""examples/ogb/gamlp_mag.py (+ gamlp_mag.yaml) end to end on a small fake ogbn-mag written in OGB's
heterogeneous layout."""
import importlib
import json

import pytest
import yaml

from sgl.cli import main as cli_main
from sgl.datasets import synthetic_mag, write_ogb_hetero_layout
from sgl.errors import ConfigError, DatasetError

SMOKE = ["--seeds", "1", "--max-epochs", "2", "--hidden", "16", "--k", "2", "--num-subsets", "3", "--no-progress",
         "--device", "cpu"]


@pytest.fixture
def mag_root(tmp_path):
    write_ogb_hetero_layout(synthetic_mag(scale=0.0004, num_classes=5, num_features=16, seed=0),
                            tmp_path / "ogb" / "ogbn_mag")
    return tmp_path / "ogb"


@pytest.fixture
def script(examples_path):
    yield importlib.import_module("gamlp_mag")


def test_yaml_preset_is_the_official_command(script):
    p = yaml.safe_load(script.PRESET.read_text())
    assert p == script.load_preset()
    assert p["model"] == "hetero-gamlp" and p["dataset"] == "ogbn-mag" and p["seeds"] == 10
    m = p["model_config"]
    assert (m["attention"], m["k"], m["hidden"], m["num_layers"], m["jk_layers"], m["label_hops"],
            m["label_layers"]) == ("jk", 5, 512, 4, 4, 3, 4)
    assert (m["input_dropout"], m["att_dropout"], m["dropout"], m["label_dropout"], m["act"]) == \
        (0.1, 0.0, 0.5, 0.0, "leaky_relu")
    assert m["pre_process"] and m["residual"] and m["batch_norm"] and m["featureless"] == "transe"
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
    saved = json.loads(out.read_text())["config"]
    assert saved["model"] == "hetero-gamlp" and saved["model_config"]["featureless"] == "transe"


def test_yaml_preset_runs_through_sgl_train(script, mag_root, tmp_path):
    out = tmp_path / "run.json"
    assert cli_main(["train", "--config", str(script.PRESET), "--root", str(mag_root), "--seeds", "1",
                     "--epochs", "2", "--rlu-stages", "2,1", "--hidden", "16", "--k", "2", "--patience", "5",
                     "--model-option", "num_subsets=2", "--model-option", "featureless=mean", "--no-progress",
                     "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["config"]["model"] == "hetero-gamlp" and record["config"]["model_config"]["jk_layers"] == 4
    assert [s["epochs_run"] for s in record["runs"][0]["stages"]] == [2, 1]


def test_print_config_feeds_sgl_train(script, mag_root, run_main, tmp_path):
    _, lines = run_main(script.main, ["--print-config", "--no-rlu", "--featureless", "mean", *SMOKE])
    config = tmp_path / "mag.json"
    config.write_text("\n".join(lines))
    data = json.loads(config.read_text())
    assert data["model_config"]["num_subsets"] == 3 and "rlu" not in data and data["train"]["epochs"] == 2
    assert cli_main(["train", "--config", str(config), "--root", str(mag_root), "--seeds", "1",
                     "--out", str(tmp_path / "run.json")]) == 0
    assert json.loads((tmp_path / "run.json").read_text())["runs"][0]["epochs_run"] == 2


def test_old_name_runs_the_same_script(examples_path):
    old = importlib.import_module("ogbn_mag")
    assert old.main is importlib.import_module("gamlp_mag").main


def test_missing_root_and_bad_overrides(script, tmp_path):
    with pytest.raises(DatasetError, match="no ogbn-mag files"):
        script.main(["--root", str(tmp_path), *SMOKE])
    with pytest.raises(ConfigError, match="--seeds must be at least 1"):
        script.main(["--root", str(tmp_path), "--seeds", "0"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: hetero-gamlp\nepochs: 3\n")
    with pytest.raises(ConfigError, match="must map only"):
        script.load_preset(bad)
