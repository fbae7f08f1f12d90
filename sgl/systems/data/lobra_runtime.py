"""LobRA executed: replica sets of one frozen base, each holding every task's LoRA adapter, on real processes.

A *layout* gives each replica of a :class:`~sgl.systems.data.lobra.LobraPlan` a tuple of global
ranks (:func:`replica_layout`: replicas in scheme order, contiguous ranks, ``Σ`` devices = world).
Each step, :func:`plan_step` dispatches the step's sequences with LobRA's own
:func:`~sgl.systems.data.lobra.dispatch` and maps its micro-batches of *lengths* back to sequence
ids (:class:`LobraStep`). A replica spanning ``d`` ranks is data parallel inside: each of its
micro-batches is split over its ``d`` ranks, longest first to the least-loaded (a scheme's tensor/pipeline layout is
not executed here; the pool's cost model should price a ``d``-rank replica accordingly, as
:func:`~sgl.systems.data.lobra_measure.cpu_lora_pool` does). A micro-batch runs packed with
``cu_seqlens`` (no padding, per-document causal attention, :func:`micro_batch_backward`).

:class:`LobraRuntime` runs one step on every rank. With ``N_t`` the labelled tokens of task ``t``
in the *whole* step (every rank knows the plan, so every rank knows ``N_t``), a rank computes

``L_rank = Σ_{its micro-batches} Σ_t (1 / N_t) Σ_{tokens of task t} ℓ``,

so ``Σ_ranks ∂L_rank/∂θ_t`` is the gradient of fine-tuning adapter ``t`` alone on all of task
``t``'s sequences of the step (the base is frozen and adapter ``t`` only touches task ``t``'s rows).
That sum is all-reduced over ``G_t``, the ranks that trained task ``t`` this step, in a process
group created once per distinct rank set and cached; ranks outside ``G_t`` then receive it from
``min(G_t)`` so every replica's copy of every adapter (and its optimizer state) stays identical.

>>> import torch
>>> from sgl.systems.seq import SeqStrategy, StrategyCost
>>> pool = [StrategyCost(SeqStrategy(), 1e-4, 1e-2, 0.5, 64, "dp1")]
>>> replica_layout(pool, {0: 2}, 2)
[(0,), (1,)]
>>> step = plan_step(pool, {0: 2}, [30, 20, 10, 5], [16, 64], world=2)
>>> sorted(i for mbs in step.work for mb in mbs for i in mb)
[0, 1, 2, 3]
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from sgl.errors import PlanError

__all__ = ["LobraStep", "replica_layout", "plan_step", "rank_share", "LobraRuntime", "task_token_counts",
           "adapter_groups", "collectives_per_step", "micro_batch_backward"]


def replica_layout(pool: Sequence, replicas: Dict[int, int], world: int) -> List[Tuple[int, ...]]:
    """Global ranks of each replica slot ``(s, k)`` (sorted by ``s`` then ``k``), contiguous from rank 0."""
    total = 0
    for s, count in replicas.items():
        if not 0 <= int(s) < len(pool):
            raise PlanError(f"the plan names scheme {s}; the pool has schemes 0..{len(pool) - 1}")
        total += pool[s].devices * int(count)
    if total != world:
        raise PlanError(f"the replica plan uses {total} devices but the world has {world} processes; "
                        f"plan for {world} devices or launch {total} processes")
    out, first = [], 0
    for s in sorted(replicas):
        for _ in range(int(replicas[s])):
            out.append(tuple(range(first, first + pool[s].devices)))
            first += pool[s].devices
    return out


@dataclass
class LobraStep:
    """One step's plan: ``replicas[j]`` (global ranks) runs micro-batches ``work[j]`` (lists of sequence ids)."""

    replicas: List[Tuple[int, ...]]
    work: List[List[List[int]]]
    schemes: Optional[List[int]] = None

    def validate(self, world: int, num_sequences: int) -> None:
        """Raise :class:`PlanError` unless the replicas partition ``range(world)`` and every sequence runs once."""
        if len(self.work) != len(self.replicas):
            raise PlanError(f"{len(self.replicas)} replicas but work for {len(self.work)}")
        ranks = [r for rep in self.replicas for r in rep]
        bad = [r for r in ranks if not 0 <= int(r) < world]
        if bad:
            raise PlanError(f"replica ranks {bad} are outside the world of {world} processes (ranks 0..{world - 1})")
        if sorted(ranks) != list(range(world)):
            raise PlanError(f"the replicas must use each of the {world} ranks exactly once; got {sorted(ranks)}")
        ids = sorted(i for mbs in self.work for mb in mbs for i in mb)
        if ids != list(range(num_sequences)):
            raise PlanError(f"the step's work must hold each of its {num_sequences} sequences exactly once")


