"""The accuracy harness of ``benchmarks/bench_hetero.py`` (issue 24): every model has the same
tuning budget, every grid setting builds, and a setting with ``rlu`` trains through RLU's stages;
``epoch --models`` times each model in its own process within one run and prints the ratio."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_hetero  # noqa: E402

from sgl.datasets import synthetic_mag  # noqa: E402
from sgl.models import model_config  # noqa: E402


@pytest.fixture(scope="module")
def mag():
    torch.set_num_threads(1)
    return synthetic_mag(scale=0.0005, num_classes=4, num_features=16, homophily=0.8, signal=0.3, seed=0)


def test_every_model_has_the_same_number_of_settings():
    sizes = {name: len(grid["settings"]) for name, grid in bench_hetero.GRIDS.items()}
    assert len(set(sizes.values())) == 1, f"unequal tuning budgets: {sizes}"


@pytest.mark.parametrize("name", sorted(bench_hetero.GRIDS))
def test_grid_settings_are_distinct(name):
    settings = [json.dumps(s, sort_keys=True) for s in bench_hetero.GRIDS[name]["settings"]]
    assert len(set(settings)) == len(settings)


@pytest.mark.parametrize("name", sorted(bench_hetero.GRIDS))
def test_every_grid_setting_is_a_valid_config(name):
    for setting in bench_hetero.GRIDS[name]["settings"]:
        options, _, _ = bench_hetero._split_setting(setting)
        config = model_config(name, **options)
        # every option reaches the model's config (none silently dropped or renamed)
        assert {key: getattr(config, key) for key in options} == options, setting


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="two RLU stages on a heterogeneous graph "
                    "(~15 s on 2 cores); RLU itself is tested in tests/tasks/test_rlu.py; SGL_SLOW_TESTS=1")
def test_fit_with_rlu_runs_its_stages(mag):
    setting = {"k": 2, "label_hops": 2, "hidden": 16, "num_subsets": 4,
               "rlu": {"stages": [10, 3], "threshold": 0.26}}
    out = bench_hetero._fit("hetero-gamlp", mag, setting, {"lr": 0.005, "weight_decay": 0.0}, 0, {})
    assert [s["stage"] for s in out["stages"]] == [0, 1]
    assert out["stages"][0]["epochs_run"] <= 10 and out["stages"][1]["epochs_run"] <= 3
    assert out["stages"][1]["confident_nodes"] > 0 and 0.0 <= out["test_macro_f1"] <= 1.0
    plain = bench_hetero._fit("hetero-gamlp", mag, {k: v for k, v in setting.items() if k != "rlu"},
                              {"lr": 0.005, "weight_decay": 0.0}, 0, {})
    assert "stages" not in plain


def test_fit_rejects_a_bad_rlu_setting(mag):
    from sgl.errors import ConfigError

    with pytest.raises(ConfigError, match="stages"):
        bench_hetero._fit("hetero-gamlp", mag, {"k": 1, "hidden": 8, "num_subsets": 2, "rlu": {"stages": []}},
                          {}, 0, {})


def test_epoch_models_times_each_in_its_own_process_and_prints_the_ratio(monkeypatch, capsys, tmp_path):
    calls = []

    def fake(model, hidden, scale, args):
        calls.append((model, hidden, scale, args.epochs))
        return {"seconds": {"rgcn": 60.0, "hetero-gamlp": 5.0}[model], "peak_mb": 1.0}

    monkeypatch.setattr(bench_hetero, "_epoch_in_fresh_process", fake)
    out = tmp_path / "epoch.json"
    bench_hetero.main(["epoch", "--models", "rgcn,hetero-gamlp", "--scale", "0.5", "--epochs", "2",
                       "--out", str(out)])
    assert calls == [("rgcn", 64, 0.5, 2), ("hetero-gamlp", 64, 0.5, 2)]
    assert "rgcn / hetero-gamlp = 12.00x" in capsys.readouterr().out
    assert json.loads(out.read_text())["rgcn/hetero-gamlp"] == pytest.approx(12.0)


@pytest.mark.parametrize("argv", [["epoch", "--models", "rgcn,gat"], ["epoch", "--models", "rgcn"],
                                  ["epoch", "--model", "rgcn", "--models", "rgcn,hetero-gamlp"], ["epoch"]])
def test_epoch_rejects_bad_model_lists(argv):
    with pytest.raises(SystemExit) as exc:
        bench_hetero.main(argv)
    assert exc.value.code == 2
