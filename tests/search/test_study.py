import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import sgl
from sgl.cli import main
from sgl.errors import ConfigError, SearchError
from sgl.search import DesignSpace, HopCache, SearchConfig, export_config, load_result, open_study, run_search

SMALL = dict(k=(1, 3), messages=["last", "concat", "gate", "mean"], num_layers=(1, 2), hidden=[16],
             post_steps=(0, 2), post_graph_ops=["adj", "ppr_a0.3"], post_messages=["last", "mean"])
GRAPH_OPTIONS = dict(num_nodes=200, num_features=8, num_classes=3, num_val=50, num_test=50, seed=0)


@pytest.fixture
def graph():
    return sgl.datasets.load("synthetic", **GRAPH_OPTIONS)


def _config(**kwargs):
    base = dict(objectives="accuracy,latency", trials=6, epochs=8, patience=None, progress=False, threads=1)
    return SearchConfig(**{**base, **kwargs})


def test_tiny_search_end_to_end(graph):
    space = DesignSpace(**SMALL)
    result = run_search(graph, space, _config(objectives="accuracy,epoch_time,memory"))
    assert len(result.trials) == 6
    assert 1 <= len(result.front) <= 6
    for t in result.trials:
        assert t["values"] == [t["metrics"]["accuracy"], t["metrics"]["epoch_time"], t["metrics"]["memory"]]
        assert 0.0 <= t["metrics"]["accuracy"] <= 1.0 and t["metrics"]["latency"] > 0
        assert space.canonical(t["design"]) == t["design"]
    best_acc = max(t["metrics"]["accuracy"] for t in result.trials)
    assert any(t["metrics"]["accuracy"] == best_acc for t in result.front)  # the most accurate is on the front


def test_trials_that_share_an_operator_share_the_precompute(graph):
    space = DesignSpace(graph_ops=["adj_r0.5"], k=(3, 3), messages=["last", "mean", "concat"], num_layers=(1, 2),
                        hidden=[16], post_steps=(0, 0))
    cache = HopCache(graph)
    result = run_search(graph, space, _config(trials=5), cache=cache)
    assert len(result.trials) == 5
    assert cache.propagations == 1 and cache.hits == 4


def test_optimizers_and_seeds_are_reproducible_in_designs(graph):
    space = DesignSpace(**SMALL)
    for optimizer in ("random", "nsga2", "tpe"):
        a = run_search(graph, space, _config(optimizer=optimizer, trials=4))
        b = run_search(graph, space, _config(optimizer=optimizer, trials=4))
        assert [t["design"] for t in a.trials] == [t["design"] for t in b.trials]
        assert [t["metrics"]["accuracy"] for t in a.trials] == [t["metrics"]["accuracy"] for t in b.trials]


def test_sqlite_resume_and_export(graph, tmp_path):
    db = str(tmp_path / "study.db")
    space = DesignSpace(**SMALL)
    first = run_search(graph, space, _config(trials=3, storage=db), dataset="synthetic",
                       dataset_options=GRAPH_OPTIONS)
    second = run_search(graph, space, _config(trials=5, storage=db), dataset="synthetic",
                        dataset_options=GRAPH_OPTIONS)
    assert [t["number"] for t in first.trials] == [0, 1, 2]
    assert len(second.trials) == 5
    assert [t["values"] for t in second.trials[:3]] == [t["values"] for t in first.trials]
    again = load_result(db)
    assert [t["values"] for t in again.trials] == [t["values"] for t in second.trials]
    exported = export_config(open_study(db), 4)
    assert exported["model"] == "sgap" and exported["dataset"] == "synthetic"
    assert exported["model_config"] == space.to_model_config(second.trials[4]["design"])
    with pytest.raises(SearchError, match="no completed trial 99"):
        export_config(open_study(db), 99)
    with pytest.raises(SearchError, match="objectives"):
        run_search(graph, space, _config(objectives="accuracy,memory", storage=db), dataset="synthetic")
    with pytest.raises(SearchError, match="space"):
        run_search(graph, DesignSpace(**{**SMALL, "hidden": [32]}), _config(storage=db), dataset="synthetic")


