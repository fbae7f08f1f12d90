"""sgl.tasks.RunConfig and run(): typed, serialisable, replayable; options that do not apply are errors."""
import json

import pytest

from sgl.errors import ConfigError
from sgl.tasks import RunConfig, TrainConfig, run


def test_config_file_keys_that_do_not_apply_are_errors():
    with pytest.raises(ConfigError, match="rlu"):
        RunConfig.from_dict({"task": "ctr", "rlu": {"stages": [3]}})
    with pytest.raises(ConfigError, match="structure"):
        RunConfig.from_dict({"sampler": "neighbor", "structure": "knn"})
    with pytest.raises(ConfigError, match="train"):
        RunConfig.from_dict({"task": "link", "train": {"lr": 0.1}})
    with pytest.raises(ConfigError, match="unknown key"):
        RunConfig.from_dict({"modle": "sgc"})
    with pytest.raises(ConfigError, match="task option"):
        RunConfig.from_dict({"task": "cluster", "task_options": {"folds": 3}})


def test_run_config_is_typed_and_round_trips():
    config = RunConfig.from_dict({"model": "gamlp", "dataset": "karate", "seeds": 3, "train": {"epochs": 7},
                                  "rlu": {"stages": [3, 2]}, "structure": "knn", "structure_options": {"k": 5}})
    assert isinstance(config.train, TrainConfig) and config.train.epochs == 7
    assert config.train.lr == 0.01          # GAMLP's own default under the override
    assert config.rlu.stages == [3, 2] and config.structure.options == {"k": 5} and config.seeds == [0, 1, 2]
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    ctr = RunConfig.from_dict({"task": "ctr", "compression": 10, "embedding": "hash"})
    assert ctr.ctr.compression == 10.0 and ctr.train.batch_size == 1024       # the CTR ratio is a typed field
    assert RunConfig.from_dict(ctr.to_dict()) == ctr


def test_run_returns_a_record_that_replays_exactly():
    config = RunConfig.from_dict({"dataset": "karate", "seeds": 2, "model_config": {"k": 2},
                                  "train": {"epochs": 15}})
    first = run(config, progress=False)
    second = run(RunConfig.from_dict(first["config"]), progress=False)
    assert first["config"] == second["config"]
    assert [r["test_acc"] for r in first["runs"]] == [r["test_acc"] for r in second["runs"]]


# ---------------------------------------------------------------------------- issue 26 items 8 and 9
def test_every_record_carries_versions_and_a_content_hash(tmp_path):
    import torch

    import sgl
    from sgl.tasks.provenance import dataset_hash, store_hash

    karate = sgl.datasets.load("karate")
    records = [
        run(RunConfig.from_dict({"dataset": "karate", "seeds": 1, "train": {"epochs": 2}}), progress=False),
        run(RunConfig.from_dict({"task": "cluster", "model": "gae", "dataset": "karate", "seeds": 1,
                                 "model_config": {"epochs": 2}, "task_options": {"n_init": 1}}), progress=False),
        run(RunConfig.from_dict({"model": "gae", "dataset": "karate", "seeds": 1, "model_config": {"epochs": 2},
                                 "task_options": {"probe_epochs": 5}}), progress=False),
    ]
    for record in records:
        assert record["sgl_version"] == sgl.__version__ and record["torch_version"] == torch.__version__
        assert record["dataset_hash"] == dataset_hash(karate)
    ctr = run(RunConfig.from_dict({"task": "ctr", "seeds": 1, "dataset_options": {"num_rows": 300},
                                   "train": {"epochs": 1}}), progress=False)
    data = sgl.datasets.load("synthetic-ctr", num_rows=300)
    assert ctr["dataset_hash"] == dataset_hash(data)
    # a store is hashed from the checksums of its manifest (no pass over its arrays)
    from sgl.samplers.store import write_store

    store = write_store(karate, tmp_path / "store")
    record = run(RunConfig.from_dict({"dataset": f"store:{store}", "sampler": {"name": "lru", "memory_budget": "1MB",
                                                                              "fanouts": [2, 2]},
                                      "seeds": 1, "train": {"epochs": 1, "batch_size": 8}}), progress=False)
    assert record["dataset_hash"] == store_hash(store) and record["sgl_version"] == sgl.__version__


