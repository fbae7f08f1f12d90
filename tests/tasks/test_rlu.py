import pytest
import torch
import torch.nn.functional as F

import sgl
from sgl.errors import ConfigError
from sgl.models import GAMLP, GAMLPConfig
from sgl.tasks import Distillation, TrainConfig, run_node_classification
from sgl.tasks.rlu import RLUConfig, train_rlu


@pytest.fixture(scope="module")
def synthetic():
    torch.set_num_threads(1)
    return sgl.datasets.load("synthetic", num_nodes=600, num_classes=3, avg_degree=8, num_features=16,
                             homophily=0.9, feature_signal=0.3, seed=0)


def factory(graph):
    return lambda: GAMLP(graph.num_features, graph.num_classes,
                         GAMLPConfig(k=3, hidden=32, label_hops=3, normalize_features=False))


def test_distillation_loss_formula():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    logits = torch.randn(2, 3)
    got = Distillation(torch.tensor([4, 5]), probs, gamma=0.5).loss(logits, slice(None), torch.device("cpu"))
    log_q = F.log_softmax(logits, 1)
    manual = sum(probs[i].max() * (probs[i] * (probs[i].log() - log_q[i])).sum() for i in range(2)) / 2
    assert torch.allclose(got, 0.5 * manual)


def test_rlu_stages_use_confident_non_training_nodes(synthetic, monkeypatch):
    seen = []
    import sgl.tasks.rlu as rlu_module

    real = rlu_module.Trainer.fit

    def spy(self, model, features, graph, seed=0, distillation=None):
        seen.append(distillation)
        return real(self, model, features, graph, seed=seed, distillation=distillation)

    monkeypatch.setattr(rlu_module.Trainer, "fit", spy)
    out = train_rlu(factory(synthetic), synthetic, TrainConfig(lr=0.01, epochs=30, progress=False),
                    RLUConfig(stages=[30, 20, 20], threshold=0.7, gamma=0.5))
    assert [s["stage"] for s in out["stages"]] == [0, 1, 2]
    assert seen[0] is None and seen[1] is not None
    index = seen[1].index
    assert index.numel() > 0 and not bool(synthetic.train_mask[index].any())
    assert bool((seen[1].probs.max(1).values > 0.7).all())
    test_y = synthetic.y[synthetic.test_mask]
    majority = float((test_y == test_y.mode().values).float().mean())
    assert out["test_acc"] > majority + 0.2


def test_rlu_through_run_record(synthetic):
    record = run_node_classification(factory(synthetic), synthetic, seeds=[0],
                                     train_config=TrainConfig(lr=0.01, epochs=10, progress=False),
                                     rlu_config=RLUConfig(stages=[10, 5]))
    assert len(record["runs"][0]["stages"]) == 2 and record["train_time_s"] > 0


@pytest.mark.parametrize("kwargs", [{"stages": []}, {"stages": [10, 0]}, {"threshold": 1.5},
                                    {"temperature": 0}, {"gamma": -1}])
def test_rlu_config_errors(kwargs):
    with pytest.raises(ConfigError):
        RLUConfig(**kwargs)
