"""TinyScript: variance at b bits <= uniform's on Weibull and normal samples, unbiased, bad bits refused."""
import pytest
import torch

from sgl.comm.compress import TinyScriptQuantizer, UniformQuantizer, fit_weibull, quantized_saved_tensors
from sgl.errors import CommError, ConfigError


def _samples():
    g = torch.Generator().manual_seed(0)
    weibull = torch.distributions.Weibull(torch.tensor(0.02), torch.tensor(0.7)).sample((40_000,))
    sign = torch.randint(0, 2, (40_000,), generator=g) * 2 - 1
    return {"weibull": weibull * sign, "normal": torch.randn(40_000, generator=g)}


@pytest.mark.parametrize("bits", range(2, 9))
def test_variance_is_at_most_uniforms(bits):
    for name, x in _samples().items():
        ts = (TinyScriptQuantizer(bits, seed=1).roundtrip(x) - x).pow(2).mean()
        un = (UniformQuantizer(bits, seed=1).roundtrip(x) - x).pow(2).mean()
        assert ts <= un * 1.02, (name, bits, float(ts / un))   # 2 %: the sampling noise of the rounding
        assert ts < 0.8 * un, (name, bits, float(ts / un))     # 2 bits too: four levels against ternary


def test_stochastic_rounding_is_unbiased():
    x = torch.linspace(-1, 1, 101).repeat(400)
    q = TinyScriptQuantizer(3, seed=2)
    mean = torch.stack([q.roundtrip(x) for _ in range(20)]).mean(0).reshape(400, 101).mean(0)
    assert (mean - torch.linspace(-1, 1, 101)).abs().max() < 0.02


def test_weibull_fit_recovers_parameters():
    k, lam = fit_weibull(torch.distributions.Weibull(torch.tensor(0.3), torch.tensor(1.5)).sample((60_000,)))
    assert abs(k - 1.5) < 0.08 and abs(lam - 0.3) < 0.01


def test_payload_size_and_decode_checks():
    q = UniformQuantizer(5)
    payload = q.encode(torch.randn(1000))
    assert payload.numel() == q.payload_bytes(1000) == 625 + 8
    with pytest.raises(CommError, match="expected 633"):
        q.decode(payload[:-1], 1000)


@pytest.mark.parametrize("bits", [0, 1, 9, 2.5])
def test_bit_width_outside_range_is_refused(bits):
    with pytest.raises(ConfigError, match="bits"):
        TinyScriptQuantizer(bits)
    with pytest.raises(ConfigError, match="bits"):
        UniformQuantizer(bits)


def test_saved_activations_are_quantized_and_gradients_stay_close():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    x = torch.randn(256, 32)
    net(x).pow(2).mean().backward()
    exact = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    with quantized_saved_tensors(TinyScriptQuantizer(8, seed=0), min_numel=64):
        out = net(x).pow(2).mean()
    out.backward()
    for g, e in zip((p.grad for p in net.parameters()), exact):
        assert (g - e).norm() < 0.05 * e.norm()


def test_two_bits_use_four_distinct_levels_and_stay_unbiased():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(40_000, generator=g)
    q = TinyScriptQuantizer(2, seed=3)
    payload = q.encode(x)
    knob = float(payload[4:8].clone().view(torch.float32))
    assert knob < 0, "at 2 bits the zero-free layout {-1, -a, a, 1} beats the ternary one on normal data"
    levels = q.levels(knob)
    assert levels.numel() == 4 and torch.equal(levels, -levels.flip(0)) and 0 < levels[2] < 1
    values = q.decode(payload, x.numel())
    assert torch.unique(values.abs()).numel() == 2 and not bool((values == 0).any())
    t = torch.linspace(-1, 1, 101).repeat(400)
    mean = torch.stack([q.roundtrip(t) for _ in range(20)]).mean(0).reshape(400, 101).mean(0)
    assert (mean - torch.linspace(-1, 1, 101)).abs().max() < 0.02
    # the uniform baseline keeps QSGD's ternary levels at 2 bits
    assert UniformQuantizer(2).levels(1.0).tolist() == [-1.0, 0.0, 1.0]


def test_mostly_zero_tensors_keep_a_zero_level_at_four_bits():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(40_000, generator=g) * (torch.rand(40_000, generator=g) < 0.01)
    q = TinyScriptQuantizer(4, seed=0)
    payload = q.encode(x)
    assert float(payload[4:8].clone().view(torch.float32)) > 0     # the with-zero layout: zeros decode exactly
    assert bool((q.decode(payload, x.numel())[x == 0] == 0).all())


def test_decode_refuses_a_payload_without_a_knob():
    q = TinyScriptQuantizer(3)
    payload = q.encode(torch.randn(100))
    payload[4:8] = 0
    with pytest.raises(CommError, match="knob"):
        q.decode(payload, 100)
