"""Per-rank measurements of a run: activation bytes saved for backward, model-state bytes.

:class:`SavedTensorBytes` counts, with autograd's saved-tensor hooks, the bytes of the
tensors kept for backward (parameters excluded) and remembers their peak;
:func:`state_bytes` adds up parameters, gradients and optimiser states a rank actually holds
(local shards of DTensors); :func:`step_report` is the dictionary one rank returns.

>>> import torch
>>> w = torch.nn.Parameter(torch.ones(4, 4))
>>> counter = SavedTensorBytes([w])
>>> with counter.hooks():
...     y = (torch.ones(2, 4) @ w).relu().sum()
>>> counter.peak > 0
True
"""
from __future__ import annotations

import resource
from typing import Any, Dict, Sequence

import torch

__all__ = ["SavedTensorBytes", "local_tensor", "state_bytes", "step_report"]


class SavedTensorBytes:
    """Peak bytes of activations saved for backward (parameters excluded)."""

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        self.param_ptrs = {local_tensor(p).data_ptr() for p in params}
        self.current = 0
        self.peak = 0

    def pack(self, t: torch.Tensor):
        local = local_tensor(t)
        size = 0 if local.data_ptr() in self.param_ptrs else local.numel() * local.element_size()
        self.current += size
        self.peak = max(self.peak, self.current)
        return (t, size)

    def unpack(self, packed):
        t, size = packed
        self.current -= size
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def local_tensor(t: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor; any other tensor as it is."""
    return t.to_local() if hasattr(t, "to_local") else t


def state_bytes(params: Sequence[torch.Tensor], opt: torch.optim.Optimizer) -> int:
    """Bytes of parameters, gradients and (non-scalar) optimiser states held on this rank."""
    total = 0
    for p in params:
        total += local_tensor(p).numel() * local_tensor(p).element_size()
        if p.grad is not None:
            total += local_tensor(p.grad).numel() * local_tensor(p.grad).element_size()
    for state in opt.state.values():
        for value in state.values():
            if torch.is_tensor(value) and value.dim() > 0:
                total += local_tensor(value).numel() * local_tensor(value).element_size()
    return total


def step_report(losses, times, params, opt, counter: SavedTensorBytes) -> Dict[str, Any]:
    """One rank's report: losses, median steady step ms, model-state / activation / RSS MB."""
    steady = times[1:] or times
    return {
        "losses": losses,
        "step_ms": 1000.0 * sorted(steady)[len(steady) // 2],
        "model_state_mb": state_bytes(params, opt) / 2 ** 20,
        "activation_peak_mb": counter.peak / 2 ** 20,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
