"""LobRA's LoRA scheme pool: capacities by hand, tp1-pp1 now holds sequences, monotone in (tp, pp)."""
import pytest

from sgl.errors import PlanError
from sgl.systems.data.lobra_pool import lobra_pool, lora_pool, lora_states_bytes
from sgl.systems.seq import hydraulis_pool


def test_capacity_by_hand_tp2_pp2():
    # Hydraulis' constants: L 32, H 4096, V 50304, A[2] = 39 bytes, bound 40536 MiB, safe 6 GiB, gap 14281 MiB
    L, H, V = 32, 4096, 50304
    base = (L / 2) * (H * H / 2) * 24 + (H * V / 2) * 2               # frozen bf16 weights, pp > 1: one embedding
    adapters = (L / 2) * 18 * 8 * H * 16 * 2 / 2                       # 2 rank-8 adapters, 16 bytes per parameter
    free = 40536 * 2**20 - 6 * 2**30 - 14281 * 2**20 - base - adapters
    expected = int(free / (L * H / 2 * 39))
    assert lora_states_bytes(2, 2, rank=8, adapters=2) == pytest.approx(base + adapters)
    pool = {p.label: p for p in lora_pool(4, rank=8, adapters=2)}
    assert pool["tp2-pp2-sp1-z1"].capacity == expected
    assert 6000 < expected < 7000  # about 6.7k tokens, where full fine-tuning on 4 GPUs holds far fewer


def test_tp1_pp1_holds_sequences_only_under_lora():
    assert "tp1-pp1-sp1-z1" not in {p.label for p in hydraulis_pool(16)}
    lora = {p.label: p for p in lora_pool(16, adapters=3)}
    assert lora["tp1-pp1-sp1-z1"].capacity > 1000
    full = {p.label: p.capacity for p in hydraulis_pool(16)}
    assert all(lora[k].capacity > cap for k, cap in full.items())  # the frozen base needs less memory everywhere
    # time coefficients are Hydraulis' profiled ones, unchanged
    assert all((lora[p.label].a, lora[p.label].b, lora[p.label].c) == (p.a, p.b, p.c) for p in hydraulis_pool(16))


def test_capacities_monotone_in_tp_and_pp_and_independent_of_cluster_size():
    pool = lora_pool(16, adapters=4)
    for p in pool:
        for q in pool:
            if p.strategy.tp <= q.strategy.tp and p.pp <= q.pp:
                assert p.capacity <= q.capacity, (p.label, q.label)
    # no ZeRO sharding of the frozen base: the same capacity on 8 and 64 GPUs
    small = {p.label: p.capacity for p in lora_pool(8, adapters=4)}
    assert all(small[p.label] == p.capacity for p in lora_pool(64, adapters=4) if p.label in small)
    # more adapters, or a larger rank, take memory
    assert lora_pool(8, adapters=8)[0].capacity < lora_pool(8, adapters=1)[0].capacity
    assert lora_pool(8, rank=64)[0].capacity < lora_pool(8, rank=4)[0].capacity


def test_bad_input():
    with pytest.raises(PlanError, match="above the layer width"):
        lora_pool(8, rank=5000)
    with pytest.raises(PlanError, match="power of two"):
        lora_pool(12)
    with pytest.raises(PlanError):
        lobra_pool("half", 8)
    assert lora_pool(8, memory_bytes=10 * 2**30) == []  # 10 GiB holds no scheme with Hydraulis' fixed terms
    assert [p.label for p in lobra_pool("full", 16)] == [p.label for p in hydraulis_pool(16)]
