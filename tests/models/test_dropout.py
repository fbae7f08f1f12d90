import pytest
import torch
import torch.nn.functional as F

from sgl.errors import ConfigError
from sgl.models.dropout import FastDropout, dropout_slices, fast_dropout, use_fast_dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_rate_and_scale_match_torch_dropout(p):
    torch.manual_seed(0)
    x = torch.ones(200_000)
    y = fast_dropout(x, p)
    kept = y != 0
    assert abs(kept.float().mean().item() - (1 - p)) < 4 * ((p * (1 - p) / x.numel()) ** 0.5)
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    # masks of neighbouring elements are not correlated (a broken hash repeats patterns)
    m = kept.float()
    corr = torch.corrcoef(torch.stack([m[:-1], m[1:]]))[0, 1].item()
    assert abs(corr) < 0.02


def test_seeded_and_thread_independent_and_gradient_uses_the_mask():
    x = torch.randn(64, 300, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(3)
    a = fast_dropout(x, 0.3)
    threads = torch.get_num_threads()
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        torch.manual_seed(3)
        b = fast_dropout(x, 0.3)
    finally:
        numba.set_num_threads(old)
    assert torch.equal(a, b) and torch.get_num_threads() == threads
    torch.manual_seed(4)
    assert not torch.equal(a, fast_dropout(x, 0.3))     # another seed, another mask
    (g,) = torch.autograd.grad(a.sum(), x)
    torch.testing.assert_close(g, (a != 0).double() / 0.7)


def test_slices_equal_per_slice_calls_and_module_swap():
    x = torch.randn(3, 50, 7)
    torch.manual_seed(5)
    a = dropout_slices(x, 0.4)
    torch.manual_seed(5)
    b = torch.stack([fast_dropout(x[i], 0.4) for i in range(3)])
    assert torch.equal(a, b)
    net = torch.nn.Sequential(torch.nn.Linear(7, 7), torch.nn.Dropout(0.2), torch.nn.Sequential(torch.nn.Dropout(0.3)))
    use_fast_dropout(net)
    assert [type(m) for m in net.modules()].count(FastDropout) == 2 and net[2][0].p == 0.3
    net.eval()
    assert torch.equal(net[1](x), x)


def test_fallbacks_and_errors():
    x = torch.ones(10, dtype=torch.bfloat16)
    assert fast_dropout(x, 0.5).dtype == torch.bfloat16          # other dtypes: F.dropout
    x = torch.randn(6, 5)
    assert torch.equal(fast_dropout(x, 0.0), x)                   # p = 0 keeps every value, unscaled
    assert torch.equal(fast_dropout(x.to(torch.bfloat16), 0.0), x.to(torch.bfloat16))
    assert torch.equal(fast_dropout(torch.ones(4), 0.5, training=False), torch.ones(4))
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        fast_dropout(torch.ones(4), 1.0)
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        dropout_slices(torch.ones(2, 4), -0.1)
    assert F.dropout(torch.ones(3), 0.5, False).sum() == 3

