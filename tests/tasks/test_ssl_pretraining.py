import pytest
import torch

import sgl
from sgl.errors import ConfigError, FeatureError
from sgl.models import build_ssl_model
from sgl.tasks.ssl_pretraining import pretrain, run_pretraining


def test_pretraining_loop_is_shared_and_stops_on_a_non_finite_loss():
    g = sgl.datasets.load("karate")
    dgi = build_ssl_model("dgi", g.num_features, epochs=3)
    history = pretrain(dgi, g, seed=0)
    assert [sorted(h) for h in history] == [["loss"]] * 3 and dgi.fit_time_s > 0
    weight = torch.nn.Parameter(torch.ones(1))
    module = torch.nn.Module()
    module.weight = weight
    calls = []
    with pytest.raises(FeatureError, match="toy pre-training diverged"):
        run_pretraining(module, g.x, g.edge_index,
                        lambda x, e: (weight.sum() * (float("nan") if calls else 1.0), {"t": weight.sum()}),
                        epochs=5, lr=0.1, weight_decay=0.0, name="toy", cosine=True,
                        callback=lambda epoch, m: calls.append(epoch))
    assert calls == [0]  # one finite epoch ran, the second stopped before its update


def test_pretrain_rejects_a_model_without_the_ssl_api():
    with pytest.raises(ConfigError, match="self-supervised model"):
        pretrain(torch.nn.Linear(2, 2), sgl.datasets.load("karate"))
