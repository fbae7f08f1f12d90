"""Smoke tests of the GAMLP OGB leaderboard scripts and their YAML presets (examples/ogb/).

Every script runs end to end on a tiny fake dataset written in OGB's on-disk layout, with
``--max-epochs``/``--hidden`` overrides so that a run takes about a second; the presets are
checked against the official hyperparameters and run through ``sgl train --config``.
"""
from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import pytest

import sgl
from sgl.cli import main as cli_main
from sgl.errors import ConfigError, DatasetError
from sgl.models import GAMLP, model_config
from sgl.tasks import RLUConfig, TrainConfig, run_node_classification

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ogb"

SCRIPTS = [("gamlp_products", "ogbn-products"), ("gamlp_arxiv", "ogbn-arxiv"),
           ("gamlp_papers100m", "ogbn-papers100M")]
SMOKE = ["--seeds", "2", "--max-epochs", "3", "--hidden", "16", "--no-progress", "--device", "cpu"]
UNLABELLED = 60  # papers100M-style nodes outside the split (label NaN)


def _fake(name: str, ogb_root) -> Path:
    return ogb_root(name, unlabelled=UNLABELLED if name == "ogbn-papers100M" else 0)


def _metric_lines(lines):
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines if ":" in line}


@pytest.mark.parametrize("script,dataset", SCRIPTS)
def test_script_end_to_end(script, dataset, ogb_root, examples_path, run_main, tmp_path):
    pytest.importorskip("ogb.nodeproppred")
    root = _fake(dataset, ogb_root)
    module = importlib.import_module(script)
    out = tmp_path / "record.json"
    started = time.perf_counter()
    record, lines = run_main(module.main, ["--root", str(root), *SMOKE, "--out", str(out)])
    elapsed = time.perf_counter() - started

    printed = _metric_lines(lines)
    assert lines[0].startswith(f"dataset: {dataset} (") and lines[1].startswith("model: GAMLP(")
    for name in ("ogb test accuracy", "validation accuracy", "stage ogb test accuracy", "precompute time",
                 "training time", "peak memory", "record"):
        assert name in printed, f"missing a line starting with {name!r}:\n" + "\n".join(lines)
    board = record["leaderboard"]
    assert board["test_metric"] == "ogb_test_acc"
    assert printed["ogb test accuracy"].startswith(f"{board['test']['mean']:.2f} ± {board['test']['std']:.2f} "
                                                   f"(2 seeds, GAMLP+RLU")
    assert ("paper GAMLP+RLU" in printed["ogb test accuracy"]) == (dataset != "ogbn-arxiv")
    assert printed["record"] == str(out)

    # The written record is the returned one; every seed ran all four RLU stages, capped at 3 epochs.
    assert json.loads(out.read_text()) == json.loads(json.dumps(record))
    assert record["seeds"] == [0, 1] and len(record["runs"]) == 2
    for run in record["runs"]:
        assert [s["stage"] for s in run["stages"]] == [0, 1, 2, 3]
        assert all(1 <= s["epochs_run"] <= 3 for s in run["stages"])
        # OGB's official Evaluator and SGL's accuracy agree on the same predictions
        assert run["ogb_test_acc"] == pytest.approx(run["test_acc"])
        assert 0.0 <= run["ogb_test_acc"] <= 1.0
    assert [s["epochs"] for s in record["stage_summary"]] == [3, 3, 3, 3]
    # the reported times were measured inside this call: positive, and together within its wall time
    assert record["precompute_time_s"] > 0 and record["train_time_s"] > 0
    assert record["precompute_time_s"] + record["train_time_s"] <= elapsed

    # The record's config is the preset with the overrides applied, in `sgl train --config` form.
    config = record["config"]
    assert config["dataset"] == dataset and config["model"] == "gamlp" and config["seeds"] == [0, 1]
    assert config["model_config"]["hidden"] == 16 and config["rlu"]["stages"] == [3, 3, 3, 3]
    assert config["train"]["device"] == "cpu" and "progress" not in config["train"]


def test_papers100m_trains_on_labelled_rows_and_distils_val_test_only(ogb_root, examples_path, run_main):
    root = _fake("ogbn-papers100M", ogb_root)
    module = importlib.import_module("gamlp_papers100m")
    record, _ = run_main(module.main, ["--root", str(root), *SMOKE])
    graph = sgl.datasets.load("ogbn-papers100M", root=root)
    assert graph.num_nodes == 240 + UNLABELLED and int((graph.y < 0).sum()) == UNLABELLED
    assert record["trained_rows"] == 240  # train/val/test rows only, as the official code
    # threshold 0: every validation and test node is "confident", no unlabelled node is
    val_test = int(graph.val_mask.sum() + graph.test_mask.sum())
    for run in record["runs"]:
        assert [s["confident_nodes"] for s in run["stages"]] == [0, val_test, val_test, val_test]
    # the official preset: symmetric normalisation with self-loops, sigmoid, temperature 0.001
    cfg = record["config"]
    assert (cfg["model_config"]["r"], cfg["model_config"]["self_loops"], cfg["model_config"]["act"]) == \
        (0.5, True, "sigmoid")
    assert (cfg["rlu"]["threshold"], cfg["rlu"]["temperature"]) == (0.0, 0.001)


