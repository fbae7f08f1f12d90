"""What one execution runs: :class:`ExecConfig` and the deterministic inputs it implies.

Every rank builds the same initial weights (:func:`build_tiny_lm`) and the same global batch
of each step (:func:`batch_for_step`) from the seed, so a parallel run's losses can be
compared with the single-process reference.

>>> cfg = ExecConfig(global_bsz=4)
>>> bool((batch_for_step(cfg, 0) == batch_for_step(cfg, 0)).all()), batch_for_step(cfg, 0).shape[0]
(True, 4)
>>> build_tiny_lm(cfg)
TinyLM(layers=4, hidden=64, heads=4, vocab=256)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.runtime.tiny_lm import TinyLM

__all__ = ["ExecConfig", "batch_for_step", "build_tiny_lm"]


@dataclass
class ExecConfig:
    """Model preset, steps, batch and optimiser of an execution."""

    model: str = "tiny"
    steps: int = 4
    global_bsz: int = 8
    chunks: int = 1
    lr: float = 1e-3
    seed: int = 0
    threads: int = 1

    def model_config(self) -> TransformerConfig:
        return get_model_config(self.model)


def batch_for_step(cfg: ExecConfig, step: int) -> torch.Tensor:
    """The global batch of step ``step`` (same on every rank)."""
    mc = cfg.model_config()
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    return torch.randint(0, mc.vocab_size, (cfg.global_bsz, mc.seq_length), generator=gen)


def build_tiny_lm(cfg: ExecConfig) -> TinyLM:
    """The seeded initial :class:`TinyLM` of ``cfg`` (identical on every rank)."""
    torch.manual_seed(cfg.seed)
    return TinyLM(cfg.model_config())
