"""A small multi-task multi-modal model whose stage operators Spindle plans and its runtime executes.

Per task ``t`` with modalities ``M_t`` and ``C_t`` classes, every operator owns its parameters:

* encoders ``t.<m>`` (``x_m`` rows → ``[rows, H]``): ``vision`` a 2-layer strided Conv2d + mean pool
  + linear, ``text`` an embedding + one Transformer encoder layer + mean pool, ``audio`` a 2-layer
  strided Conv1d + mean pool + linear;
* backbone ``t.llm``: each encoder output becomes ``q`` tokens (``Linear(H, q·H)``), two Transformer
  encoder layers run over the ``|M_t|·q`` tokens, mean pool → ``[rows, H]`` (``arch="tiny"``); with
  ``arch="hf-llama"`` the layers are a tiny Hugging Face Llama's decoder layers (rotary, causal,
  SwiGLU) and its final RMSNorm, :class:`~sgl.systems.data.spindle_hf.LlamaTower`;
* head ``t.head``: ``Linear(H, C_t)``, its loss ``(1 / B_t) Σ_rows CE`` (the task's mean).

The step loss is ``L = Σ_t mean_rows CE_t``. Every operator maps rows to rows, so an operator can
run data parallel over any device set (each device takes a contiguous block of the task's rows).
:func:`spindle_dag` turns the model into a :class:`~sgl.systems.data.spindle_dag.TaskDAG` with
scaling curves measured on this machine by :func:`calibrate_curves`.

>>> import torch
>>> model = MultiModalModel((("vqa", ("vision", "text"), 3),), hidden=16, query_tokens=2)
>>> batch = synthetic_batch(model, rows=4, seed=0)
>>> model.op_names()
['vqa.vision', 'vqa.text', 'vqa.llm', 'vqa.head']
>>> model.loss(batch).dim()
0
"""
from __future__ import annotations

import time
from typing import Dict, List, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl.errors import PlanError

__all__ = ["MultiModalModel", "synthetic_batch", "spindle_dag", "calibrate_curves", "DEFAULT_TASKS", "SPINDLE_ARCHS"]

#: (task, modalities, classes): two tasks, three modalities
DEFAULT_TASKS = (("vqa", ("vision", "text"), 4), ("asr", ("audio",), 8))
MODALITIES = ("vision", "text", "audio")
#: backbone implementations: the TinyLM-style encoder layers, or Hugging Face Llama decoder layers
SPINDLE_ARCHS = ("tiny", "hf-llama")


class _Vision(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.GELU(), nn.Conv2d(16, 32, 3, 2, 1), nn.GELU())
        self.out = nn.Linear(32, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.conv(x).mean((2, 3)))


