"""Spindle executed: a wavefront schedule of a multi-task multi-modal step on real processes.

An :class:`ExecPlan` gives every operator of a :class:`~sgl.systems.data.spindle_model.MultiModalModel`
a set of global ranks and fixes one issue order (a topological order). :func:`spindle_exec_plan`
takes it from a :class:`~sgl.systems.data.spindle.SpindleResult` (the planner's per-wave allocation
and device mapping), :func:`big_pipeline_plan` and :func:`even_split_plan` from the two baselines
the modelled bench uses.

:class:`SpindleRuntime` runs one step. An operator on ``g`` ranks is data parallel: rank ``i`` of
its set takes the ``i``-th contiguous block of the task's rows. Every rank walks the same issue
order, so the transfers happen in one global sequence and blocking send/recv cannot deadlock:

* forward, operator ``v``: for each input ``u`` and each (producer rank, consumer rank) pair
  whose row blocks overlap, the overlap moves (a local slice when the ranks coincide, else
  :func:`sgl.comm.send` / :func:`sgl.comm.recv`); the members then run ``v`` on their rows, the
  inputs held as leaves that require grad;
* backward, in reverse issue order: the members back-propagate ``v`` from the summed output
  gradients (a head from its loss), then each input leaf's gradient travels the same pairs in
  reverse and is added into the producer's output gradient;
* finally every parameter gradient is all-reduced (sum) over the world, so every rank holds
  ``∂L/∂θ`` of the single-process step (ranks that did not run an operator contribute zeros).

A rank starts an operator as soon as its own inputs and its earlier operators are done, so
operators of different devices overlap as in the planner's replay (no wave barriers).

>>> from sgl.systems.data.spindle_model import MultiModalModel, synthetic_batch
>>> model = MultiModalModel((("asr", ("audio",), 3),), hidden=8, query_tokens=2, audio_len=64)
>>> plan = big_pipeline_plan(model, 1)
>>> loss = SpindleRuntime(model).step(plan, synthetic_batch(model, 4))
>>> abs(loss - float(model.loss(synthetic_batch(model, 4)).detach())) < 1e-5
True
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import torch

from sgl.errors import PlanError

__all__ = ["ExecPlan", "spindle_exec_plan", "big_pipeline_plan", "even_split_plan", "SpindleRuntime", "row_blocks"]


@dataclass
class ExecPlan:
    """``devices[op]`` (global ranks) per operator name and the issue ``order``; ``world`` devices in all."""

    devices: Dict[str, Tuple[int, ...]]
    order: List[str]
    world: int
    label: str = ""
    predicted_s: float = float("nan")
    extra: Dict[str, float] = field(default_factory=dict)

    def validate(self, model, world: int) -> None:
        """Raise :class:`PlanError` unless the plan fits ``world`` ranks and runs every operator once, in order."""
        if self.world != world:
            raise PlanError(f"the plan is for {self.world} devices but the world has {world} processes; "
                            f"plan for {world} devices or launch {self.world} processes")
        names = model.op_names()
        if sorted(self.order) != sorted(names) or set(self.devices) != set(names):
            raise PlanError(f"the plan must place and order each of the model's operators {names} exactly once")
        for op, ranks in self.devices.items():
            bad = [r for r in ranks if not 0 <= int(r) < world]
            if not ranks or bad or len(set(ranks)) != len(ranks):
                raise PlanError(f"operator {op!r} runs on ranks {list(ranks)}; they must be distinct ids in "
                                f"[0, {world})" + (f" ({bad} are outside the world)" if bad else ""))
        seen = set()
        for op in self.order:
            missing = [p for p in model.inputs[op] if p not in seen]
            if missing:
                raise PlanError(f"the issue order runs {op!r} before its input(s) {missing}")
            seen.add(op)


def row_blocks(rows: int, ranks: Sequence[int]) -> List[Tuple[int, int, int]]:
    """``(rank, lo, hi)``: contiguous row blocks of ``rows`` over ``ranks`` (the first ``rows % g`` one longer)."""
    g = len(ranks)
    base, extra = divmod(rows, g)
    out, lo = [], 0
    for i, r in enumerate(ranks):
        hi = lo + base + (1 if i < extra else 0)
        out.append((int(r), lo, hi))
        lo = hi
    return out


def spindle_exec_plan(dag, result, world: int) -> ExecPlan:
    """The planner's device mapping and issue order (``result.devices``, the replayed schedule's entries)."""
    devices = {dag.ops[i].name: tuple(int(d) for d in ranks) for i, ranks in result.devices.items()}
    order = [dag.ops[e.op].name for e in result.schedule.entries]
    return ExecPlan(devices, order, world, "spindle", result.makespan)


def big_pipeline_plan(model, world: int) -> ExecPlan:
    """Every operator on all ranks, in topological order (one data-parallel job over the union model)."""
    everything = tuple(range(world))
    return ExecPlan({op: everything for op in model.op_names()}, model.op_names(), world, "one big pipeline")


def even_split_plan(model, world: int) -> ExecPlan:
    """Each task on its own ``world / T`` ranks (remainder to the first tasks), its operators in turn."""
    tasks = [t for t, _, _ in model.tasks]
    if world < len(tasks):
        raise PlanError(f"an even split needs at least one device per task: {len(tasks)} tasks, {world} devices")
    base, extra = divmod(world, len(tasks))
    groups, first = {}, 0
    for k, task in enumerate(tasks):
        size = base + (1 if k < extra else 0)
        groups[task] = tuple(range(first, first + size))
        first += size
    return ExecPlan({op: groups[model.task_of(op)] for op in model.op_names()}, model.op_names(), world,
                    "even split")


def _pairs(rows: int, src: Sequence[int], dst: Sequence[int]):
    """``(src rank, dst rank, lo, hi, src lo, dst lo)`` for every overlapping pair of row blocks."""
    for s, slo, shi in row_blocks(rows, src):
        for d, dlo, dhi in row_blocks(rows, dst):
            lo, hi = max(slo, dlo), min(shi, dhi)
            if lo < hi:
                yield s, d, lo, hi, slo, dlo


class SpindleRuntime:
    """Runs :class:`ExecPlan` steps of a :class:`~sgl.systems.data.spindle_model.MultiModalModel` on this process."""

    def __init__(self, model) -> None:
        self.model = model
        self.timings: Dict[str, float] = {}

    def step(self, plan: ExecPlan, batch: Dict[str, Dict[str, torch.Tensor]]) -> float:
        """Forward and backward of one step under ``plan``; gradients summed over the world. Returns the loss."""
        from sgl import comm

        model = self.model
        rank, world = comm.get_rank(), comm.get_world_size()
        plan.validate(model, world)
        param = next(model.parameters())
        dtype, device = param.dtype, param.device
        rows = {t: int(batch[t]["label"].shape[0]) for t, _, _ in model.tasks}
        model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        outs: Dict[str, torch.Tensor] = {}
        leaves: Dict[str, List[torch.Tensor]] = {}
        loss = torch.zeros((), dtype=torch.float64, device=device)
        for op in plan.order:
            task, ranks = model.task_of(op), plan.devices[op]
            mine = next(((lo, hi) for r, lo, hi in row_blocks(rows[task], ranks) if r == rank), None)
            inputs = []
            for u in model.inputs[op]:
                pieces = []
                for s, d, lo, hi, slo, dlo in _pairs(rows[task], plan.devices[u], ranks):
                    if s == rank and d == rank:
                        pieces.append(outs[u][lo - slo:hi - slo].detach())
                    elif s == rank:
                        comm.send(outs[u][lo - slo:hi - slo].detach(), d)
                    elif d == rank:
                        pieces.append(comm.recv((hi - lo, model.hidden), s, dtype=dtype).to(device))
                if mine is not None:
                    inputs.append(torch.cat(pieces).requires_grad_(True))
            if mine is not None:
                leaves[op] = inputs
                outs[op] = model.run_op(op, batch, mine, inputs)
                if op.endswith(".head"):
                    loss += outs[op].detach().double()
        self.timings["forward_s"] = time.perf_counter() - started
        grads: Dict[str, torch.Tensor] = {}
        for op in reversed(plan.order):
            task, ranks = model.task_of(op), plan.devices[op]
            if op in outs:
                if op.endswith(".head"):
                    outs[op].backward()
                elif op in grads:
                    outs[op].backward(grads.pop(op))
                # an output nobody consumed (not possible in this model) would have no gradient
            for k, u in enumerate(model.inputs[op]):
                for s, d, lo, hi, slo, dlo in _pairs(rows[task], plan.devices[u], ranks):
                    if d == rank:
                        piece = leaves[op][k].grad[lo - dlo:hi - dlo]
                        if s == rank:
                            self._add(grads, u, outs[u], lo - slo, piece)
                        else:
                            comm.send(piece.contiguous(), s)
                    elif s == rank:
                        self._add(grads, u, outs[u], lo - slo,
                                  comm.recv((hi - lo, model.hidden), d, dtype=dtype).to(device))
        self.timings["compute_s"] = time.perf_counter() - started
        if world > 1:
            params = list(model.parameters())
            flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
            comm.all_reduce(flat)
            offset = 0
            for p in params:
                p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
            loss = comm.all_reduce(loss.reshape(1))[0]
        self.timings["step_s"] = time.perf_counter() - started
        return float(loss)

    @staticmethod
    def _add(grads: Dict[str, torch.Tensor], op: str, out: torch.Tensor, at: int, piece: torch.Tensor) -> None:
        if op not in grads:
            grads[op] = torch.zeros_like(out)
        grads[op][at:at + piece.shape[0]] += piece
