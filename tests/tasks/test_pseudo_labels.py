import pytest
import torch

import sgl
from sgl.errors import ConfigError, FeatureError
from sgl.tasks import model_pseudo_labels


@pytest.fixture(scope="module")
def graph():
    return sgl.datasets.csbm(num_nodes=300, num_classes=3, avg_degree=6, homophily=0.8, seed=0)


def test_ensemble_probabilities_clamped_and_informative(graph):
    probs = model_pseudo_labels(graph, "sgc", seeds=2, epochs=30)
    assert probs.shape == (300, 3) and torch.allclose(probs.sum(1), torch.ones(300), atol=1e-5)
    train = graph.train_mask
    assert torch.equal(probs[train], torch.nn.functional.one_hot(graph.y[train], 3).float())
    test = graph.test_mask
    assert float((probs[test].argmax(1) == graph.y[test]).float().mean()) > 0.6  # chance is 1/3
    # seeds as a count or a list; the ensemble is the mean of the members, deterministic
    assert torch.equal(probs, model_pseudo_labels(graph, "sgc", seeds=[0, 1], epochs=30))
    one = model_pseudo_labels(graph, "sgc", seeds=[0], epochs=30, clamp_train=False)
    two = model_pseudo_labels(graph, "sgc", seeds=[1], epochs=30, clamp_train=False)
    both = model_pseudo_labels(graph, "sgc", seeds=[0, 1], epochs=30, clamp_train=False)
    assert torch.allclose(both, (one + two) / 2, atol=1e-6)
    assert not torch.allclose(one[train], torch.nn.functional.one_hot(graph.y[train], 3).float())


def test_pseudo_labels_feed_rwgsl(graph):
    from sgl.models import RWGSL, RWGSLConfig

    probs = model_pseudo_labels(graph, "sgc", seeds=1, epochs=30)
    out = RWGSL(RWGSLConfig(rounds=1, high=1.1, low=0.5), seed=0).learn(graph, pseudo_labels=probs)
    assert out.num_nodes == 300 and out.is_symmetric()


def test_bad_input(graph):
    with pytest.raises(ConfigError, match="unknown model"):
        model_pseudo_labels(graph, "nope")
    with pytest.raises(ConfigError, match="seeds"):
        model_pseudo_labels(graph, "sgc", seeds=0)
    with pytest.raises(ConfigError, match="empty"):
        model_pseudo_labels(graph, "sgc", seeds=[])
    with pytest.raises(ConfigError, match="training option"):
        model_pseudo_labels(graph, "sgc", seeds=1, not_an_option=3)
    bare = sgl.data.Graph.from_edge_index(graph.edge_index, num_nodes=300, x=graph.x, y=graph.y)
    with pytest.raises(FeatureError, match="train_mask"):
        model_pseudo_labels(bare, "sgc")
    unlabeled = sgl.data.Graph.from_edge_index(graph.edge_index, num_nodes=300, x=graph.x)
    with pytest.raises(FeatureError, match="labels"):
        model_pseudo_labels(unlabeled, "sgc")
    featureless = sgl.data.Graph.from_edge_index(graph.edge_index, num_nodes=300, y=graph.y)
    with pytest.raises(FeatureError, match="features"):
        model_pseudo_labels(featureless, "sgc")
