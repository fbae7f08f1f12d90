"""On-disk CTR stores: same rows as the in-memory reader, shuffled, reused, atomic, mapped splits."""
import json
import os

import numpy as np
import pytest

from sgl.datasets.ctr import AVAZU_FORMAT, CRITEO_FORMAT, load_avazu, load_criteo, make_synthetic_ctr, read_ctr_file
from sgl.datasets.ctr_store import build_ctr_store, ctr_store_path, open_ctr_store
from sgl.errors import ConfigError, DatasetError


def write_criteo(path, rows=2000, seed=0):
    """A Criteo-format TSV whose categoricals follow the synthetic generator's planted model."""
    data = make_synthetic_ctr(rows, [60] * 26, num_dense=13, seed=seed)
    with open(path, "w") as handle:
        for i in range(rows):
            dense = [str(int(v * 10)) if (i + j) % 7 else "" for j, v in enumerate(data.dense[i])]
            cats = [f"{f:02d}{v:06x}" if v else "" for f, v in enumerate(data.sparse[i])]
            handle.write("\t".join([str(int(data.labels[i]))] + dense + cats) + "\n")
    return path


def assert_same_rows(store, memory):
    """Row r of the store is line source_row[r] of the file, encoded identically."""
    order = np.asarray(store.source_row)
    assert sorted(order.tolist()) == list(range(len(memory)))
    np.testing.assert_array_equal(np.asarray(store.sparse), memory.sparse[order])
    np.testing.assert_array_equal(np.asarray(store.dense), memory.dense[order])
    np.testing.assert_array_equal(np.asarray(store.labels), memory.labels[order])
    assert store.field_dims == memory.field_dims and store.field_names == memory.field_names
    assert store.dense_names == memory.dense_names


