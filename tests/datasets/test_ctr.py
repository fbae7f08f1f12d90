"""CTR data: real samples (Criteo CSV + HET arrays, Avazu, MovieLens-100k), synthetic, bad rows."""
import numpy as np
import pytest

import sgl
from sgl.datasets.ctr import (CRITEO_FORMAT, CTRData, build_vocabulary, iter_ctr_chunks, load_avazu,
                              load_criteo, load_movielens_100k, make_synthetic_ctr, read_ctr_file,
                              transform_dense)
from sgl.errors import ConfigError, DatasetError


def _criteo_line(label="1", dense=None, cats=None, sep="\t"):
    dense = dense if dense is not None else [str(i) for i in range(13)]
    cats = cats if cats is not None else [f"c{i}" for i in range(26)]
    return sep.join([label] + dense + cats)


def test_criteo_csv_sample(data_path):
    path = data_path("criteo_deepctr_sample", "criteo_sample.txt")
    data = load_criteo(path)
    assert len(data) == 200 and data.dense.shape == (200, 13) and data.sparse.shape == (200, 26)
    assert data.field_names[0] == "C1" and data.dense_names[-1] == "I13"
    # first row: I2 = 3 -> log(4); I1 missing -> 0; the label column is 0
    assert data.dense[0, 1] == pytest.approx(np.log(4.0)) and data.dense[0, 0] == 0.0
    assert data.labels[0] == 0.0 and set(np.unique(data.labels)) <= {0.0, 1.0}
    # ids are most-frequent-first per field: id 1 is the commonest value of C1 in the file
    import csv
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    values, counts = np.unique([r["C1"] for r in rows], return_counts=True)
    top = values[np.argmax(counts)]
    assert (data.sparse[:, 0] == 1).sum() == counts.max()
    assert all(data.sparse[i, 0] == 1 for i, r in enumerate(rows) if r["C1"] == top)
    # missing categoricals (C19 empty in row 0) -> unknown bucket 0
    assert rows[0]["C19"] == "" and data.sparse[0, 18] == 0
    assert data.global_ids().max() < data.num_embeddings


def test_criteo_streaming_chunks_equal_one_pass(data_path):
    path = data_path("criteo_deepctr_sample", "criteo_sample.txt")
    whole = read_ctr_file(path, chunk_rows=10_000)
    small = read_ctr_file(path, chunk_rows=7)
    np.testing.assert_array_equal(whole.sparse, small.sparse)
    np.testing.assert_array_equal(whole.dense, small.dense)
    vocab = build_vocabulary(path, chunk_rows=13)
    chunks = list(iter_ctr_chunks(path, vocab, chunk_rows=64))
    assert [len(c) for c in chunks] == [64, 64, 64, 8]


def test_criteo_het_arrays(data_path):
    folder = data_path("criteo_het_sampled")
    data = load_criteo(folder)
    raw = np.load(folder / "sampled_sparse_feats.npy")
    assert len(data) == 8192 and data.num_fields == 26
    for f in (0, 5, 25):  # a per-field bijection of the global ids onto 1..n_f
        assert data.field_dims[f] == len(np.unique(raw[:, f])) + 1
        assert len(np.unique(np.stack([raw[:, f], data.sparse[:, f]]), axis=1)[0]) == len(np.unique(raw[:, f]))
    assert data.labels.mean() == pytest.approx(0.253, abs=0.001)


def test_avazu_sample(data_path):
    data = load_avazu(data_path("avazu_deepctr_sample", "avazu_sample.txt"))
    assert len(data) == 100 and data.num_fields == 22 and data.num_dense == 0
    assert data.field_names[0] == "hour" and data.labels.mean() == pytest.approx(0.2)


def test_movielens_100k(data_path):
    data = load_movielens_100k(data_path("ml-100k"), download=False)
    assert len(data) == 100_000  # the 3 junk rows of user 0 are dropped
    assert data.field_names == ["user", "item", "age", "gender", "occupation", "genre"]
    assert data.field_dims[:2] == [944, 1683] and data.field_dims[3] == 3
    ratings = np.loadtxt(data_path("ml-100k", "u.data"), usecols=(0, 2), dtype=np.int64)
    ratings = ratings[ratings[:, 0] != 0]
    assert data.labels.sum() == (ratings[:, 1] >= 4).sum()


def test_registry_names(data_path):
    names = {name: task for name, _, task in sgl.datasets.list_datasets()}
    for name in ("criteo", "avazu", "movielens-100k", "synthetic-ctr"):
        assert names[name] == "ctr"
    data = sgl.datasets.load("criteo", root=data_path("criteo_het_sampled"))
    assert isinstance(data, CTRData)
    assert len(sgl.datasets.load("synthetic-ctr", num_rows=50, num_fields=3, ids_per_field=20)) == 50


