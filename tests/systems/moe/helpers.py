"""Shared small shapes for the MoE tests (imported by the test modules)."""
from __future__ import annotations

import torch

from sgl.systems.moe import MoEConfig
from sgl.systems.moe.train import TrainSpec
from sgl.systems.parallel.model import TransformerConfig

CFG = TransformerConfig("moe-test", 2, 32, 4, 64, 64, 16)
MOE = MoEConfig(hidden_size=32, ffn_hidden_size=32, num_experts=4, top_k=2, aux_loss_coef=0.01,
                bias_update_rate=0.001)
TIMEOUT = 60.0


def batches(steps: int = 3, batch: int = 4, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, CFG.vocab_size, (steps, batch, CFG.seq_length + 1), generator=gen)


def spec(**kw) -> TrainSpec:
    base = dict(model=CFG, moe=MOE, batches=batches(), lr=0.05, optimizer="sgd", dispatch="ep",
                record_grads=True, timeout=30.0)
    base.update(kw)
    return TrainSpec(**base)
