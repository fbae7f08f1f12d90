"""Many LoRA adapters on one frozen base, fine-tuned jointly in one batch (LobRA's execution model).

:class:`MultiLoRALinear` wraps a frozen ``nn.Linear`` ``W`` with ``T`` adapters; sample ``i`` of
a batch uses adapter ``t_i``:

``y_i = W x_i + (α / r) · B_{t_i} A_{t_i} x_i``,  ``A_t ∈ R^{r×d_in}``, ``B_t ∈ R^{d_out×r}``,

computed for the whole batch with two batched products (gathering each sample's ``A``/``B``).
``A`` starts Kaiming-uniform and ``B`` at zero (as PEFT's ``LoraConfig`` default), so training
starts from the base model. :func:`add_multi_lora` swaps the target linears of any model
(``q_proj``/``v_proj`` of a Hugging Face Llama by default) and :func:`joint_lora_loss` sums the
per-task mean losses, ``L = Σ_t mean_{tokens of task t} ℓ``: since adapter ``t`` only touches
task ``t``'s samples and the base is frozen, ``∂L/∂(A_t, B_t)`` equals the gradient of
fine-tuning adapter ``t`` alone on its samples (tested against ``peft``).

>>> import torch
>>> layer = MultiLoRALinear(torch.nn.Linear(8, 6), num_adapters=3, rank=2)
>>> layer.adapter_ids = torch.tensor([0, 2])
>>> layer(torch.randn(2, 5, 8)).shape
torch.Size([2, 5, 6])
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["MultiLoRALinear", "add_multi_lora", "set_adapters", "joint_lora_loss", "lora_parameters"]


class MultiLoRALinear(nn.Module):
    """A frozen linear layer plus ``num_adapters`` rank-``rank`` LoRA adapters chosen per sample."""

    def __init__(self, base: nn.Linear, num_adapters: int, rank: int, alpha: float = 16.0) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ConfigError(f"MultiLoRALinear wraps an nn.Linear, got {type(base).__name__}")
        self.num_adapters = check_int(num_adapters, "num_adapters", minimum=1)
        width = min(base.in_features, base.out_features)
        self.rank = check_int(rank, "LoRA rank", minimum=1)
        if self.rank > width:
            raise ConfigError(f"LoRA rank {rank} is above the layer width {width} "
                              f"({base.in_features} -> {base.out_features}); use a rank <= {width}")
        self.scaling = check_real(alpha, "LoRA alpha", 0.0, open_low=True) / self.rank
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(self.num_adapters, self.rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(self.num_adapters, base.out_features, self.rank))
        self.adapter_ids: torch.Tensor = torch.zeros(1, dtype=torch.long)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for t in range(self.num_adapters):
            nn.init.kaiming_uniform_(self.lora_A.data[t], a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ids = self.adapter_ids.to(x.device)
        if ids.numel() == 1 and x.shape[0] != 1:
            ids = ids.expand(x.shape[0])
        if x.dim() > 2 and ids.numel() != x.shape[0] and ids.numel() == x.shape[:-1].numel():
            # one id per token (a packed [1, T, in] micro-batch of a Hugging Face decoder): each token is a row
            return self._routed(x.reshape(-1, 1, x.shape[-1]), ids).reshape(*x.shape[:-1], -1)
        if ids.numel() != x.shape[0]:
            raise ConfigError(f"{ids.numel()} adapter ids for a batch of {x.shape[0]} samples")
        return self._routed(x, ids)

    def _routed(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        a, b = self.lora_A[ids], self.lora_B[ids]                  # [N, r, in], [N, out, r]
        flat = x.reshape(x.shape[0], -1, x.shape[-1])               # [N, S, in]
        delta = torch.bmm(torch.bmm(flat, a.transpose(1, 2)), b.transpose(1, 2))
        return self.base(x) + self.scaling * delta.reshape(*x.shape[:-1], -1)

    def extra_repr(self) -> str:
        return f"adapters={self.num_adapters}, rank={self.rank}, scaling={self.scaling:g}"


def add_multi_lora(model: nn.Module, num_adapters: int, rank: int, alpha: float = 16.0,
                   target_modules: Sequence[str] = ("q_proj", "v_proj")) -> List[MultiLoRALinear]:
    """Freeze ``model`` and replace every ``nn.Linear`` whose name ends with a target by a :class:`MultiLoRALinear`."""
    for p in model.parameters():
        p.requires_grad_(False)
    targets = [(name, module) for name, module in model.named_modules()
               if isinstance(module, nn.Linear) and name.split(".")[-1] in set(target_modules)]
    if not targets:
        raise ConfigError(f"no nn.Linear named {list(target_modules)} in the model; pass target_modules")
    layers = []
    for name, module in targets:
        parent = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
        layer = MultiLoRALinear(module, num_adapters, rank, alpha)
        setattr(parent, name.rpartition(".")[2], layer)
        layers.append(layer)
    return layers


def set_adapters(model: nn.Module, adapter_ids: torch.Tensor) -> None:
    """Route every sample of the next forward through its adapter (one id per sample)."""
    ids = torch.as_tensor(adapter_ids, dtype=torch.long).reshape(-1)
    for module in model.modules():
        if isinstance(module, MultiLoRALinear):
            if ids.numel() and (ids.min() < 0 or ids.max() >= module.num_adapters):
                raise ConfigError(f"adapter ids must be in [0, {module.num_adapters}), got {ids.tolist()}")
            module.adapter_ids = ids


def lora_parameters(model: nn.Module, adapter: int) -> Dict[str, torch.Tensor]:
    """``{name: tensor}`` of one adapter's A and B in every layer (views into the stacked parameters)."""
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, MultiLoRALinear):
            out[f"{name}.lora_A"] = module.lora_A[adapter]
            out[f"{name}.lora_B"] = module.lora_B[adapter]
    return out


def joint_lora_loss(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor, adapter_ids: torch.Tensor,
                    attention_mask: Any = None) -> torch.Tensor:
    """``Σ_t`` (mean next-token loss over task ``t``'s labelled tokens) for a mixed-task batch."""
    set_adapters(model, adapter_ids)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    targets = labels[:, 1:]
    token_loss = F.cross_entropy(logits.transpose(1, 2), targets.clamp_min(0), reduction="none")
    valid = (targets != -100).float()
    ids = torch.as_tensor(adapter_ids).reshape(-1)
    total = logits.new_zeros(())
    for task in torch.unique(ids).tolist():
        rows = ids == task
        total = total + (token_loss[rows] * valid[rows]).sum() / valid[rows].sum().clamp_min(1.0)
    return total
