"""Heterogeneous models: NARS-SIGN, SeHGNN, HeteroGAMLP, R-GCN, HGT through the Trainer, run() and RLU."""
import pytest
import torch

from sgl.data import Graph
from sgl.datasets import synthetic_mag
from sgl.errors import ConfigError, FeatureError
from sgl.models import build_model, default_train_config, model_config
from sgl.models.hetero import HETERO_MODELS, HGTConfig, NARSConfig, SeHGNN, SeHGNNConfig, build_hetero_model, \
    model_input
from sgl.tasks import RunConfig, TrainConfig, Trainer, run
from sgl.tasks.rlu import RLUConfig, train_rlu

SMALL = {"nars-sign": {"k": 2, "hidden": 32, "num_subsets": 4}, "sehgnn": {"k": 2, "hidden": 32},
         "hetero-gamlp": {"k": 2, "hidden": 32, "num_subsets": 4}, "rgcn": {"hidden": 32}, "hgt": {"hidden": 16, "heads": 2}}


@pytest.fixture(scope="module")
def mag():
    torch.set_num_threads(1)
    # weak paper features (signal 0.3): the graph has to carry the class information
    return synthetic_mag(scale=0.0005, num_classes=4, num_features=16, homophily=0.8, signal=0.3, seed=0)


@pytest.mark.parametrize("name", sorted(HETERO_MODELS))
def test_trains_through_trainer(name, mag):
    model = build_model(name, mag, mag.num_classes, model_config(name, **SMALL[name]))
    before = [p.detach().clone() for p in model.parameters()]
    features = model.precompute(mag)
    assert len(features) == mag.num_nodes
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))   # nothing trains in precompute
    full_batch = HETERO_MODELS[name][0].full_batch   # one forward over the whole graph per epoch: fewer epochs
    cfg = TrainConfig(**{**default_train_config(name), "lr": 0.02 if full_batch else 0.01,
                         "epochs": 15 if full_batch else 30, "patience": None, "progress": False})
    result = Trainer(cfg).fit(model, features, mag, seed=0)
    test_y = mag.y[mag.test_mask]
    majority = float((test_y == test_y.mode().values).float().mean())
    assert result["test_acc"] > majority + 0.15, (name, result["test_acc"], majority)
    assert result["ogb_test_acc"] is not None if getattr(mag, "ogb_name", None) else "ogb_test_acc" not in result


def test_graph_beats_features_alone(mag):
    """Metapath features carry the planted signal: SeHGNN with k=2 beats SeHGNN with k=0 (raw features)."""
    cfg = TrainConfig(lr=0.01, weight_decay=0.0, epochs=25, progress=False)
    accs = {}
    for k in (0, 2):
        model = SeHGNN(mag, mag.num_classes, SeHGNNConfig(k=k, label_hops=0, hidden=16))
        accs[k] = Trainer(cfg).fit(model, model.precompute(mag), mag, seed=0)["test_acc"]
    assert accs[2] > accs[0] + 0.1, accs


def test_run_config_and_rlu(mag, monkeypatch):
    import sgl.datasets

    monkeypatch.setattr(sgl.datasets, "load", lambda name, root=None, **kw: mag)
    record = run(RunConfig.from_dict({"dataset": "synthetic-mag", "model": "hetero-gamlp", "seeds": 2,
                                      "model_config": SMALL["hetero-gamlp"], "train": {"epochs": 5}}),
                 progress=False)
    assert len(record["runs"]) == 2 and record["dataset_hash"] == mag.content_hash()
    assert record["config"]["model_config"]["num_subsets"] == 4
    factory = lambda: build_hetero_model("hetero-gamlp", mag, config=model_config("hetero-gamlp",  # noqa: E731
                                                                                   **SMALL["hetero-gamlp"]))
    out = train_rlu(factory, mag, TrainConfig(lr=0.005, epochs=5, progress=False),
                    RLUConfig(stages=[5, 5], threshold=0.3), seed=0)
    assert len(out["stages"]) == 2 and out["stages"][1]["confident_nodes"] > 0


def test_wrong_graph_kind_errors(mag):
    homo = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 2), y=torch.tensor([0, 1]))
    with pytest.raises(ConfigError, match="heterogeneous-graph model"):
        build_model("sehgnn", 16, 4)
    with pytest.raises(ConfigError, match="needs a heterogeneous dataset"):
        model_input("nars-sign", homo)
    with pytest.raises(ConfigError, match="is heterogeneous; model 'sgc' is not"):
        model_input("sgc", mag)
    assert model_input("sgc", homo) == 2 and model_input("rgcn", mag) is mag
    with pytest.raises(ConfigError, match="unknown heterogeneous model"):
        build_hetero_model("han", mag)


def test_bad_configs_and_labels(mag):
    with pytest.raises(ConfigError, match="num_subsets"):
        NARSConfig(num_subsets=0)
    with pytest.raises(ConfigError, match="divisible by heads"):
        HGTConfig(hidden=30, heads=4)
    with pytest.raises(ConfigError, match="featureless"):
        SeHGNNConfig(featureless="zeros")
    unlabeled = mag._with(y=None)
    with pytest.raises(FeatureError, match="has no labels"):
        SeHGNN(unlabeled, 4, SeHGNNConfig(k=1, hidden=8)).precompute(unlabeled)


@pytest.mark.parametrize("training", [False, True])
def test_gamlp_packed_path_equals_reference(mag, training):
    from sgl.models.hetero.packed import PackedHopFeatures

    torch.manual_seed(0)
    model = build_model("hetero-gamlp", mag, mag.num_classes, model_config("hetero-gamlp", **SMALL["hetero-gamlp"]))
    features = model.precompute(mag)
    assert isinstance(features, PackedHopFeatures)
    index = torch.arange(0, min(len(features), 40))
    packed = features[index]
    reference = [t[index] for t in features.data]      # [B, S, d] per hop + the label input
    model.train(training)
    torch.manual_seed(1)
    fast = model(packed)
    torch.manual_seed(1)
    slow = model.reference_forward(reference)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    if training:                                       # the same gradients reach the same parameters
        params = [p for p in model.parameters() if p.requires_grad]
        fast_grads = torch.autograd.grad(fast.sum(), params, allow_unused=True)
        slow_grads = torch.autograd.grad(slow.sum(), params, allow_unused=True)
        assert any(g is not None for g in fast_grads)
        for a, b in zip(fast_grads, slow_grads):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
