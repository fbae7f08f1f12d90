"""Transformer shapes the planner reasons about (no weights, no graph code).

A :class:`TransformerConfig` is what a parallel plan is searched for: layer count, hidden
size, heads, FFN width, vocabulary and sequence length.  Presets mirror the LLaMA family
(``llama-7b``, ``llama-13b``, ...) and a tiny model the executor trains on CPU.

>>> from sgl.systems.parallel import get_model_config
>>> cfg = get_model_config("llama-7b")
>>> cfg.num_layers, cfg.hidden_size, cfg.num_heads
(32, 4096, 32)
>>> round(cfg.layer_params() / 1e6, 1)   # parameters of one decoder layer, millions
202.4
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Mapping

from sgl.errors import ConfigError, PlanError

__all__ = ["TransformerConfig", "MODEL_PRESETS", "get_model_config"]


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only Transformer: ``num_layers`` identical layers plus embedding and LM head.

    Args:
        name: label used in plan file names.
        num_layers: decoder layers (the planner assigns one strategy to each).
        hidden_size: model width ``h``.
        num_heads: attention heads; must be divisible by every tensor-parallel degree used.
        ffn_hidden_size: MLP width (LLaMA uses a gated MLP with three ``h x ffn`` matrices).
        vocab_size: vocabulary; must be divisible by the vocabulary TP degree.
        seq_length: tokens per sample.
        gated_mlp: three MLP matrices (LLaMA SwiGLU) instead of two (GPT).
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    ffn_hidden_size: int
    vocab_size: int
    seq_length: int
    gated_mlp: bool = True

    def __post_init__(self) -> None:
        for field in ("num_layers", "hidden_size", "num_heads", "ffn_hidden_size", "vocab_size", "seq_length"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"TransformerConfig.{field} must be a positive int, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"TransformerConfig: hidden_size={self.hidden_size} is not divisible by "
                f"num_heads={self.num_heads}; pick a head count that divides the width"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def layer_params(self) -> int:
        """Weights of one layer: 4h^2 attention + (3 or 2)·h·ffn MLP + 2h norms."""
        h, f = self.hidden_size, self.ffn_hidden_size
        return 4 * h * h + (3 if self.gated_mlp else 2) * h * f + 2 * h

    def other_params(self) -> int:
        """Embedding and (untied) LM head plus the final norm."""
        return 2 * self.vocab_size * self.hidden_size + self.hidden_size

    def layer_flops_per_token(self) -> float:
        """Forward FLOPs of one layer per token (matmuls + attention scores)."""
        return 2.0 * self.layer_params() + 4.0 * self.seq_length * self.hidden_size

    def head_flops_per_token(self) -> float:
        return 2.0 * self.vocab_size * self.hidden_size

    def check_tp(self, tp: int, *, vocab_tp: int | None = None) -> None:
        """Raise :class:`PlanError` when ``tp`` does not divide heads/FFN (or vocab by ``vocab_tp``)."""
        if self.num_heads % tp:
            raise PlanError(
                f"model {self.name!r}: num_heads={self.num_heads} is not divisible by tensor-parallel "
                f"degree {tp}; use a TP degree that divides the head count (or --max-tp {_largest_pow2_divisor(self.num_heads)})"
            )
        if self.ffn_hidden_size % tp:
            raise PlanError(
                f"model {self.name!r}: ffn_hidden_size={self.ffn_hidden_size} is not divisible by "
                f"tensor-parallel degree {tp}"
            )
        vtp = tp if vocab_tp is None else vocab_tp
        if self.vocab_size % vtp:
            raise PlanError(
                f"model {self.name!r}: vocab_size={self.vocab_size} is not divisible by vocabulary "
                f"tensor-parallel degree {vtp}; pad the vocabulary to a multiple of {vtp} "
                f"(e.g. {-(-self.vocab_size // vtp) * vtp}) or lower the degree"
            )

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TransformerConfig":
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown TransformerConfig key(s) {sorted(unknown)}; valid: {sorted(known)}")
        return cls(**dict(data))


def _largest_pow2_divisor(n: int) -> int:
    return n & -n


MODEL_PRESETS: Dict[str, TransformerConfig] = {
    "llama-7b": TransformerConfig("llama-7b", 32, 4096, 32, 11008, 32000, 2048),
    "llama-13b": TransformerConfig("llama-13b", 40, 5120, 40, 13824, 32000, 2048),
    "llama-30b": TransformerConfig("llama-30b", 60, 6656, 52, 17920, 32000, 2048),
    "llama2-70b": TransformerConfig("llama2-70b", 80, 8192, 64, 28672, 32000, 2048),
    "gpt-1.3b": TransformerConfig("gpt-1.3b", 24, 2048, 16, 8192, 50257, 2048, gated_mlp=False),
    # The executor's CPU model: small enough that 2 gloo processes train it in seconds.
    "tiny": TransformerConfig("tiny", 4, 64, 4, 128, 256, 32),
    # CPU calibration model for benchmarks/bench_plan.py: big enough that compute dominates.
    "cpu-small": TransformerConfig("cpu-small", 4, 256, 8, 704, 2048, 128),
}


def get_model_config(name: str | TransformerConfig) -> TransformerConfig:
    """A preset by name (case-insensitive) or the config itself."""
    if isinstance(name, TransformerConfig):
        return name
    key = str(name).strip().lower()
    if key not in MODEL_PRESETS:
        raise ConfigError(f"unknown model {name!r}; presets: {sorted(MODEL_PRESETS)} (or pass a TransformerConfig)")
    return MODEL_PRESETS[key]
