"""LobRA's scheme pool: Hydraulis' 7B/A100-40GB (tp, pp) schemes with a **LoRA** memory model.

:func:`~sgl.systems.seq.hydraulis_pool` sizes each scheme for *full* fine-tuning: model states
``B = 197`` bytes per ``H²`` element per layer (about 16 bytes per parameter of the ``12·H²`` of
a layer: bf16 weight and gradient, fp32 master weight and two Adam moments), ZeRO-sharded over the
``D = N/(tp·pp)`` data-parallel replicas by ``α/D + 1 − α``, and 32 (pp = 1: embedding and LM
head on one stage) or 16 bytes per ``H·V`` embedding element. On 40 GB that leaves tp1-pp1 no
room for a single token. LobRA trains LoRA adapters on a **frozen** base, so per device:

* frozen base weights, bf16, no gradient, no optimiser state, *not* ZeRO-sharded (every replica
  keeps its own copy; share 1): ``(L/pp)·(H²/tp)·12·2 = (L/pp)·(H²/tp)·24`` bytes, and
  ``(H·V/tp)·(4 if pp = 1 else 2)`` for the frozen embedding and LM head (the same 2 : 1 split
  between pp = 1 and pp > 1 as Hydraulis' 32 : 16);
* adapters: ``adapters`` LoRA modules of rank ``r`` on every linear layer of the ``12·H²``
  Transformer layer (four ``H×H`` attention projections, ``4·r·2H``; two ``H×4H`` MLP
  projections, ``2·r·5H``), ``18·r·H`` parameters per layer per adapter, trained with 16 bytes per
  parameter like the full model (bf16 weight and gradient, fp32 master, Adam m and v), split by
  ``tp·pp`` and not ZeRO-sharded (conservative): ``(L/pp)·18·r·H·16·adapters/tp`` bytes;
* activations as Hydraulis' regression, ``L·(H/tp)·A[tp]`` bytes per token (kept although a
  frozen linear layer needs no saved input for a weight gradient: conservative), and its fixed
  ``gap`` and ``safe`` terms unchanged (also conservative: part of the gap is full-model gradient
  buffers).

Capacity (the longest micro-batch in tokens) = ``(bound − safe − gap − states) / (L·H/tp·A[tp])``.
For tp1-pp1 with 3 rank-16 adapters that is 1,117 tokens, where full fine-tuning holds none; tp8-pp1
holds 24,347 (15,653 under full fine-tuning on 16 GPUs).

**Times** keep Hydraulis' profiled full fine-tuning coefficients ``a, b, c`` for every scheme: LoRA
skips the frozen weights' gradients (about a third of a linear layer's FLOPs) so real steps are
shorter, but by about the same factor on every scheme; the profiled times are a conservative,
uniform model and the GPU-second *ratios* LobRA reports do not depend on that factor.

>>> pool = lora_pool(16, rank=16, adapters=3)
>>> [p.label for p in pool][:2]
['tp1-pp1-sp1-z1', 'tp1-pp2-sp1-z1']
>>> pool[0].capacity > 0 and pool[0].capacity < pool[1].capacity
True
"""
from __future__ import annotations

from typing import List, Optional

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.seq.cost import _HYDRAULIS_MEMORY, StrategyCost, hydraulis_pool

__all__ = ["lora_pool", "lora_states_bytes", "POOLS", "lobra_pool"]

#: bytes per parameter of the frozen bf16 base, per ``H²`` element of a layer (12 parameters each)
BASE_BYTES_PER_H2 = 12 * 2
#: LoRA parameters per layer per unit of ``r·H``: 4 attention ``H×H`` (2H each) + 2 MLP ``H×4H`` (5H each)
LORA_PARAMS_PER_RH = 4 * 2 + 2 * 5
#: bytes per trained adapter parameter (bf16 weight + bf16 gradient + fp32 master + Adam m, v)
ADAPTER_BYTES = 16
POOLS = ("lora", "full")


def lora_states_bytes(tp: int, pp: int, rank: int = 16, adapters: int = 1) -> float:
    """Model-state bytes per device of a (tp, pp) replica: frozen bf16 base + ``adapters`` rank-``rank`` LoRAs."""
    mem = _HYDRAULIS_MEMORY
    L, H, V = mem["L"], mem["H"], mem["V"]
    base = (L / pp) * (H ** 2 / tp) * BASE_BYTES_PER_H2 + (H * V / tp) * (4 if pp == 1 else 2)
    lora = (L / pp) * LORA_PARAMS_PER_RH * rank * H * ADAPTER_BYTES * adapters / tp
    return float(base + lora)


def lora_pool(devices: int, memory_bytes: Optional[float] = None, *, rank: int = 16,
              adapters: int = 1) -> List[StrategyCost]:
    """Hydraulis' schemes that fit ``devices`` GPUs, capacities from the LoRA memory model (module doc).

    ``memory_bytes`` replaces Hydraulis' usable A100-40GB bound (40,536 MiB); schemes that hold no
    token are left out. A rank above the layer width is an error.

    >>> p = lora_pool(8, adapters=2)[0]
    >>> (p.label, p.capacity)
    ('tp1-pp1-sp1-z1', 1238)
    """
    mem = _HYDRAULIS_MEMORY
    rank = check_int(rank, "rank", 1, error=PlanError)
    adapters = check_int(adapters, "adapters", 1, error=PlanError)
    if rank > mem["H"]:
        raise PlanError(f"a LoRA rank of {rank} is above the layer width {mem['H']}; use a rank <= {mem['H']}")
    return hydraulis_pool(devices, memory_bytes,
                          model_states=lambda tp, pp, _replicas: lora_states_bytes(tp, pp, rank, adapters))


def lobra_pool(kind: str, devices: int, *, rank: int = 16, adapters: int = 1) -> List[StrategyCost]:
    """``"lora"``: :func:`lora_pool` (LobRA's setting); ``"full"``: :func:`~sgl.systems.seq.hydraulis_pool`."""
    from sgl._checks import check_choice

    check_choice(kind, "pool", POOLS, error=PlanError)
    return lora_pool(devices, rank=rank, adapters=adapters) if kind == "lora" else hydraulis_pool(devices)
