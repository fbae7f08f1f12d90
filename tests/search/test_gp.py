"""The Gaussian-process optimizer (optuna GPSampler, log-EHVI with several objectives) in `sgl search`."""
import pytest

import sgl
from sgl.errors import ConfigError
from sgl.search import OPTIMIZERS, DesignSpace, SearchConfig, run_search
from sgl.search.study import _make_sampler

SPACE = dict(k=(1, 3), messages=["last", "concat", "mean"], num_layers=(1, 2), hidden=[16],
             post_steps=(0, 1), post_graph_ops=["adj"], post_messages=["last"])


@pytest.fixture(scope="module")
def graph():
    return sgl.datasets.load("synthetic", num_nodes=200, num_features=8, num_classes=3, num_val=50, num_test=50,
                             seed=0)


def _config(**kwargs):
    base = dict(objectives="accuracy,latency", trials=4, epochs=5, patience=None, progress=False, threads=1,
                optimizer="gp", startup_trials=2)
    return SearchConfig(**{**base, **kwargs})


def test_gp_is_a_named_optimizer_with_the_search_seed():
    import optuna

    assert "gp" in OPTIMIZERS
    sampler = _make_sampler(_config(seed=4), offset=2)
    assert isinstance(sampler, optuna.samplers.GPSampler)
    assert SearchConfig.from_dict(_config().to_dict()).optimizer == "gp"
    with pytest.raises(ConfigError, match="unknown optimizer"):
        _config(optimizer="gaussian")


def test_gp_search_runs_past_its_startup_trials(graph):
    import optuna

    space = DesignSpace(**SPACE)
    a = run_search(graph, space, _config())
    b = run_search(graph, space, _config(trials=2))
    assert isinstance(a.study.sampler, optuna.samplers.GPSampler)
    assert len(a.trials) == 4  # 2 seeded random start-up trials, then 2 GP (log-EHVI) proposals
    # the start-up trials are seeded; later ones depend on the measured latencies, so only these repeat
    assert [t["design"] for t in a.trials[:2]] == [t["design"] for t in b.trials]
    assert all(space.canonical(t["design"]) == t["design"] for t in a.trials)
    assert 1 <= len(a.front) <= 4
