"""Issue 26 item 10: CLI errors name CLI flags; --k 0; a file as --root; SQLite storage errors."""
import os

import pytest

from sgl.cli import main

TRAIN = ["train", "--dataset", "karate", "--seeds", "1", "--no-progress"]


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("argv, flag, python_name", [
    (TRAIN + ["--batch-size", "0"], "--batch-size must", "batch_size"),
    (TRAIN + ["--epochs", "0"], "--epochs must", None),
    (TRAIN + ["--patience", "-1"], "--patience must", None),
    (TRAIN + ["--weight-decay", "-1"], "--weight-decay", "weight_decay"),
    (TRAIN + ["--lr", "0"], "--lr > 0", None),
    (TRAIN + ["--hidden", "0"], "--hidden must", None),
    (TRAIN + ["--task", "link", "--link-val-ratio", "2"], "--link-val-ratio (val_ratio) must", None),
    (TRAIN + ["--rlu-stages", "0", "--model", "gamlp"], "--rlu-stages (stages) must", None),
    (TRAIN + ["--model", "gamlp", "--rlu-stages", "2", "--rlu-threshold", "2"], "--rlu-threshold", None),
    (["train", "--task", "ctr", "--ctr-embed-dim", "0", "--seeds", "1", "--no-progress"],
     "(--ctr-embed-dim (embed_dim))", None),
    (["search", "--dataset", "karate", "--objectives", "accuracy,memory", "--n-jobs", "2"], "--n-jobs", "n_jobs"),
    (["search", "--dataset", "karate", "--trials", "0"], "--trials must", None),
    (["plan", "search", "--devices", "8", "--granularity", "0"], "--granularity (granularity_mb) must", None),
    (["plan", "search", "--devices", "8", "--reserve", "2"], "--reserve (reserve_fraction) must", None),
    (["plan", "profile", "--out", "x", "--world-size", "3"], "--world-size", "world_size"),
])
def test_errors_name_the_flag_not_the_python_argument(argv, flag, python_name, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = _error(capsys, argv)
    assert flag in err
    if python_name:
        assert python_name not in err


def test_a_config_file_key_keeps_its_name(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("dataset: karate\nseeds: 1\ntrain: {batch_size: 0}\n")
    err = _error(capsys, ["train", "--config", str(config), "--no-progress"])
    assert "batch_size must" in err   # the user wrote batch_size, not --batch-size


@pytest.mark.parametrize("k", ["0", "-1"])
def test_k_below_one_says_positive(k, capsys):
    err = _error(capsys, TRAIN + ["--k", k])
    assert "--k must be a positive" in err and "non-negative" not in err


def test_a_file_given_as_root_says_so(tmp_path, capsys):
    file = tmp_path / "cora.csv"
    file.write_text("0,1\n")
    for argv in (["train", "--dataset", "cora", "--no-progress"], ["search", "--dataset", "cora"],
                 ["preprocess", "--dataset", "cora", "--out", str(tmp_path / "store")]):
        err = _error(capsys, argv + ["--root", str(file)])
        assert f"--root {file} is a file" in err and "download" not in err


def test_a_ctr_text_file_as_root_is_still_read(tmp_path, capsys):
    # the CTR loaders take the data file itself as --root: that is not an error
    file = tmp_path / "train.txt"
    file.write_text("")
    err = _error(capsys, ["train", "--task", "ctr", "--dataset", "criteo", "--root", str(file), "--seeds", "1",
                          "--no-progress"])
    assert "is a file; give the folder" not in err


def test_sqlite_storage_errors_do_not_mention_servers_or_drivers(tmp_path, unwritable, capsys, monkeypatch):
    import sgl.datasets

    monkeypatch.setattr(sgl.datasets, "load", lambda *a, **k: pytest.fail("loaded the dataset first"))
    (tmp_path / "folder.db").mkdir()
    base = ["search", "--dataset", "karate", "--trials", "1", "--no-progress", "--storage"]
    for storage in (str(tmp_path / "folder.db"), f"sqlite:///{tmp_path / 'folder.db'}",
                    os.path.join(unwritable, "s.db"), str(tmp_path / "missing" / "s.db")):
        err = _error(capsys, base + [storage]).lower()
        assert "server" not in err and "driver" not in err and "sqlalche" not in err, err
    for command in (["search", "show", str(tmp_path / "folder.db")],
                    ["search", "export", str(tmp_path / "folder.db"), "--trial", "0"]):
        err = _error(capsys, command).lower()
        assert "is a folder" in err and "server" not in err and "driver" not in err


def test_model_option_k_zero_says_positive(capsys):
    err = _error(capsys, TRAIN + ["--model-option", "k=0"])
    assert "k (propagation hops) must be positive" in err