@pytest.mark.parametrize("memory_bytes", [1 << 30, 40_000])
def test_store_holds_the_files_rows_in_a_seeded_order(tmp_path, memory_bytes):
    path = write_criteo(tmp_path / "train.txt")
    folder = build_ctr_store(path, fmt=CRITEO_FORMAT, memory_bytes=memory_bytes, chunk_rows=300, progress=False)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["buckets"] == (1 if memory_bytes > 1 << 20 else -(-path.stat().st_size // memory_bytes))
    store = open_ctr_store(folder)
    assert store.is_mapped and store.sparse.dtype == np.int32 and store.order_seed == 0
    assert_same_rows(store, read_ctr_file(path, chunk_rows=300, progress=False))
    assert not np.array_equal(np.asarray(store.source_row), np.arange(len(store)))   # shuffled
    assert folder.parent == path.parent / "processed" and not list(folder.glob("buckets*"))


def test_store_is_deterministic_and_seed_dependent(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=500)
    a = open_ctr_store(build_ctr_store(path, tmp_path / "a", memory_bytes=30_000, progress=False))
    b = open_ctr_store(build_ctr_store(path, tmp_path / "b", memory_bytes=30_000, progress=False))
    c = open_ctr_store(build_ctr_store(path, tmp_path / "c", memory_bytes=30_000, shuffle_seed=1, progress=False))
    np.testing.assert_array_equal(a.source_row, b.source_row)
    assert not np.array_equal(a.source_row, c.source_row) and c.order_seed == 1


def test_real_samples_through_the_store(data_path, tmp_path):
    for loader, fmt, parts in ((load_criteo, CRITEO_FORMAT, ("criteo_deepctr_sample", "criteo_sample.txt")),
                               (load_avazu, AVAZU_FORMAT, ("avazu_deepctr_sample", "avazu_sample.txt"))):
        path = data_path(*parts)
        stored = loader(path, store=tmp_path / fmt.header_first)
        assert stored.is_mapped
        assert_same_rows(stored, read_ctr_file(path, fmt, progress=False))
        assert not loader(path, store=False).is_mapped           # in memory on request
        assert not loader(path).is_mapped                        # small files: in memory by default


def test_store_is_reused_and_rebuilt_when_the_file_changes(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=300)
    first = build_ctr_store(path, tmp_path / "s", progress=False)
    stamp = (first / "sparse.npy").stat().st_mtime_ns
    assert build_ctr_store(path, tmp_path / "s", progress=False) == first
    assert (first / "sparse.npy").stat().st_mtime_ns == stamp     # not written again
    with open(path, "a") as handle:                                # the source grows by one row
        handle.write("\t".join(["1"] + ["1"] * 13 + ["new"] * 26) + "\n")
    second = build_ctr_store(path, tmp_path / "s", progress=False)
    assert second != first and len(open_ctr_store(second)) == 301
    assert ctr_store_path(path, tmp_path / "s") == second


def test_malformed_row_leaves_no_store(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=200)
    with open(path, "a") as handle:
        handle.write("1\t2\t3\n")
    with pytest.raises(DatasetError, match="line 201: 3 columns"):
        build_ctr_store(path, tmp_path / "s", chunk_rows=50, progress=False)
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_damaged_store_names_the_folder_to_delete(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=300)
    folder = build_ctr_store(path, tmp_path / "s", progress=False)
    sparse = folder / "sparse.npy"
    with open(sparse, "r+b") as handle:
        handle.truncate(sparse.stat().st_size - 100)
    with pytest.raises(DatasetError, match=f"delete {folder}"):
        open_ctr_store(folder)
    with pytest.raises(DatasetError, match="delete"):
        build_ctr_store(path, tmp_path / "s", progress=False)      # not silently reused
    (folder / "meta.json").write_text("{")
    with pytest.raises(DatasetError, match="meta.json"):
        open_ctr_store(folder)


def test_bad_store_arguments(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=20)
    with pytest.raises(ConfigError, match="memory_bytes"):
        build_ctr_store(path, memory_bytes=0)
    with pytest.raises(ConfigError, match="shuffle_seed"):
        build_ctr_store(path, shuffle_seed=-1)
    with pytest.raises(DatasetError, match="does not exist"):
        build_ctr_store(tmp_path / "missing.txt")
    with pytest.raises(ConfigError, match="store must be"):
        load_criteo(path, store=3)
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(DatasetError):
        build_ctr_store(tmp_path / "empty.txt", progress=False)


def test_mapped_split_cuts_ranges_without_copying(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=1000)
    data = load_criteo(path, store=True)
    train, val, test = data.split((0.8, 0.1, 0.1), seed=0)
    assert (len(train), len(val), len(test)) == (800, 100, 100)
    assert train.is_mapped and val.is_mapped and test.is_mapped and train.order_seed == 0
    assert np.shares_memory(train.sparse, data.sparse)
    rows = np.concatenate([train.source_row, val.source_row, test.source_row])
    assert sorted(rows.tolist()) == list(range(1000))
    with pytest.raises(ConfigError, match="shuffle_seed=3"):
        data.split((0.8, 0.1, 0.1), seed=3)
    copied = data.subset(np.arange(10))                            # index arrays copy into memory
    assert not copied.is_mapped and copied.order_seed is None
    dense, ids, labels = data.batch(slice(5, 9))
    np.testing.assert_array_equal(ids, data.global_ids()[5:9])
    assert ids.dtype == np.int64 and dense.shape == (4, 13) and labels.shape == (4,)


def test_registry_and_cli_pass_the_store_option(tmp_path, capsys):
    from sgl.cli import main

    path = write_criteo(tmp_path / "train.txt", rows=600)
    code = main(["train", "--task", "ctr", "--model", "wdl", "--dataset", "criteo", "--root", str(path),
                 "--dataset-option", f"store={tmp_path / 'st'}", "--seeds", "1", "--epochs", "1",
                 "--hidden", "8", "--batch-size", "64", "--no-progress"])
    assert code == 0 and "test AUC:" in capsys.readouterr().out
    assert len(list((tmp_path / "st").iterdir())) == 1


def test_store_files_are_not_left_open(tmp_path):
    path = write_criteo(tmp_path / "train.txt", rows=100)
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    build_ctr_store(path, tmp_path / "s", memory_bytes=5_000, progress=False)
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


def test_large_files_get_a_store_by_default(tmp_path, monkeypatch):
    import sgl.datasets.ctr.loaders as loaders

    path = write_criteo(tmp_path / "train.txt", rows=100)
    assert not load_criteo(path).is_mapped
    monkeypatch.setattr(loaders, "AUTO_STORE_BYTES", path.stat().st_size - 1)   # "larger than 2 GiB"
    data = load_criteo(path, progress=False)
    assert data.is_mapped and len(data) == 100
    assert len(list((tmp_path / "processed").iterdir())) == 1
    assert not load_criteo(path, store="false").is_mapped                  # the CLI's spelling


def test_preprocess_cli_builds_the_store_train_reuses(tmp_path, capsys):
    from sgl.cli import main

    path = write_criteo(tmp_path / "train.txt", rows=400)
    out = tmp_path / "stores"
    assert main(["preprocess", "--dataset", "criteo", "--root", str(path), "--out", str(out), "--no-progress"]) == 0
    assert "400 rows, 26 fields" in capsys.readouterr().out
    folder, = out.iterdir()
    stamp = (folder / "sparse.npy").stat().st_mtime_ns
    assert main(["train", "--task", "ctr", "--model", "wdl", "--dataset", "criteo", "--root", str(path),
                 "--dataset-option", f"store={out}", "--seeds", "1", "--epochs", "1", "--hidden", "8",
                 "--no-progress"]) == 0
    assert (folder / "sparse.npy").stat().st_mtime_ns == stamp and len(list(out.iterdir())) == 1


def test_preprocess_cli_rejects_ctr_data_without_text(data_path, tmp_path, capsys):
    from sgl.cli import main

    assert main(["preprocess", "--dataset", "criteo", "--root", str(data_path("criteo_het_sampled")),
                 "--out", str(tmp_path / "s"), "--no-progress"]) != 0
    assert "holds arrays, not a text file" in capsys.readouterr().err
    assert main(["preprocess", "--dataset", "synthetic-ctr", "--out", str(tmp_path / "s"), "--no-progress"]) != 0
    assert "criteo and avazu" in capsys.readouterr().err
