import math

import pytest
import torch
from torch import nn

from sgl.errors import ConfigError
from sgl.models import Dense, FeedForwardNetII, InitialResidualDense


def test_every_layer_ends_in_batch_norm_and_uses_the_official_init():
    torch.manual_seed(0)
    net = FeedForwardNetII(12, 16, 3, num_layers=4, dropout=0.5)
    assert [type(layer) for layer in net.layers] == [Dense, InitialResidualDense, InitialResidualDense, Dense]
    for layer in net.layers:
        assert isinstance(layer.norm, nn.BatchNorm1d) and layer.norm.num_features == layer.out_features
        bound = 1.0 / math.sqrt(layer.out_features)
        largest = float(layer.weight.detach().abs().max())
        assert 0.5 * bound < largest <= bound
    assert not any(isinstance(m, nn.Linear) for m in net.modules())  # no additive bias anywhere
    # the logits are batch-normalised too: in training mode each class column has mean ~0, std ~1
    net.train()
    logits = net(torch.randn(64, 12))
    assert torch.allclose(logits.mean(0), torch.zeros(3), atol=1e-5)
    assert torch.allclose(logits.std(0, unbiased=False), torch.ones(3), atol=1e-3)


def test_one_layer_is_a_single_dense():
    net = FeedForwardNetII(5, 8, 2, num_layers=1)
    assert len(net.layers) == 1 and isinstance(net.layers[0], Dense)
    assert net(torch.randn(4, 5)).shape == (4, 2)


def test_initial_residual_layer_formula():
    layer = InitialResidualDense(3, 3, alpha=0.5).eval()  # eval: BatchNorm with mean 0, var 1
    with torch.no_grad():
        layer.weight.copy_(torch.eye(3))
    x, h0 = torch.randn(4, 3), torch.randn(4, 3)
    scale = 1.0 / math.sqrt(1.0 + layer.norm.eps)
    assert torch.allclose(layer(x, h0), (0.5 * x + 0.5 * h0) * scale + x, atol=1e-6)
    # zero weights leave the identity residual: BN(0) = 0 in eval mode
    with torch.no_grad():
        layer.weight.zero_()
    assert torch.allclose(layer(x, h0), x)


def test_middle_layers_receive_the_first_layer_output():
    torch.manual_seed(0)
    net = FeedForwardNetII(6, 5, 2, num_layers=3, dropout=0.0).eval()
    seen = {}
    net.layers[0].register_forward_hook(lambda m, i, o: seen.__setitem__("h0", o))
    net.layers[1].register_forward_hook(lambda m, i, o: seen.__setitem__("inputs", i))
    x = torch.randn(7, 6)
    out = net(x)
    x_in, h0_in = seen["inputs"]
    assert torch.equal(h0_in, seen["h0"]) and torch.allclose(x_in, net.act(seen["h0"]))
    # with the middle weights zeroed only its identity residual remains: y = Dense(PReLU(PReLU(h0)))
    with torch.no_grad():
        net.layers[1].weight.zero_()
    h0 = net.layers[0](x)
    assert torch.allclose(net(x), net.layers[2](net.act(net.act(h0))), atol=1e-6)
    assert not torch.allclose(out, net(x))


def test_bad_sizes_raise():
    with pytest.raises(ConfigError, match="num_layers >= 1"):
        FeedForwardNetII(4, 8, 2, num_layers=0)
    with pytest.raises(ConfigError, match="dropout"):
        FeedForwardNetII(4, 8, 2, dropout=1.0)
    with pytest.raises(ConfigError, match="alpha"):
        InitialResidualDense(4, 4, alpha=1.5)
