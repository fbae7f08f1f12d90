"""Allocation traces: the malloc/free sequence of one training step, recorded or loaded.

An :class:`AllocTrace` is ``n`` requests, request ``i`` holding ``size[i]`` bytes from event
``start[i]`` (its malloc) to event ``end[i]`` (its free); events are numbered in program order,
so two requests are live together iff ``start[i] < end[j]`` and ``start[j] < end[i]``.
``phase[i]`` names where the malloc happened (``"fwd:3"`` = forward of layer 3, ``"bwd:3"``,
``"other"``), which the bi-level planner uses to cut the trace into layers.

:func:`record_trace` records a real trace from one forward + backward of a module with a
tensor-lifetime tracer (a :class:`~torch.utils._python_dispatch.TorchDispatchMode`): every op
output whose storage is new is a malloc of ``storage.nbytes()``; the storage is freed when the
last tensor viewing it dies (a :func:`weakref.finalize` per tensor).  Kernel-internal workspaces
are invisible to it and a storage is counted once however many views it has.  The same code runs
on CPU and GPU (``torch.cuda.memory._snapshot`` is GPU-only; this tracer is what CPU runs use).

>>> t = AllocTrace.from_events([("malloc", "a", 100), ("malloc", "b", 50), ("free", "a"), ("free", "b")])
>>> t.size.tolist(), t.start.tolist(), t.end.tolist()
([100, 50], [0, 1], [2, 3])
"""
from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sgl.errors import ConfigError
from sgl.fileio import atomic_write

__all__ = ["AllocTrace", "record_trace", "record_lm_trace", "TensorLifetimeTracer"]


