"""LobRA's dynamic plan executed: the replica set re-chosen between steps, the same adapters trained throughout.

:class:`DynamicLobraPlanner` is :func:`~sgl.systems.data.lobra_dynamic.dynamic_replay`'s greedy rule
taken one step at a time: before step ``i`` it prices every candidate set ``R`` on this step's
lengths with the dispatcher (``T_i(R)``, :func:`~sgl.systems.data.lobra.simulate`), adds
:func:`~sgl.systems.data.lobra_dynamic.reconfig_ms` from the current set, keeps the current set on a
tie, and returns the chosen set's dispatch as a :class:`~sgl.systems.data.lobra_runtime.LobraStep`
(the same dispatch settings as the pricing). Fed the same steps it makes ``dynamic_replay``'s choices.

:func:`run_dynamic` executes it on the processes of a :class:`~sgl.systems.data.lobra_runtime.LobraRuntime`:
rank 0 plans each step (the dispatch MILP has a time limit, so ranks planning alone could
disagree) and broadcasts it as one integer tensor, then every rank runs
:meth:`~sgl.systems.data.lobra_runtime.LobraRuntime.train_step` on the *same* model and optimizer.
In this runtime every rank holds the whole frozen base and a replica of every adapter with its
optimizer state (a replica spanning ``d`` ranks is data parallel inside), so a switch of replica set
moves no state: only the step's layout and the adapter groups change (their process groups are
created once and cached). The planner's default ``bandwidth_gbps`` is therefore ``math.inf``
(free switches); pass a finite one to price the re-sharding of a tensor/pipeline-parallel cluster.

>>> import torch
>>> from sgl.systems.seq import SeqStrategy, StrategyCost
>>> pool = [StrategyCost(SeqStrategy(), 1e-4, 1e-2, 0.5, 64, "dp1")]
>>> planner = DynamicLobraPlanner(pool, [{0: 1}], [16, 64], world=1)
>>> index, step = planner.next([30, 9, 12])
>>> index, sorted(i for mbs in step.work for mb in mbs for i in mb)
(0, [0, 1, 2])
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from sgl.errors import PlanError

__all__ = ["DynamicLobraPlanner", "run_dynamic", "encode_step", "decode_step"]


class DynamicLobraPlanner:
    """Per step, the candidate replica set with the least dispatcher step time + switch cost (module doc)."""

    def __init__(self, pool: Sequence, sets: Sequence[Mapping[int, int]], boundaries: Sequence[int], *, world: int,
                 start: Optional[Mapping[int, int]] = None, bandwidth_gbps: float = math.inf, rank: int = 16,
                 adapters: int = 1, state_bytes: Optional[Callable[[int, int], float]] = None,
                 time_limit: float = 2.0, microbatch: str = "tokens", lpt: bool = False) -> None:
        from sgl.systems.data.lobra_dynamic import reconfig_ms
        from sgl.systems.data.lobra_runtime import replica_layout

        self.pool, self.boundaries, self.world = list(pool), list(boundaries), int(world)
        self.sets = [dict(rep) for rep in sets]
        if not self.sets:
            raise PlanError("the dynamic plan needs at least one candidate replica set")
        for rep in self.sets:
            replica_layout(self.pool, rep, self.world)  # every set must fill the world exactly
        previous = dict(start) if start is not None else self.sets[0]
        if previous not in self.sets:
            replica_layout(self.pool, previous, self.world)
            self.sets.append(previous)
        self.at = self.sets.index(previous)
        self.dispatch_kw = dict(time_limit=time_limit, microbatch=microbatch, lpt=lpt)
        self.move = np.array([[reconfig_ms(self.pool, a, b, bandwidth_gbps, rank=rank, adapters=adapters,
                                           state_bytes=state_bytes) for b in self.sets] for a in self.sets])
        self.choices: List[int] = []

    def choose(self, lengths: Sequence[int]) -> int:
        """The set index for a step of ``lengths`` (``dynamic_replay``'s greedy rule; ties keep the current set)."""
        from sgl.systems.data.lobra import simulate

        x = np.asarray(lengths, dtype=np.int64)
        row = np.array([simulate(self.pool, rep, [x], self.boundaries, **self.dispatch_kw)["total_s"] * 1000.0
                        for rep in self.sets])
        cost = row + self.move[self.at]
        best = int(np.argmin(cost))
        return self.at if cost[best] >= cost[self.at] else best

    def next(self, lengths: Sequence[int]) -> Tuple[int, "object"]:
        """Choose this step's set, move to it, and return ``(set index, LobraStep)``."""
        from sgl.systems.data.lobra_runtime import plan_step

        self.at = self.choose(lengths)
        self.choices.append(self.at)
        return self.at, plan_step(self.pool, self.sets[self.at], list(lengths), self.boundaries, world=self.world,
                                  **self.dispatch_kw)


def encode_step(index: int, step, num_sequences: int, device=None) -> torch.Tensor:
    """``[1 + n, 3]`` integers: ``(set index, n, 0)``, then per sequence (replica, micro-batch, position)."""
    out = torch.zeros(1 + num_sequences, 3, dtype=torch.long, device=device)
    out[0, 0], out[0, 1] = int(index), int(num_sequences)
    for j, mbs in enumerate(step.work):
        for k, mb in enumerate(mbs):
            for pos, i in enumerate(mb):
                out[1 + int(i)] = torch.tensor([j, k, pos], device=device)
    return out


def decode_step(code: torch.Tensor, pool: Sequence, sets: Sequence[Mapping[int, int]], world: int):
    """``(set index, LobraStep)`` of :func:`encode_step`'s tensor."""
    from sgl.systems.data.lobra_runtime import LobraStep, replica_layout

    rows = code.tolist()  # a few integers per sequence: host-side metadata
    index, n = int(rows[0][0]), int(rows[0][1])
    rep = dict(sets[index])
    layout = replica_layout(pool, rep, world)
    slots: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
    for i, (j, k, pos) in enumerate(rows[1:1 + n]):
        slots.setdefault((j, k), []).append((pos, i))
    work: List[List[List[int]]] = [[] for _ in layout]
    for j in range(len(layout)):
        ks = sorted(k for jj, k in slots if jj == j)
        work[j] = [[i for _, i in sorted(slots[(j, k)])] for k in ks]
    schemes = [s for s in sorted(rep) for _ in range(int(rep[s]))]
    return index, LobraStep(layout, work, schemes)


def run_dynamic(runtime, optimizer: torch.optim.Optimizer, planner: DynamicLobraPlanner,
                batches: Sequence[Tuple[Sequence[torch.Tensor], Sequence[int]]]) -> Dict[str, list]:
    """Train ``runtime``'s adapters on ``batches`` (``(sequences, task ids)`` per step), re-planned before each step.

    Every rank calls this with the same batches; rank 0's planner decides. Returns the per-step
    loss, chosen set index and ``LobraStep``, and the number of switches (from the set before step one).
    """
    from sgl import comm

    rank, world = comm.get_rank(), comm.get_world_size()
    if world != planner.world:
        raise PlanError(f"the dynamic plan is for {planner.world} processes but the world has {world}; "
                        f"plan for {world} devices or launch {planner.world} processes")
    device = next(runtime.model.parameters()).device
    losses, choices, steps = [], [], []
    previous = planner.at  # the set before the first step (the same on every rank)
    for seqs, tasks in batches:
        n = len(seqs)
        if rank == 0:
            code = encode_step(*planner.next([int(s.numel()) for s in seqs]), n, device=device)
        else:
            code = torch.zeros(1 + n, 3, dtype=torch.long, device=device)
        if world > 1:
            comm.broadcast(code, src=0)
        index, step = decode_step(code, planner.pool, planner.sets, world)
        if rank != 0:
            planner.at = index
            planner.choices.append(index)
        losses.append(runtime.train_step(step, seqs, tasks, optimizer))
        choices.append(index)
        steps.append(step)
    return {"loss": losses, "choice": choices, "steps": steps,
            "switches": int(sum(a != b for a, b in zip([previous] + choices[:-1], choices)))}