def test_killed_search_loses_no_finished_trial(graph, tmp_path):
    db = tmp_path / "killed.db"
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(DesignSpace(**SMALL).to_dict()))
    options = [f"--dataset-option={k}={v}" for k, v in GRAPH_OPTIONS.items()]
    cmd = [sys.executable, "-m", "sgl.cli", "search", "--dataset", "synthetic", *options, "--trials", "200",
           "--epochs", "30", "--storage", str(db), "--space", str(space_file), "--threads", "1",
           "--no-progress", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    done = 0
    deadline = time.time() + 120
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
            if db.exists():
                try:
                    with sqlite3.connect(db) as con:
                        done = con.execute("SELECT COUNT(*) FROM trials WHERE state='COMPLETE'").fetchone()[0]
                except sqlite3.Error:
                    continue
                if done >= 3:
                    break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert done >= 3, proc.stderr.read().decode()[-2000:]
    before = load_result(str(db))
    assert len(before.trials) >= 3
    result = run_search(graph, DesignSpace(**SMALL), _config(trials=len(before.trials) + 2, storage=str(db),
                                                             epochs=30, patience=50),
                        dataset="synthetic", dataset_options=GRAPH_OPTIONS)
    assert len(result.trials) == len(before.trials) + 2
    kept = {t["number"]: t["values"] for t in result.trials}
    assert all(kept[t["number"]] == t["values"] for t in before.trials)


def test_bad_storage_and_config(graph, tmp_path):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    with pytest.raises(SearchError, match="not a SQLite study file"):
        run_search(graph, DesignSpace(**SMALL), _config(storage=str(corrupt)))
    assert corrupt.read_bytes().startswith(b"this is not")  # nothing overwritten
    with pytest.raises(SearchError, match="does not exist"):
        run_search(graph, DesignSpace(**SMALL), _config(storage=str(tmp_path / "no" / "dir" / "s.db")))
    with pytest.raises(SearchError, match="cannot open search storage"):
        run_search(graph, DesignSpace(**SMALL), _config(storage="postgresql://nobody@127.0.0.1:1/none"))
    with pytest.raises(SearchError, match="holds 0 studies"):
        open_study(str(tmp_path / "empty.db"))
    with pytest.raises(ConfigError, match="unknown optimizer"):
        _config(optimizer="openbox")
    with pytest.raises(ConfigError, match="n_jobs"):
        _config(objectives="accuracy,memory", n_jobs=2)
    with pytest.raises(ConfigError, match="trials"):
        _config(trials=0)


def test_cli_search_show_export_and_train(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    space_file = tmp_path / "space.yaml"
    space_file.write_text(yaml.safe_dump(DesignSpace(**SMALL).to_dict()))
    options = [f"--dataset-option={k}={v}" for k, v in GRAPH_OPTIONS.items()]
    assert main(["search", "--dataset", "synthetic", *options, "--trials", "3", "--epochs", "5",
                 "--storage", "s.db", "--space", str(space_file), "--no-progress", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "Pareto front" in out and "hops computed" in out
    folder = tmp_path / "search-sgl-synthetic"
    for name in ("front.csv", "front.json", "trials.csv", "pareto.png"):
        assert (folder / name).stat().st_size > 0
    assert (folder / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["search", "show", "s.db", "--all"]) == 0
    shown = capsys.readouterr().out
    assert "3 completed trials" in shown
    assert main(["search", "export", "s.db", "--trial", "1", "--seeds", "2"]) == 0
    exported = capsys.readouterr().out
    config = yaml.safe_load(exported)
    assert config["model"] == "sgap" and config["seeds"] == 2
    (tmp_path / "best.yaml").write_text(exported)
    assert main(["train", "--config", str(tmp_path / "best.yaml"), "--no-progress"]) == 0
    assert "test accuracy" in capsys.readouterr().out
    assert main(["search", "show", "missing.db"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["search", "--objectives", "accuracy,speed", "--dataset", "karate"]) == 2
    assert "unknown objective" in capsys.readouterr().err


def test_parallel_trials_in_one_process(graph):
    result = run_search(graph, DesignSpace(**SMALL), _config(trials=4, n_jobs=2, optimizer="random"))
    # both threads stop once 4 trials completed; the one still running may finish as a 5th
    assert 4 <= len(result.trials) <= 5
    assert len({t["number"] for t in result.trials}) == len(result.trials)


def test_graph_without_validation_nodes_fails_before_any_trial(graph):
    from sgl.errors import FeatureError

    graph.val_mask = None
    with pytest.raises(FeatureError, match="no val nodes"):
        run_search(graph, DesignSpace(**SMALL), _config())
    graph.x = None
    with pytest.raises(FeatureError, match="features"):
        run_search(graph, DesignSpace(**SMALL), _config())


def test_result_hypervolume_matches_the_2d_formula(graph):
    from sgl.search import hypervolume_2d

    result = run_search(graph, DesignSpace(**SMALL), _config(trials=4, optimizer="random"))
    points = [(t["metrics"]["accuracy"], t["metrics"]["latency"]) for t in result.trials]
    reference = (0.0, 2 * max(p[1] for p in points))
    assert result.hypervolume(reference) == hypervolume_2d(points, ["maximize", "minimize"], reference) > 0
    with pytest.raises(ConfigError, match="was not searched"):
        result.hypervolume(reference, objectives=("accuracy", "memory"))


def test_timeout_stops_starting_trials(graph):
    import time as _time

    start = _time.perf_counter()
    result = run_search(graph, DesignSpace(**SMALL), _config(trials=10_000, timeout=1.0, optimizer="random"))
    assert 1 <= len(result.trials) < 10_000
    assert _time.perf_counter() - start < 30


def test_two_processes_share_one_sqlite_study(graph, tmp_path):
    """Two `sgl search` processes on one storage fill one study: every trial number once, the trial
    target reached (at most one in-flight trial per extra process beyond it), nothing lost."""
    db = tmp_path / "shared.db"
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(DesignSpace(**SMALL).to_dict()))
    options = [f"--dataset-option={k}={v}" for k, v in GRAPH_OPTIONS.items()]
    target = 8
    cmd = [sys.executable, "-m", "sgl.cli", "search", "--dataset", "synthetic", *options, "--trials", str(target),
           "--epochs", "8", "--storage", str(db), "--space", str(space_file), "--threads", "1", "--no-progress"]
    run_search(graph, DesignSpace(**SMALL), _config(trials=1, storage=str(db), epochs=8),
               dataset="synthetic", dataset_options=GRAPH_OPTIONS)  # create the study before the race
    procs = [subprocess.Popen([*cmd, "--seed", str(seed), "--out", str(tmp_path / f"out{seed}")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path) for seed in (0, 1)]
    errors = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(err.decode()[-2000:])
    assert not errors, errors
    result = load_result(str(db))
    numbers = sorted(t["number"] for t in result.trials)
    assert len(numbers) == len(set(numbers))
    assert target <= len(result.trials) <= target + 1
    with sqlite3.connect(db) as con:
        states = dict(con.execute("SELECT state, COUNT(*) FROM trials GROUP BY state").fetchall())
    assert states.get("RUNNING", 0) == 0  # no trial left dangling by either process


def test_library_sqlite_storage_error_names_the_file_not_a_server(tmp_path, monkeypatch):
    """A SQLite study that does not open (a locked or unreadable file) is a file problem: the
    message names the file and what to do, and says nothing about servers or drivers."""
    import sgl.search.study as study_module
    from sgl.errors import SearchError

    def refuse(url, **kwargs):
        raise RuntimeError("(sqlite3.OperationalError) database is locked")

    monkeypatch.setattr(study_module, "_open_rdb", refuse)
    path = tmp_path / "s.db"
    with pytest.raises(SearchError) as caught:
        study_module._rdb_storage(str(path))
    message = str(caught.value).lower()
    assert str(path).lower() in message and "database is locked" in message
    assert "server" not in message and "driver" not in message
    with pytest.raises(SearchError, match="server is reachable"):
        study_module._rdb_storage("postgresql+psycopg2://u@localhost:1/db")
