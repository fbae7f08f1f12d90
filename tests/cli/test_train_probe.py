"""Issue 26 item 8: `sgl train --task node --model gcmae|dgi|grace|graphmae|gae`: pre-train, then the linear probe."""
import json

import pytest

from sgl.cli import main

BASE = ["train", "--dataset", "karate", "--seeds", "2", "--no-progress"]


@pytest.mark.parametrize("model", ["gcmae", "graphmae", "grace", "dgi", "gae"])
def test_every_self_supervised_model_trains_under_task_node(model, capsys):
    assert main(BASE + ["--task", "node", "--model", model, "--epochs", "2", "--hidden", "8",
                        "--probe-epochs", "10"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert any(l.startswith("test accuracy: ") and l.endswith("(2 seeds)") for l in lines), text
    assert any(l.startswith("validation accuracy: ") for l in lines)
    assert "linear probe: 10 epochs, lr 0.01, weight decay 0.0001, raw embeddings" in text


def test_the_probe_record_replays_exactly(tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    argv = BASE + ["--model", "gae", "--model-option", "epochs=5", "--probe-epochs", "30", "--probe-lr", "0.05",
                   "--probe-standardize"]
    assert main(argv + ["--out", str(first)]) == 0
    out1 = capsys.readouterr().out
    record = json.loads(first.read_text())
    assert record["config"]["task_options"] == {"probe_epochs": 30, "probe_lr": 0.05, "probe_weight_decay": 1e-4,
                                                "probe_standardize": True}
    assert main(["train", "--config", str(first), "--no-progress", "--out", str(second)]) == 0
    out2 = capsys.readouterr().out
    def outcome(runs):
        return [{k: v for k, v in r.items() if k != "fit_time_s"} for r in runs]

    assert outcome(json.loads(second.read_text())["runs"]) == outcome(record["runs"])
    metric = [line for line in out1.splitlines() if "accuracy" in line]
    assert metric and metric == [line for line in out2.splitlines() if "accuracy" in line]


def test_self_supervised_clustering_replays_exactly(tmp_path, capsys):
    # pre-training seeds python's and numpy's generators too (torch_geometric samples negatives with them)
    argv = BASE + ["--task", "cluster", "--model", "gae", "--epochs", "5", "--cluster-n-init", "2"]
    assert main(argv + ["--out", str(tmp_path / "a.json")]) == 0
    assert main(argv + ["--out", str(tmp_path / "b.json")]) == 0
    runs = [json.loads((tmp_path / n).read_text())["runs"] for n in ("a.json", "b.json")]
    assert [{k: v for k, v in r.items() if k != "fit_time_s"} for r in runs[0]] == \
           [{k: v for k, v in r.items() if k != "fit_time_s"} for r in runs[1]]


@pytest.mark.parametrize("extra, flag", [
    (["--model", "gae", "--k", "2"], "--k"),
    (["--model", "gae", "--batch-size", "4"], "--batch-size"),
    (["--model", "gae", "--sampler", "neighbor"], "--sampler"),
    (["--model", "gae", "--rlu-stages", "2"], "--rlu-stages"),
    (["--model", "gae", "--structure", "knn"], "--structure"),
    (["--model", "sgc", "--probe-epochs", "5"], "--probe-epochs"),
    (["--task", "link", "--probe-lr", "0.1"], "--probe-lr"),
    (["--model", "gae", "--probe-epochs", "0"], "--probe-epochs must"),
    (["--model", "gae", "--probe-weight-decay", "-1"], "--probe-weight-decay must"),
])
def test_flags_that_do_not_apply_to_the_probe_are_errors(extra, flag, capsys):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and flag in err and "Traceback" not in err


def test_the_cli_runs_the_protocol_of_the_readme_headline(data_path, tmp_path, capsys):
    """`sgl train --model gcmae --model-option preset=cora` is examples/gsl_ssl_cora.py's gcmae-preset
    part (the 83.9 figure) step for step: same config, pre-training seed and probe. Checked at 1 epoch."""
    import sgl
    from sgl.models.ssl import GCMAE, gcmae_config
    from sgl.tasks import linear_probe, pretrain

    root = data_path("planetoid")
    out = tmp_path / "run.json"
    assert main(["train", "--model", "gcmae", "--model-option", "preset=cora", "--epochs", "1", "--dataset", "cora",
                 "--root", str(root), "--seeds", "1", "--no-progress", "--out", str(out)]) == 0
    run = json.loads(out.read_text())["runs"][0]
    cora = sgl.datasets.load("cora", root=str(root))
    model = GCMAE(cora.num_features, gcmae_config("cora", epochs=1))
    pretrain(model, cora, seed=0)
    # the example's PROBE settings: lr 0.01, weight decay 1e-4, 400 epochs, raw embeddings
    probe = linear_probe(model.embed(cora), cora, seed=0, standardize=False, lr=0.01, weight_decay=1e-4, epochs=400)
    assert (run["test_acc"], run["val_acc"], run["epoch"]) == (probe["test_acc"], probe["val_acc"], probe["epoch"])
