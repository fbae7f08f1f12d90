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
