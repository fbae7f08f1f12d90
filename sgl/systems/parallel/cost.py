"""Galvatron's per-layer memory and time cost model, vectorised over strategies.

Memory of one layer on one device (MB), for a strategy with degrees (pp, tp, dp):

* model states ``4 * P / tp * r`` with ``P`` the layer's fp32 parameter MB and the ZeRO ratio
  ``r`` = 1 (DDP), ``7/8 * 1/dp + 1/8`` (ZeRO-2) or ``1/dp`` (ZeRO-3); with gradient
  accumulation (chunks > 1) ZeRO-2 keeps ``2/8`` and ZeRO-3 ``1/8`` unsharded (Galvatron's ratios);
* activations ``A[tp] * m * k`` with ``m = B / (chunks * dp)`` samples per micro-batch and
  ``k`` micro-batches in flight: ``min(pp - stage, chunks)`` for 1F1B, ``chunks`` for GPipe;
  checkpointing keeps only the layer input (``A[checkpoint]``);
* OSDP mode adds, once per plan, the largest transient buffer of gathered ZeRO-3 weights,
  ``P / 2 / tp / split`` for a layer whose operators are split in ``split`` slices;
* embedding/LM head: the profile's model states and activation at the vocabulary-TP degree
  ``vtp`` (the degree-1 figures ``/ vtp`` where that degree was not profiled), with the same
  ZeRO ratio over ``dp = N / (pp * vtp)``.  ``default_dp_type="zero3"`` (Galvatron 3.0) makes
  every part whose ``dp_types_enc`` flag is 0 ZeRO-3 as well.

Time of one layer for one training iteration (ms):

* forward ``f * B / dp / tp`` (``f`` = profiled forward ms per sample), backward
  ``bct_fct_coe * forward`` plus one more forward with checkpointing;
* Megatron TP: 4 all-reduces of the micro-batch activation per layer (6 with checkpointing),
  Ulysses SP: 8 all-to-alls of a 1/tp slice (12 with checkpointing);
* DP gradient all-reduce ``2 (dp-1)/dp * P/2/tp`` MB (bf16; ``P/tp`` for fp32), ZeRO-3 adds an all-gather per
  micro-batch in forward and backward; both overlap with compute, each slowed down by the
  profiled ``overlap_coe``: ``max(a, b) + (coe - 1) * min(a, b)``;
* a layout change between consecutive layers (TP degree/consecutiveness/SP) re-distributes the
  activation: ``2 * chunks * (g-1)/g * act / bw(g)``;
* pipeline p2p: forward activation and backward gradient per micro-batch at each boundary;
* embedding/head under vocabulary TP: two all-reduces of the micro-batch activation (Megatron)
  or two all-to-alls of a ``1/vtp`` slice (Ulysses, ``vsp``) per micro-batch.

Bandwidths come from the hardware profile, chosen by whether a group crosses nodes.

>>> from sgl.systems.parallel import CostModel, ClusterSpec, enumerate_strategies, load_builtin_profiles
>>> model, hw = load_builtin_profiles("llama-7b")
>>> cost = CostModel("llama-7b", model, hw, ClusterSpec(1, 8))
>>> strategies = enumerate_strategies(ClusterSpec(1, 8), pp=1, space="dp+tp", ckpt=False)
>>> [s.label for s in strategies]
['1-1-8', '1-2-4', '1-2-4*', '1-4-2', '1-4-2*', '1-8-1']
>>> mem = cost.layer_memory(strategies, global_bsz=16, chunks=1, stage=0)
>>> bool(mem[0] > mem[-1])   # DP keeps the whole layer; TP=8 keeps an eighth of it
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from sgl.errors import PlanError
from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.parallel.profiles import HardwareProfile, ModelProfile
from sgl.systems.parallel.space import ClusterSpec, Strategy

__all__ = ["CostOptions", "CostModel", "OtherOption"]

_MB = 1024.0 * 1024.0


@dataclass(frozen=True)
class CostOptions:
    """Knobs of the cost model (Galvatron's defaults)."""

    pipeline_type: str = "pipedream_flush"   # 1F1B; or "gpipe"
    default_dp_type: str = "ddp"             # what dp_types_enc = 0 means: "ddp", "zero2" or "zero3"
    bct_fct_coe: float = 2.0                 # backward ≈ 2 x forward
    bytes_per_value: int = 2                 # bf16 activations and gradients on the wire
    osdp_split_overhead: float = 0.02        # extra compute per additional weight slice (OSDP)

    def __post_init__(self) -> None:
        if self.pipeline_type not in ("pipedream_flush", "gpipe"):
            raise PlanError(f"pipeline_type must be 'pipedream_flush' (1F1B) or 'gpipe', got {self.pipeline_type!r}")
        if self.default_dp_type not in ("ddp", "zero2", "zero3"):
            raise PlanError(f"default_dp_type must be 'ddp', 'zero2' or 'zero3', got {self.default_dp_type!r}")
        if not self.bct_fct_coe > 0:
            raise PlanError(f"bct_fct_coe must be > 0, got {self.bct_fct_coe}")


@dataclass(frozen=True)
class OtherOption:
    """How the embedding and LM head run: vocabulary-TP degree, ZeRO-3 or not, Ulysses SP or Megatron TP.

    Galvatron's plan keys ``vtp``, ``vocab_sdp`` (``embed_sdp`` before 3.0) and ``vsp``.
    """

    vtp: int
    sdp: bool
    sp: bool = False


class CostModel:
    """Memory (MB) and time (ms) of layers and of embedding/head for a model on a cluster."""

    def __init__(self, config: TransformerConfig | str, profile: ModelProfile, hardware: HardwareProfile,
                 cluster: ClusterSpec, options: CostOptions | None = None) -> None:
        self.config = get_model_config(config)
        self.profile = profile
        self.hardware = hardware
        self.cluster = cluster
        self.options = options or CostOptions()
        if hardware.devices_per_node != cluster.devices_per_node or hardware.num_nodes != cluster.num_nodes:
            raise PlanError(
                f"hardware profile is for {hardware.num_nodes}x{hardware.devices_per_node} devices but the cluster is "
                f"{cluster.num_nodes}x{cluster.devices_per_node}; load the profile of this cluster shape"
            )

    # ------------------------------------------------------------------ helpers
    @property
    def _wire(self) -> float:
        """Bytes on the wire per fp32 parameter byte (bf16 gradients: 0.5)."""
        return self.options.bytes_per_value / 4.0

    def _ms(self, megabytes: np.ndarray | float, gbps: np.ndarray | float) -> np.ndarray | float:
        """Transfer time in ms of ``megabytes`` at ``gbps`` GB/s."""
        return np.asarray(megabytes) / (np.asarray(gbps) * 1024.0) * 1000.0

    def _crosses(self, s: Strategy, group: str) -> bool:
        """Whether the TP (or DP) group of ``s`` spans more than one node."""
        per_node = self.cluster.devices_per_node
        per_stage = self.cluster.num_devices // s.pp
        size = s.tp if group == "tp" else s.dp
        if size <= 1:
            return False
        # Consecutive groups span `size` ranks; strided ones span the whole stage.
        consecutive = s.tp_consec if group == "tp" else (not s.tp_consec or s.tp == 1)
        span = size if consecutive else per_stage
        return span > per_node

    def micro_batch(self, global_bsz: int, chunks: int, dp: int) -> float:
        return global_bsz / (chunks * dp)

    def sharded(self, sdp: bool) -> bool:
        """Whether a part with ``dp_types_enc`` flag ``sdp`` runs ZeRO-3 (flag set, or ZeRO-3 by default)."""
        return sdp or self.options.default_dp_type == "zero3"

    def zero_ratio(self, sdp: bool, dp: int, chunks: int) -> float:
        if dp <= 1:
            return 1.0
        if self.sharded(sdp):
            return 1.0 / dp if chunks == 1 else 7 / 8 / dp + 1 / 8
        if self.options.default_dp_type == "zero2":
            return 7 / 8 / dp + 1 / 8 if chunks == 1 else 6 / 8 / dp + 2 / 8
        return 1.0

    def in_flight(self, stage: int, pp: int, chunks: int) -> int:
        if self.options.pipeline_type == "gpipe":
            return chunks
        return min(pp - stage, chunks)

    # ------------------------------------------------------------------ layers
    def layer_memory(self, strategies: Sequence[Strategy], global_bsz: int, chunks: int, stage: int) -> np.ndarray:
        """MB one layer occupies on each device of ``stage`` (array over strategies)."""
        p = self.profile
        out = np.empty(len(strategies))
        for i, s in enumerate(strategies):
            states = 4.0 * p.param_mb / s.tp * self.zero_ratio(s.sdp, s.dp, chunks)
            m = self.micro_batch(global_bsz, chunks, s.dp)
            act = p.activation(s.tp, sp=s.sp, ckpt=s.ckpt) * m * self.in_flight(stage, s.pp, chunks)
            out[i] = states + act
        return out

    def gather_buffer(self, strategies: Sequence[Strategy]) -> np.ndarray:
        """MB of the transient full-weight buffer a ZeRO-3 layer all-gathers (OSDP's memory term).

        Only one layer's weights are gathered at a time, so a plan's peak adds the *largest*
        buffer of its layers once; operator splitting gathers ``split`` slices one after another.
        """
        return np.array([self.profile.param_mb * self._wire / s.tp / s.split if self.sharded(s.sdp) else 0.0
                         for s in strategies])

    def layer_time(self, strategies: Sequence[Strategy], global_bsz: int, chunks: int) -> np.ndarray:
        """ms one layer costs per iteration on each device (array over strategies)."""
        p, o, cfg = self.profile, self.options, self.config
        out = np.empty(len(strategies))
        for i, s in enumerate(strategies):
            samples = global_bsz / s.dp
            fwd = p.fwd_ms * samples / s.tp
            if s.split > 1:
                fwd *= 1.0 + o.osdp_split_overhead * (s.split - 1)
            bwd = o.bct_fct_coe * fwd + (fwd if s.ckpt else 0.0)
            m = self.micro_batch(global_bsz, chunks, s.dp)
            act_mb = m * cfg.seq_length * cfg.hidden_size * o.bytes_per_value / _MB
            tp_comm = 0.0
            if s.tp > 1:
                bw = self.hardware.bandwidth(s.tp, crosses_nodes=self._crosses(s, "tp"))
                if s.sp:
                    count = 12 if s.ckpt else 8
                    tp_comm = chunks * count * self._ms((s.tp - 1) / s.tp * act_mb / s.tp, bw)
                else:
                    count = 6 if s.ckpt else 4
                    tp_comm = chunks * count * self._ms(2 * (s.tp - 1) / s.tp * act_mb, bw)
            fwd_comm = bwd_comm = 0.0
            if s.dp > 1:
                bw = self.hardware.bandwidth(s.dp, crosses_nodes=self._crosses(s, "dp"))
                grad_mb = p.param_mb * self._wire / s.tp
                allreduce = self._ms(2 * (s.dp - 1) / s.dp * grad_mb, bw)
                if self.sharded(s.sdp):
                    gather = allreduce / 2.0
                    fwd_comm = chunks * gather
                    bwd_comm = chunks * gather + allreduce / 2.0
                else:
                    bwd_comm = allreduce
            out[i] = (_overlap(fwd, fwd_comm, self.hardware.overlap_coe)
                      + _overlap(bwd, bwd_comm, self.hardware.overlap_coe) + tp_comm)
        return out

    def transition_time(self, layouts: Sequence[tuple], pp: int, global_bsz: int, chunks: int) -> np.ndarray:
        """ms to re-lay activations between consecutive layers with layouts (tp, consec, sp)."""
        cfg, o = self.config, self.options
        per_stage = self.cluster.num_devices // pp
        n = len(layouts)
        out = np.zeros((n, n))
        for a, la in enumerate(layouts):
            for b, lb in enumerate(layouts):
                if la == lb:
                    continue
                g = max(la[0], lb[0], 2)
                samples = global_bsz * g / (chunks * per_stage)
                act_mb = samples * cfg.seq_length * cfg.hidden_size * o.bytes_per_value / _MB
                crosses = g > self.cluster.devices_per_node or not (la[1] and lb[1])
                crosses = crosses and per_stage > self.cluster.devices_per_node
                bw = self.hardware.bandwidth(g, crosses_nodes=crosses)
                out[a, b] = 2 * chunks * self._ms((g - 1) / g * act_mb, bw)
        return out

    # ------------------------------------------------------------------ embedding / head
    def other_options(self, pp: int, *, sdp: bool = True) -> List[OtherOption]:
        """Embedding/head options of a ``pp``-stage plan; ``sdp=False`` leaves out ZeRO-3 (e.g. ``--space 3d``)."""
        per_stage = self.cluster.num_devices // pp
        out = []
        vtp = 1
        while vtp <= per_stage:
            if self.config.vocab_size % vtp == 0 and self.config.num_heads % vtp == 0:
                for shard in ((False, True) if per_stage // vtp > 1 and sdp else (False,)):
                    out.append(OtherOption(vtp, shard))
            vtp *= 2
        return out

    def other_cost(self, option: OtherOption, pp: int, stage: int, global_bsz: int, chunks: int) -> Tuple[float, float]:
        """(memory MB, time ms) of the embedding/head part living on ``stage``."""
        p, o, cfg = self.profile, self.options, self.config
        if pp == 1:
            parts = [("pp_off", 1.0)]
        else:
            parts = ([("first", 0.0)] if stage == 0 else []) + ([("last", 1.0)] if stage == pp - 1 else [])
        if not parts:
            return 0.0, 0.0
        per_stage = self.cluster.num_devices // pp
        dp = per_stage // option.vtp
        m = self.micro_batch(global_bsz, chunks, dp)
        memory = time = 0.0
        for key, head_share in parts:
            states, act = p.other_memory(key, option.vtp, sp=option.sp)   # per device at this vtp
            memory += states * self.zero_ratio(option.sdp, dp, chunks)
            memory += act * m * self.in_flight(stage, pp, chunks)
            # The LM head dominates the FLOPs; the embedding lookup is nearly free.
            fwd = p.other_fwd_ms * head_share * (global_bsz / dp) / option.vtp
            comm = 0.0
            if dp > 1:
                crosses = dp * option.vtp > self.cluster.devices_per_node and option.vtp < self.cluster.devices_per_node
                bw = self.hardware.bandwidth(dp, crosses_nodes=crosses and per_stage > self.cluster.devices_per_node)
                grad_mb = states / 4.0 * self._wire
                comm = self._ms(2 * (dp - 1) / dp * grad_mb, bw) * (1.5 if self.sharded(option.sdp) else 1.0)
            vcomm = 0.0
            if option.vtp > 1:
                act_mb = m * cfg.seq_length * cfg.hidden_size * o.bytes_per_value / _MB
                bw = self.hardware.bandwidth(option.vtp, crosses_nodes=option.vtp > self.cluster.devices_per_node)
                g = option.vtp
                # Megatron vocab TP: an all-reduce of the activation each way; Ulysses SP: all-to-alls of a 1/g slice.
                per_op = (g - 1) / g * act_mb / g if option.sp else 2 * (g - 1) / g * act_mb
                vcomm = chunks * 2 * self._ms(per_op, bw)
            time += fwd + _overlap(o.bct_fct_coe * fwd, comm, self.hardware.overlap_coe) + vcomm
        return memory, time

    def p2p_time(self, pp: int, global_bsz: int, chunks: int) -> float:
        """ms a stage spends sending activations / gradients over one boundary per iteration."""
        if pp == 1:
            return 0.0
        cfg = self.config
        per_stage = self.cluster.num_devices // pp
        samples = global_bsz / (chunks * per_stage)
        act_mb = samples * cfg.seq_length * cfg.hidden_size * self.options.bytes_per_value / _MB
        return 2 * chunks * self._ms(act_mb, self.hardware.p2p(pp))


def _overlap(compute: float, comm: float, coe: float) -> float:
    """Compute and communication overlapped, both slowed by ``coe`` while they overlap."""
    if comm <= 0:
        return compute
    return max(compute, comm) + (coe - 1.0) * min(compute, comm)
