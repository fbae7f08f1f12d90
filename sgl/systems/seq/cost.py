"""Per-sequence time and memory of a training strategy: ``a·s² + b·s + c`` and a token capacity.

Every planner in :mod:`sgl.systems.seq` works on :class:`StrategyCost` objects, one per
candidate *replica* strategy (a group of ``tp·pp·sp`` devices that trains a micro-batch together):

* time of one micro-batch holding sequences ``s_1..s_n`` on one pipeline stage (ms):
  ``T = Σ_i (a·s_i² + b·s_i) + c``;
* time of a replica that runs micro-batches ``T_1..T_m`` with 1F1B: ``Σ_j T_j + (pp-1)·max_j T_j``
  (warm-up and cool-down bubble, as Hydraulis models it);
* memory: a micro-batch fits when its token sum is at most ``capacity`` (so ``capacity`` is
  also the longest sequence the strategy supports).

:class:`SeqCostModel` derives ``(a, b, c, capacity)`` for any :class:`SeqStrategy` (TP, PP,
Ulysses SP / context-parallel degree, ZeRO stage, checkpointing) from a model and a device
description, generalising FlexSP's per-device model (``flexSPCostModel`` in the FlexSP solver):

* compute: ``(α1·s² + α2·s)·k / (tp·sp·pp)`` with ``k = 4/3`` under checkpointing (one more
  forward), ``β / pp`` per micro-batch;
* Ulysses all-to-all: ``4·2·L·h·s·2 B / sp / bw_a2a(sp)`` per sequence (×1.5 with checkpointing);
* Megatron TP: ``4`` all-reduces of ``s·h·2 B`` per layer (6 with checkpointing) at
  ``2(tp-1)/tp / bw_ar(tp)``;
* ring-attention CP (``cp`` instead of ``sp``): the ``K,V`` blocks travel ``cp-1`` hops per layer,
  ``2·2·L·h_kv·s·2 B·(cp-1)/cp / bw_p2p(cp)`` (the inter-node figure once the ring leaves a node of
  ``node_size`` devices), of which the share ``overlap`` hides behind compute;
* memory per device (MB): model states ``16·P·1024·r / (tp·pp)`` with ZeRO ratio ``r`` over the
  ``N/(tp·pp)`` data/sequence ranks (FlexSP's ratios), activations ``act_per_token·s/(tp·sp)``
  (``ckpt_fraction`` of it under checkpointing); capacity =
  ``(memory - reserve - states)·tp·sp / act_per_token``.

Presets carry the papers' published constants: :func:`flexsp_cost_model` (LLaMA-7B on A100-80GB,
α1 = 5.128e-6, α2 = 0.184, β = 629 ms, 4.71 MB per token, all-to-all {2:154, 4:137, 8:121, 16:8.7}
GB/s) and :func:`hydraulis_pool` (Hydraulis' 10 fitted (tp, pp) strategies for 7B on A100-40GB,
with its memory regression).  :func:`sgl.systems.seq.calibrate.calibrate_cost_model` fits α1, α2, β
on this machine with the runtime's TinyLM.

>>> from sgl.systems.seq import flexsp_cost_model, SeqStrategy
>>> model = flexsp_cost_model(devices=16, memory_gb=80)
>>> sp8 = model.strategy_cost(SeqStrategy(sp=8))
>>> sp8.capacity > model.strategy_cost(SeqStrategy(sp=2)).capacity
True
>>> round(float(sp8.micro_batch_time([4096, 4096])), 1) == round(float(sp8.seq_time([4096, 4096]).sum() + sp8.c), 1)
True
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np

from sgl._checks import check_bool, check_choice, check_int, check_real
from sgl.errors import PlanError

__all__ = ["SeqStrategy", "StrategyCost", "SeqModelSpec", "SeqHardware", "SeqCostModel",
           "flexsp_cost_model", "hydraulis_pool", "FLEXSP_ALLTOALL_GBPS", "longest_supported"]

#: FlexSP's all-to-all bandwidth table (GB/s) by SP degree; 16 crosses nodes
FLEXSP_ALLTOALL_GBPS: Dict[int, float] = {1: 1e10, 2: 154.0, 4: 137.0, 8: 121.0, 16: 8.7}


def _power_of_two(value: int, name: str) -> int:
    value = check_int(value, name, 1, error=PlanError)
    if value & (value - 1):
        raise PlanError(f"{name} must be a power of two, got {value}")
    return value


@dataclass(frozen=True)
class SeqStrategy:
    """One replica's layout: ``tp`` x ``pp`` x (``sp`` Ulysses or ``cp`` ring) devices, ZeRO, checkpointing."""

    tp: int = 1
    pp: int = 1
    sp: int = 1
    cp: int = 1
    zero: int = 3
    ckpt: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "sp", "cp"):
            _power_of_two(getattr(self, name), f"SeqStrategy.{name}")
        if self.sp > 1 and self.cp > 1:
            raise PlanError("SeqStrategy: use either Ulysses sp or ring-attention cp for the sequence split, not both")
        check_choice(self.zero, "SeqStrategy.zero", (0, 1, 2, 3), error=PlanError)
        check_bool(self.ckpt, "SeqStrategy.ckpt", error=PlanError)

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.sp * self.cp

    @property
    def label(self) -> str:
        parts = [f"tp{self.tp}", f"pp{self.pp}"]
        parts.append(f"cp{self.cp}" if self.cp > 1 else f"sp{self.sp}")
        return "-".join(parts) + f"-z{self.zero}" + ("-ckpt" if self.ckpt else "")


