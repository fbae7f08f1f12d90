"""The typed configuration of one MoE layer (shared by the Python API, the trainer and the CLI)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sgl._checks import check_choice, check_int, check_real
from sgl.errors import ConfigError

__all__ = ["MoEConfig"]

GATES = ("softmax", "sigmoid")
ACTIVATIONS = ("swiglu", "gelu")


@dataclass(frozen=True)
class MoEConfig:
    """A top-k gated expert FFN.

    Args:
        hidden_size: token width ``h``.
        ffn_hidden_size: width ``f`` of every expert's MLP.
        num_experts: ``E``.
        top_k: experts per token (``1 <= top_k <= num_experts``).
        gate: ``"softmax"`` (Switch/GShard/Mixtral) or ``"sigmoid"`` (DeepSeek-V3) scores.
        activation: ``"swiglu"`` (three matrices) or ``"gelu"`` (two) experts.
        capacity_factor: ``None`` is dropless; else each expert takes at most
            ``ceil(capacity_factor * T * top_k / E)`` of a group's ``T`` tokens, later ones dropped.
        capacity_groups: ``G`` groups the capacity applies to (GShard's groups, Megatron's
            per-rank capacity): the global batch's tokens are cut into ``G`` equal contiguous
            groups and every (group, expert) pair gets its own capacity.  Under ``W`` token-routing
            ranks (EP) each rank holds ``G / W`` groups of its own tokens; ``None`` means one group
            per rank (``G = W``), so a 1-process run with ``capacity_groups=W`` drops exactly the
            tokens a ``W``-rank EP run drops.
        aux_loss_coef: weight of the Switch/GShard balance loss ``E * sum_e f_e * P_e``.
        bias_update_rate: DeepSeek-V3 aux-loss-free balancing: after each training forward the
            selection bias moves by ``rate * sign(mean load - load_e)`` (0 disables it).
        normalize_weights: rescale the top-k gate weights to sum to one.
        seed: initialisation seed of the router and the experts.
        expert_impl: how the experts run: ``"auto"`` (grouped GEMM where torch has it, else
            padded ``bmm``), ``"grouped"``, ``"padded"`` or ``"loop"`` (one matmul per expert, the
            reference); see :mod:`sgl.systems.moe.experts`.
    """

    hidden_size: int
    ffn_hidden_size: int
    num_experts: int = 8
    top_k: int = 2
    gate: str = "softmax"
    activation: str = "swiglu"
    capacity_factor: float | None = None
    aux_loss_coef: float = 0.0
    bias_update_rate: float = 0.0
    normalize_weights: bool = True
    seed: int = 0
    capacity_groups: int | None = None  # after seed: positional construction keeps working
    expert_impl: str = "auto"

    def __post_init__(self) -> None:
        check_int(self.hidden_size, "MoEConfig.hidden_size", 1)
        check_int(self.ffn_hidden_size, "MoEConfig.ffn_hidden_size", 1)
        check_int(self.num_experts, "MoEConfig.num_experts", 1)
        check_int(self.top_k, "MoEConfig.top_k", 1)
        if self.top_k > self.num_experts:
            raise ConfigError(
                f"MoEConfig.top_k={self.top_k} exceeds num_experts={self.num_experts}; "
                "a token cannot pick more experts than exist: lower top_k or add experts")
        check_choice(self.gate, "MoEConfig.gate", GATES)
        check_choice(self.activation, "MoEConfig.activation", ACTIVATIONS)
        if self.capacity_factor is not None:
            check_real(self.capacity_factor, "MoEConfig.capacity_factor (None for dropless)", 0.0,
                       open_low=True)
        if self.capacity_groups is not None:
            check_int(self.capacity_groups, "MoEConfig.capacity_groups (None: one per rank)", 1)
        check_real(self.aux_loss_coef, "MoEConfig.aux_loss_coef", 0.0)
        check_real(self.bias_update_rate, "MoEConfig.bias_update_rate", 0.0)
        check_int(self.seed, "MoEConfig.seed")
        check_choice(self.expert_impl, "MoEConfig.expert_impl", ("auto", "grouped", "padded", "loop"))

    def capacity(self, num_tokens: int) -> int | None:
        """Slots per expert for a group of ``num_tokens`` tokens (``None`` when dropless)."""
        if self.capacity_factor is None:
            return None
        import math

        return max(1, math.ceil(self.capacity_factor * num_tokens * self.top_k / self.num_experts))

    def local_groups(self, routing_ranks: int, num_tokens: int) -> int:
        """Capacity groups of one rank's ``num_tokens`` tokens when ``routing_ranks`` ranks route."""
        if self.capacity_factor is None or self.capacity_groups is None:
            return 1
        if self.capacity_groups % routing_ranks:
            raise ConfigError(f"MoEConfig.capacity_groups={self.capacity_groups} is not a multiple of the "
                              f"{routing_ranks} ranks that route tokens; use a multiple (or None: one per rank)")
        g = self.capacity_groups // routing_ranks
        if num_tokens % g:
            raise ConfigError(f"{num_tokens} tokens per rank cannot form {g} equal capacity groups; "
                              "pick capacity_groups so that every group has the same token count")
        return g

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
