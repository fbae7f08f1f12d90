"""SearchConfig: the trials' TrainConfig inside, older flat records, any optuna sampler."""
import dataclasses

import optuna
import pytest

import sgl
from sgl.errors import ConfigError
from sgl.search import DesignSpace, SearchConfig, open_study, run_search, search_train_config
from sgl.tasks.config import TrainConfig

SMALL = dict(k=(1, 3), messages=["last", "mean"], num_layers=(1, 2), hidden=[16], post_steps=(0, 1),
             post_graph_ops=["adj"], post_messages=["last"])

#: ``SearchConfig.to_dict()`` as the flat config of earlier versions wrote it
OLD_FLAT = {"objectives": "accuracy,latency", "trials": 12, "timeout": None, "optimizer": "nsga2", "seed": 4,
            "storage": None, "study_name": "s", "n_jobs": 1, "lr": 0.05, "weight_decay": 0.0, "epochs": 30,
            "patience": None, "startup_trials": 3, "progress": False, "device": "cpu", "threads": 1}


@pytest.fixture(scope="module")
def graph():
    return sgl.datasets.load("synthetic", num_nodes=120, num_features=6, num_classes=3, num_val=30, num_test=30,
                             seed=0)


def _trials(graph, **kwargs):
    config = SearchConfig(objectives="accuracy,latency", trials=3, progress=False, threads=1,
                          train=search_train_config(epochs=3, patience=None), **kwargs)
    return run_search(graph, DesignSpace(**SMALL), config).trials


def test_contains_a_train_config_with_the_search_defaults():
    config = SearchConfig()
    assert isinstance(config.train, TrainConfig)
    assert (config.train.lr, config.train.weight_decay, config.train.epochs, config.train.patience,
            config.train.progress) == (0.01, 5e-4, 200, 50, False)
    assert config.train_config() == config.train
    assert SearchConfig(train=TrainConfig(epochs=3)).train_config().progress is False  # never a bar per trial
    # the flat keywords still work and land in train
    flat = SearchConfig(lr=0.05, weight_decay=0.0, epochs=30, patience=None, device="cpu")
    assert flat == SearchConfig(train=search_train_config(lr=0.05, weight_decay=0.0, epochs=30, patience=None,
                                                          device="cpu"))
    assert dataclasses.replace(flat, trials=3).train == flat.train
    assert dataclasses.replace(flat, train=search_train_config(epochs=7)).train.epochs == 7
    with pytest.raises(ConfigError, match="epochs must be a positive integer"):
        SearchConfig(epochs=0)
    with pytest.raises(ConfigError, match="train must be a sgl.tasks.TrainConfig"):
        SearchConfig(train=5)


def test_from_dict_reads_nested_and_older_flat_records():
    old = SearchConfig.from_dict(OLD_FLAT)
    assert old.train == search_train_config(lr=0.05, weight_decay=0.0, epochs=30, patience=None, device="cpu")
    assert (old.optimizer, old.seed, old.trials, old.startup_trials, old.progress) == ("nsga2", 4, 12, 3, False)
    assert old == SearchConfig(**OLD_FLAT)
    nested = old.to_dict()
    assert nested["train"]["epochs"] == 30 and "epochs" not in nested and nested["sampler"] is None
    assert SearchConfig.from_dict(nested) == old
    assert SearchConfig.from_dict({"train": {"epochs": 5}}).train == search_train_config(epochs=5)
    with pytest.raises(ConfigError, match="unknown search setting"):
        SearchConfig.from_dict({**OLD_FLAT, "epoch": 3})
    with pytest.raises(ConfigError, match="unknown training setting"):
        SearchConfig.from_dict({"train": {"epoch": 3}})


def test_sampler_objects_are_recorded_by_class_name():
    sampler = optuna.samplers.TPESampler(n_startup_trials=2, seed=0)
    config = SearchConfig(sampler=sampler)
    assert config.optimizer == "TPESampler" and config.sampler is sampler
    assert SearchConfig(optimizer=sampler) == config  # a sampler object as the optimizer
    record = config.to_dict()
    assert record["sampler"] == "TPESampler" and record["optimizer"] == "TPESampler"
    assert SearchConfig.from_dict(record, sampler=sampler) == config
    with pytest.raises(ConfigError, match="pass sampler="):
        SearchConfig.from_dict(record)
    with pytest.raises(ConfigError, match="TPESampler, got a RandomSampler"):
        SearchConfig.from_dict(record, sampler=optuna.samplers.RandomSampler())
    with pytest.raises(ConfigError, match="not both"):
        SearchConfig(optimizer="nsga2", sampler=sampler)
    with pytest.raises(ConfigError, match="BaseSampler"):
        SearchConfig(sampler="random")
    with pytest.raises(ConfigError, match="unknown optimizer"):
        SearchConfig(optimizer="openbox")


def test_a_random_sampler_object_reproduces_optimizer_random(graph):
    named = _trials(graph, optimizer="random", seed=7)
    custom = _trials(graph, sampler=optuna.samplers.RandomSampler(seed=7))
    other = _trials(graph, sampler=optuna.samplers.RandomSampler(seed=8))
    assert [t["design"] for t in custom] == [t["design"] for t in named]
    assert [t["design"] for t in other] != [t["design"] for t in named]


def test_the_given_sampler_draws_every_trial(graph):
    class Recording(optuna.samplers.RandomSampler):
        calls = 0

        def sample_independent(self, study, trial, name, distribution):
            Recording.calls += 1
            return super().sample_independent(study, trial, name, distribution)

    config = SearchConfig(objectives="accuracy,latency", trials=3, progress=False, threads=1, storage=None,
                          train=search_train_config(epochs=3, patience=None), sampler=Recording(seed=0))
    result = run_search(graph, DesignSpace(**SMALL), config, dataset="tiny")
    assert len(result.trials) == 3 and Recording.calls >= 3 * 4  # at least the always-active knobs per trial
    assert result.study.user_attrs["sgl_search"]["optimizer"] == "Recording"  # stored: serialisable


def test_stored_study_records_a_sampler_by_name(graph, tmp_path):
    db = str(tmp_path / "s.db")
    config = SearchConfig(objectives="accuracy,latency", trials=2, progress=False, threads=1, storage=db,
                          train=search_train_config(epochs=3, patience=None),
                          sampler=optuna.samplers.RandomSampler(seed=1))
    run_search(graph, DesignSpace(**SMALL), config, dataset="tiny")
    meta = open_study(db).user_attrs["sgl_search"]
    assert meta["optimizer"] == "RandomSampler"
    assert meta["train"] == {"lr": 0.01, "weight_decay": 5e-4, "epochs": 3, "patience": None}
