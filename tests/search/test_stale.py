"""A trial whose worker was killed is marked FAIL by the next run at once (same machine) or by
optuna's heartbeat within GRACE_PERIOD seconds (another machine), never left RUNNING for 120 s."""
import json
import logging
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import sgl
from sgl.search import DesignSpace, SearchConfig, open_study, run_search
from sgl.search.stale import GRACE_PERIOD, WORKER_ATTR, owner_alive, worker_identity
from sgl.search.study import _rdb_storage

OPTIONS = dict(num_nodes=120, num_features=6, num_classes=3, num_val=30, num_test=30, seed=1)
SPACE = dict(k=(1, 2), num_layers=(1, 2), hidden=[8], post_steps=(0, 1))


@pytest.fixture
def graph():
    return sgl.datasets.load("synthetic", **OPTIONS)


def _search(graph, db, trials):
    config = SearchConfig(objectives="accuracy,latency", trials=trials, epochs=4, patience=None, progress=False,
                          threads=1, storage=str(db))
    return run_search(graph, DesignSpace(**SPACE), config, dataset="synthetic", dataset_options=OPTIONS)


def _states(db):
    with sqlite3.connect(db) as con:
        return dict(con.execute("SELECT number, state FROM trials").fetchall())


def test_owner_alive_tells_dead_and_reused_pids():
    me = worker_identity()
    if me["machine"] is None:
        pytest.skip("no /proc: only the heartbeat can tell")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = {**me, "pid": child.pid, "started": worker_identity()["started"]}
    assert owner_alive(owner) is False  # a live pid that started at another time: the pid was reused
    from sgl.search import stale

    owner["started"] = stale._start_time(child.pid)
    assert owner_alive(owner) is True
    child.kill()
    child.wait()
    assert owner_alive(owner) is False
    assert owner_alive({**owner, "machine": "elsewhere"}) is None and owner_alive(None) is None


def test_storage_uses_a_short_heartbeat(tmp_path):
    storage = _rdb_storage(str(tmp_path / "h.db"))
    assert storage.heartbeat_interval <= 10 and storage.grace_period == GRACE_PERIOD < 120
    assert storage.get_heartbeat_stale_trial_callback() is not None


def test_killed_trial_is_failed_by_the_next_run_at_once(graph, tmp_path, caplog):
    db = tmp_path / "killed.db"
    _search(graph, db, 1)  # create the study; the worker below joins it
    options = [f"--dataset-option={k}={v}" for k, v in OPTIONS.items()]
    space = tmp_path / "space.json"
    space.write_text(json.dumps(DesignSpace(**SPACE).to_dict()))
    worker = subprocess.Popen([sys.executable, "-m", "sgl.cli", "search", "--dataset", "synthetic", *options,
                               "--space", str(space), "--trials", "50", "--epochs", "100000", "--patience", "100000",
                               "--storage", str(db), "--threads", "1", "--no-progress", "--out", str(tmp_path / "o")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    running, deadline = None, time.time() + 120
    try:
        while running is None and time.time() < deadline and worker.poll() is None:
            time.sleep(0.2)
            with sqlite3.connect(db) as con:
                row = con.execute("SELECT t.number FROM trials t JOIN trial_user_attributes a "
                                  "ON a.trial_id = t.trial_id WHERE t.state = 'RUNNING' AND a.key = ?",
                                  (WORKER_ATTR,)).fetchone()
            running = None if row is None else row[0]
    finally:
        worker.send_signal(signal.SIGKILL)
        _, err = worker.communicate(timeout=30)
    assert running is not None, err.decode()[-2000:]
    killed_at = time.time()
    with caplog.at_level(logging.WARNING, logger="sgl.search"):
        result = _search(graph, db, 2)
    assert time.time() - killed_at < GRACE_PERIOD  # not the heartbeat's doing: the owner check's
    states = _states(db)
    assert states[running] == "FAIL" and "RUNNING" not in states.values()
    assert len(result.trials) == 2
    assert any(f"trial {running} " in r.getMessage() and "marked FAIL" in r.getMessage() for r in caplog.records)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_heartbeat_fails_a_silent_trial_of_another_machine(graph, tmp_path, caplog):
    db = tmp_path / "remote.db"
    _search(graph, db, 1)
    study = open_study(str(db))
    trial = study.ask()
    trial.set_user_attr(WORKER_ATTR, {"host": "node7", "machine": "elsewhere", "pid": 4242, "started": "1"})
    study._storage.record_heartbeat(trial._trial_id)
    with sqlite3.connect(db) as con:  # its last heartbeat was a minute ago: past the grace period
        con.execute("UPDATE trial_heartbeats SET heartbeat = datetime(heartbeat, '-60 seconds')")
    with caplog.at_level(logging.WARNING, logger="sgl.search"):
        _search(graph, db, 2)
    assert _states(db)[trial.number] == "FAIL"
    assert any("pid 4242 on node7" in r.getMessage() for r in caplog.records)
