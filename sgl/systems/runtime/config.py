"""What one execution runs: :class:`ExecConfig` and the deterministic inputs it implies.

Every rank builds the same initial weights (:func:`build_tiny_lm`, or
:func:`~sgl.systems.runtime.models.build_model` for any ``arch``) and the same global batch of
each step (:func:`batch_for_step`) from the seed, so a parallel run's losses can be compared
with the single-process reference.  Batches are drawn from a seeded host generator (the same
numbers on every backend) and land on ``device``.

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

__all__ = ["ExecConfig", "SCHEDULES", "batch_for_step", "build_tiny_lm"]

#: Pipeline schedules of :mod:`torch.distributed.pipelining` the executor runs ("" = the plan's pipeline_type).
SCHEDULES = ("", "1f1b", "gpipe", "interleaved-1f1b", "zero-bubble")


@dataclass
class ExecConfig:
    """Model preset and implementation, steps, batch, optimiser and pipeline schedule of an execution.

    ``model`` names the shapes (a :func:`~sgl.systems.parallel.get_model_config` preset) and
    ``arch`` the implementation: ``"tiny"`` (:class:`TinyLM`) or ``"hf-llama"`` (``transformers``'
    ``LlamaForCausalLM`` with those shapes).  ``schedule`` overrides the plan's
    ``pipeline_type`` with a :mod:`torch.distributed.pipelining` schedule; the interleaved ones
    run ``virtual_stages`` stages per rank.  ``sequence_parallel`` adds Megatron sequence
    parallelism to tensor-parallel layers (norms and residuals sharded along the sequence,
    all-gather / reduce-scatter around attention and MLP; Hugging Face decoders).
    """

    model: str = "tiny"
    steps: int = 4
    global_bsz: int = 8
    chunks: int = 1
    lr: float = 1e-3
    seed: int = 0
    threads: int = 1
    arch: str = "tiny"
    schedule: str = ""
    virtual_stages: int = 2
    sequence_parallel: bool = False

    def model_config(self) -> TransformerConfig:
        return get_model_config(self.model)


def batch_for_step(cfg: ExecConfig, step: int, device: torch.device | None = None) -> torch.Tensor:
    """The global batch of step ``step`` (same on every rank), on ``device``."""
    mc = cfg.model_config()
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    tokens = torch.randint(0, mc.vocab_size, (cfg.global_bsz, mc.seq_length), generator=gen)
    return tokens if device is None else tokens.to(device)


def build_tiny_lm(cfg: ExecConfig) -> TinyLM:
    """The seeded initial :class:`TinyLM` of ``cfg`` (identical on every rank)."""
    torch.manual_seed(cfg.seed)
    return TinyLM(cfg.model_config())
