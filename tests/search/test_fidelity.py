"""The multi-fidelity search: per-epoch validation reports, successive halving / Hyperband over epochs."""
import pytest

import sgl
from sgl.cli.main import main
from sgl.errors import ConfigError
from sgl.search import DesignEvaluator, DesignSpace, SearchConfig, load_result, run_search
from sgl.search.evaluate import EpochPruner
from sgl.search.study import make_pruner

SPACE = dict(k=(1, 3), messages=["last", "concat", "mean"], num_layers=(1, 2), hidden=[16],
             post_steps=(0, 1), post_graph_ops=["adj"], post_messages=["last"])


@pytest.fixture(scope="module")
def graph():
    return sgl.datasets.load("synthetic", num_nodes=200, num_features=8, num_classes=3, num_val=50, num_test=50,
                             seed=0)


def _config(**kwargs):
    # random designs: which design each trial gets does not depend on measured latencies, so runs repeat
    base = dict(objectives="accuracy,latency", trials=10, epochs=9, patience=None, progress=False, threads=1,
                optimizer="random", pruner="halving", min_epochs=1)
    return SearchConfig(**{**base, **kwargs})


def _states(result):
    return {t.number: t.state.name for t in result.study.get_trials()}


def test_epoch_reports_leave_training_unchanged(graph):
    space = DesignSpace(**SPACE)
    evaluator = DesignEvaluator(graph, space, _config().train_config())
    design = space.design_at(3)
    curve = []
    plain = evaluator.evaluate(design, seed=1)
    reported = evaluator.evaluate(design, seed=1, on_epoch=lambda epoch, acc: curve.append((epoch, acc)))
    assert [epoch for epoch, _ in curve] == list(range(1, 10))
    assert reported["accuracy"] == plain["accuracy"] == max(acc for _, acc in curve)  # best-validation epoch

    def stop(epoch, acc):
        if epoch == 2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):  # the hook's exception ends the training where it was raised
        evaluator.evaluate(design, on_epoch=stop)


def test_halving_prunes_by_the_rung_rule_and_keeps_pruned_off_the_front(graph):
    result = run_search(graph, DesignSpace(**SPACE), _config())
    study = result.study
    states = _states(result)
    assert len(states) == 10  # with a pruner, `trials` counts finished trials: completed + pruned
    assert set(states.values()) <= {"COMPLETE", "PRUNED"}
    assert 1 <= len(result.pruned) <= 9 and len(result.trials) == 10 - len(result.pruned)
    assert {t["number"] for t in result.trials}.isdisjoint(p["number"] for p in result.pruned)
    complete = {n for n, state in states.items() if state == "COMPLETE"}
    assert result.front and {t["number"] for t in result.front} <= complete
    pruner = make_pruner(_config())
    assert pruner.rungs(0) == [1, 3]
    # replay the rule: trials ran one after another, so trial n competed with trials < n at each rung
    trials = sorted(study.get_trials(), key=lambda t: t.number)
    for trial in trials:
        for rung, epochs in enumerate(pruner.rungs(0)):
            key = f"sgl_rung_{rung}"
            if key not in trial.user_attrs:
                assert trial.state.name == "PRUNED" and trial.user_attrs["pruned_at_epoch"] < epochs
                continue
            rivals = [t.user_attrs[key] for t in trials if t.number < trial.number and key in t.user_attrs]
            value = trial.user_attrs[key]
            kept = EpochPruner.promotable(value, rivals + [value], 3)
            stopped_here = trial.state.name == "PRUNED" and trial.user_attrs["pruned_at_epoch"] == epochs
            assert kept != stopped_here, (trial.number, rung, value, rivals)
    for row in result.pruned:  # recorded as such: the design, where it stopped, its best accuracy then
        assert row["design"] is not None and row["pruned_at_epoch"] in (1, 3) and 0 <= row["val_acc"] <= 1
    # designs are the sampler's alone: the same seed without a pruner proposes the same ones
    plain = run_search(graph, DesignSpace(**SPACE), _config(pruner="none", trials=4))
    assert [t["design"] for t in plain.trials] == [t.user_attrs["design"] for t in trials[:4]]
    assert not plain.pruned and len(plain.study.get_trials()) == 4


def test_hyperband_brackets_start_later(graph):
    pruner = EpochPruner("hyperband", min_epochs=1, max_epochs=9, reduction_factor=3)
    assert pruner.brackets == 3 and pruner.budgets == [27, 5, 1]  # optuna: ceil(B eta^(B-1-s) / (s+1))
    assert [pruner.rungs(s) for s in range(3)] == [[1, 3], [3], []]
    result = run_search(graph, DesignSpace(**SPACE), _config(pruner="hyperband", trials=12))
    brackets = {t.number: pruner.bracket_of(t.number) for t in result.study.get_trials()}
    assert len(set(brackets.values())) >= 2  # trials spread over brackets
    assert result.pruned
    for row in result.pruned:  # never judged before its bracket's first rung
        assert row["pruned_at_epoch"] in pruner.rungs(brackets[row["number"]])


def test_a_pruned_search_resumes_counting_pruned_trials(graph, tmp_path):
    storage = str(tmp_path / "study.db")
    first = run_search(graph, DesignSpace(**SPACE), _config(trials=4, storage=storage))
    assert len(first.study.get_trials()) == 4
    again = run_search(graph, DesignSpace(**SPACE), _config(trials=8, storage=storage))
    assert len(again.study.get_trials()) == 8 and len(again.trials) + len(again.pruned) == 8
    stored = load_result(storage)
    assert [p["number"] for p in stored.pruned] == [p["number"] for p in again.pruned]
    assert stored.study.user_attrs["sgl_search"]["pruner"] == {"kind": "halving", "min_epochs": 1,
                                                               "reduction_factor": 3}
    done = run_search(graph, DesignSpace(**SPACE), _config(trials=8, storage=storage))
    assert len(done.study.get_trials()) == 8  # nothing left to run


def test_pruner_settings_are_checked_and_serialised():
    config = _config(pruner="hyperband", min_epochs=2, reduction_factor=2)
    again = SearchConfig.from_dict(config.to_dict())
    assert (again.pruner, again.min_epochs, again.reduction_factor) == ("hyperband", 2, 2)
    assert SearchConfig.from_dict({"trials": 5}).pruner == "none"  # records from before the pruner
    with pytest.raises(ConfigError, match="pruner must be one of"):
        _config(pruner="median")
    with pytest.raises(ConfigError, match="min_epochs .9. must be below"):
        _config(min_epochs=9)
    with pytest.raises(ConfigError, match="reduction_factor"):
        _config(reduction_factor=1)
    _config(pruner="none", min_epochs=50)  # no pruner: the rung settings are unused


def test_cli_pruner_flag(graph, tmp_path, capsys):
    storage = str(tmp_path / "s.db")
    code = main(["search", "--dataset", "karate", "--pruner", "halving", "--min-epochs", "1", "--epochs", "9",
                 "--patience", "100", "--trials", "6", "--optimizer", "random", "--storage", storage,
                 "--threads", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "pruned:" in out
    stored = load_result(storage)
    assert len(stored.trials) + len(stored.pruned) == 6 and stored.pruned
    assert main(["search", "show", storage]) == 0
    assert f"{len(stored.pruned)} pruned" in capsys.readouterr().out
    code = main(["search", "--dataset", "karate", "--pruner", "halving", "--epochs", "5", "--trials", "2",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    assert code == 2 and "lower min_epochs (--min-epochs)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["search", "--dataset", "karate", "--pruner", "median"])
