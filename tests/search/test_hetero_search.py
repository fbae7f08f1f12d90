"""PaSca search over the heterogeneous models (sgl.search.hetero through sgl.search.run_search)."""
import itertools
import json
import os

import pytest

from sgl.cli.main import main
from sgl.datasets import synthetic_mag
from sgl.errors import ConfigError
from sgl.search.hetero import SEARCHABLE, HeteroDesignEvaluator, HeteroDesignSpace, search_parts, \
    space_from_dict
from sgl.search import DesignEvaluator, DesignSpace, SearchConfig, export_config, run_search, search_train_config


@pytest.fixture(scope="module")
def mag():
    return synthetic_mag(scale=0.0004, num_classes=4, num_features=8, seed=0)


def _brute_force(space):
    """Every combination of the knobs, canonicalised, counted once."""
    designs = set()
    for values in itertools.product(*space.choices.values()):
        design = space.canonical(dict(zip(space.choices, values)))
        designs.add(json.dumps(design, sort_keys=True))
    return designs


def test_size_counts_the_distinct_designs():
    for space in (HeteroDesignSpace(), HeteroDesignSpace(models=["sehgnn"], k=(1, 2), hidden=[8], dropout=0.5),
                  HeteroDesignSpace(models=["nars-sign", "hetero-gamlp"], label_hops=(1, 2), attention="jk")):
        assert space.size == len(_brute_force(space))
    assert HeteroDesignSpace().size == 4 * 3 * 2 * (3 + 4 + 3 * 4 * 2)


def test_canonical_round_trip_and_model_configs():
    space = HeteroDesignSpace()
    design = space.canonical({"model": "sehgnn", "k": 3, "hidden": 64, "dropout": 0.3, "label_hops": 2,
                              "num_subsets": 8, "attention": "recursive"})
    assert design["num_subsets"] is None and design["attention"] is None and design["label_hops"] == 2
    assert space.to_model_config(design) == {"k": 3, "hidden": 64, "dropout": 0.3, "label_hops": 2}
    for model, knobs in SEARCHABLE.items():
        full = {"model": model, "k": 1, "hidden": 64, "dropout": 0.5, "num_subsets": 2, "label_hops": 1,
                "attention": "jk"}
        assert set(space.to_model_config(full)) == {"k", "hidden", "dropout", *knobs}
    again = space_from_dict(json.loads(json.dumps(space.to_dict())))
    assert isinstance(again, HeteroDesignSpace) and again.to_dict() == space.to_dict()
    assert isinstance(space_from_dict(DesignSpace(k=(1, 2)).to_dict()), DesignSpace)


@pytest.mark.parametrize("design,message", [
    ({"model": "gcn"}, "needs model"),
    ({"model": "sehgnn", "k": 9, "hidden": 64, "dropout": 0.5, "label_hops": 1}, "outside the space"),
    ({"model": "sehgnn", "hidden": 64, "dropout": 0.5, "label_hops": 1}, "misses knob 'k'"),
])
def test_bad_designs(design, message):
    with pytest.raises(ConfigError, match=message):
        HeteroDesignSpace().canonical(design)


def test_bad_spaces_and_mismatched_graphs(mag, small_graph):
    with pytest.raises(ConfigError, match="unknown models"):
        HeteroDesignSpace(models=["gcn"])
    with pytest.raises(ConfigError, match="k range"):
        HeteroDesignSpace(k=(0, 2))
    with pytest.raises(ConfigError, match="dropout"):
        HeteroDesignSpace(dropout=[1.0])
    with pytest.raises(ConfigError, match="unknown heterogeneous design-space key"):
        HeteroDesignSpace.from_dict({"kind": "hetero", "messages": ["mean"]})
    assert search_parts(mag, DesignSpace())[1] is HeteroDesignEvaluator
    assert search_parts(small_graph, DesignSpace())[1] is DesignEvaluator
    with pytest.raises(ConfigError, match="does not apply to a heterogeneous graph"):
        search_parts(mag, DesignSpace(k=(1, 2)))
    with pytest.raises(ConfigError, match="needs a heterogeneous dataset"):
        search_parts(small_graph, HeteroDesignSpace())


def test_run_search_on_a_heterogeneous_graph_and_export(mag):
    space = HeteroDesignSpace(k=(1, 2), hidden=[16])
    config = SearchConfig(objectives="accuracy,latency", trials=3, optimizer="random", seed=0,
                          train=search_train_config(epochs=3, lr=0.01), progress=False)
    result = run_search(mag, space, config, dataset="synthetic-mag")
    assert len(result.trials) == 3 and result.front
    models = {t["design"]["model"] for t in result.trials}
    assert models <= set(SEARCHABLE)
    for t in result.trials:
        assert 0.0 <= t["metrics"]["accuracy"] <= 1.0 and t["metrics"]["epochs_run"] == 3
        assert t["model_config"] == space.to_model_config(t["design"])
    exported = export_config(result.study, result.trials[0]["number"], seeds=2)
    assert exported["model"] == result.trials[0]["design"]["model"] and exported["seeds"] == 2
    assert exported["model_config"] == result.trials[0]["model_config"]


def _search_cli(dataset_args, tmp_path, capsys):
    storage = tmp_path / "study.db"
    assert main(["search", *dataset_args, "--trials", "2", "--epochs", "3", "--optimizer", "random",
                 "--storage", str(storage), "--no-progress", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "completed trials: 2" in out and "model=" in out
    assert (tmp_path / "o" / "trials.csv").read_text().splitlines()[0].count("model") == 1
    assert main(["search", "export", str(storage), "--trial", "0"]) == 0
    exported = capsys.readouterr().out
    assert any(f"model: {m}" in exported for m in SEARCHABLE)
    return exported


def test_sgl_search_on_a_heterogeneous_dataset(tmp_path, capsys):
    exported = _search_cli(["--dataset", "synthetic-mag", "--dataset-option", "scale=0.0004",
                            "--dataset-option", "num_features=8"], tmp_path, capsys)
    assert "dataset: synthetic-mag" in exported and "scale: 0.0004" in exported


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="ACM loads in ~10 s and its designs train "
                    "for up to ~30 s each on a loaded CPU; set SGL_SLOW_TESTS=1")
def test_sgl_search_on_acm_runs_two_trials(data_path, tmp_path, capsys):
    root = data_path("hetero")
    storage = tmp_path / "study.db"
    assert main(["search", "--dataset", "acm", "--root", str(root), "--trials", "2", "--epochs", "3",
                 "--optimizer", "random", "--storage", str(storage), "--no-progress", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "completed trials: 2" in out and "model=" in out
    assert (tmp_path / "o" / "trials.csv").read_text().splitlines()[0].count("model") == 1
    assert main(["search", "export", str(storage), "--trial", "0"]) == 0
    exported = capsys.readouterr().out
    assert "dataset: acm" in exported and any(f"model: {m}" in exported for m in SEARCHABLE)
