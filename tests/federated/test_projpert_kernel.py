"""sgl.federated._projpert_numba: the fused CPU kernel gives ProjPert-iso's torch perturbation."""
import pytest
import torch

from sgl.federated import perturb, projpert
from sgl.federated._projpert_numba import host_kernel_applies, load_host_kernel, projpert_iso_host
from sgl.federated.defenses import _projpert_torch


def _batch(n=1024, d=24, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=gen) < 0.25).float()
    # class stds differ by column, mean gaps either 0 or far above the stds: no column sits near
    # the max() tie of the closed form, where the targets' sqrt is ill-conditioned in float32
    spread = torch.linspace(0.5, 2.0, d) * (1 + y[:, None])
    gap = torch.where(torch.arange(d) % 2 == 0, torch.zeros(d), torch.linspace(20, 40, d))
    g = 1e-3 * (torch.randn(n, d, generator=gen) * spread + y[:, None] * gap + 3.0)
    return g.to(dtype), y, torch.randn(n, d, generator=gen, dtype=dtype)


def _rel(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def test_kernel_equals_the_torch_ops_in_float64():
    g, y, z = _batch(dtype=torch.float64)
    out = projpert(g, y, 2.0, "iso", noise=z)
    ref = _projpert_torch(g, y > 0.5, z, 2.0, "iso")
    assert _rel(out, ref) < 1e-12
    assert not torch.equal(out, g)


def test_kernel_equals_the_torch_ops_in_float32_up_to_rounding():
    g, y, z = _batch()
    out = projpert(g, y, 2.0, "iso", noise=z)
    assert out.dtype == torch.float32
    # the kernel accumulates in float64: it equals the torch math in float64 on the same inputs ...
    exact = _projpert_torch(g.double(), y > 0.5, z.double(), 2.0, "iso")
    assert _rel(out, exact) < 1e-6
    # ... and differs from the float32 torch ops only by their own rounding (~5e-6 here: float32
    # means over 1,024 rows)
    ops32 = _projpert_torch(g, y > 0.5, z, 2.0, "iso")
    assert _rel(out, ops32) <= 1.5 * _rel(ops32, exact) + 1e-7 and _rel(ops32, exact) < 2e-5


def test_kernel_keeps_shape_noise_sequence_and_one_class_batches():
    g, y, _ = _batch(n=256, d=12)
    g3 = g.view(256, 3, 4)  # [B, fields, k] derivatives as the party sends them
    drawn = perturb("projpert-iso", g3, y, bound=1.0, generator=torch.Generator().manual_seed(5))
    given = projpert(g3, y, 1.0, noise=torch.randn(256, 12, generator=torch.Generator().manual_seed(5)))
    assert drawn.shape == g3.shape and torch.equal(drawn, given)
    assert projpert(g, torch.ones(256), 1.0) is g and projpert(g, torch.zeros(256), 1.0) is g
    assert projpert_iso_host(g, torch.zeros(256, dtype=torch.bool), torch.zeros_like(g), 1.0) is None


def test_autograd_and_other_dtypes_take_the_torch_ops():
    g, y, z = _batch(n=256, d=8)
    assert host_kernel_applies(g, z)
    assert not host_kernel_applies(g.half(), z.half()) and not host_kernel_applies(g, z.double())
    leaf = g.clone().requires_grad_()
    assert not host_kernel_applies(leaf, z)
    out = projpert(leaf, y, 1.0, noise=z)
    out.sum().backward()  # the torch path stays differentiable (d out / d g is not the identity)
    assert leaf.grad is not None and _rel(out.detach(), projpert(g, y, 1.0, noise=z)) < 2e-5  # float32 ops
    load_host_kernel(torch.float16)  # no kernel for half precision: a no-op, not an error


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_device_tensors_take_the_torch_ops():  # pragma: no cover - GPU only
    g, y, z = _batch(dtype=torch.float64)
    dev = torch.device("cuda")
    out = projpert(g.to(dev), y.to(dev), 2.0, noise=z.to(dev))
    assert out.device.type == "cuda" and _rel(out.cpu(), projpert(g, y, 2.0, noise=z)) < 1e-10


def test_noise_ahead_loads_the_kernel_before_any_batch(monkeypatch):
    import sgl.federated.noise as noise

    loaded = []
    monkeypatch.setattr(noise, "load_host_kernel", loaded.append)
    ahead = noise.NoiseAhead(seed=0, dtype=torch.float64)  # the active party builds it at setup
    assert loaded == [torch.float64]
    ahead.close()