class _Text(nn.Module):
    def __init__(self, hidden: int, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layer = nn.TransformerEncoderLayer(hidden, 2, 2 * hidden, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(self.embed(x)).mean(1)


class _Audio(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(1, 16, 9, 4, 4), nn.GELU(), nn.Conv1d(16, 32, 9, 4, 4), nn.GELU())
        self.out = nn.Linear(32, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.conv(x).mean(2))


class _Backbone(nn.Module):
    def __init__(self, hidden: int, inputs: int, query_tokens: int, layers: int) -> None:
        super().__init__()
        self.q = query_tokens
        self.lift = nn.ModuleList(nn.Linear(hidden, query_tokens * hidden) for _ in range(inputs))
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(hidden, 2, 4 * hidden, dropout=0.0, batch_first=True)
                                    for _ in range(layers))

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        h = torch.cat([lift(x).view(x.shape[0], self.q, -1) for lift, x in zip(self.lift, xs)], 1)
        for layer in self.layers:
            h = layer(h)
        return h.mean(1)


class MultiModalModel(nn.Module):
    """Encoders per (task, modality), a backbone and a head per task; see the module docstring."""

    def __init__(self, tasks: Sequence[Tuple[str, Sequence[str], int]] = DEFAULT_TASKS, hidden: int = 32,
                 query_tokens: int = 8, backbone_layers: int = 2, vocab: int = 128, text_len: int = 16,
                 image_size: int = 16, audio_len: int = 1024, arch: str = "tiny") -> None:
        super().__init__()
        if not tasks:
            raise PlanError("the multi-modal model needs at least one task")
        if arch not in SPINDLE_ARCHS:
            raise PlanError(f"unknown backbone arch {arch!r}; choose one of {list(SPINDLE_ARCHS)}")
        self.arch = arch
        self.tasks = [(str(n), tuple(m), int(c)) for n, m, c in tasks]
        self.hidden, self.vocab, self.text_len = hidden, vocab, text_len
        self.image_size, self.audio_len = image_size, audio_len
        self.ops = nn.ModuleDict()
        self.inputs: Dict[str, List[str]] = {}
        for name, modalities, classes in self.tasks:
            for m in modalities:
                if m not in MODALITIES:
                    raise PlanError(f"task {name!r}: unknown modality {m!r}; use {list(MODALITIES)}")
                self.ops[f"{name}__{m}"] = (_Vision(hidden) if m == "vision" else _Text(hidden, vocab)
                                           if m == "text" else _Audio(hidden))
                self.inputs[f"{name}.{m}"] = []
            self.ops[f"{name}__llm"] = self._backbone(len(modalities), query_tokens, backbone_layers)
            self.inputs[f"{name}.llm"] = [f"{name}.{m}" for m in modalities]
            self.ops[f"{name}__head"] = nn.Linear(hidden, classes)
            self.inputs[f"{name}.head"] = [f"{name}.llm"]

    def _backbone(self, inputs: int, query_tokens: int, layers: int) -> nn.Module:
        if self.arch == "tiny":
            return _Backbone(self.hidden, inputs, query_tokens, layers)
        from sgl.systems.data.spindle_hf import LlamaTower

        return LlamaTower(self.hidden, inputs, query_tokens, layers)

    def op_names(self) -> List[str]:
        """Operator names ``task.kind`` in a topological order (modules are keyed ``task__kind``)."""
        return [k.replace("__", ".") for k in self.ops.keys()]

    def module(self, op: str) -> nn.Module:
        return self.ops[op.replace(".", "__")]

    @staticmethod
    def task_of(op: str) -> str:
        return op.rsplit(".", 1)[0]

    def run_op(self, op: str, batch: Dict[str, Dict[str, torch.Tensor]], rows: Tuple[int, int],
               inputs: Sequence[torch.Tensor] = ()) -> torch.Tensor:
        """Operator ``op`` on rows ``[lo, hi)`` of its task: an encoder reads the batch, others take ``inputs``.

        A head returns its share of the task's mean loss, ``Σ_{rows} CE / B_t``.
        """
        task, kind = op.rsplit(".", 1)
        lo, hi = rows
        data = batch[task]
        module = self.module(op)
        device = next(module.parameters()).device  # the batch follows the model's device
        if kind in MODALITIES:
            return module(data[kind][lo:hi].to(device))
        if kind == "llm":
            return module(*inputs)
        logits = module(inputs[0])
        return F.cross_entropy(logits, data["label"][lo:hi].to(device), reduction="sum") / data["label"].shape[0]

    def loss(self, batch: Dict[str, Dict[str, torch.Tensor]]) -> torch.Tensor:
        """The single-process step loss ``Σ_t mean CE_t`` (the reference the runtime must equal)."""
        out: Dict[str, torch.Tensor] = {}
        total = None
        for op in self.op_names():
            rows = (0, int(batch[self.task_of(op)]["label"].shape[0]))
            out[op] = self.run_op(op, batch, rows, [out[p] for p in self.inputs[op]])
            if op.endswith(".head"):
                total = out[op] if total is None else total + out[op]
        return total


def synthetic_batch(model: MultiModalModel, rows: int, seed: int = 0,
                    dtype: torch.dtype = torch.float32) -> Dict[str, Dict[str, torch.Tensor]]:
    """Random images, token ids, waveforms and labels, ``rows`` per task (seeded)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, modalities, classes in model.tasks:
        data = {"label": torch.randint(0, classes, (rows,), generator=g)}
        for m in modalities:
            if m == "vision":
                data[m] = torch.randn(rows, 3, model.image_size, model.image_size, generator=g, dtype=dtype)
            elif m == "text":
                data[m] = torch.randint(0, model.vocab, (rows, model.text_len), generator=g)
            else:
                data[m] = torch.randn(rows, 1, model.audio_len, generator=g, dtype=dtype)
        out[name] = data
    return out


def calibrate_curves(model: MultiModalModel, batch: Dict[str, Dict[str, torch.Tensor]], devices: Sequence[int],
                     repeats: int = 3) -> Dict[str, Tuple[Tuple[int, ...], Tuple[float, ...]]]:
    """Per operator, ``(gpus, seconds)``: forward + backward of its ``B/g`` rows on this process, median of ``repeats``.

    Data parallel over ``g`` devices gives each ``⌈B/g⌉`` rows, so ``t(g)`` is the time of that share.
    """
    curves = {}
    for op in model.op_names():
        task = model.task_of(op)
        rows = int(batch[task]["label"].shape[0])
        times = []
        for g in devices:
            share = -(-rows // g)
            param = next(model.module(op).parameters())
            inputs = [torch.randn(share, model.hidden, dtype=param.dtype, device=param.device, requires_grad=True)
                      for _ in model.inputs[op]]
            runs = []
            for _ in range(repeats):
                model.zero_grad(set_to_none=True)
                started = time.perf_counter()
                out = model.run_op(op, batch, (0, share), inputs)
                out.sum().backward()
                runs.append(time.perf_counter() - started)
            times.append(sorted(runs)[len(runs) // 2])
        curves[op] = (tuple(devices), tuple(times))
    model.zero_grad(set_to_none=True)
    return curves


def spindle_dag(model: MultiModalModel, curves: Dict[str, Tuple[Sequence[int], Sequence[float]]],
                rows: int, bytes_per_value: int = 4):
    """The model's operator DAG for :class:`~sgl.systems.data.spindle.SpindlePlanner` (``out_mb``: rows × H values)."""
    from sgl.systems.data.spindle_dag import ScalingCurve, SpindleOp, TaskDAG

    ops = []
    for op in model.op_names():
        if op not in curves:
            raise PlanError(f"no scaling curve for operator {op!r}; calibrate every operator")
        gpus, times = curves[op]
        out_mb = 0.0 if op.endswith(".head") else rows * model.hidden * bytes_per_value / 1e6
        kind = op.rsplit(".", 1)[1]
        ops.append(SpindleOp(op, model.task_of(op), ScalingCurve(tuple(gpus), tuple(times)),
                             tuple(model.inputs[op]), out_mb, kind))
    return TaskDAG(ops)
