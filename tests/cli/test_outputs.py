"""Issue 26 items 2 and 12: every output path is checked before any work; search results go beside the study.

Each check runs with the expensive step patched to fail loudly: a path error that reaches the
user only after the dataset was loaded (or the plan searched) fails the test with that step's
AssertionError instead of the expected one-line error.
"""
import os

import pytest

from sgl.cli import main
from sgl.cli.paths import check_output_path
from sgl.errors import ConfigError

WORK = "the command did work before checking its output path"


def _no_work(*args, **kwargs):
    raise AssertionError(WORK)


@pytest.fixture
def no_dataset_load(monkeypatch):
    import sgl.datasets

    monkeypatch.setattr(sgl.datasets, "load", _no_work)


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


# ---------------------------------------------------------------------------- the helper
def test_check_output_path_kinds(tmp_path, a_file, unwritable):
    assert check_output_path(tmp_path / "new" / "deeper" / "run.json", "file") == tmp_path / "new" / "deeper" / "run.json"
    assert not (tmp_path / "new").exists()              # a check creates nothing
    assert check_output_path(tmp_path, "dir") == tmp_path
    assert check_output_path(a_file, "file") == a_file  # an existing file is replaced atomically
    with pytest.raises(ConfigError, match="is a folder; give a file path"):
        check_output_path(tmp_path, "file")
    with pytest.raises(ConfigError, match="is a file; give a folder"):
        check_output_path(a_file, "dir")
    with pytest.raises(ConfigError, match="notes.txt is a file, so no folder can be made there"):
        check_output_path(a_file / "sub" / "run.json", "file")
    with pytest.raises(ConfigError, match="cannot write in folder"):
        check_output_path(os.path.join(unwritable, "run.json"), "file", "--out")
    with pytest.raises(ConfigError, match="cannot write in folder"):
        check_output_path(os.path.join(unwritable, "sub", "store"), "dir", "--out")
    assert [p.name for p in tmp_path.iterdir()] == [a_file.name]   # no probe file left behind


# ---------------------------------------------------------------------------- sgl train
@pytest.mark.parametrize("make_argv, message", [
    (lambda d, f, u: ["--out", str(d)], "--out"),
    (lambda d, f, u: ["--out", str(f / "run.json")], "is a file, so no folder"),
    (lambda d, f, u: ["--out", os.path.join(u, "run.json")], "cannot write in folder"),
    (lambda d, f, u: ["--cache-dir", str(f)], "--cache-dir"),
    (lambda d, f, u: ["--cache-dir", os.path.join(u, "cache")], "cannot write in folder"),
])
def test_train_checks_outputs_before_loading(make_argv, message, tmp_path, a_file, unwritable, capsys,
                                             no_dataset_load):
    err = _error(capsys, ["train", "--dataset", "karate", "--seeds", "1", "--no-progress",
                          *make_argv(tmp_path, a_file, unwritable)])
    assert message in err


def test_train_out_folder_message_names_the_flag(tmp_path, capsys, no_dataset_load):
    err = _error(capsys, ["train", "--dataset", "karate", "--out", str(tmp_path)])
    assert "--out" in err and "is a folder" in err and str(tmp_path / "run.json") in err


# ---------------------------------------------------------------------------- sgl plan
def test_plan_search_checks_out_before_searching(tmp_path, a_file, unwritable, capsys, monkeypatch):
    from sgl.systems.parallel import PlanSearcher

    monkeypatch.setattr(PlanSearcher, "search", _no_work)
    base = ["plan", "search", "--model", "llama-7b", "--devices", "8", "--memory", "40GiB", "--out"]
    assert "is a file, so no folder" in _error(capsys, base + [str(a_file / "plan.json")])
    assert "cannot write in folder" in _error(capsys, base + [os.path.join(unwritable, "plan.json")])
    assert "cannot write in folder" in _error(capsys, base + [os.path.join(unwritable, "plans")])


def test_plan_profile_checks_out_before_profiling(a_file, capsys, monkeypatch):
    import sgl.systems.runtime as runtime

    monkeypatch.setattr(runtime, "profile_to_dir", _no_work)
    err = _error(capsys, ["plan", "profile", "--out", str(a_file)])
    assert "--out" in err and "is a file; give a folder" in err


# ---------------------------------------------------------------------------- sgl preprocess
def test_preprocess_checks_out_before_reading(tmp_path, a_file, unwritable, capsys, no_dataset_load):
    base = ["preprocess", "--dataset", "karate", "--no-progress", "--out"]
    assert "is a file; give a folder" in _error(capsys, base + [str(a_file)])
    assert "cannot write in folder" in _error(capsys, base + [os.path.join(unwritable, "store")])
    existing = tmp_path / "store"
    existing.mkdir()
    assert "already exists; pass --overwrite" in _error(capsys, base + [str(existing)])


# ---------------------------------------------------------------------------- sgl search
def test_search_checks_storage_and_out_before_loading(tmp_path, a_file, unwritable, capsys, no_dataset_load):
    base = ["search", "--dataset", "karate", "--trials", "1", "--no-progress"]
    assert "is a folder; give a file path" in _error(capsys, base + ["--storage", str(tmp_path)])
    assert "cannot write in folder" in _error(capsys, base + ["--storage", os.path.join(unwritable, "s.db")])
    assert "does not exist; create it" in _error(capsys, base + ["--storage", str(tmp_path / "no" / "s.db")])
    assert "is a file; give a folder" in _error(capsys, base + ["--out", str(a_file)])
    # without --storage the results are all a search leaves: their folder is checked first too
    assert "cannot write in folder" in _error(capsys, base + ["--out", os.path.join(unwritable, "res")])
    assert "is a file; give a folder" in _error(capsys, base + ["--storage", str(tmp_path / "s.db"),
                                                                "--out", str(a_file)])
    assert not (tmp_path / "s.db").exists()


def test_search_show_checks_its_out_first(tmp_path, a_file, capsys):
    assert "is a file; give a folder" in _error(capsys, ["search", "show", str(tmp_path / "s.db"),
                                                          "--out", str(a_file)])
    assert "is a folder" in _error(capsys, ["search", "show", str(tmp_path)])


def test_search_results_go_beside_the_storage_file(tmp_path, capsys, monkeypatch):
    studies, elsewhere = tmp_path / "studies", tmp_path / "cwd"
    studies.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    argv = ["search", "--dataset", "karate", "--trials", "2", "--epochs", "2", "--no-progress", "--threads", "1",
            "--optimizer", "random", "--storage", str(studies / "s.db")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    folder = studies / "search-sgl-karate"
    assert {p.name for p in folder.iterdir()} >= {"front.csv", "front.json", "trials.csv"}
    assert list(elsewhere.iterdir()) == []                       # no litter in the current folder
    assert f"to {folder.resolve()}" in out                        # and it says where it wrote
    explicit = tmp_path / "results"
    assert main(argv + ["--out", str(explicit), "--study", "again"]) == 0
    assert f"to {explicit.resolve()}" in capsys.readouterr().out
    assert (explicit / "front.csv").is_file() and not (studies / "search-again").exists()