@dataclass(frozen=True)
class StrategyCost:
    """Time coefficients (ms) and token capacity of one replica strategy (see the module doc)."""

    strategy: SeqStrategy
    a: float
    b: float
    c: float
    capacity: int
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.strategy.label)

    @property
    def devices(self) -> int:
        return self.strategy.devices

    @property
    def pp(self) -> int:
        return self.strategy.pp

    def seq_time(self, lengths) -> np.ndarray:
        """``a·s² + b·s`` per sequence (ms)."""
        s = np.asarray(lengths, dtype=np.float64)
        return self.a * s * s + self.b * s

    def micro_batch_time(self, lengths) -> float:
        """``Σ (a·s² + b·s) + c`` of one micro-batch (0 for an empty one)."""
        s = np.asarray(lengths, dtype=np.float64)
        return float(self.seq_time(s).sum() + self.c) if s.size else 0.0

    def replica_time(self, micro_batches: Sequence[Sequence[int]]) -> float:
        """1F1B time of a replica: ``Σ T_j + (pp-1)·max T_j``."""
        times = [self.micro_batch_time(mb) for mb in micro_batches if len(mb)]
        if not times:
            return 0.0
        return float(sum(times) + (self.pp - 1) * max(times))

    def fits(self, lengths) -> bool:
        return int(np.sum(lengths)) <= self.capacity


def longest_supported(pool: Iterable[StrategyCost]) -> int:
    """The longest sequence any strategy of ``pool`` can hold."""
    return max((p.capacity for p in pool), default=0)


@dataclass(frozen=True)
class SeqModelSpec:
    """A decoder Transformer as the sequence cost model sees it (defaults: LLaMA-7B as in FlexSP)."""

    layers: int = 32
    hidden: int = 4096
    kv_hidden: int = 4096
    params_b: float = 7.0               # parameters, billions
    act_mb_per_token: float = 4.71      # activation MB per token of the whole model, tp = sp = 1
    ckpt_fraction: float = 1.0 / 16     # share of activations kept under full checkpointing
    bytes_per_element: float = 2.0      # activation bytes on the wire (bf16 = 2; fp32 CPU runs = 4)

    def __post_init__(self) -> None:
        check_real(self.bytes_per_element, "SeqModelSpec.bytes_per_element", 0.0, open_low=True, error=PlanError)
        check_int(self.layers, "SeqModelSpec.layers", 1, error=PlanError)
        check_int(self.hidden, "SeqModelSpec.hidden", 1, error=PlanError)
        check_int(self.kv_hidden, "SeqModelSpec.kv_hidden", 1, error=PlanError)
        check_real(self.params_b, "SeqModelSpec.params_b", 0.0, open_low=True, error=PlanError)
        check_real(self.act_mb_per_token, "SeqModelSpec.act_mb_per_token", 0.0, open_low=True, error=PlanError)
        check_real(self.ckpt_fraction, "SeqModelSpec.ckpt_fraction", 0.0, 1.0, open_low=True, error=PlanError)


