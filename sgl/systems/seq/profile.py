"""A measured machine profile that the sequence planners accept (``sgl plan calibrate`` writes it).

:func:`~sgl.systems.seq.profile_fit.calibrate_machine` runs ``world_size`` processes (:func:`sgl.comm.spawn`, gloo on a CPU) that
time, all at once, the parts of one training micro-batch of the runtime's model on this machine
(fwd + bwd, the fastest of ``repeats``: on a shared machine the others carry other people's load) and then the collectives the executors call, and fits by
non-negative least squares on relative error

.. math::

    T_\\text{attn}(s) = a\\,s^2 + a_1 s + a_0, \\quad T_\\text{lin}(s) = b\\,s + b_0,
    \\quad T_\\text{head}(s) = h\\,s + h_0, \\quad T_\\text{op}(m) = α_\\text{op} + β_\\text{op}\\, m

(``s`` tokens of one sequence, attention and token-wise work per layer, embedding + LM head + loss
once per micro-batch, ``m`` bytes per rank for ``op`` in all-reduce, all-to-all, send/recv).  The
whole model on one device costs ``α_1 s² + α_2 s + β`` ms -- FlexSP's per-sequence form --, fitted
on the whole model's own samples (the step executor's packed path,
:func:`sgl.systems.seq.calibrate.runtime_paths`) jointly with ``L·T_attn``, which shares the
quadratic term ``α_1 = L a`` (each part's constant carries its own per-call overhead, so summing
the parts would over-count).  ``α_2`` splits into the LM head's ``h`` and ``L`` layers' token-wise
share.  Ulysses and ring attention are also timed on one sequence sharded over all the processes:
the busiest rank's quadratic term against ``a / world`` gives ``sp_quadratic_factor`` and
``cp_quadratic_factor`` (ring attention on contiguous causal shards is unbalanced: the last rank
meets every earlier block, ``(2d-1)/d`` of an even share for ``d`` ranks).
:meth:`MachineProfile.seq_cost_model` turns ``β_op`` into the cost model's bandwidths and ``α_op``
into per-call latencies (:class:`~sgl.systems.seq.cost.SeqHardware`), so :class:`FlexSPPlanner`,
:class:`HydraulisPlanner` (:meth:`MachineProfile.hydraulis_pool`), :class:`DynamicMeshPlanner` and
:class:`SwitchingPlanner` plan with measured terms, and :meth:`MachineProfile.malleus_model` gives a
:class:`MalleusModel`.  Activation memory per token is the most the whole model saves for backward
per token over the calibrated lengths (the packed attention's mask grows with ``s²``, so longer
sequences than calibrated may need more).  :func:`predict_step_ms` is the step time a plan
should take under a cost model: the busiest device's group work plus the gradient all-reduce and
the optimiser step.

The file is JSON with a format version, a fingerprint of the machine (host, CPUs, torch, device),
the model it was measured for, the threads, and every raw sample; :meth:`MachineProfile.load`
refuses another format version or missing fields with a :class:`~sgl.errors.PlanError`.

>>> import math
>>> link = LinkFit(alpha_s=1e-4, beta_s_per_byte=1e-9)
>>> math.isclose(link.ms(2**20), 0.1 + 2**20 * 1e-6)
True
"""
from __future__ import annotations

import json
import os
import platform
import socket
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import PlanError
from sgl.systems.seq.cost import SeqCostModel, SeqHardware, SeqModelSpec, SeqStrategy, StrategyCost
from sgl.systems.seq.plan import StepPlan

__all__ = ["FORMAT_VERSION", "LinkFit", "MachineProfile", "predict_step_ms", "machine_fingerprint", "QUICK",
           "DEFAULT"]

#: bump when the file's fields change meaning; a file of another version must be re-measured
FORMAT_VERSION = 1
#: (lengths, repeats, message sizes in bytes, link repeats) of a full and a ``quick`` calibration
DEFAULT = ((128, 256, 512, 1024, 2048), 4, (2**12, 2**16, 2**20, 2**23), 5)
QUICK = ((16, 32, 64), 1, (2**12, 2**16, 2**20), 2)
#: Hydraulis' (tp, pp) strategy set (its 7B pool), ZeRO-1
HYDRAULIS_LAYOUTS = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (8, 1))


