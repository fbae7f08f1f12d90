"""sgl.fileio: atomic writes whose results a team can share (the umask), and self-cleaning temporaries."""
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap

import pytest
import torch

import sgl
from sgl.data import Graph
from sgl.fileio import atomic_dir, atomic_write, current_umask, make_temp_dir, pid_alive, remove_stale_temps


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Set the process umask for one test; restored afterwards."""
    previous = os.umask(0o022)
    os.umask(previous)

    def set_mask(mask):
        os.umask(mask)
        return mask

    yield set_mask
    os.umask(previous)


def _host():
    return "".join(c if c.isalnum() or c == "_" else "_" for c in socket.gethostname())[:40]


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_atomic_write_and_dir_follow_the_umask(tmp_path, umask, mask):
    umask(mask)
    assert current_umask() == mask
    with atomic_write(tmp_path / "record.json", "w") as handle:
        handle.write("{}")
    assert mode(tmp_path / "record.json") == 0o666 & ~mask
    with atomic_dir(tmp_path / "entry") as folder:
        (folder / "hops.npy").write_bytes(b"x")
    assert mode(tmp_path / "entry") == 0o777 & ~mask


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path, umask):
    umask(0o022)
    path = tmp_path / "plan.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    with atomic_write(path, "w") as handle:
        handle.write("new")
    assert path.read_text() == "new" and mode(path) == 0o640


def test_records_graphs_stores_and_search_results_are_group_shareable(tmp_path, umask):
    from sgl.cli.report import write_record
    from sgl.samplers import open_store, write_store
    from sgl.search import DesignSpace, SearchConfig, run_search
    from sgl.search.report import write_results

    umask(0o002)  # a team's shared folder: group-writable
    graph = sgl.datasets.load("karate")
    write_record(str(tmp_path / "run.json"), {"acc": 1.0})
    graph.save(tmp_path / "karate.pt")
    store = write_store(graph, tmp_path / "store")
    assert mode(tmp_path / "run.json") == mode(tmp_path / "karate.pt") == 0o664
    assert mode(store) == 0o775
    assert {mode(p) for p in store.iterdir()} == {0o664}
    open_store(store)
    config = SearchConfig(objectives="accuracy,latency", trials=1, epochs=2, patience=None, progress=False,
                          threads=1, storage=str(tmp_path / "study.db"))
    result = run_search(graph, DesignSpace(k=(1, 2), num_layers=(1, 1), hidden=[8], post_steps=(0, 0)), config)
    paths = write_results(result, tmp_path / "search", plot=False)
    assert {mode(p) for p in paths.values()} == {0o664}


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path):
    target = tmp_path / "store"
    dead, host = _dead_pid(), _host()
    stale_dir = tmp_path / f".store.sgl-{host}-{dead}-abc123_x.tmp"
    (stale_dir / "sub").mkdir(parents=True)
    (stale_dir / "sub" / "features.npy").write_bytes(b"0" * 4096)
    stale_file = tmp_path / f".store.sgl-{host}-{dead}-zz9.old"
    stale_file.write_bytes(b"1")
    keep = [tmp_path / f".store.sgl-{host}-{os.getpid()}-live.tmp",  # a live writer (this process)
            tmp_path / f".store.sgl-otherhost-{dead}-abc.tmp",      # another machine: cannot tell
            tmp_path / ".store.k2j3h4.tmp",                          # not ours (another program's)
            tmp_path / f".storex.sgl-{host}-{dead}-abc.tmp"]         # another target's
    for path in keep:
        path.mkdir()
    messages = []
    removed = remove_stale_temps(target, log=messages.append)
    assert sorted(removed) == sorted([stale_dir, stale_file])
    assert not stale_dir.exists() and not stale_file.exists() and all(p.exists() for p in keep)
    assert len(messages) == 2 and all(f"killed process (pid {dead})" in m for m in messages)
    assert any("0.0 MiB" in m and stale_dir.name in m for m in messages)
    assert remove_stale_temps(target, log=messages.append) == []  # nothing left to do


def test_atomic_write_cleans_its_own_stale_temporaries_and_warns(tmp_path):
    stale = tmp_path / f".g.pt.sgl-{_host()}-{_dead_pid()}-q1w2e3r4.tmp"
    stale.write_bytes(b"half a graph")
    with pytest.warns(UserWarning, match="a temporary left by a killed process"):
        Graph.from_edge_index(torch.tensor([[0], [1]])).save(tmp_path / "g.pt")
    assert not stale.exists() and Graph.load(tmp_path / "g.pt").num_edges == 1


def test_pid_alive():
    assert pid_alive(os.getpid()) and not pid_alive(_dead_pid())


def test_a_killed_store_writer_is_cleaned_up_by_the_next_run(tmp_path):
    """A preprocess killed mid-write leaves its hidden folder; the next write of the store removes it."""
    path = tmp_path / "karate"
    script = textwrap.dedent(f"""
        import os, signal
        from sgl.samplers import StoreWriter
        writer = StoreWriter({str(path)!r}, num_nodes=1000, num_edges=10, num_features=256)
        writer.features[:] = 1.0
        writer.features.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".karate.")]
    assert len(left) == 1 and left[0].is_dir() and not path.exists()
    messages = []
    from sgl.samplers import open_store, write_store

    write_store(sgl.datasets.load("karate"), path, log=messages.append)
    assert [p.name for p in tmp_path.iterdir()] == ["karate"]
    assert len(messages) == 1 and left[0].name in messages[0] and "1.0 MiB" in messages[0]
    assert open_store(path).num_nodes == 34


def test_make_temp_dir_names_its_owner(tmp_path, umask):
    umask(0o027)
    folder = make_temp_dir(tmp_path / "cache")
    assert folder.name.startswith(f".cache.sgl-{_host()}-{os.getpid()}-") and folder.name.endswith(".tmp")
    assert mode(folder) == 0o750