@dataclass(frozen=True)
class SeqHardware:
    """Device and link constants (defaults: FlexSP's A100-80GB figures)."""

    memory_mb: float = 80 * 1024.0
    reserve_mb: float = 0.0
    alpha1: float = 5.128e-6            # ms per token² (attention), whole model on one device
    alpha2: float = 0.1839576           # ms per token (linear layers)
    beta: float = 629.3563              # ms per micro-batch
    alltoall_gbps: Dict[int, float] = field(default_factory=lambda: dict(FLEXSP_ALLTOALL_GBPS))
    allreduce_gbps: Dict[int, float] = field(default_factory=lambda: {1: 1e10, 2: 150.0, 4: 140.0, 8: 130.0,
                                                                      16: 10.0})
    p2p_gbps: float = 150.0
    overlap: float = 0.5                # share of ring-attention K/V transfer time hidden behind compute
    node_size: int = 8                  # devices per node: a ring larger than this has inter-node hops
    p2p_inter_gbps: float = 8.7         # bottleneck of an inter-node ring (FlexSP's inter-node figure)
    # per-call latencies (ms) of the collectives, added once per call to a micro-batch's constant c;
    # 0 in the published presets (their bandwidths are effective figures), measured by a MachineProfile
    alltoall_latency_ms: float = 0.0
    allreduce_latency_ms: float = 0.0
    p2p_latency_ms: float = 0.0
    # the busiest rank's share of the attention's s² work relative to an even split (1 = balanced);
    # measured by a MachineProfile (ring attention on contiguous causal shards is unbalanced)
    sp_quadratic_factor: float = 1.0
    cp_quadratic_factor: float = 1.0

    def __post_init__(self) -> None:
        check_real(self.memory_mb, "SeqHardware.memory_mb", 0.0, open_low=True, error=PlanError)
        for name in ("reserve_mb", "alpha1", "alpha2", "beta", "alltoall_latency_ms", "allreduce_latency_ms",
                     "p2p_latency_ms", "sp_quadratic_factor", "cp_quadratic_factor"):
            check_real(getattr(self, name), f"SeqHardware.{name}", 0.0, error=PlanError)
        check_real(self.p2p_gbps, "SeqHardware.p2p_gbps", 0.0, open_low=True, error=PlanError)
        check_real(self.overlap, "SeqHardware.overlap", 0.0, 1.0, error=PlanError)
        check_int(self.node_size, "SeqHardware.node_size", 1, error=PlanError)
        check_real(self.p2p_inter_gbps, "SeqHardware.p2p_inter_gbps", 0.0, open_low=True, error=PlanError)

    def p2p(self, degree: int) -> float:
        """Ring bandwidth: intra-node ``p2p_gbps`` up to ``node_size`` devices, else ``p2p_inter_gbps``."""
        return float(self.p2p_gbps if degree <= self.node_size else min(self.p2p_gbps, self.p2p_inter_gbps))

    @staticmethod
    def _bandwidth(table: Dict[int, float], degree: int) -> float:
        if degree in table:
            return float(table[degree])
        larger = [k for k in table if k >= degree]
        # groups larger than the table's largest entry cross nodes like its largest entry
        return float(table[min(larger)] if larger else table[max(table)])

    def a2a(self, degree: int) -> float:
        return self._bandwidth(self.alltoall_gbps, degree)

    def allreduce(self, degree: int) -> float:
        return self._bandwidth(self.allreduce_gbps, degree)


