import json
import subprocess
import sys

import pytest

from sgl.cli import main


def test_train_prints_metric_lines_and_writes_a_record(capsys, tmp_path):
    out = tmp_path / "run.json"
    assert main(["train", "--dataset", "karate", "--seeds", "2", "--epochs", "20", "--no-progress",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert any(line.startswith("test accuracy: ") and line.endswith("(2 seeds)") for line in text.splitlines())
    assert "precompute" in text and "training" in text
    record = json.loads(out.read_text())
    assert record["config"]["model"] == "sgc" and record["config"]["seeds"] == [0, 1]
    # the record reproduces the run exactly
    assert main(["train", "--config", str(out), "--no-progress"]) == 0
    again = capsys.readouterr().out
    line = [l for l in text.splitlines() if l.startswith("test accuracy")]
    assert line == [l for l in again.splitlines() if l.startswith("test accuracy")]


def test_yaml_config(capsys, tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("model: sgc\ndataset: karate\nseeds: 1\nmodel_config: {k: 1}\ntrain: {epochs: 5}\n")
    assert main(["train", "--config", str(cfg), "--no-progress"]) == 0
    assert "k=1" in capsys.readouterr().out


def test_cora_from_root(capsys, data_path):
    assert main(["train", "--dataset", "cora", "--root", str(data_path("planetoid")), "--seeds", "1",
                 "--no-progress"]) == 0
    assert "2,708 nodes, 10,556 edges, 1433 features, 7 classes, split 140/500/1000" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--dataset", "coraa"], "unknown dataset"),
        (["train", "--model", "gcnn"], "unknown model"),
        (["train", "--seeds", "0"], "at least 1"),
        (["train", "--lr", "-1"], "lr > 0"),
        (["train", "--model-option", "hops=3"], "unknown option"),
        (["train", "--model-option", "k"], "KEY=VALUE"),
        (["train", "--config", "/nonexistent.yaml"], "does not exist"),
        (["train", "--dataset", "mutag"], "graph-classification"),
        (["train", "--dataset", "cora", "--root", "/nonexistent-root"], "ind.cora"),
    ],
)
def test_errors_are_one_clear_line(capsys, argv, message):
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_datasets_and_models_listings(capsys):
    assert main(["datasets", "list"]) == 0
    listing = capsys.readouterr().out
    assert "cora" in listing and "karate" in listing and "ogbn-arxiv" in listing
    assert main(["models"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"sgc", "sign", "s2gc", "gbp", "appnp", "nafs", "gamlp", "pasca-v1", "pasca-v2", "pasca-v3"} <= set(names)
    assert {"nars-sign", "sehgnn", "hetero-gamlp", "rgcn", "hgt"} <= set(names)
    assert "acm" in listing and "imdb" in listing and "ogbn-mag" in listing


def test_console_script_entry_point():
    out = subprocess.run([sys.executable, "-m", "sgl.cli", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("sgl ")


def test_systems_import_loads_no_graph_code():
    import subprocess
    import sys

    code = "import sys, sgl.systems; print(any(m.startswith(('sgl.data', 'sgl.ops', 'sgl.models')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_train_on_a_learned_structure(tmp_path, capsys):
    from sgl.cli import main

    out = tmp_path / "run.json"
    assert main(["train", "--model", "sgc", "--dataset", "karate", "--seeds", "1", "--no-progress",
                 "--structure", "rwgsl", "--structure-option", "rounds=1", "--structure-option", "high=1.2",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "structure: rwgsl" in text and "test accuracy" in text
    import json

    record = json.loads(out.read_text())
    assert record["config"]["structure"] == "rwgsl" and record["config"]["structure_options"]["rounds"] == 1
    assert main(["train", "--dataset", "karate", "--structure", "magic"]) == 2
    assert "unknown structure learner" in capsys.readouterr().err


def test_train_on_a_structure_learned_with_model_pseudo_labels(tmp_path, capsys):
    from sgl.cli import main

    out = tmp_path / "run.json"
    assert main(["train", "--model", "sgc", "--dataset", "karate", "--seeds", "1", "--no-progress",
                 "--structure", "rwgsl", "--structure-option", "rounds=1", "--structure-pseudo", "sgc",
                 "--structure-pseudo-seeds", "2", "--out", str(out)]) == 0
    assert "with sgc x2 pseudo-labels" in capsys.readouterr().out
    import json

    config = json.loads(out.read_text())["config"]
    assert config["structure_pseudo"] == "sgc" and config["structure_pseudo_seeds"] == 2
    assert main(["train", "--dataset", "karate", "--structure", "knn", "--structure-pseudo", "sgc"]) == 2
    assert "needs --structure rwgsl" in capsys.readouterr().err
    assert main(["train", "--dataset", "karate", "--structure", "rwgsl", "--structure-pseudo", "sgc",
                 "--structure-pseudo-seeds", "0"]) == 2
    assert "positive integer" in capsys.readouterr().err
    assert main(["train", "--dataset", "karate", "--structure", "rwgsl", "--structure-pseudo", "nope",
                 "--no-progress"]) == 2
    assert "unknown model" in capsys.readouterr().err