def test_synthetic_is_seeded_zipf_and_learnable():
    a = make_synthetic_ctr(20_000, [1000, 300], num_dense=3, seed=4)
    b = make_synthetic_ctr(20_000, [1000, 300], num_dense=3, seed=4)
    c = make_synthetic_ctr(20_000, [1000, 300], num_dense=3, seed=5)
    np.testing.assert_array_equal(a.sparse, b.sparse)
    assert not np.array_equal(a.sparse, c.sparse)
    assert a.sparse.min() >= 1  # 0 is the (unused) unknown bucket
    counts = np.sort(np.bincount(a.sparse[:, 0], minlength=1000))[::-1]
    # Zipf(1.1): the most frequent id is far above the median one
    assert counts[0] > 50 * max(counts[500], 1)
    # the planted model: per-id empirical CTR of frequent ids spreads far beyond binomial noise
    ids = np.argsort(-np.bincount(a.sparse[:, 0]))[:10]
    from scipy.stats import chi2_contingency
    table = [[a.labels[a.sparse[:, 0] == i].sum(), (1 - a.labels[a.sparse[:, 0] == i]).sum()] for i in ids]
    assert chi2_contingency(table).pvalue < 1e-6  # CTR depends on the id: not homogeneous noise


def test_split_sizes_and_disjoint():
    data = make_synthetic_ctr(1001, [30], num_dense=0)
    train, val, test = data.split((0.6, 0.2, 0.2), seed=1)
    assert (len(train), len(val), len(test)) == (600, 200, 201)
    with pytest.raises(ConfigError):
        data.split((0.5, 0.2, 0.2))


def test_transform_dense():
    out = transform_dense(np.array([[0.0, 1.0, np.nan, -1.0, -3.0]]))
    np.testing.assert_allclose(out, [[0.0, np.log(2.0), 0.0, -1.0, -3.0]], rtol=1e-6)


@pytest.mark.parametrize("sep", ["\t", ","])
def test_wrong_column_count_names_the_line(tmp_path, sep):
    path = tmp_path / "bad.txt"
    good = _criteo_line(sep=sep)
    path.write_text("\n".join([good, good, good + sep + "extra"]) + "\n")
    with pytest.raises(DatasetError, match=r"line 3: 41 columns, expected 40"):
        read_ctr_file(path)


def test_non_numeric_dense_names_line_and_column(tmp_path):
    path = tmp_path / "bad.txt"
    dense = [str(i) for i in range(13)]
    dense[4] = "abc"
    path.write_text(_criteo_line() + "\n" + _criteo_line(dense=dense) + "\n")
    with pytest.raises(DatasetError, match=r"line 2, column 6: dense value 'abc' is not a number"):
        read_ctr_file(path, chunk_rows=1)


def test_bad_label_and_empty_file(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text(_criteo_line(label="2") + "\n")
    with pytest.raises(DatasetError, match="not 0 or 1"):
        read_ctr_file(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DatasetError, match="empty"):
        read_ctr_file(empty)


def test_min_count_maps_rare_values_to_unknown(tmp_path):
    path = tmp_path / "tiny.txt"
    cats_a = [f"a{i}" for i in range(26)]
    cats_b = [f"b{i}" for i in range(26)]
    path.write_text("\n".join([_criteo_line(cats=cats_a)] * 2 + [_criteo_line(cats=cats_b)]) + "\n")
    data = read_ctr_file(path, CRITEO_FORMAT, min_count=2)
    assert data.sparse[:, 0].tolist() == [1, 1, 0] and data.field_dims[0] == 2


def test_missing_root_and_bad_ids(tmp_path):
    with pytest.raises(DatasetError, match="cannot be downloaded automatically"):
        load_criteo(tmp_path)
    with pytest.raises(DatasetError, match="ids must be in"):
        CTRData(np.zeros((2, 0)), np.array([[0], [5]]), np.zeros(2), [5], ["f"])
    with pytest.raises(DatasetError, match="ids must be in"):
        CTRData(np.zeros((2, 0)), np.array([[0], [-1]]), np.zeros(2), [5], ["f"])
    with pytest.raises(ConfigError):
        make_synthetic_ctr(10, [1])


def test_movielens_downloads_when_absent(data_path, tmp_path, monkeypatch):
    import zipfile

    import sgl.datasets.ctr.movielens as movielens

    archive = tmp_path / "ml-100k.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name in ("u.data", "u.user", "u.item"):
            zf.write(data_path("ml-100k", name), f"ml-100k/{name}")
    monkeypatch.setattr(movielens, "_ML100K_URL", archive.as_uri())
    root = tmp_path / "data"
    data = load_movielens_100k(root)
    assert len(data) == 100_000 and (root / "ml-100k" / "raw" / "u.data").is_file()
    with pytest.raises(DatasetError, match="not found"):
        load_movielens_100k(tmp_path / "elsewhere", download=False)
