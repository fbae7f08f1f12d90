import pytest
import torch
from torch import nn

import sgl
from sgl.errors import ConfigError, FeatureError
from sgl.models import GAMLP, MLP, GAMLPConfig, build_model, model_config
from sgl.models.base import SGAPConfig, SGAPModel
from sgl.models.accel import (
    FoldedLinear, GraphFreeMLP, Int8NodeFeatures, fuse_fp32, model_bytes, quantize_columns, quantize_static_int8,
)


@pytest.fixture(scope="module")
def graph():
    torch.set_num_threads(1)
    return sgl.datasets.load("synthetic", num_nodes=200, num_classes=3, avg_degree=6, num_features=24,
                             homophily=0.9, feature_signal=0.5, seed=0)


def _trained_like(model):
    """Random but non-trivial weights (biases and PReLU slopes included), deterministic."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model.eval()


def test_folded_linear_matches_fp32_within_quantisation_error():
    torch.manual_seed(0)
    x = torch.randn(64, 40) * torch.logspace(-2, 1, 40)  # very different column ranges
    w = torch.randn(10, 40)
    q, scale = quantize_columns(x)
    exact = (q.float() * scale) @ w.t()  # the hop quantisation alone
    single = FoldedLinear(w, scale, split=False)(q)
    split = FoldedLinear(w, scale)(q)
    row_scale = (w.abs() * scale).amax(1) / 127  # each weight code errs by at most half of it
    bound = q.float().abs().sum(1, keepdim=True) * row_scale / 2
    assert bool(((single - exact).abs() <= bound + 1e-4).all())
    assert (split - exact).abs().max() < (single - exact).abs().max() / 20  # the residual int8 matrix
    assert torch.allclose(FoldedLinear(w)(x), x @ w.t())
    with pytest.raises(FeatureError, match="int8 codes"):
        FoldedLinear(w, scale)(x)
    auto = FoldedLinear(w, scale, "auto", q, tol=1e-6)  # splits only when one code per weight errs above tol
    assert auto.split and auto.single_error == pytest.approx(float((single - split).norm() / split.norm()), rel=0.05)
    assert not FoldedLinear(w, scale, "auto", q, tol=10.0).split


def test_wide_codes_are_padded_and_gathered_as_words():
    torch.manual_seed(0)
    x = torch.randn(30, 300)
    wide = Int8NodeFeatures.quantize(x)  # 300 >= PAD_FROM columns: stored as 304
    q, scale = quantize_columns(x)
    assert wide.stored[0].shape == (30, 304) and wide.codes[0].shape == (30, 300)
    assert wide.nbytes == 30 * 304 + 300 * 4
    rows = torch.tensor([4, 0, 29])
    assert torch.equal(wide.codes_at(rows)[:, :300], q[rows]) and not wide.codes_at(rows)[:, 300:].any()
    assert torch.allclose(wide[rows], q[rows].float() * scale)
    w = torch.randn(5, 300)
    layer = FoldedLinear(w, scale)
    assert torch.allclose(layer(wide.codes_at(rows)), layer(q[rows]))  # padded or not, the same product
    with pytest.raises(FeatureError, match="300 columns"):
        layer(q[rows][:, :299])


@pytest.mark.parametrize("attention", ["recursive", "jk"])
def test_static_gamlp_equals_fp32_within_quantisation_error(graph, attention):
    model = _trained_like(GAMLP(graph.num_features, graph.num_classes,
                                GAMLPConfig(k=3, hidden=16, attention=attention, label_hops=2)))
    feats = model.precompute(graph)
    hops8 = Int8NodeFeatures.quantize(feats)
    rows = torch.arange(50)
    with torch.no_grad():
        reference = model(feats[rows])
        assert torch.allclose(fuse_fp32(model)(feats[rows]), reference, atol=1e-4)  # same fusion, fp32
        dequantised = model(hops8[rows])  # what int8 hops give through the fp32 model
        static = quantize_static_int8(model, hops8, split_weights=True)(hops8.codes_at(rows))
    assert (static - dequantised).abs().max() < 1e-2 * reference.abs().max()
    assert not torch.equal(static, reference)


@pytest.mark.parametrize("name", ["sgc", "sign", "pasca-v1", "pasca-v2"])
def test_static_sgap_and_student_close_and_smaller(graph, name):
    model = _trained_like(build_model(name, graph.num_features, graph.num_classes, model_config(name)))
    feats = model.precompute(graph)
    hops8 = Int8NodeFeatures.quantize(feats)
    static = quantize_static_int8(model, hops8, split_weights=True)
    with torch.no_grad():
        assert torch.allclose(fuse_fp32(model)(feats[torch.arange(60)]), model(feats[torch.arange(60)]), atol=1e-4)
        dequantised = model(hops8[torch.arange(60)])
        out = static(hops8.codes_at(torch.arange(60)))
    assert (out - dequantised).abs().max() < 1e-2 * dequantised.abs().max()
    if name == "sign":  # split int8 weights: about half the fp32 bytes (SGC's 3 outputs are padded to 8)
        assert model_bytes(static) < model_bytes(model) / 1.5
    student = _trained_like(GraphFreeMLP(graph.num_features, graph.num_classes))
    x8 = Int8NodeFeatures.quantize(student.precompute(graph))
    with torch.no_grad():
        assert torch.allclose(quantize_static_int8(student, x8, True)(x8.codes_at(torch.arange(5))),
                              student(x8[torch.arange(5)]), atol=1e-2)


def test_static_int8_errors(graph):
    model = GAMLP(graph.num_features, graph.num_classes, GAMLPConfig(k=2, hidden=8))
    hops8 = Int8NodeFeatures.quantize(model.precompute(graph))
    with pytest.raises(ConfigError, match="eval"):
        quantize_static_int8(model, hops8)
    with pytest.raises(FeatureError, match="Int8NodeFeatures"):
        quantize_static_int8(model.eval(), model.precompute(graph))
    pre = GAMLP(graph.num_features, graph.num_classes, GAMLPConfig(k=2, hidden=8, pre_process=True)).eval()
    with pytest.raises(ConfigError, match="pre_process"):
        quantize_static_int8(pre, hops8)
    learnable = SGAPModel(graph.num_features, graph.num_classes, SGAPConfig(k=2, message="projected_concat",
                                                                            message_options={"hidden": 4}))
    with pytest.raises(ConfigError, match="projected_concat"):
        fuse_fp32(learnable.eval())
    with pytest.raises(ConfigError, match="no static int8 plan"):
        fuse_fp32(nn.Sequential(nn.Linear(3, 2)).eval())
    with pytest.raises(ConfigError, match="split_weights"):
        quantize_static_int8(model, hops8, split_weights="yes")
    with pytest.raises(FeatureError, match="one feature tensor"):
        quantize_static_int8(MLP(graph.num_features, 8, 3).eval(), hops8)