def plan_step(pool: Sequence, replicas: Dict[int, int], lengths: Sequence[int], boundaries: Sequence[int], *,
              world: int, **dispatch_kw) -> LobraStep:
    """LobRA's :func:`~sgl.systems.data.lobra.dispatch` of one step, as sequence ids per replica micro-batch."""
    from sgl.systems.data.lobra import dispatch

    layout = replica_layout(pool, replicas, world)
    lengths = np.asarray(lengths, dtype=np.int64)
    work = dispatch(pool, replicas, lengths, boundaries, **dispatch_kw)
    free: Dict[int, List[int]] = {}
    for i in np.argsort(-lengths, kind="stable").tolist():
        free.setdefault(int(lengths[i]), []).append(i)
    slots = [(s, k) for s in sorted(replicas) for k in range(int(replicas[s]))]
    out = []
    for slot in slots:
        out.append([[free[int(x)].pop(0) for x in mb] for mb in work.get(slot, []) if len(mb)])
    step = LobraStep(layout, out, [s for s, _ in slots])
    step.validate(world, int(lengths.size))
    return step


def rank_share(step: LobraStep, rank: int, lengths: Sequence[int]) -> List[List[int]]:
    """The micro-batches (sequence ids) ``rank`` runs: its replica's, each split over the replica's ranks
    (longest first, each sequence to the rank with the fewest tokens so far)."""
    for ranks, mbs in zip(step.replicas, step.work):
        if rank in ranks:
            d, pos = len(ranks), ranks.index(rank)
            out = []
            for mb in mbs:
                load, mine = [0] * d, []
                for i in sorted(mb, key=lambda i: -int(lengths[i])):  # longest first to the least-loaded rank
                    j = min(range(d), key=lambda r: (load[r], r))
                    load[j] += int(lengths[i])
                    if j == pos:
                        mine.append(i)
                if mine:
                    out.append(mine)
            return out
    raise PlanError(f"rank {rank} is in no replica of the step")


def adapter_groups(step: LobraStep, tasks: Sequence[int], lengths: Sequence[int],
                   num_tasks: int) -> List[Tuple[int, ...]]:
    """``G_t`` per task: the sorted ranks whose share of the step holds a sequence of task ``t``."""
    trainers: List[set] = [set() for _ in range(num_tasks)]
    for ranks in step.replicas:
        for r in ranks:
            for mb in rank_share(step, r, lengths):
                for i in mb:
                    trainers[int(tasks[i])].add(r)
    return [tuple(sorted(g)) for g in trainers]


def collectives_per_step(step: LobraStep, tasks: Sequence[int], lengths: Sequence[int], num_tasks: int,
                         world: int) -> int:
    """Collective calls of one :meth:`LobraRuntime.backward` (per adapter: reduce and/or broadcast; the loss)."""
    if world == 1:
        return 0
    n = 1
    for g in adapter_groups(step, tasks, lengths, num_tasks):
        n += 0 if not g else 1 if len(g) in (1, world) else 2
    return n


def task_token_counts(seqs: Sequence[torch.Tensor], tasks: Sequence[int], num_tasks: int) -> List[int]:
    """Labelled (next-token) positions per task: ``len - 1`` per sequence."""
    out = [0] * num_tasks
    for s, t in zip(seqs, tasks):
        out[int(t)] += max(int(s.numel()) - 1, 0)
    return out


