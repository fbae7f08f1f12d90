"""Per-task LoRA adapters (``peft``) on one base decoder, and multi-LoRA serving on it.

:func:`train_adapters` fits one LoRA adapter per task (``W x + (α/r) B A x`` on the attention
and MLP projections, base frozen) on the task's token blocks with next-token cross-entropy;
:class:`MultiLoRAServer` answers requests for any loaded adapter on the one (quantized) base
and counts adapter switches; a request for an unknown adapter is an error naming the loaded ones.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import torch

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["train_adapters", "MultiLoRAServer", "next_token_accuracy", "TARGETS"]

#: the Llama projections an adapter adapts
TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def train_adapters(model: Any, tasks: Dict[str, torch.Tensor], *, rank: int = 8, steps: int = 100,
                   batch_size: int = 8, lr: float = 3e-3, seed: int = 0) -> Any:
    """A ``peft.PeftModel`` over ``model`` with one trained adapter per task (``tasks``: name -> blocks ``[n, L]``)."""
    from peft import LoraConfig, get_peft_model

    if not tasks:
        raise ConfigError("train_adapters needs at least one task")
    rank = check_int(rank, "rank", minimum=1)
    steps = check_int(steps, "steps", minimum=1)
    lr = check_real(lr, "lr", 0.0, 1.0, open_low=True)
    config = lambda: LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(TARGETS), lora_dropout=0.0)  # noqa
    peft_model = None
    for k, (name, blocks) in enumerate(tasks.items()):
        if peft_model is None:
            peft_model = get_peft_model(model, config(), adapter_name=name)
        else:
            peft_model.add_adapter(name, config())
        peft_model.set_adapter(name)
        params = [p for n, p in peft_model.named_parameters() if f".{name}." in n and "lora_" in n]
        for p in params:
            p.requires_grad_(True)
        opt = torch.optim.AdamW(params, lr=lr)
        gen = torch.Generator().manual_seed(seed + k)
        peft_model.train()
        for _ in range(steps):
            rows = blocks[torch.randint(0, len(blocks), (batch_size,), generator=gen)]
            loss = peft_model(input_ids=rows, labels=rows).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    peft_model.eval()
    return peft_model


@torch.no_grad()
def next_token_accuracy(model: Any, blocks: torch.Tensor, batch_size: int = 16) -> float:
    """Share of positions whose arg-max next-token prediction is the true token."""
    hits = total = 0
    for s in range(0, len(blocks), batch_size):
        rows = blocks[s:s + batch_size]
        pred = model(input_ids=rows).logits[:, :-1].argmax(-1)
        hits += int((pred == rows[:, 1:]).sum())
        total += pred.numel()
    return hits / max(total, 1)


class MultiLoRAServer:
    """Serve requests for several adapters on one shared base (``peft.PeftModel``)."""

    def __init__(self, peft_model: Any):
        if not hasattr(peft_model, "peft_config"):
            raise ConfigError("MultiLoRAServer needs a peft.PeftModel with the task adapters loaded")
        self.model = peft_model
        self.current = None
        self.switches = 0

    @property
    def adapters(self) -> List[str]:
        return list(self.model.peft_config)

    def use(self, adapter: str) -> None:
        """Activate ``adapter`` (counted as a switch when it changes)."""
        if adapter not in self.model.peft_config:
            raise ConfigError(f"unknown adapter {adapter!r}; loaded adapters: {self.adapters}")
        if adapter != self.current:
            self.model.set_adapter(adapter)
            self.current = adapter
            self.switches += 1

    @torch.no_grad()
    def generate(self, adapter: str, input_ids: torch.Tensor, max_new_tokens: int = 16) -> torch.Tensor:
        """Greedy continuation of ``input_ids [B, L]`` with ``adapter``."""
        self.use(adapter)
        return self.model.generate(input_ids=input_ids, max_new_tokens=check_int(max_new_tokens, "max_new_tokens",
                                                                               minimum=1),
                                   do_sample=False, pad_token_id=0)