@dataclass
class AllocTrace:
    """``n`` allocation requests: bytes, malloc event, free event, phase label."""

    size: np.ndarray
    start: np.ndarray
    end: np.ndarray
    phase: List[str] = field(default_factory=list)
    spans: Dict[str, List[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.size = np.asarray(self.size, dtype=np.int64)
        self.start = np.asarray(self.start, dtype=np.int64)
        self.end = np.asarray(self.end, dtype=np.int64)
        n = len(self.size)
        if not (len(self.start) == len(self.end) == n):
            raise ConfigError(f"AllocTrace: size/start/end lengths differ ({n}, {len(self.start)}, {len(self.end)})")
        if not self.phase:
            self.phase = ["other"] * n
        if len(self.phase) != n:
            raise ConfigError(f"AllocTrace: {len(self.phase)} phase labels for {n} requests")
        if n and (self.size < 0).any():
            raise ConfigError(f"AllocTrace: request {int(np.argmax(self.size < 0))} has a negative size")
        bad = np.nonzero(self.end <= self.start)[0]
        if len(bad):
            i = int(bad[0])
            raise ConfigError(f"AllocTrace: request {i} is freed at event {int(self.end[i])}, not after its malloc "
                            f"at event {int(self.start[i])}; a free must follow its malloc")

    def __len__(self) -> int:
        return len(self.size)

    @classmethod
    def from_events(cls, events: Iterable[Sequence[Any]]) -> "AllocTrace":
        """From ``("malloc", key, bytes[, phase])`` / ``("free", key)`` events in program order.

        Requests still live at the end are freed at one extra final event.  A free of a key that
        is not live (a free before its malloc, or a double free) is a :class:`ConfigError`.
        """
        live: Dict[Any, int] = {}
        size: List[int] = []
        start: List[int] = []
        end: List[int] = []
        phase: List[str] = []
        t = -1
        for t, ev in enumerate(events):
            kind, key = ev[0], ev[1]
            if kind == "malloc":
                if key in live:
                    raise ConfigError(f"trace event {t}: malloc of {key!r}, which is already live (missing free)")
                live[key] = len(size)
                size.append(int(ev[2]))
                start.append(t)
                end.append(-1)
                phase.append(str(ev[3]) if len(ev) > 3 else "other")
            elif kind == "free":
                if key not in live:
                    raise ConfigError(f"trace event {t}: free of {key!r} before its malloc (or freed twice); "
                                    "each free must follow the malloc of the same block")
                end[live.pop(key)] = t
            else:
                raise ConfigError(f"trace event {t}: kind must be 'malloc' or 'free', got {kind!r}")
        for i in live.values():
            end[i] = t + 1
        return cls(np.array(size, dtype=np.int64), np.array(start, dtype=np.int64),
                   np.array(end, dtype=np.int64), phase)

    def subset(self, index: Sequence[int]) -> "AllocTrace":
        idx = np.asarray(index, dtype=np.int64)
        return AllocTrace(self.size[idx], self.start[idx], self.end[idx], [self.phase[i] for i in idx])

    def transient(self, label: str) -> np.ndarray:
        """Requests malloc'd and freed inside the span of phase ``label`` (one layer's temporaries)."""
        if label not in self.spans:
            raise ConfigError(f"trace has no phase {label!r}; phases: {sorted(self.spans)}")
        lo, hi = self.spans[label]
        return np.nonzero((self.start >= lo) & (self.end <= hi))[0]

    def overlapping_pairs(self) -> np.ndarray:
        """``[m, 2]`` index pairs ``i < j`` whose lifetimes overlap."""
        s, e = self.start, self.end
        both = (s[:, None] < e[None, :]) & (s[None, :] < e[:, None])
        i, j = np.nonzero(np.triu(both, 1))
        return np.stack([i, j], axis=1)

    def to_json(self) -> Dict[str, Any]:
        return {"format": "sgl-alloc-trace-v1", "size": self.size.tolist(), "start": self.start.tolist(),
                "end": self.end.tolist(), "phase": list(self.phase),
                "spans": self.spans}

    def save(self, path: str | Path) -> None:
        with atomic_write(path, "w") as fh:
            json.dump(self.to_json(), fh)

    @classmethod
    def load(cls, path: str | Path) -> "AllocTrace":
        """Read a trace file: our JSON (``size/start/end``) or an ``{"events": [...]}`` list."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read allocation trace {path}: {exc}") from exc
        if isinstance(data, dict) and "events" in data:
            return cls.from_events(data["events"])
        if not isinstance(data, dict) or not {"size", "start", "end"} <= set(data):
            raise ConfigError(f"{path} is not an allocation trace: expected keys size/start/end or events")
        try:
            return cls(data["size"], data["start"], data["end"], data.get("phase") or [], data.get("spans") or {})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: malformed allocation trace ({exc})") from exc


class TensorLifetimeTracer(TorchDispatchMode):
    """Records malloc/free events of op outputs; ``self.phase`` labels new mallocs."""

    def __init__(self) -> None:
        super().__init__()
        self.events: List[Tuple[Any, ...]] = []
        self.refs: Dict[int, int] = {}
        self.phase = "other"
        self._next = 0
        self._key: Dict[int, int] = {}

    def _release(self, ptr: int) -> None:
        self.refs[ptr] -= 1
        if self.refs[ptr] == 0:
            del self.refs[ptr]
            self.events.append(("free", self._key.pop(ptr)))

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(a, torch.Tensor)}
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr == 0:
                continue
            if ptr in inputs and ptr not in self.refs:
                continue  # a view or in-place result of a storage that existed before the trace
            if ptr not in self.refs:
                self.refs[ptr] = 0
                self._key[ptr] = self._next
                self.events.append(("malloc", self._next, storage.nbytes(), self.phase))
                self._next += 1
            self.refs[ptr] += 1
            weakref.finalize(t, self._release, ptr)
        return out


def record_trace(step: Callable[[TensorLifetimeTracer], Any]) -> AllocTrace:
    """Run ``step(tracer)`` under a :class:`TensorLifetimeTracer`; return its :class:`AllocTrace`.

    ``step`` may set ``tracer.phase`` (e.g. from module hooks, see
    :func:`sgl.systems.memory.record_lm_trace`).  Storages still live after ``step`` returns
    (gradients, the result) are freed at the trace's end.
    """
    tracer = TensorLifetimeTracer()
    with tracer:
        result = step(tracer)
    del result
    trace = AllocTrace.from_events([e for e in tracer.events if e[0] != "mark"])
    trace.spans = _spans(tracer.events)
    return trace


def _spans(events: List[Tuple[Any, ...]]) -> Dict[str, List[int]]:
    """``("mark", label, "begin"|"end")`` events -> label -> [first event, last event + 1] (mark-free indices)."""
    spans: Dict[str, List[int]] = {}
    t = 0
    for ev in events:
        if ev[0] == "mark":
            if ev[2] == "begin":
                spans[ev[1]] = [t, t]
            elif ev[1] in spans:
                spans[ev[1]][1] = t
        else:
            t += 1
    return spans


def record_lm_trace(model: torch.nn.Module, tokens: torch.Tensor, loss_fn: Callable[..., torch.Tensor],
                    optimizer: Optional[torch.optim.Optimizer] = None) -> AllocTrace:
    """The trace of one training step (forward, backward, optimiser step) of a block-stacked LM.

    The decoder layers (``model.blocks`` of a TinyLM, ``model.model.layers`` of a Hugging Face
    causal LM) get hooks that label mallocs ``fwd:i`` / ``bwd:i`` and mark each layer's forward and
    backward span; ``loss_fn`` gets the logits (a Hugging Face output's ``.logits``) and ``tokens``.
    """
    from sgl.systems.memory.block_parts import blocks_of

    try:
        blocks = list(blocks_of(model))
    except ConfigError as exc:
        raise ConfigError(f"record_lm_trace: {exc}") from None
    if not blocks:
        raise ConfigError("record_lm_trace: the model needs a `blocks` ModuleList of Transformer layers")

    def step(tracer: TensorLifetimeTracer) -> Any:
        def mark(label: str, edge: str) -> Callable[..., None]:
            def hook(*_: Any) -> None:
                tracer.events.append(("mark", label, edge))
                tracer.phase = label if edge == "begin" else "other"
            return hook

        handles = []
        for i, block in enumerate(blocks):
            handles += [block.register_forward_pre_hook(mark(f"fwd:{i}", "begin")),
                        block.register_forward_hook(mark(f"fwd:{i}", "end")),
                        block.register_full_backward_pre_hook(mark(f"bwd:{i}", "begin")),
                        block.register_full_backward_hook(mark(f"bwd:{i}", "end"))]
        try:
            out = model(tokens)
            loss = loss_fn(out.logits if hasattr(out, "logits") else out, tokens)
            loss.backward()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            return loss.detach()
        finally:
            for h in handles:
                h.remove()

    return record_trace(step)
