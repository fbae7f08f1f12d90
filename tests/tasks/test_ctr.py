"""CTR training: metrics against sklearn, training on real and synthetic data, the CLI."""
import json

import numpy as np
import pytest
import torch

from sgl.cli import main
from sgl.datasets.ctr import load_movielens_100k, make_synthetic_ctr
from sgl.embeddings import build_embedding
from sgl.errors import ConfigError
from sgl.models.ctr import build_ctr_model
from sgl.tasks.ctr import CTRTrainConfig, log_loss, roc_auc, run_ctr, train_ctr


def test_metrics_match_sklearn():
    from sklearn.metrics import log_loss as sk_log_loss
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    labels = rng.random(500) < 0.3
    scores = np.round(rng.random(500) + labels * 0.3, 2)  # rounding makes ties
    assert roc_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores))
    probs = rng.random(500)
    assert log_loss(probs, labels) == pytest.approx(sk_log_loss(labels, probs))
    assert np.isnan(roc_auc([0.1, 0.2], [1, 1]))


def _run(kind, ratio, data, seed=0, **options):
    train, val, test = data
    emb = build_embedding(kind, train.num_embeddings, 8, ratio=ratio, **options)
    model = build_ctr_model("deepfm", emb, train.num_fields, 8, train.num_dense, hidden=[32])
    return train_ctr(model, train, val, test, CTRTrainConfig(epochs=1, batch_size=256, lr=3e-3, progress=False), seed)


def test_cafe_at_50x_matches_a_shared_hash_table_and_beats_per_field_hashing():
    data = make_synthetic_ctr(30_000, [3000] * 4, num_dense=0, seed=0).split((0.8, 0.1, 0.1), seed=0)
    hashed = _run("hash", 50, data)
    per_field = _run("hash-field", 50, data, field_dims=data[0].field_dims)
    cafe = _run("cafe", 50, data, threshold=5.0)
    assert cafe["embedding_bytes"] == hashed["embedding_bytes"] == per_field["embedding_bytes"]
    assert cafe["test_auc"] > 0.6 and hashed["test_auc"] > 0.55
    assert cafe["test_auc"] >= hashed["test_auc"] - 0.005
    assert cafe["test_auc"] > per_field["test_auc"] + 0.01


def test_movielens_trains_above_chance(data_path):
    data = load_movielens_100k(data_path("ml-100k"), download=False)
    train, val, test = data.split(seed=0)
    result = _run("cafe+", 10, (train, val, test))
    assert result["test_auc"] > 0.6 and result["best_epoch"] == 1


def test_run_ctr_over_seeds_and_patience():
    data = make_synthetic_ctr(4_000, [300, 100], num_dense=2, seed=1).split()

    def factory(seed):
        return build_ctr_model("wdl", build_embedding("qr", 400, 4, ratio=4), 2, 4, 2, hidden=[8])

    record = run_ctr(factory, *data, seeds=[0, 1], config=CTRTrainConfig(epochs=3, patience=1, lr=0.01,
                                                                                  batch_size=128, progress=False))
    assert [r["seed"] for r in record["runs"]] == [0, 1]
    assert record["embedding_bytes"] == 100 * 4 * 4
    assert 0.5 < record["test_auc"]["mean"] <= 1


