import json

import pytest
import torch

import sgl
from sgl.errors import ConfigError, FeatureError
from sgl.models import SGC
from sgl.tasks import TrainConfig, Trainer, run_node_classification


@pytest.fixture
def karate():
    return sgl.datasets.load("karate")


def test_fit_is_deterministic_under_a_seed(karate):
    model = SGC(karate.num_features, karate.num_classes)
    features = model.precompute(karate)
    trainer = Trainer(TrainConfig(epochs=30, progress=False))
    a = trainer.fit(SGC(karate.num_features, karate.num_classes), features, karate, seed=3)
    b = trainer.fit(SGC(karate.num_features, karate.num_classes), features, karate, seed=3)
    for key in ("train_acc", "val_acc", "test_acc", "best_epoch"):
        assert a[key] == b[key]


def test_model_is_selected_on_validation_not_test(karate, monkeypatch):
    """The returned model is the one from the best *validation* epoch."""
    features = SGC(karate.num_features, 2).precompute(karate)
    seen = []
    import sgl.tasks.node_classification as nc

    real = nc.accuracy

    def spy(pred, target):
        seen.append(target.numel())
        return real(pred, target)

    monkeypatch.setattr(nc, "accuracy", spy)
    result = Trainer(TrainConfig(epochs=10, progress=False)).fit(SGC(karate.num_features, 2), features, karate)
    n_val = int(karate.val_mask.sum())
    n_test = int(karate.test_mask.sum())
    # every per-epoch evaluation is on validation nodes; test is scored once, at the end
    assert seen[:10] == [n_val] * 10 and seen.count(n_test) == 1
    assert 0 <= result["best_epoch"] < 10


def test_mini_batches_and_patience(karate):
    features = SGC(karate.num_features, 2).precompute(karate)
    result = Trainer(TrainConfig(epochs=200, batch_size=3, patience=5, progress=False)).fit(
        SGC(karate.num_features, 2), features, karate)
    assert result["epochs_run"] < 200
    assert result["epochs_run"] - result["best_epoch"] - 1 == 5


def test_run_record_is_json_serializable(karate):
    record = run_node_classification(lambda: SGC(karate.num_features, 2), karate, seeds=[0, 1],
                                     train_config=TrainConfig(epochs=5, progress=False))
    text = json.dumps(record)
    assert set(json.loads(text)) >= {"runs", "precompute_time_s", "train_time_s", "peak_rss_mb", "test_acc"}
    assert len(record["runs"]) == 2
    # the summary is the mean and the sample std of the seeds' own accuracies
    accs = [r["test_acc"] for r in record["runs"]]
    assert record["test_acc"]["mean"] == pytest.approx(sum(accs) / 2)
    assert record["test_acc"]["std"] == pytest.approx(abs(accs[0] - accs[1]) / 2 ** 0.5)


def test_bad_inputs(karate):
    features = SGC(karate.num_features, 2).precompute(karate)
    trainer = Trainer(TrainConfig(epochs=2, progress=False))
    with pytest.raises(FeatureError, match="expected"):
        trainer.fit(SGC(karate.num_features, 2), features[:10], karate)
    karate.val_mask = None
    with pytest.raises(FeatureError, match="val_mask"):
        trainer.fit(SGC(karate.num_features, 2), features, karate)
    with pytest.raises(ConfigError, match="lr"):
        TrainConfig(lr=0)
    with pytest.raises(ConfigError, match="epochs"):
        TrainConfig(epochs=0)
    with pytest.raises(ConfigError, match="seed"):
        run_node_classification(lambda: SGC(karate.num_features, 2), karate, seeds=[])


def test_divergence_is_reported(karate):
    features = SGC(karate.num_features, 2).precompute(karate).data * 1e30
    with pytest.raises(FeatureError, match="diverged"):
        Trainer(TrainConfig(lr=1e10, epochs=3, progress=False)).fit(SGC(karate.num_features, 2), features, karate)
