"""LoRA-Inlaid's multi-task quantization: one GPTQ base calibrated on every task's data.

Each linear layer of the base model gets one GPTQ quantization under the *multi-task* Hessian

    H = (1/|T|) Σ_t H_t,    H_t = X_t X_t^T / n_t,

where ``X_t`` are the layer's inputs on task ``t``'s calibration text *with task t's LoRA
adapter active* (so the base is fitted to the activations every adapter produces). One
quantized base then serves all adapters. Adding a task needs a calibration pass over the new
task only: the ``H_t`` of the old tasks are kept, the sum is updated and every layer is
re-quantized from the float weights (:meth:`MultiTaskQuantizer.add_task` + :meth:`quantize`).
Embeddings and the output head stay in floating point. :meth:`MultiTaskQuantizer.packed_model`
returns the served form: every base linear replaced by an :class:`~.int4.Int4Linear` (packed
int4 codes and, per group, a 12-bit log scale code and an int4 zero in one uint16 -- or fp16
scales with ``scale_format="fp16"``), with no float copy of the quantized weights.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import copy

import torch

from sgl._checks import check_choice, check_int
from sgl.errors import ConfigError
from sgl.systems.serving.lora.gptq import gptq, gptq_codes, quantized_bytes, rtn
from sgl.systems.serving.lora.int4 import Int4Linear
from sgl.systems.serving.lora.scales import check_scale_format

__all__ = ["MultiTaskQuantizer", "quantizable_linears"]


def quantizable_linears(model: torch.nn.Module, skip: Sequence[str] = ("lm_head",)) -> Dict[str, torch.nn.Linear]:
    """The base model's ``nn.Linear`` layers (LoRA factors and ``skip``-named ones left out)."""
    out = {name: m for name, m in model.named_modules()
           if isinstance(m, torch.nn.Linear) and "lora_" not in name and not any(s in name for s in skip)}
    if not out:
        raise ConfigError(f"{type(model).__name__} has no linear layers to quantize")
    return out