def micro_batch_backward(model: torch.nn.Module, seqs: Sequence[torch.Tensor], tasks: Sequence[int],
                         counts: Sequence[int]) -> torch.Tensor:
    """One micro-batch packed with ``cu_seqlens`` (no padding), forward and backward; task ``t`` weighs ``1/N_t``.

    The sequences are concatenated; attention is the per-document causal varlen attention of
    :func:`~sgl.systems.seq.sp_block.sequence_parallel_lm` (``"local"``) for a TinyLM, of
    :func:`~sgl.systems.seq.hf_varlen.hf_varlen_lm` (the model's own layers, per-document positions)
    for a Hugging Face Llama, and every token routes through its sequence's adapter, so the result
    equals running each sequence alone.
    """
    from sgl.systems.data.lora import set_adapters
    from sgl.systems.seq.hf_varlen import hf_varlen_lm
    from sgl.systems.seq.sp_block import sequence_parallel_lm
    from sgl.systems.seq.varlen import cu_seqlens

    device = next(model.parameters()).device
    lengths = torch.tensor([int(s.numel()) for s in seqs], dtype=torch.long, device=device)
    tokens = torch.cat([s.to(device) for s in seqs])
    cu = cu_seqlens(lengths).to(device)
    owner = torch.repeat_interleave(torch.tensor([int(t) for t in tasks], dtype=torch.long, device=device), lengths)
    set_adapters(model, owner)
    if hasattr(model, "blocks"):
        logits = sequence_parallel_lm(model, tokens, cu, "local")[:-1]
    else:
        logits = hf_varlen_lm(model, tokens, cu)[:-1]
    pos = torch.arange(1, tokens.numel(), device=device)
    valid = ~torch.isin(pos, cu[1:])                   # a sequence's last token predicts nothing
    token = F.cross_entropy(logits, tokens[1:], reduction="none") * valid
    weight = 1.0 / torch.tensor(list(counts), dtype=token.dtype, device=device).clamp_min(1.0)
    loss = (token * weight[owner[:-1]]).sum()
    loss.backward()
    return loss.detach().double()


