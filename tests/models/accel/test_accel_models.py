import pytest
import torch
from torch import nn

from sgl.errors import ConfigError, FeatureError
from sgl.models import MLP, SGC, build_model, model_config
from sgl.models.accel import (
    BinaryLinear, GraphFreeMLP, GraphFreeMLPConfig, Int8NodeFeatures, binarize, binary_bytes, dequantize_columns,
    inductive_positions, model_bytes, positional_features, quantize_columns, quantize_int8,
)


@pytest.fixture
def graph(homophilous_graph):
    return homophilous_graph


def test_student_inference_reads_features_only(graph):
    student = build_model("mlp", graph.num_features, graph.num_classes, model_config("mlp", hidden=8))
    assert isinstance(student, GraphFreeMLP)
    student.eval()
    x = graph.x[:5].clone()
    # inference is a function of the feature rows alone: no Graph, no adjacency anywhere in the call
    out = student(student.inputs(x))
    assert out.shape == (5, graph.num_classes)
    assert torch.equal(student.postprocess(None, out), out)
    feats = student.precompute(graph)
    assert torch.allclose(student(feats[torch.arange(5)]), out)


def test_student_with_positions_needs_them(graph):
    student = GraphFreeMLP(graph.num_features, graph.num_classes, GraphFreeMLPConfig(hidden=8, positional_dim=4))
    feats = student.precompute(graph)
    assert feats.data.shape == (graph.num_nodes, graph.num_features + 4)
    with pytest.raises(FeatureError, match="position features"):
        student.inputs(graph.x[:3])
    with pytest.raises(ConfigError, match="positional_dim"):
        GraphFreeMLPConfig(positional_dim=-1)


def test_positional_features_deterministic_and_inductive(graph):
    a, b = positional_features(graph, 8, seed=3), positional_features(graph, 8, seed=3)
    assert torch.equal(a, b) and torch.allclose(a.norm(dim=1), torch.ones(graph.num_nodes), atol=1e-5)
    observed, new = torch.arange(0, 250), torch.arange(250, 300)
    rows = inductive_positions(graph, a[observed], observed, new)
    src, dst = graph.edge_index
    v = int(new[0])
    nbrs = src[(dst == v) & (src < 250)]
    expected = a[nbrs].mean(0) if nbrs.numel() else torch.zeros(8)
    assert torch.allclose(rows[0], expected, atol=1e-6)


def test_int8_columns_round_trip_within_half_scale():
    torch.manual_seed(0)
    x = torch.randn(200, 16) * torch.logspace(-3, 2, 16)
    q, scale = quantize_columns(x)
    assert q.dtype == torch.int8 and scale.shape == (16,)
    err = (dequantize_columns(q, scale) - x).abs()
    assert bool((err <= scale / 2 + 1e-6 * x.abs().amax(0)).all())
    hops = Int8NodeFeatures.quantize([x, 2 * x])
    assert hops.nbytes == 2 * (200 * 16 + 16 * 4)
    assert 4 * 200 * 16 * 2 / hops.nbytes > 3.9
    rows = hops[torch.tensor([3, 7])]
    assert torch.allclose(rows[1], dequantize_columns(hops.codes[1][[3, 7]], hops.scales[1]))


def test_quantize_int8_close_and_smaller(graph):
    torch.manual_seed(0)
    model = MLP(graph.num_features, 64, 3, num_layers=2).eval()
    q = quantize_int8(model)
    x = graph.x.float()
    assert (q(x) - model(x)).abs().max() < 0.1 * model(x).abs().max()
    assert model_bytes(q) < model_bytes(model) / 2
    assert isinstance(model.layers[0], nn.Linear)  # the original is untouched


def test_quantize_int8_rejects_models_without_linear_layers():
    with pytest.raises(ConfigError, match="no quantisable layer"):
        quantize_int8(nn.Sequential(nn.ReLU()))
    with pytest.raises(ConfigError, match="int8 backend"):
        quantize_int8(SGC(4, 2), backend="fp8")


def test_binarized_layer_math():
    torch.manual_seed(0)
    layer = nn.Linear(6, 3)
    model = binarize(nn.Sequential(layer))
    binary = model[0]
    assert isinstance(binary, BinaryLinear)
    x = torch.rand(4, 6)  # non-negative: standardised per row before the sign
    z = (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-5)
    alpha = layer.weight.abs().mean(1, keepdim=True)
    beta = z.abs().mean(1, keepdim=True)
    expected = (torch.sign(z) * beta) @ (torch.sign(layer.weight) * alpha).T + layer.bias
    assert torch.allclose(binary(x), expected, atol=1e-6)
    binary(x).sum().backward()
    assert binary.weight.grad is not None
    assert binary_bytes(model) < sum(p.numel() * 4 for p in model.parameters())
    with pytest.raises(ConfigError, match="no quantisable layer"):
        binarize(nn.ReLU())


@pytest.mark.skipif(not __import__("os").environ.get("SGL_SLOW_TESTS"), reason="importing torchao takes ~5-20 s")
def test_torchao_backend_matches_fp32():
    pytest.importorskip("torchao")
    torch.manual_seed(0)
    model = MLP(16, 32, 3, num_layers=2).eval()
    x = torch.randn(8, 16)
    q = quantize_int8(model, backend="torchao")
    assert (q(x) - model(x)).abs().max() < 0.1 * model(x).abs().max()