class MultiTaskQuantizer:
    """Collect per-task Hessians of every base linear layer and quantize with their mean.

    Args:
        model: a ``transformers`` model or a ``peft.PeftModel`` with one adapter per task.
        bits, group_size: the GPTQ grid (``group_size`` must divide each layer's input width).
        scale_format: how group scales are stored (:mod:`~.scales`): ``"log12"`` (12-bit log codes,
            ``bits <= 4``) or ``"fp16"``; :meth:`quantize`, :meth:`packed_model` and
            :meth:`memory_bytes` use it unless told otherwise.
    """

    def __init__(self, model: torch.nn.Module, bits: int = 4, group_size: int = 32, damp: float = 0.01,
                 scale_format: str = "log12"):
        self.model = model
        self.bits = check_int(bits, "bits", 2, 8)
        self.group_size = check_int(group_size, "group_size", minimum=1)
        self.damp = damp
        self.scale_format = check_scale_format(scale_format)
        self._format(None)
        self.layers = quantizable_linears(model)
        for name, lin in self.layers.items():
            if lin.in_features % self.group_size:
                raise ConfigError(f"group_size={group_size} does not divide the {lin.in_features} inputs of {name}")
        self.float_weights = {n: m.weight.detach().clone() for n, m in self.layers.items()}
        self.hessians: Dict[str, Dict[str, torch.Tensor]] = {}

    @property
    def tasks(self) -> List[str]:
        return list(self.hessians)

    @torch.no_grad()
    def add_task(self, task: str, batches: Iterable[torch.Tensor], adapter: Optional[str] = None) -> None:
        """Calibrate on ``batches`` of input ids ``[B, L]`` of ``task`` (with ``adapter`` active).

        The float weights are put back for the pass, so a task added after :meth:`quantize`
        sees the same base the earlier tasks saw.
        """
        if task in self.hessians:
            raise ConfigError(f"task {task!r} is already calibrated; tasks: {self.tasks}")
        self.restore()
        if adapter is not None:
            if not hasattr(self.model, "set_adapter"):
                raise ConfigError("adapter given but the model is not a peft model with adapters")
            self.model.set_adapter(adapter)
        sums = {n: torch.zeros(m.in_features, m.in_features, dtype=torch.float64) for n, m in self.layers.items()}
        counts = {n: 0 for n in self.layers}

        def hook(name):
            def fn(module, inputs, output):
                x = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).double()
                sums[name] += x.T @ x
                counts[name] += x.shape[0]
            return fn

        handles = [m.register_forward_hook(hook(n)) for n, m in self.layers.items()]
        try:
            seen = 0
            for ids in batches:
                self.model(input_ids=ids)
                seen += 1
        finally:
            for h in handles:
                h.remove()
        if not seen:
            raise ConfigError(f"task {task!r}: no calibration batches given")
        self.hessians[task] = {n: (sums[n] / max(counts[n], 1)).float() for n in self.layers}

    def hessian(self, tasks: Optional[Sequence[str]] = None) -> Dict[str, torch.Tensor]:
        """Per layer, the mean Hessian over ``tasks`` (default: every calibrated task)."""
        tasks = list(self.hessians) if tasks is None else list(tasks)
        if not tasks:
            raise ConfigError("no task is calibrated yet: call add_task first")
        for t in tasks:
            check_choice(t, "task", list(self.hessians))
        return {n: sum(self.hessians[t][n] for t in tasks) / len(tasks) for n in self.layers}

    def _format(self, scale_format: Optional[str]) -> str:
        fmt = self.scale_format if scale_format is None else check_scale_format(scale_format)
        if fmt == "log12" and self.bits > 4:
            raise ConfigError(f"scale_format='log12' packs a {self.bits}-bit zero with the 12-bit scale code "
                              f"in 16 bits: bits must be <= 4; use scale_format='fp16'")
        return fmt

    @torch.no_grad()
    def quantize(self, tasks: Optional[Sequence[str]] = None, method: str = "gptq",
                 scale_format: Optional[str] = None) -> None:
        """Replace every base weight by its quantized value (``gptq`` with the tasks' Hessian, or ``rtn``)."""
        method = check_choice(method, "method", ("gptq", "rtn"))
        fmt = self._format(scale_format)
        hs = self.hessian(tasks) if method == "gptq" else None
        for n, m in self.layers.items():
            w = self.float_weights[n]
            q = (gptq(w, hs[n], self.bits, self.group_size, damp=self.damp, scale_format=fmt) if method == "gptq"
                 else rtn(w, self.bits, self.group_size, scale_format=fmt))
            m.weight.copy_(q)

    @torch.no_grad()
    def packed_model(self, tasks: Optional[Sequence[str]] = None, scale_format: Optional[str] = None
                     ) -> torch.nn.Module:
        """A copy of the model whose base linears are :class:`~.int4.Int4Linear` (4-bit GPTQ with the tasks' Hessian).

        Its forward equals the model's after :meth:`quantize` with the same tasks and scale format
        (the packed weights decode to the dequantized GPTQ weights exactly). The original model is
        untouched. ``scale_format`` defaults to the quantizer's.
        """
        if self.bits != 4:
            raise ConfigError(f"packed_model stores int4 codes: bits must be 4, got {self.bits}")
        fmt = self._format(scale_format)
        hs = self.hessian(tasks)
        model = copy.deepcopy(self.model)      # the base linears' weights are replaced below, never kept
        for name in self.layers:
            parent_name, _, attr = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            lin = getattr(parent, attr)
            r = gptq_codes(self.float_weights[name], hs[name], 4, self.group_size, damp=self.damp, scale_format=fmt)
            setattr(parent, attr, Int4Linear.from_codes(r.codes, r.scales, r.zeros, self.group_size, lin.bias,
                                                        scale_format=fmt, scale_base=r.scale_base,
                                                        scale_step=r.scale_step))
        return model

    @torch.no_grad()
    def restore(self) -> None:
        """Put the float weights back."""
        for n, m in self.layers.items():
            m.weight.copy_(self.float_weights[n])

    def memory_bytes(self, scale_format: Optional[str] = None) -> Tuple[int, int]:
        """``(quantized, float)`` bytes of the base model (float = the fp16 copy of the same weights)."""
        fmt = self._format(scale_format)
        quant = fp16 = 0
        seen = {id(m.weight) for m in self.layers.values()}
        for n, m in self.layers.items():
            rows, cols = m.weight.shape
            quant += quantized_bytes(m.weight.numel(), rows, cols, self.bits, self.group_size, fmt)
            fp16 += 2 * m.weight.numel()
        rest = sum(2 * p.numel() for name, p in self.model.named_parameters()
                   if id(p) not in seen and "lora_" not in name)
        return quant + rest, fp16 + rest