def test_the_hash_sees_features_labels_and_splits():
    import sgl
    from sgl.tasks.provenance import dataset_hash

    base = dataset_hash(sgl.datasets.load("karate"))
    for change in ("x", "y", "train_mask"):
        graph = sgl.datasets.load("karate")
        value = getattr(graph, change).clone()
        if change == "x":
            value[0, 0] += 1.0
        elif change == "y":
            value[0] = (value[0] + 1) % graph.num_classes
        else:
            value[0] = ~value[0]
        setattr(graph, change, value)
        assert dataset_hash(graph) != base, change
    other = sgl.datasets.load("synthetic", num_nodes=50, num_features=4, seed=1)
    assert dataset_hash(other) != base


def test_a_self_supervised_model_under_task_node_is_linearly_probed():
    config = RunConfig.from_dict({"model": "gae", "dataset": "karate", "seeds": 2, "model_config": {"epochs": 3},
                                  "task_options": {"probe_epochs": 20}})
    assert config.self_supervised and config.train is None
    assert config.task_options == {"probe_epochs": 20, "probe_lr": 0.01, "probe_weight_decay": 1e-4,
                                   "probe_standardize": False}   # the official protocol's defaults
    first = run(config, progress=False)
    assert len(first["runs"]) == 2 and 0.0 <= first["test_acc"]["mean"] <= 1.0
    assert {"val_acc", "train_acc", "epoch", "fit_time_s", "final_loss"} <= set(first["runs"][0])
    second = run(RunConfig.from_dict(first["config"]), progress=False)
    assert [r["test_acc"] for r in first["runs"]] == [r["test_acc"] for r in second["runs"]]
    assert [r["final_loss"] for r in first["runs"]] == [r["final_loss"] for r in second["runs"]]


@pytest.mark.parametrize("data, match", [
    ({"model": "gcmae", "train": {"lr": 0.1}}, "train"),
    ({"model": "gcmae", "rlu": {"stages": [2]}}, "rlu"),
    ({"model": "dgi", "sampler": "neighbor"}, "sampler"),
    ({"model": "grace", "structure": "knn"}, "structure"),
    ({"model": "gae", "task_options": {"n_init": 3}}, "linear probe takes"),
    ({"model": "gae", "task_options": {"probe_epochs": 0}}, "probe_epochs"),
    ({"model": "gae", "task_options": {"probe_standardize": "yes"}}, "probe_standardize"),
    ({"model": "sgc", "task_options": {"probe_epochs": 3}}, "task option"),
])
def test_probe_configs_that_do_not_apply_are_errors(data, match):
    with pytest.raises(ConfigError, match=match):
        RunConfig.from_dict({"dataset": "karate", **data})


# ---------------------------------------------------------------------------- issue 40 §1: CTR without dense features
def test_the_hash_handles_empty_arrays():
    """MovieLens-100k has 0 dense features: its ``dense`` array is ``[n, 0]`` (this crashed in
    ``memoryview.cast`` after training had finished)."""
    import numpy as np

    from sgl.datasets.ctr import make_synthetic_ctr
    from sgl.tasks.provenance import dataset_hash

    data = make_synthetic_ctr(200, [10, 20], num_dense=0, seed=0)
    assert data.dense.shape == (200, 0)
    digest = dataset_hash(data)
    assert digest == dataset_hash(make_synthetic_ctr(200, [10, 20], num_dense=0, seed=0))
    # an empty array still counts by its shape: [200, 0] and [0, 0] hash apart
    other = make_synthetic_ctr(200, [10, 20], num_dense=0, seed=0)
    other.dense = np.zeros((0, 0), dtype=data.dense.dtype)
    assert dataset_hash(other) != digest


def test_a_ctr_run_without_dense_features_returns_its_record():
    record = run(RunConfig.from_dict({"task": "ctr", "model": "deepfm", "seeds": 1,
                                      "dataset_options": {"num_rows": 300, "num_dense": 0},
                                      "train": {"epochs": 1}}), progress=False)
    assert len(record["dataset_hash"]) == 32 and "test_auc" in record


def test_a_failing_hash_keeps_the_finished_run(monkeypatch):
    import warnings

    import sgl.tasks.provenance as provenance

    def broken(data):
        raise TypeError("memoryview: cannot cast view with zeros in shape or strides")

    monkeypatch.setattr(provenance, "dataset_hash", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = run(RunConfig.from_dict({"dataset": "karate", "seeds": 1, "train": {"epochs": 2}}), progress=False)
    assert record["dataset_hash"] is None and "memoryview" in record["provenance_error"]
    assert len(record["runs"]) == 1 and "test_acc" in record["runs"][0]
    assert any("results are kept" in str(w.message) for w in caught)