class LobraRuntime:
    """Runs LobRA steps on this process: forward/backward of its share, per-adapter gradient reduction.

    ``model`` is a frozen base, :class:`~sgl.systems.runtime.tiny_lm.TinyLM` or a Hugging Face
    ``LlamaForCausalLM`` (:func:`~sgl.systems.data.lobra_models.build_lora_base`), whose target linears
    were replaced by :func:`~sgl.systems.data.lora.add_multi_lora`; ``arch`` (optional, ``"tiny"`` or
    ``"hf-llama"``) asserts which.

    >>> import torch
    >>> from sgl.systems.data.lora import add_multi_lora
    >>> from sgl.systems.parallel.model import TransformerConfig
    >>> from sgl.systems.runtime.tiny_lm import TinyLM
    >>> from sgl.systems.seq import SeqStrategy, StrategyCost
    >>> torch.manual_seed(0) and None
    >>> model = TinyLM(TransformerConfig("t", 1, 16, 2, 32, 32, 16))
    >>> _ = add_multi_lora(model, 2, 2, target_modules=("q", "v"))
    >>> pool = [StrategyCost(SeqStrategy(), 1e-4, 1e-2, 0.5, 64, "dp1")]
    >>> seqs = [torch.randint(0, 32, (n,)) for n in (9, 5, 7)]
    >>> step = plan_step(pool, {0: 1}, [9, 5, 7], [64], world=1)
    >>> loss = LobraRuntime(model, 2).backward(step, seqs, [0, 1, 1])
    >>> loss > 0
    True
    """

    def __init__(self, model: torch.nn.Module, num_tasks: int, arch: Optional[str] = None) -> None:
        from sgl.systems.data.lora import MultiLoRALinear
        from sgl.systems.seq.executor import varlen_arch

        found = varlen_arch(model)
        if arch is not None and arch != found:
            raise PlanError(f"arch={arch!r} but the model is {type(model).__name__} ({found!r}); build it with "
                            f"build_lora_base(..., arch={arch!r}) or pass arch={found!r}")
        self.arch = found
        self.model = model
        self.num_tasks = int(num_tasks)
        self.layers = [m for m in model.modules() if isinstance(m, MultiLoRALinear)]
        if not self.layers:
            raise PlanError("the model has no MultiLoRALinear layer; wrap it with add_multi_lora first")
        if any(layer.num_adapters != self.num_tasks for layer in self.layers):
            raise PlanError(f"every LoRA layer needs {self.num_tasks} adapters (one per task)")
        self._groups: Dict[Tuple[int, ...], object] = {}
        self.timings: Dict[str, float] = {}

    def _group(self, ranks: Tuple[int, ...]):
        from sgl import comm

        if ranks not in self._groups:  # every rank reaches this in the same order (same plan everywhere)
            self._groups[ranks] = comm.new_group(list(ranks))
        return self._groups[ranks]

    def backward(self, step: LobraStep, seqs: Sequence[torch.Tensor], tasks: Sequence[int]) -> float:
        """Forward/backward of this rank's share, then the per-adapter gradient reduction; returns the step loss."""
        from sgl import comm

        rank, world = comm.get_rank(), comm.get_world_size()
        lengths = [int(s.numel()) for s in seqs]
        step.validate(world, len(seqs))
        if len(tasks) != len(seqs) or any(not 0 <= int(t) < self.num_tasks for t in tasks):
            raise PlanError(f"need one task id in [0, {self.num_tasks}) per sequence")
        device = next(self.model.parameters()).device
        counts = task_token_counts(seqs, tasks, self.num_tasks)
        for layer in self.layers:
            layer.lora_A.grad = None
            layer.lora_B.grad = None
        started = time.perf_counter()
        local = torch.zeros((), dtype=torch.float64, device=device)
        for mb in rank_share(step, rank, lengths):
            local += micro_batch_backward(self.model, [seqs[i] for i in mb], [int(tasks[i]) for i in mb], counts)
        self.timings["compute_s"] = time.perf_counter() - started
        started = time.perf_counter()
        self._reduce(step, tasks, lengths, world)
        total = comm.all_reduce(local.reshape(1)) if world > 1 else local.reshape(1)
        self.timings["reduce_s"] = time.perf_counter() - started
        return float(total[0])

    def _reduce(self, step: LobraStep, tasks: Sequence[int], lengths: Sequence[int], world: int) -> None:
        from sgl import comm

        for t, group_ranks in enumerate(adapter_groups(step, tasks, lengths, self.num_tasks)):
            if not group_ranks or world == 1:
                continue
            flat = torch.cat([self._grad(layer, t) for layer in self.layers])
            if len(group_ranks) == world:
                comm.all_reduce(flat)
            else:
                if len(group_ranks) > 1:
                    group = self._group(group_ranks)  # created by every rank, used by its members only
                    if comm.get_rank() in group_ranks:
                        comm.all_reduce(flat, group=group)
                comm.broadcast(flat, src=group_ranks[0])  # keep the other replicas' copies identical
            offset = 0
            for layer in self.layers:
                for p in (layer.lora_A, layer.lora_B):
                    n = p[t].numel()
                    p.grad[t].copy_(flat[offset:offset + n].view_as(p[t]))
                    offset += n

    def train_step(self, step: LobraStep, seqs: Sequence[torch.Tensor], tasks: Sequence[int],
                   optimizer: torch.optim.Optimizer) -> float:
        """:meth:`backward`, then ``optimizer.step()`` (replicated: every rank holds identical gradients)."""
        loss = self.backward(step, seqs, tasks)
        optimizer.step()
        return loss

    @staticmethod
    def _grad(layer, t: int) -> torch.Tensor:
        for p in (layer.lora_A, layer.lora_B):
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        return torch.cat([layer.lora_A.grad[t].reshape(-1), layer.lora_B.grad[t].reshape(-1)])
