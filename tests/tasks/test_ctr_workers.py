"""HET / HET-GMP as a CTR embedding: the lock-step trainer, real processes vs the simulator, options, devices."""
import json

import pytest
import torch

from sgl.cli import main
from sgl.datasets.ctr import make_synthetic_ctr
from sgl.embeddings import ProtocolEmbedding, build_embedding
from sgl.errors import ConfigError, EmbeddingError
from sgl.models.ctr import build_ctr_model
from sgl.tasks import RunConfig, run
from sgl.tasks.ctr import CTRTrainConfig, evaluate_ctr
from sgl.tasks.ctr_workers import train_ctr_workers, worker_rounds


def _config(kind, **options):
    return {"task": "ctr", "model": "wdl", "seeds": 1, "embedding": kind, "embedding_options": options,
            "embed_dim": 8, "train": {"epochs": 2, "batch_size": 128, "lr": 0.01},
            "dataset_options": {"num_rows": 2000, "num_fields": 4, "ids_per_field": 200, "num_dense": 2},
            "model_config": {"hidden": [16]}}


def test_het_through_the_cli_on_two_processes_gives_the_simulators_auc(tmp_path, capsys):
    """The acceptance check of issue 37: `sgl train --task ctr --ctr-embedding het --procs 2` (two processes
    over sgl.comm) gives the in-process simulator's AUC with two workers, same seed."""
    common = ["train", "--task", "ctr", "--model", "wdl", "--ctr-embedding", "het", "--seeds", "1", "--epochs", "2",
              "--batch-size", "128", "--lr", "0.01", "--hidden", "16", "--ctr-embed-dim", "8", "--no-progress",
              "--dataset-option", "num_rows=2000", "--dataset-option", "num_fields=4",
              "--dataset-option", "ids_per_field=200", "--dataset-option", "num_dense=2",
              "--ctr-embedding-option", "lr=0.5", "--ctr-embedding-option", "bound=2",
              "--ctr-embedding-option", "cache=0.05"]
    assert main(common + ["--ctr-embedding-option", "workers=2", "--out", str(tmp_path / "one.json")]) == 0
    assert main(common + ["--procs", "2", "--out", str(tmp_path / "two.json")]) == 0
    assert "embedding traffic" in capsys.readouterr().out
    simulated, processes = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    for key in ("test_auc", "val_auc", "test_logloss", "traffic_bytes"):
        assert processes[key]["mean"] == simulated[key]["mean"], key
    assert processes["world_size"] == 2 and processes["workers"] == simulated["workers"] == 2


def test_hetgmp_on_two_processes_gives_the_simulators_auc():
    options = {"lr": 0.5, "bound": 2, "mirrors": 0.05}
    simulated = run(RunConfig.from_dict(_config("hetgmp", workers=2, **options)), progress=False)
    processes = run(RunConfig.from_dict({**_config("hetgmp", **options), "procs": 2, "distributed": {"timeout": 60}}),
                    progress=False)
    for key in ("test_auc", "val_auc", "test_logloss", "traffic_bytes"):
        assert processes[key]["mean"] == simulated[key]["mean"], key
    assert processes["runs"][0]["best_epoch"] == simulated["runs"][0]["best_epoch"]


def _data():
    return make_synthetic_ctr(3000, [200, 100], num_dense=2, seed=0).split()


@pytest.mark.parametrize("kind", ["het", "hetgmp"])
def test_the_best_epoch_is_restored_with_its_server_rows(kind):
    train, val, test = _data()
    torch.manual_seed(0)
    extra = {"train_ids": train.global_ids(), "batch_size": 64} if kind == "hetgmp" else {}
    emb = build_embedding(kind, 300, 4, workers=2, lr=0.3, **extra)
    model = build_ctr_model("wdl", emb, 2, 4, 2, hidden=[8])
    result = train_ctr_workers(model, train, val, test, CTRTrainConfig(epochs=3, batch_size=64, lr=0.01,
                                                                       progress=False))
    assert 0.55 < result["test_auc"] <= 1 and result["traffic_bytes"] > 0 and result["workers"] == 2
    # the record's validation AUC is the restored model's: dense parameters and server rows together
    assert evaluate_ctr(model, val)["auc"] == pytest.approx(result["val_auc"], abs=1e-12)


def test_rounds_split_rows_over_workers():
    g = torch.Generator().manual_seed(0)
    rounds = list(worker_rounds(13, 2, 3, None, g))
    rows = torch.cat([r for rs in rounds for r in rs])
    assert len(rounds) == 2 and rows.unique().numel() == 12    # a last single row cannot feed 2 workers
    owner = torch.tensor([0, 1] * 5)
    for per_worker in worker_rounds(10, 2, 2, owner, g):
        assert all(bool((owner[rows] == w).all()) for w, rows in enumerate(per_worker))


def test_options_and_errors_name_the_fix():
    with pytest.raises(ConfigError, match="valid: bound, cache, compress, init_std"):
        build_embedding("het", 100, 4, capacity=10)
    with pytest.raises(ConfigError, match="--ctr-compression does not apply"):
        build_embedding("het", 100, 4, ratio=10)
    with pytest.raises(ConfigError, match="workers must be a positive integer"):
        build_embedding("het", 100, 4, workers=0)
    with pytest.raises(ConfigError, match="cache must be a number of rows"):
        build_embedding("het", 100, 4, cache=1.5)
    with pytest.raises(ConfigError, match="pass train_ids"):
        build_embedding("hetgmp", 100, 4)
    with pytest.raises(EmbeddingError, match="het, hetgmp"):
        build_embedding("hetx", 100, 4)
    emb = build_embedding("het", 100, 4, cache=7, policy="lru", bound=3)
    assert emb.workers[0].config.cache_capacity == 7 and emb.workers[0].config.policy == "lru"
    with pytest.raises(ConfigError, match="trains in one process"):
        RunConfig.from_dict({"task": "ctr", "embedding": "hash", "compression": 10, "procs": 2})
    with pytest.raises(ConfigError, match="disagrees with procs=2"):
        RunConfig.from_dict({**_config("het", workers=3), "procs": 2})
    with pytest.raises(ConfigError, match="takes only timeout"):
        RunConfig.from_dict({**_config("het"), "procs": 2, "distributed": {"uneven": "drop"}})


def test_worker_state_follows_the_model_device_and_the_server_stays_on_the_host():
    emb = build_embedding("het", 50, 4, workers=2, cache=5)
    assert isinstance(emb, ProtocolEmbedding)
    emb.to("meta")
    for worker in emb.workers:
        cache = worker.worker.cache
        assert {getattr(cache, name).device.type for name in cache._TENSORS} == {"meta"}
    assert all(shard.weight.device.type == "cpu" for shard in emb._shards())
    gmp = build_embedding("hetgmp", 50, 4, workers=2, train_ids=torch.randint(0, 50, (40, 3)), mirrors=5)
    gmp.to("meta")
    assert gmp.workers[1].worker.value.device.type == "meta"
    assert gmp.workers[1].worker.shard.weight.device.type == "cpu"
