"""log12 group scales: the layer's range, round-up to the smallest covering code, clamping."""
import torch

from sgl.systems.serving.lora import gptq_codes, log12_range, log12_round_up, log12_table, rtn


def test_log12_scales_round_up_and_cover_the_group():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(16, 64, generator=g) * torch.logspace(-3, 1, 16)[:, None]   # rows spanning 4 decades
    e0, d = log12_range(w, 4, 32)
    table = log12_table(e0, d)
    assert bool((table[1:] > table[:-1]).all())
    raw = (w.reshape(16, 2, 32).amax(-1).clamp(min=0) - w.reshape(16, 2, 32).amin(-1).clamp(max=0)) / 15
    k = log12_round_up(raw, table)
    assert bool((table[k] >= raw).all()) and bool((table[k - 1] < raw).all())      # the smallest covering code
    assert float((table[k] / raw).max()) <= 2 ** float(d) * (1 + 1e-6)              # at most one step above
    assert int(log12_round_up(torch.tensor([1e30]), table)) == 4095                  # clamped at the ends
    assert int(log12_round_up(torch.tensor([0.0]), table)) == 0
    q = rtn(w, 4, 32)                                                                # the grid covers: no clipping
    assert float((q - w).abs().max()) <= float(table[k].max()) / 2 * (1 + 1e-5)
    zero = torch.zeros(4, 32)
    r = gptq_codes(zero, torch.eye(32), 4, 32)
    assert torch.equal(r.dequantized, zero)
