"""Per-dataset presets (issue 26 item 11): one table, read by model_config / default_train_config,
used by RunConfig under explicit options, listed by `sgl models --presets`."""
import re
from pathlib import Path

import pytest

from sgl.cli.main import main
from sgl.errors import ConfigError
from sgl.models import MODELS, PRESETS, default_train_config, list_presets, model_config, preset
from sgl.tasks import TrainConfig
from sgl.tasks.run_config import RunConfig

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"  # the model table moved here from the README


@pytest.mark.parametrize("row", PRESETS, ids=lambda p: f"{p.model}-{p.dataset}")
def test_every_row_builds_a_model_and_a_train_config(row):
    assert row.model in MODELS and row.reference
    config = model_config(row.model, **row.model_config)
    for key, value in row.model_config.items():
        assert getattr(config, key) == value
    train = TrainConfig(**default_train_config(row.model, preset=row.dataset))
    for key, value in row.train.items():
        assert getattr(train, key) == value


def test_lookup_is_case_insensitive_and_misses_are_empty_or_strict():
    assert preset("SGC", "Cora") == ({"k": 3}, {"weight_decay": 5e-5})
    assert preset("pasca_v1", "CORA")[0] == {"k": 6, "dropout": 0.8}
    assert preset("sgc", "karate") == ({}, {}) and preset("sgc", None) == ({}, {})
    with pytest.raises(ConfigError, match="presets exist for citeseer, cora, pubmed"):
        preset("sgc", "karate", strict=True)
    with pytest.raises(ConfigError, match="no preset for model 'sage'"):
        model_config("sage", preset="cora")


def test_model_config_and_train_defaults_take_a_preset():
    assert model_config("sgc").k == 2 and model_config("sgc", preset="cora").k == 3
    assert model_config("sgc", preset="cora", k=1).k == 1  # explicit values win
    assert default_train_config("sgc", preset="citeseer")["epochs"] == 150
    assert default_train_config("gat", preset="pubmed")["lr"] == 0.01
    assert model_config("gat", preset="pubmed").out_heads == 8


def _readme_settings():
    """The results page's model table 'setting (chosen on validation)' column, as {model: {key: value}}."""
    rows = {}
    for line in RESULTS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("**") and "=" in cells[4]:
            rows[cells[0]] = {k: v for k, v in (item.split("=") for item in re.split(r",\s*", cells[4]))}
    return rows


def test_cora_validation_rows_are_the_readme_settings():
    settings = _readme_settings()
    assert {"sgc", "sign", "s2gc", "gbp", "appnp", "nafs", "gamlp", "pasca-v1"} <= set(settings)
    validation = [p for p in PRESETS if p.dataset == "cora" and p.source == "validation"]
    assert {p.model for p in validation} == set(settings)
    for p in validation:
        values = {**p.model_config, **p.train}
        assert set(values) == set(settings[p.model]), p.model
        for key, text in settings[p.model].items():
            assert str(values[key]) == text or float(values[key]) == float(text), (p.model, key)


def test_run_config_puts_the_preset_under_explicit_options_and_records_it():
    config = RunConfig.from_dict({"model": "sgc", "dataset": "cora"})
    assert config.model_config == {"k": 3} and config.train.weight_decay == 5e-5 and config.train.lr == 0.2
    explicit = RunConfig.from_dict({"model": "sgc", "dataset": "Cora", "model_config": {"k": 2},
                                    "train": {"weight_decay": 1e-4, "epochs": 7}})
    assert explicit.model_config == {"k": 2} and explicit.train.weight_decay == 1e-4 and explicit.train.epochs == 7
    replay = RunConfig.from_dict(config.to_dict())
    assert replay == config and replay.to_dict()["train"]["weight_decay"] == 5e-5
    # no preset: the model's own defaults, as before
    assert RunConfig.from_dict({"model": "sgc", "dataset": "karate"}).train.weight_decay == 1.3e-5


def test_sgl_models_presets_lists_the_table(capsys):
    assert main(["models", "--presets"]) == 0
    out = capsys.readouterr().out
    for p in list_presets():
        assert re.search(rf"{re.escape(p.model)}\s+{re.escape(p.dataset)}\s+{p.source}", out), (p.model, p.dataset)
    assert "k=3; train: weight_decay=5e-05" in out and "Klicpera" in out


def test_sgl_train_sgc_on_cora_reaches_the_readme_setting(capsys, data_path):
    root = str(data_path("planetoid"))
    assert main(["train", "--model", "sgc", "--dataset", "cora", "--root", root, "--seeds", "3",
                 "--threads", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "k=3" in out
    accuracy = float(re.search(r"test accuracy: ([\d.]+)", out).group(1))
    assert accuracy >= 81.0, out
    assert main(["train", "--model", "sgc", "--dataset", "cora", "--root", root, "--seeds", "1", "--k", "2",
                 "--epochs", "5", "--threads", "1", "--no-progress"]) == 0
    assert "k=2" in capsys.readouterr().out  # an explicit flag overrides the preset