def test_no_rlu_runs_the_first_stage_only(ogb_root, examples_path, run_main):
    root = _fake("ogbn-arxiv", ogb_root)
    module = importlib.import_module("gamlp_arxiv")
    record, lines = run_main(module.main, ["--root", str(root), *SMOKE, "--no-rlu"])
    printed = _metric_lines(lines)
    assert "(2 seeds, GAMLP)" in printed.get("ogb test accuracy", printed.get("test accuracy", ""))
    assert "stage ogb test accuracy" not in printed and "stage test accuracy" not in printed
    assert record["config"]["rlu"] is None and record["config"]["train"]["epochs"] == 3
    assert len(record["stage_summary"]) == 1 and "stages" not in record["runs"][0]
    assert record["script"]["paper_row"] == "GAMLP" and record["script"]["no_rlu"] is True


def test_products_no_rlu_reports_the_paper_gamlp_row(ogb_root, examples_path, run_main):
    root = _fake("ogbn-products", ogb_root)
    module = importlib.import_module("gamlp_products")
    record, lines = run_main(module.main, ["--root", str(root), "--seeds", "1", "--max-epochs", "2", "--hidden",
                                            "8", "--no-progress", "--device", "cpu", "--no-rlu"])
    line = _metric_lines(lines)["validation accuracy"]
    assert line.endswith("(1 seed; paper GAMLP: 93.12 ± 0.03)")
    assert tuple(record["script"]["paper"]["GAMLP"]["test"]) == (83.54, 0.09)


def test_driver_matches_sgl_train_rlu(ogb_root, examples_path):
    """The scripts' driver (features propagated once) gives exactly sgl.tasks.rlu's results."""
    runner = importlib.import_module("gamlp_runner")
    graph = sgl.datasets.load("ogbn-products", root=_fake("ogbn-products", ogb_root))
    preset = runner.load_run_config(EXAMPLES / "gamlp_products.yaml")
    cfg = model_config("gamlp", **{**preset["model_config"], "hidden": 16, "k": 3, "label_hops": 3})
    train = TrainConfig(**{**preset["train"], "lr": 0.01, "progress": False, "device": "cpu"})
    # threshold 0 makes every non-training node confident, so stages 1-2 really distil
    rlu = RLUConfig(stages=[12, 6, 6], threshold=0.0, temperature=1.0, gamma=0.1)
    ours = runner.run_gamlp(graph, cfg, train, rlu, seeds=[0, 1])
    reference = run_node_classification(lambda: GAMLP(graph.num_features, graph.num_classes, cfg), graph, [0, 1],
                                        train, rlu_config=rlu)
    keys = ("best_epoch", "epochs_run", "train_acc", "val_acc", "test_acc", "test_macro_f1", "ogb_test_acc",
            "confident_nodes")
    for run, ref in zip(ours["runs"], reference["runs"]):
        assert [s["confident_nodes"] for s in run["stages"]] == [0, 120, 120]
        for stage, ref_stage in zip(run["stages"], ref["stages"]):
            assert {k: stage.get(k) for k in keys} == {k: ref_stage.get(k) for k in keys}
    assert ours["test_acc"] == reference["test_acc"]


def test_record_replays_through_the_cli(ogb_root, examples_path, run_main, tmp_path):
    root = _fake("ogbn-products", ogb_root)
    module = importlib.import_module("gamlp_products")
    out = tmp_path / "script.json"
    record, _ = run_main(module.main, ["--root", str(root), *SMOKE, "--out", str(out)])
    replay = tmp_path / "replay.json"
    assert cli_main(["train", "--config", str(out), "--no-progress", "--out", str(replay)]) == 0
    replayed = json.loads(replay.read_text())
    assert replayed["config"]["model_config"] == record["config"]["model_config"]
    assert [r["test_acc"] for r in replayed["runs"]] == [r["test_acc"] for r in record["runs"]]
    assert [r["val_acc"] for r in replayed["runs"]] == [r["val_acc"] for r in record["runs"]]


@pytest.mark.parametrize("name,dataset", [("gamlp_products", "ogbn-products"), ("gamlp_arxiv", "ogbn-arxiv"),
                                          ("gamlp_papers100m", "ogbn-papers100M")])