@dataclass(frozen=True)
class LinkFit:
    """``T(m) = alpha_s + beta_s_per_byte · m`` seconds for ``m`` bytes per rank of one collective."""

    alpha_s: float
    beta_s_per_byte: float

    def ms(self, nbytes: float) -> float:
        return 1e3 * (self.alpha_s + self.beta_s_per_byte * float(nbytes))

    @property
    def cost_model_gbps(self) -> float:
        """Bandwidth in the cost model's unit (MB per ms: ``time_ms = MB / gbps``)."""
        return 1.0 / (2**20 * 1e3 * self.beta_s_per_byte) if self.beta_s_per_byte > 0 else 1e10


def machine_fingerprint(device: Optional[str] = None) -> Dict[str, Any]:
    """Host name, CPU count, torch version and device kind (``device``, default :func:`sgl.device.get_device`)."""
    import torch

    from sgl.device import get_device

    kind = str(device) if device is not None else str(get_device())
    if kind.startswith("cuda") and torch.cuda.is_available():
        kind = f"{kind} ({torch.cuda.get_device_name(torch.device(kind))})"
    return {"hostname": socket.gethostname(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
            "device": kind, "machine": platform.machine(), "python": platform.python_version()}


@dataclass
class MachineProfile:
    """Measured compute, memory and collective terms of this machine for one model (module doc).

    Compute terms are ms: ``attention_ms_per_token2`` and ``linear_ms_per_token`` per layer,
    ``head_ms_per_token`` and ``micro_batch_ms`` for the whole model, ``optimizer_ms`` per step.

    >>> links = {op: LinkFit(1e-4, 1e-9) for op in ("all_reduce", "all_to_all", "send_recv")}
    >>> p = MachineProfile(model={"num_layers": 2, "hidden_size": 64}, attention_ms_per_token2=1e-5,
    ...                    linear_ms_per_token=0.01, head_ms_per_token=0.002, micro_batch_ms=2.0, optimizer_ms=1.0,
    ...                    act_mb_per_token=0.02, params=10**5, layer_params=4 * 10**4, links=links, threads=1,
    ...                    world_size=2, fingerprint={})
    >>> sp2 = p.seq_cost_model(devices=2, memory_gb=1.0).strategy_cost(SeqStrategy(sp=2))
    >>> round(sp2.c, 3)                      # 2.0 ms + 8 all-to-alls per layer x 2 layers x 0.1 ms latency
    3.6
    """

    model: Dict[str, Any]
    attention_ms_per_token2: float
    linear_ms_per_token: float
    head_ms_per_token: float
    micro_batch_ms: float
    optimizer_ms: float
    act_mb_per_token: float
    params: int
    layer_params: int
    links: Dict[str, LinkFit]
    threads: int
    world_size: int
    fingerprint: Dict[str, Any]
    samples: Dict[str, Any] = field(default_factory=dict)
    sp_quadratic_factor: float = 1.0
    cp_quadratic_factor: float = 1.0
    bytes_per_element: int = 4
    created: str = ""
    format_version: int = FORMAT_VERSION
    #: the step executor timed per strategy (``{"budget", "devices", "fits": {"ulysses:2": [a, b, c, o]}}``:
    #: ``o + Σ_mb [c + Σ (a·s² + b·s)]`` ms per step); empty when calibrated without ``executor=True``
    strategy_fits: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("attention_ms_per_token2", "linear_ms_per_token", "head_ms_per_token", "micro_batch_ms",
                     "optimizer_ms"):
            check_real(getattr(self, name), f"MachineProfile.{name}", 0.0, error=PlanError)
        for name in ("act_mb_per_token", "sp_quadratic_factor", "cp_quadratic_factor"):
            check_real(getattr(self, name), f"MachineProfile.{name}", 0.0, open_low=True, error=PlanError)
        if not isinstance(self.model, dict) or not {"num_layers", "hidden_size"} <= set(self.model):
            raise PlanError(f"machine profile's model {self.model!r} needs num_layers and hidden_size: re-run "
                            f"`sgl plan calibrate`")
        check_int(self.params, "MachineProfile.params", 1, error=PlanError)
        check_int(self.layer_params, "MachineProfile.layer_params", 1, error=PlanError)
        missing = [op for op in ("all_reduce", "all_to_all", "send_recv") if op not in self.links]
        if missing:
            raise PlanError(f"machine profile has no fit for {missing}: re-run `sgl plan calibrate`")

    # ------------------------------------------------------------------ derived terms
    @property
    def layers(self) -> int:
        return int(self.model["num_layers"])

    @property
    def alpha1(self) -> float:
        """ms per token² of the whole model on one device."""
        return self.layers * self.attention_ms_per_token2

    @property
    def alpha2(self) -> float:
        """ms per token of the whole model on one device."""
        return self.layers * self.linear_ms_per_token + self.head_ms_per_token

    def micro_batch_ms_of(self, lengths: Sequence[int]) -> float:
        """Fitted fwd + bwd ms of one micro-batch holding ``lengths`` on one device."""
        s = np.asarray(lengths, dtype=np.float64)
        return float(np.sum(self.alpha1 * s * s + self.alpha2 * s) + self.micro_batch_ms) if s.size else 0.0

    def gradient_sync_ms(self, devices: int) -> float:
        """One all-reduce of every gradient over ``devices`` ranks (ring volume ``2(N-1)/N``; 0 for one)."""
        devices = check_int(devices, "devices", 1, error=PlanError)
        if devices == 1:
            return 0.0
        link = self.links["all_reduce"]
        ring = 2 * (devices - 1) / devices        # the 2-rank measurement has ring factor 1
        return 1e3 * (link.alpha_s + link.beta_s_per_byte * self.params * self.bytes_per_element * ring)

    def seq_cost_model(self, devices: int, memory_gb: float = 8.0, *, reserve_gb: float = 0.0) -> SeqCostModel:
        """A :class:`SeqCostModel` with this machine's compute, memory and collective terms.

        One local node: every group size uses the 2-rank bandwidths (``node_size = devices``);
        ring attention is not overlapped with compute here (``overlap = 0``).
        """
        memory_gb = check_real(memory_gb, "memory_gb", 0.0, open_low=True, error=PlanError)
        devices = check_int(devices, "devices", 1, error=PlanError)
        sizes = [2 ** i for i in range(int(np.log2(max(devices, 1))) + 1)]
        a2a, ar, p2p = self.links["all_to_all"], self.links["all_reduce"], self.links["send_recv"]
        spec = SeqModelSpec(layers=self.layers, hidden=int(self.model["hidden_size"]),
                            kv_hidden=int(self.model["hidden_size"]), params_b=self.params / 1e9,
                            act_mb_per_token=self.act_mb_per_token, bytes_per_element=float(self.bytes_per_element))
        hardware = SeqHardware(
            memory_mb=memory_gb * 1024.0, reserve_mb=reserve_gb * 1024.0, alpha1=self.alpha1, alpha2=self.alpha2,
            beta=self.micro_batch_ms, alltoall_gbps={d: a2a.cost_model_gbps for d in sizes},
            allreduce_gbps={d: ar.cost_model_gbps for d in sizes}, p2p_gbps=p2p.cost_model_gbps, overlap=0.0,
            node_size=max(devices, 1), p2p_inter_gbps=p2p.cost_model_gbps, alltoall_latency_ms=a2a.ms(0),
            allreduce_latency_ms=ar.ms(0), p2p_latency_ms=p2p.ms(0), sp_quadratic_factor=self.sp_quadratic_factor,
            cp_quadratic_factor=self.cp_quadratic_factor)
        return SeqCostModel(spec, hardware, devices)

    def hydraulis_pool(self, devices: int, memory_gb: float = 8.0) -> List[StrategyCost]:
        """Hydraulis' (tp, pp) strategies (ZeRO-1) costed with this profile, for :class:`HydraulisPlanner`."""
        model = self.seq_cost_model(devices, memory_gb)
        return model.pool(SeqStrategy(tp=tp, pp=pp, zero=1) for tp, pp in HYDRAULIS_LAYOUTS if tp * pp <= devices)

    def malleus_model(self, tokens: int, micro_batches: int = 8, memory_gb: float = 8.0,
                      seq_length: Optional[int] = None):
        """A :class:`MalleusModel`: one layer's fwd + bwd of a ``tokens``-token micro-batch of sequences of
        ``seq_length`` (default ``tokens``), fp32 Adam states (16 B per parameter), and TP overheads
        ``ω_t = t · 4 · T_allreduce(tokens · h · bytes · 2(t-1)/t) / τ`` from the measured all-reduce."""
        from sgl.systems.seq.malleus import MalleusModel

        tokens = check_int(tokens, "tokens", 1, error=PlanError)
        seq = tokens if seq_length is None else check_int(seq_length, "seq_length", 1, error=PlanError)
        count = max(1, tokens // seq)
        per_layer_const = self.micro_batch_ms / self.layers
        layer_ms = count * (self.attention_ms_per_token2 * seq * seq + self.linear_ms_per_token * seq) \
            + per_layer_const + self.head_ms_per_token * tokens / self.layers   # head work spread over layers
        hidden = int(self.model["hidden_size"])
        link = self.links["all_reduce"]
        overhead = {1: 0.0}
        for t in (2, 4, 8):
            overhead[t] = t * 4 * link.ms(tokens * hidden * self.bytes_per_element * 2 * (t - 1) / t) / layer_ms
        embed_params = self.params - self.layers * self.layer_params
        return MalleusModel(layers=self.layers, layer_ms=layer_ms, state_mb=self.layer_params * 16 / 2**20,
                            act_mb=self.act_mb_per_token * tokens / self.layers,
                            embed_mb=embed_params * 16 / 2**20, memory_mb=memory_gb * 1024.0,
                            micro_batches=check_int(micro_batches, "micro_batches", 1, error=PlanError),
                            tp_overhead=overhead)

    def predict_step_ms(self, plan: StepPlan, devices: int, memory_gb: float = 8.0, *, barrier: bool = False,
                        optimizer: bool = True) -> float:
        """:func:`predict_step_ms` with this profile's cost model, plus the gradient all-reduce and (unless
        ``optimizer=False``, a step without an optimiser) the measured Adam step."""
        model = self.seq_cost_model(devices, memory_gb)
        fixed = self.gradient_sync_ms(devices) + (self.optimizer_ms if optimizer else 0.0)
        return predict_step_ms(plan, model, fixed_ms=fixed, barrier=barrier)

    def fitted_cost_model(self, devices: int, budget: Optional[int] = None):
        """A :class:`~sgl.systems.seq.fitted_cost.FittedCostModel` from the executor's per-strategy fits
        (capacity ``budget × degree``; default the calibration's budget), or ``None`` without them."""
        fits = (self.strategy_fits or {}).get("fits")
        if not fits:
            return None
        from sgl.systems.seq.fitted_cost import FittedCostModel

        try:
            parsed = {(k.split(":")[0], int(k.split(":")[1])): [float(x) for x in v] for k, v in fits.items()}
        except (ValueError, IndexError, TypeError):
            raise PlanError(f"the profile's strategy_fits are malformed ({fits!r}): re-run `sgl plan calibrate`") \
                from None
        return FittedCostModel(parsed, int(budget or self.strategy_fits.get("budget", 1024)), devices)

    def fingerprint_differences(self, other: Optional[Dict[str, Any]] = None) -> List[str]:
        """``key: recorded != current`` for each fingerprint entry that differs from this machine."""
        recorded = self.fingerprint.get("device")
        current = other if other is not None else machine_fingerprint(str(recorded).split(" ")[0] if recorded
                                                                      else None)
        return [f"{k}: {self.fingerprint.get(k)!r} != {current.get(k)!r}" for k in sorted(current)
                if self.fingerprint.get(k) != current.get(k)]

    # ------------------------------------------------------------------ file format
    def to_dict(self) -> dict:
        data = asdict(self)
        data["links"] = {k: asdict(v) for k, v in self.links.items()}
        return data

    @classmethod
    def from_dict(cls, data: Any, source: str = "the profile") -> "MachineProfile":
        if not isinstance(data, dict):
            raise PlanError(f"{source} is not a machine profile (a JSON object): re-run `sgl plan calibrate`")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise PlanError(f"{source} has machine-profile format version {version!r}, this SGL reads version "
                            f"{FORMAT_VERSION}: re-run `sgl plan calibrate --out PATH` on this machine")
        names = [f.name for f in fields(cls)]
        required = [n for n in names if n not in ("samples", "bytes_per_element", "created", "format_version",
                                                  "sp_quadratic_factor", "cp_quadratic_factor", "strategy_fits")]
        missing = [n for n in required if n not in data]
        if missing:
            raise PlanError(f"{source} lacks the fields {missing}: it is incomplete or not written by "
                            f"`sgl plan calibrate`; re-run it")
        kwargs = {n: data[n] for n in names if n in data}
        try:
            kwargs["links"] = {k: LinkFit(float(v["alpha_s"]), float(v["beta_s_per_byte"]))
                               for k, v in dict(data["links"]).items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PlanError(f"{source} has malformed links {data['links']!r}: each needs alpha_s and "
                            f"beta_s_per_byte; re-run `sgl plan calibrate`") from None
        return cls(**kwargs)

    def save(self, path) -> str:
        """Write the profile as JSON atomically (tmp + rename); returns the path."""
        from sgl.fileio import atomic_write

        with atomic_write(path, "w") as handle:
            json.dump(self.to_dict(), handle, indent=1)
        return str(path)

    @classmethod
    def load(cls, path) -> "MachineProfile":
        """Read and validate a profile written by :meth:`save` (PlanError with the fix otherwise)."""
        try:
            with open(path) as handle:
                data = json.load(handle)
        except FileNotFoundError:
            raise PlanError(f"machine profile {path} does not exist: write one with "
                            f"`sgl plan calibrate --out {path}`") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise PlanError(f"cannot read machine profile {path} ({exc}): re-run `sgl plan calibrate`") from None
        return cls.from_dict(data, f"machine profile {path}")


def predict_step_ms(plan: StepPlan, model: SeqCostModel, *, fixed_ms: float = 0.0, barrier: bool = False) -> float:
    """Predicted ms of one executed step of ``plan`` under ``model``.

    Every group is re-costed with ``model`` (whatever cost model planned it): its 1F1B time over its
    micro-batches.  Groups sit on consecutive devices in each phase (:meth:`StepPlan.device_load`);
    the step takes the busiest device's total, or with ``barrier=True`` the sum over phases of the
    slowest group (every phase ends in a barrier).  ``fixed_ms`` is added once (the gradient
    all-reduce and optimiser step of :meth:`MachineProfile.predict_step_ms`).  ``plan.switch_ms`` is
    not: an executor creates its process groups once and caches them.

    >>> import numpy as np
    >>> from sgl.systems.seq import flexsp_cost_model
    >>> from sgl.systems.seq.plan import GroupWork
    >>> model = flexsp_cost_model(2, 80)
    >>> cost = model.strategy_cost(SeqStrategy(sp=1))
    >>> lengths = np.array([1000, 3000])
    >>> plan = StepPlan("demo", [[GroupWork(cost, [[0]], lengths), GroupWork(cost, [[1]], lengths)]])
    >>> predict_step_ms(plan, model) == plan.time
    True
    """
    fixed_ms = check_real(fixed_ms, "fixed_ms", 0.0, error=PlanError)
    load = np.zeros(model.devices)
    total = 0.0
    for phase in plan.phases:
        start, slowest = 0, 0.0
        for g in phase:
            cost = model.strategy_cost(g.cost.strategy)
            t = cost.replica_time([g.lengths[mb] for mb in g.micro_batches])
            if start + g.devices > model.devices:
                raise PlanError(f"the {plan.method} plan uses more than the cost model's {model.devices} devices: "
                                f"build the cost model for the plan's device count")
            load[start:start + g.devices] += t
            start += g.devices
            slowest = max(slowest, t)
        total += slowest
    return float((total if barrier else load.max(initial=0.0)) + fixed_ms)