class SeqCostModel:
    """``(a, b, c, capacity)`` of any :class:`SeqStrategy` on ``devices`` devices (module doc)."""

    def __init__(self, model: SeqModelSpec, hardware: SeqHardware, devices: int) -> None:
        self.model = model
        self.hardware = hardware
        self.devices = _power_of_two(devices, "devices")

    def zero_ratio(self, strategy: SeqStrategy) -> float:
        """Share of the model states one device keeps (FlexSP's mixed-precision ratios)."""
        n = max(1, self.devices // (strategy.tp * strategy.pp))
        return {0: 1.0, 1: 6 / 8 / n + 2 / 8, 2: 7 / 8 / n + 1 / 8, 3: 1.0 / n}[strategy.zero]

    def states_mb(self, strategy: SeqStrategy) -> float:
        return self.model.params_b * 16 * 1024 * self.zero_ratio(strategy) / (strategy.tp * strategy.pp)

    def act_mb_per_token(self, strategy: SeqStrategy) -> float:
        """Activation MB per token of the micro-batch on one device."""
        act = self.model.act_mb_per_token * (self.model.ckpt_fraction if strategy.ckpt else 1.0)
        return act / (strategy.tp * strategy.sp * strategy.cp)

    def capacity(self, strategy: SeqStrategy) -> int:
        free = self.hardware.memory_mb - self.hardware.reserve_mb - self.states_mb(strategy)
        return max(0, int(free / self.act_mb_per_token(strategy)))

    def strategy_cost(self, strategy: SeqStrategy) -> StrategyCost:
        if strategy.devices > self.devices:
            raise PlanError(f"strategy {strategy.label} needs {strategy.devices} devices, the cluster has {self.devices}")
        m, hw = self.model, self.hardware
        split = strategy.tp * strategy.sp * strategy.cp * strategy.pp
        k = 4.0 / 3.0 if strategy.ckpt else 1.0
        a = hw.alpha1 * k / split
        a *= hw.sp_quadratic_factor if strategy.sp > 1 else hw.cp_quadratic_factor if strategy.cp > 1 else 1.0
        b = hw.alpha2 * k / split
        per_layer_bytes = m.hidden * m.bytes_per_element / 2**20   # MB per token of one layer's activation
        layers = m.layers / strategy.pp
        c = hw.beta / strategy.pp
        if strategy.sp > 1:
            passes = 4 * 2 * (1.5 if strategy.ckpt else 1.0)
            b += passes * layers * per_layer_bytes / strategy.sp / hw.a2a(strategy.sp)
            c += passes * layers * hw.alltoall_latency_ms
        if strategy.tp > 1:
            passes = 6 if strategy.ckpt else 4
            ring = 2 * (strategy.tp - 1) / strategy.tp
            b += passes * layers * per_layer_bytes * ring / hw.allreduce(strategy.tp)
            c += passes * layers * hw.allreduce_latency_ms
        if strategy.cp > 1:
            kv_mb = 2 * 2 * layers * m.kv_hidden * m.bytes_per_element / 2**20 * (strategy.cp - 1) / strategy.cp
            b += (1.0 - hw.overlap) * kv_mb / hw.p2p(strategy.cp) * (1.5 if strategy.ckpt else 1.0)
            # one K/V message per hop forward and one dK/dV message per hop backward
            c += 2 * layers * (strategy.cp - 1) * hw.p2p_latency_ms * (1.5 if strategy.ckpt else 1.0)
        return StrategyCost(strategy, float(a), float(b), float(c), self.capacity(strategy))

    def pool(self, strategies: Iterable[SeqStrategy]) -> List[StrategyCost]:
        """Costs of the strategies that fit at least one token into memory."""
        out = [self.strategy_cost(s) for s in strategies]
        return [p for p in out if p.capacity > 0]

    def sp_pool(self, max_sp: Optional[int] = None, *, tp: int = 1, ckpt: bool = False, zero: int = 3,
                minimum: int = 1) -> List[StrategyCost]:
        """Ulysses SP groups of every power-of-two size in ``[minimum, max_sp]`` (FlexSP's option set)."""
        top = self.devices // tp if max_sp is None else min(max_sp, self.devices // tp)
        sizes = [2 ** i for i in range(int(np.log2(top)) + 1) if 2 ** i >= minimum]
        return self.pool(SeqStrategy(tp=tp, sp=s, zero=zero, ckpt=ckpt) for s in sizes)

    def cp_pool(self, max_cp: Optional[int] = None, *, zero: int = 3, ckpt: bool = False,
                minimum: int = 1) -> List[StrategyCost]:
        """Ring-attention CP groups of every power-of-two size in ``[minimum, max_cp]`` (1 = plain DP)."""
        top = self.devices if max_cp is None else min(max_cp, self.devices)
        sizes = [2 ** i for i in range(int(np.log2(top)) + 1) if 2 ** i >= minimum]
        return self.pool(SeqStrategy(cp=s, zero=zero, ckpt=ckpt) for s in sizes)

    def with_hardware(self, **changes) -> "SeqCostModel":
        return SeqCostModel(self.model, replace(self.hardware, **changes), self.devices)


def flexsp_cost_model(devices: int = 64, memory_gb: float = 80.0, *, model: Optional[SeqModelSpec] = None,
                      **hardware) -> SeqCostModel:
    """FlexSP's published cost model: LLaMA-7B, ZeRO-3, A100 (memory in GiB as FlexSP's ``memory_limit_gb``)."""
    memory_gb = check_real(memory_gb, "memory_gb", 0.0, open_low=True, error=PlanError)
    return SeqCostModel(model or SeqModelSpec(), SeqHardware(memory_mb=memory_gb * 1024.0, **hardware), devices)


# Hydraulis' strategy pool for LLaMA-7B on A100-40GB (examples/hydraulis/strategy/
# generate_strategy_7b_A100.py in PKU-DAIR/Hetu): per-stage ms = a·s² + b·s + c.
_HYDRAULIS_7B_A100 = (
    # (tp, pp, a, b, c)
    (1, 1, 0.0, 0.19650879, 33.00625),
    (1, 2, 2.34319074e-06, 8.85071471e-02, 29.37029735),
    (1, 4, 4.95466356e-07, 4.94624083e-02, 10.56197479),
    (1, 8, 4.59723501e-07, 2.46004879e-02, 6.95829235),
    (2, 1, 2.04864710e-06, 9.72555576e-02, 52.17134542),
    (2, 2, 8.87526098e-07, 5.07571080e-02, 24.61292579),
    (2, 4, 4.17956749e-07, 2.63047347e-02, 12.26906398),
    (4, 1, 9.50733003e-07, 5.55708100e-02, 51.37847364),
    (4, 2, 4.60260699e-07, 2.82728634e-02, 26.16629860),
    (8, 1, 5.11853937e-07, 3.26816250e-02, 59.65544894),
)
_HYDRAULIS_MEMORY = {"A": {1: 38, 2: 39, 4: 42, 8: 48}, "B": 197, "alpha": 0.75,
                     "gap": 14281 * 2**20, "safe": 6 * 2**30, "bound": 40536 * 2**20,
                     "L": 32, "H": 4096, "V": 50304}


def _full_finetune_states(tp: int, pp: int, d: int) -> float:
    """Hydraulis' model-state bytes per device for full fine-tuning (ZeRO-sharded over ``d`` replicas)."""
    mem = _HYDRAULIS_MEMORY
    share = mem["alpha"] / d + 1 - mem["alpha"]
    return (mem["L"] / pp) * (mem["H"] ** 2 / tp) * mem["B"] * share + \
        (mem["H"] * mem["V"] / tp) * (32 if pp == 1 else 16) * share


def hydraulis_pool(devices: int, memory_bytes: Optional[float] = None, *,
                   model_states: Optional[Callable[[int, int, int], float]] = None) -> List[StrategyCost]:
    """Hydraulis' 10-strategy pool (7B, A100-40GB) with capacities from its memory regression.

    Model states ``(L/pp)·(H²/tp)·B·(α/D + 1-α) + (H·V/tp)·(32 if pp = 1 else 16)·(α/D + 1-α)``
    bytes with ``D = devices/(tp·pp)`` data-parallel replicas; longest sequence
    ``(bound - safe - states - gap) / (L·H/tp·A[tp])``. Strategies that need more devices than
    ``devices`` or hold no sequence are left out. ``model_states(tp, pp, D)`` replaces the
    states term (bytes per device) for another training regime, e.g. LoRA on a frozen base
    (:func:`sgl.systems.data.lobra_pool.lora_pool`).
    """
    devices = _power_of_two(devices, "devices")
    mem = _HYDRAULIS_MEMORY
    bound = mem["bound"] if memory_bytes is None else check_real(memory_bytes, "memory_bytes", 0.0,
                                                                 open_low=True, error=PlanError)
    out: List[StrategyCost] = []
    for tp, pp, a, b, c in _HYDRAULIS_7B_A100:
        if tp * pp > devices:
            continue
        d = devices // (tp * pp)
        states = (model_states or _full_finetune_states)(tp, pp, d)
        free = bound - mem["safe"] - states - mem["gap"]
        capacity = int(free / (mem["L"] * mem["H"] / tp * mem["A"][tp])) if free > 0 else 0
        if capacity > 0:
            out.append(StrategyCost(SeqStrategy(tp=tp, pp=pp, zero=1), a, b, c, capacity))
    return out