def test_yaml_preset_runs_through_sgl_train(name, dataset, ogb_root, tmp_path, capsys):
    pytest.importorskip("ogb.nodeproppred")
    root = _fake(dataset, ogb_root)
    out = tmp_path / "cli.json"
    # --rlu-stages doubles as the epoch cap: the CLI has no --max-epochs
    rc = cli_main(["train", "--config", str(EXAMPLES / f"{name}.yaml"), "--root", str(root), "--seeds", "1",
                   "--rlu-stages", "2,1", "--hidden", "16", "--device", "cpu", "--no-progress", "--out", str(out)])
    assert rc == 0
    printed = _metric_lines(capsys.readouterr().out.splitlines())
    assert printed["dataset"].startswith(f"{dataset} (") and "ogb test accuracy" in printed
    record = json.loads(out.read_text())
    assert record["config"]["dataset"] == dataset and record["config"]["rlu"]["stages"] == [2, 1]
    assert [s["stage"] for s in record["runs"][0]["stages"]] == [0, 1]
    assert 0.0 <= record["ogb_test_acc"]["mean"] <= 1.0


#: The official commands (PKU-DAIR/GAMLP README + main.py defaults), in SGL field names.
OFFICIAL = {
    "gamlp_products": {
        "model_config": {"attention": "recursive", "k": 5, "label_hops": 9, "hidden": 512, "num_layers": 4,
                         "jk_layers": 4, "label_layers": 4, "act": "leaky_relu", "input_dropout": 0.2,
                         "att_dropout": 0.5, "label_dropout": 0.0, "dropout": 0.5, "pre_process": True,
                         "residual": True, "batch_norm": True, "graph_op": "adj", "r": 0.0, "self_loops": False,
                         "normalize_features": False},
        "train": {"lr": 0.001, "weight_decay": 0.0, "batch_size": 50000, "patience": 300},
        "rlu": {"stages": [400, 300, 300, 300], "threshold": 0.85, "temperature": 1.0, "gamma": 0.1},
        "seeds": 10,
    },
    "gamlp_papers100m": {
        "model_config": {"attention": "recursive", "k": 6, "label_hops": 9, "hidden": 1024, "num_layers": 6,
                         "jk_layers": 4, "label_layers": 4, "act": "sigmoid", "input_dropout": 0.0,
                         "att_dropout": 0.0, "label_dropout": 0.0, "dropout": 0.5, "pre_process": True,
                         "residual": False, "batch_norm": True, "graph_op": "adj", "r": 0.5, "self_loops": True,
                         "normalize_features": False},
        "train": {"lr": 0.001, "weight_decay": 0.0, "batch_size": 5000, "patience": 300},
        "rlu": {"stages": [100, 150, 150, 150], "threshold": 0.0, "temperature": 0.001, "gamma": 0.5,
                "candidates": "val_test"},
        "seeds": 3,
    },
}


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_presets_hold_the_official_hyperparameters(name, examples_path):
    preset = importlib.import_module("gamlp_runner").load_run_config(EXAMPLES / f"{name}.yaml")
    expected = OFFICIAL[name]
    assert {k: preset["model_config"][k] for k in expected["model_config"]} == expected["model_config"]
    assert {k: preset["train"][k] for k in expected["train"]} == expected["train"]
    assert preset["rlu"] == expected["rlu"] and preset["seeds"] == expected["seeds"]
    assert preset["train"]["epochs"] == expected["rlu"]["stages"][0]  # --no-rlu / `sgl train` without rlu
    model_config("gamlp", **preset["model_config"])  # every key is a GAMLPConfig field
    RLUConfig(**preset["rlu"])


def test_arxiv_preset_is_the_products_recipe_scaled_down(examples_path):
    load = importlib.import_module("gamlp_runner").load_run_config
    arxiv, products = load(EXAMPLES / "gamlp_arxiv.yaml"), load(EXAMPLES / "gamlp_products.yaml")
    scaled = {"hidden": 256}
    assert {**products["model_config"], **scaled} == arxiv["model_config"]
    assert {**products["train"], "epochs": 200, "batch_size": 10000, "eval_batch_size": 200000, "patience": 100} \
        == arxiv["train"]
    assert {**products["rlu"], "stages": [200, 100, 100, 100]} == arxiv["rlu"]


def test_missing_files_and_bad_overrides(examples_path, tmp_path):
    module = importlib.import_module("gamlp_products")
    with pytest.raises(DatasetError, match=r"raw/edge\.csv\.gz.*split/sales_ranking/train\.csv\.gz"):
        module.main(["--root", str(tmp_path / "empty"), "--no-download", "--no-progress"])
    with pytest.raises(ConfigError, match="--max-epochs"):
        module.main(["--root", str(tmp_path), "--max-epochs", "0"])
    with pytest.raises(ConfigError, match="--seeds"):
        module.main(["--root", str(tmp_path), "--seeds", "0"])
