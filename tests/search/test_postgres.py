"""Two `sgl search` workers on one PostgreSQL study: the multi-machine recipe, tried for real.

The server is ``SGL_TEST_POSTGRES_URL`` when set (``make test-postgres`` starts one), else a
throw-away one this module starts from the PostgreSQL binaries (``initdb``, ``pg_ctl``,
``createdb``; Debian's ``postgresql`` package) on a Unix socket in a temporary folder. The
test is skipped when neither is available or the ``psycopg2`` driver is missing.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from sgl.search import DesignSpace, load_result, open_study

OPTIONS = dict(num_nodes=150, num_features=6, num_classes=3, num_val=40, num_test=40, seed=2)
SPACE = dict(k=(1, 3), num_layers=(1, 2), hidden=[8, 16], post_steps=(0, 1))


def _postgres_bin():
    """The folder holding initdb/pg_ctl/createdb, or None."""
    found = shutil.which("initdb")
    candidates = [os.path.dirname(os.path.realpath(found))] if found else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    for folder in candidates:
        if all(os.access(os.path.join(folder, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "createdb")):
            return folder
    return None


def _start_server(folder: Path, bin_dir: str):
    """initdb + pg_ctl start on a socket in ``folder`` + createdb; returns (url, stop)."""
    prefix = []
    if os.geteuid() == 0:  # initdb refuses to run as root: use the package's postgres account
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser is missing: initdb refuses to run as root")
        prefix = ["runuser", "-u", "postgres", "--"]
        shutil.chown(folder, user="postgres")
    socket_dir = folder / "socket"
    data = folder / "data"

    def run(*args):
        subprocess.run([*prefix, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    run(f"{bin_dir}/initdb", "-D", str(data), "-A", "trust", "-U", "sgl", "--no-sync", "-E", "UTF8")
    run("mkdir", str(socket_dir))
    run(f"{bin_dir}/pg_ctl", "-D", str(data), "-l", str(folder / "server.log"), "-w", "-o",
        f"-k {socket_dir} -c listen_addresses='' -c fsync=off", "start")

    def stop():
        subprocess.run([*prefix, f"{bin_dir}/pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    try:
        run(f"{bin_dir}/createdb", "-h", str(socket_dir), "-U", "sgl", "sgl_search")
    except BaseException:
        stop()
        raise
    return f"postgresql+psycopg2://sgl@/sgl_search?host={socket_dir}", stop


@pytest.fixture(scope="module")
def postgres_url():
    pytest.importorskip("psycopg2", reason="the PostgreSQL driver: pip install 'sgl[postgres]'")
    url = os.environ.get("SGL_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    if not os.environ.get("SGL_SLOW_TESTS"):
        pytest.skip("starts a throw-away PostgreSQL server (~50 s): run `make test-postgres`, or set "
                    "SGL_SLOW_TESTS=1 or SGL_TEST_POSTGRES_URL")
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl, createdb); install Debian's postgresql package "
                    "or set SGL_TEST_POSTGRES_URL")
    folder = Path(tempfile.mkdtemp(prefix="sglpg"))  # short: a socket path has a 107-byte limit
    try:
        url, stop = _start_server(folder, bin_dir)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"could not start a throw-away PostgreSQL server: {exc.stderr.decode()[-500:]}")
    try:
        yield url
    finally:
        stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fresh_url(postgres_url):
    """A URL to a new, empty database on the server (so each test starts without optuna's tables)."""
    import uuid

    import sqlalchemy

    base = sqlalchemy.engine.make_url(postgres_url)
    name = f"sgl_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    yield base.set(database=name).render_as_string(hide_password=False)


def test_workers_started_at_the_same_moment_on_an_empty_database(postgres_url):
    """Four workers open one study on a fresh database at once, three times: optuna's schema
    creation races (issue #1092: "relation already exists", "duplicate key ... pg_type") must not
    stop any of them."""
    import sqlalchemy

    base = sqlalchemy.engine.make_url(postgres_url)
    engine = sqlalchemy.create_engine(base, isolation_level="AUTOCOMMIT")
    names = [f"sgl_race_{os.getpid()}_{i}" for i in range(3)]
    with engine.connect() as connection:
        for name in names:
            connection.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}"'))
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    child = textwrap.dedent("""
        import sys
        from sgl.search import DesignSpace, SearchConfig, open_study
        config = SearchConfig(objectives="accuracy,latency")
        meta = {"objectives": config.objectives, "space": DesignSpace().to_dict(), "dataset": "synthetic"}
        print("ready", flush=True)
        for line in sys.stdin:
            try:
                open_study(line.strip(), "race", create=meta, config=config)
                print("ok", flush=True)
            except Exception as exc:
                print("FAIL " + " ".join(str(exc).split())[:600], flush=True)
    """)
    workers = [subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True) for _ in range(4)]
    try:
        assert [w.stdout.readline().strip() for w in workers] == ["ready"] * len(workers)
        outcomes = []
        for name in names:  # release all four at once on each empty database
            url = base.set(database=name).render_as_string(hide_password=False)
            for w in workers:
                w.stdin.write(url + "\n")
                w.stdin.flush()
            outcomes += [w.stdout.readline().strip() for w in workers]
    finally:
        for w in workers:
            w.stdin.close()
            w.wait(timeout=60)
    assert [o for o in outcomes if o != "ok"] == []


def _wait(proc, timeout=400):
    """None when the worker exits cleanly, else the end of its stderr (killed after ``timeout`` s)."""
    try:
        err = proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        err = proc.communicate()[1] + b"\n(killed: still running after the timeout)"
    return None if proc.returncode == 0 else err.decode()[-3000:]


def test_two_search_workers_share_one_postgres_study(fresh_url, tmp_path):
    """Both workers start at once on an empty database (neither creates the study first): every
    trial number once, the trial target reached, nothing left RUNNING."""
    import optuna

    space = tmp_path / "space.json"
    space.write_text(json.dumps(DesignSpace(**SPACE).to_dict()))
    target = 8
    worker = [sys.executable, "-m", "sgl.cli", "search", "--dataset", "synthetic",
              *[f"--dataset-option={k}={v}" for k, v in OPTIONS.items()], "--space", str(space),
              "--trials", str(target), "--epochs", "8", "--storage", fresh_url, "--study", "pg-race",
              "--threads", "1", "--no-progress"]
    workers = [subprocess.Popen([*worker, "--seed", str(seed), "--out", str(tmp_path / f"out{seed}")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path) for seed in (0, 1)]
    failures = [error for error in map(_wait, workers) if error is not None]
    assert not failures, failures
    result = load_result(fresh_url, "pg-race")
    numbers = [t["number"] for t in result.trials]
    assert len(numbers) == len(set(numbers))
    assert target <= len(numbers) <= target + 1  # at most the other worker's in-flight trial beyond it
    study = open_study(fresh_url, "pg-race")
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert optuna.trial.TrialState.RUNNING not in states
    assert sorted(t.number for t in study.get_trials(deepcopy=False)) == list(range(len(states)))