def test_cli_trains_and_writes_a_record(tmp_path, capsys):
    out = tmp_path / "record.json"
    code = main(["train", "--task", "ctr", "--model", "dcn", "--dataset", "synthetic-ctr", "--seeds", "1",
                 "--epochs", "1", "--hidden", "16", "--ctr-embedding", "cafe", "--ctr-compression", "10",
                 "--ctr-embed-dim", "8", "--ctr-embedding-option", "threshold=5",
                 "--dataset-option", "num_rows=3000", "--dataset-option", "ids_per_field=500",
                 "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "test AUC:" in text and "test log-loss:" in text
    record = json.loads(out.read_text())
    assert record["config"]["embedding"] == "cafe" and record["embedding_bytes"] == 400 * 8 * 4


@pytest.mark.parametrize("backend", [["--ctr-embedding", "hash-field"],
                                     ["--ctr-embedding", "cafe", "--ctr-embedding-option", "cold=field",
                                      "--ctr-embedding-option", "threshold=5"]])
def test_cli_per_field_layouts_get_the_field_sizes(backend, tmp_path, capsys):
    out = tmp_path / "record.json"
    code = main(["train", "--task", "ctr", "--model", "wdl", "--dataset", "synthetic-ctr", "--seeds", "1",
                 "--epochs", "1", "--hidden", "8", "--ctr-compression", "10", "--ctr-embed-dim", "8",
                 "--dataset-option", "num_rows=2000", "--dataset-option", "ids_per_field=300",
                 "--no-progress", "--out", str(out), *backend])
    assert code == 0, capsys.readouterr().err
    record = json.loads(out.read_text())
    assert "field_dims" not in record["config"]["embedding_options"]   # derived from the data, not recorded
    assert 0 < record["embedding_bytes"] <= 2400 * 8 * 4 // 10


@pytest.mark.parametrize("argv, message", [
    (["--ctr-compression", "0", "--ctr-embedding", "hash"], "compression ratio"),
    (["--ctr-compression", "-5", "--ctr-embedding", "cafe"], "compression ratio"),
    (["--ctr-embedding", "cafe", "--ctr-compression", "10000"], "smaller than the sketch"),
    (["--dataset", "cora"], "--task ctr needs one of"),
    (["--model", "sgc"], "unknown CTR model"),
])
def test_cli_bad_input_is_one_error_line(argv, message, capsys):
    code = main(["train", "--task", "ctr", "--seeds", "1", "--epochs", "1", "--no-progress",
                 "--dataset-option", "num_rows=200", "--dataset-option", "ids_per_field=100", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and message in err and "Traceback" not in err


def test_cli_reproduces_a_run_from_its_record(tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    common = ["train", "--task", "ctr", "--no-progress"]
    assert main(common + ["--model", "wdl", "--seeds", "1", "--epochs", "1", "--hidden", "8",
                          "--ctr-embedding", "qr", "--ctr-compression", "5", "--ctr-embed-dim", "4",
                          "--dataset-option", "num_rows=1500", "--dataset-option", "ids_per_field=200",
                          "--out", str(first)]) == 0
    assert main(common + ["--config", str(first), "--out", str(second)]) == 0
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert a["config"] == b["config"]
    assert a["test_auc"]["mean"] == pytest.approx(b["test_auc"]["mean"], abs=1e-12)


def _mapped(data, folder):
    """``data`` as memory maps on disk (what :func:`open_ctr_store` returns)."""
    from sgl.datasets.ctr import CTRData

    arrays = {}
    for name in ("dense", "sparse", "labels"):
        np.save(folder / f"{name}.npy", getattr(data, name).astype(np.int32) if name == "sparse"
                else getattr(data, name))
        arrays[name] = np.load(folder / f"{name}.npy", mmap_mode="r")
    return CTRData(arrays["dense"], arrays["sparse"], arrays["labels"], data.field_dims, data.field_names,
                   data.dense_names, check=False, order_seed=0)


def test_mapped_batches_visit_every_row_once_per_epoch(tmp_path):
    from sgl.tasks.ctr import _mapped_batch_count, mapped_batches

    data = make_synthetic_ctr(1000, [30, 20], num_dense=2, seed=0)
    mapped = _mapped(data, tmp_path)
    assert mapped.is_mapped
    gen = torch.Generator().manual_seed(0)
    batches = list(mapped_batches(mapped, 64, 200, gen))          # blocks of 256 rows = 4 batches
    assert len(batches) == _mapped_batch_count(1000, 64, 200) == 16
    assert [len(b[2]) for b in batches].count(64) == 15            # only the last block's tail is short
    ids = np.concatenate([b[1] for b in batches])
    expected = data.global_ids()
    # every row exactly once: the multiset of rows equals the data's
    seen = np.sort(ids.view([("", ids.dtype)] * ids.shape[1]).ravel())
    assert np.array_equal(seen, np.sort(expected.view([("", expected.dtype)] * 2).ravel()))
    first = np.concatenate([b[2] for b in batches])
    again = np.concatenate([b[2] for b in mapped_batches(mapped, 64, 200, torch.Generator().manual_seed(0))])
    np.testing.assert_array_equal(first, again)                    # seeded


def test_training_on_memory_maps_learns_and_evaluates_like_memory(tmp_path):
    from sgl.tasks.ctr import evaluate_ctr

    data = make_synthetic_ctr(6000, [200, 50, 30], num_dense=2, seed=1)
    train, val, test = data.split()
    folders = [tmp_path / n for n in ("train", "val", "test")]
    for f in folders:
        f.mkdir()
    m_train, m_val, m_test = (_mapped(d, f) for d, f in zip((train, val, test), folders))
    torch.manual_seed(0)
    model = build_ctr_model("wdl", build_embedding("full", data.num_embeddings, 8), 3, 8, 2, hidden=[16])
    result = train_ctr(model, m_train, m_val, m_test, CTRTrainConfig(epochs=4, lr=0.01, batch_size=128,
                                                                      block_rows=1000, progress=False))
    assert 0.6 < result["test_auc"] <= 1.0
    in_memory = evaluate_ctr(model, test, batch_size=500)
    on_disk = evaluate_ctr(model, m_test, batch_size=500)
    assert on_disk["auc"] == pytest.approx(in_memory["auc"], abs=1e-12)
    assert on_disk["logloss"] == pytest.approx(in_memory["logloss"], rel=1e-6)


def test_block_rows_must_be_positive():
    with pytest.raises(ConfigError, match="block_rows"):
        CTRTrainConfig(block_rows=0)
