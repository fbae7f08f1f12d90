"""The accuracy harness of ``benchmarks/bench_hetero.py`` (issue 24): every grid setting builds,
and a setting with ``rlu`` trains through RLU's stages."""
from __future__ import annotations

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


@pytest.mark.parametrize("name", sorted(bench_hetero.GRIDS))
def test_every_grid_setting_is_a_valid_config(name):
    for setting in bench_hetero.GRIDS[name]["settings"]:
        options, _, _ = bench_hetero._split_setting(setting)
        assert model_config(name, **options) is not None


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
