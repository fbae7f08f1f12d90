import pytest
import torch

from sgl.models.hetero._packed_kernels import gather_rows, hop_prelu, subset_mix

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_subset_mix_equals_torch_broadcast_both_ways(dtype):
    torch.manual_seed(0)
    x = torch.randn(37, 3, 4, 5, dtype=dtype)
    w = torch.randn(3, 4, 5, dtype=dtype, requires_grad=True)
    fast = subset_mix(x, w)
    slow = (x * w).sum(2).transpose(0, 1)
    assert fast.is_contiguous() and fast.shape == (3, 37, 5)
    torch.testing.assert_close(fast, slow)
    g = torch.randn_like(slow)
    (a,) = torch.autograd.grad(fast, w, g)
    (b,) = torch.autograd.grad(slow, w, g)
    torch.testing.assert_close(a, b)
    xg = x.clone().requires_grad_(True)                  # x needing a gradient: the torch expression
    (gx,) = torch.autograd.grad(subset_mix(xg, w).sum(), xg)
    torch.testing.assert_close(gx, w.detach().expand_as(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hop_prelu_equals_torch_both_ways(dtype):
    torch.manual_seed(1)
    x = torch.randn(3, 41, 6, dtype=dtype, requires_grad=True)
    a = torch.tensor([0.25, -0.5, 1.5], dtype=dtype, requires_grad=True)
    fast = hop_prelu(x, a)
    slow = torch.where(x >= 0, x, x * a.view(-1, 1, 1))
    torch.testing.assert_close(fast, slow)
    g = torch.randn_like(slow)
    torch.testing.assert_close(torch.autograd.grad(fast, (x, a), g), torch.autograd.grad(slow, (x, a), g))


def test_gather_rows_equals_index_select_and_checks_range():
    src = torch.randn(5000, 33)
    index = torch.randint(0, 5000, (3000,))
    assert torch.equal(gather_rows(src, index), src.index_select(0, index))
    assert torch.equal(gather_rows(src, index[:10]), src[index[:10]])          # small batches: torch
    with pytest.raises(IndexError):
        gather_rows(src, torch.full((2000,), 5000))
