"""Run one training step of a variable-length step plan on the processes of a ``torch.distributed`` world.

:class:`VarlenStepExecutor` takes a plan (:class:`~sgl.systems.seq.plan.StepPlan` of FlexSP,
Hydraulis, the dynamic mesh or per-step switching, or its dict form; see
:mod:`~sgl.systems.seq.exec_plan`) and the step's token sequences, and on every rank:

1. for each phase, the rank's replica (if any) packs each of its micro-batches with
   ``cu_seqlens``, keeps its contiguous shard (:func:`~sgl.systems.seq.varlen.shard_bounds`) and
   runs the model (:func:`varlen_lm` -- TinyLM's layers as in
   :func:`~sgl.systems.seq.sp_block.sequence_parallel_lm`, or a Hugging Face ``LlamaForCausalLM``'s own
   decoder layers with rotary positions counted inside each document
   (:func:`~sgl.systems.seq.hf_varlen.hf_varlen_lm`), both with per-document attention from
   :mod:`~sgl.systems.seq.doc_attention`, whose cost is ``Σ s_i²`` as with FlashAttention's varlen
   kernel) with the group's strategy (Ulysses all-to-all or ring attention over the replica's
   cached process group; degree 1 runs local attention);
2. the loss of micro-batch ``m`` is its next-token cross-entropy *summed* over its shard's tokens
   whose next token lies in the same document, divided by the step's global count
   ``N = Σ_i (s_i - 1)``, and back-propagated at once (gradient accumulation);
3. the flattened gradients are summed over all ranks (one all-reduce) and the optimiser, if any, steps.

So the loss and the gradients equal a single-process step over the same documents,

.. math:: \\mathcal{L} = \\frac{1}{N} \\sum_i \\sum_{t < s_i - 1} -\\log p_\\theta(x_{i,t+1} \\mid x_{i,\\le t}),

which :func:`single_process_step` computes with the model's own forward, one document at a time.
Process groups are created once: every contiguous range of ``≥ 2`` ranks when the executor is built
(every rank calls ``new_group`` in the same order), and any other rank set a plan names, in plan
order, on first use; all are cached.

>>> import torch
>>> from sgl.systems.parallel import get_model_config
>>> from sgl.systems.runtime.tiny_lm import TinyLM
>>> _ = torch.manual_seed(0); model = TinyLM(get_model_config("tiny")).double()
>>> docs = [torch.randint(0, 256, (n,)) for n in (5, 3, 7)]
>>> plan = {"phases": [[{"strategy": "ulysses", "degree": 1, "sequence_ids": [[0, 2], [1]]}]]}
>>> result = VarlenStepExecutor(model).step(plan, docs)
>>> grads = [p.grad.clone() for p in model.parameters()]
>>> ref = single_process_step(model, docs)
>>> abs(result.loss - ref) < 1e-12 and all(torch.allclose(g, p.grad) for g, p in zip(grads, model.parameters()))
True
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.seq.exec_plan import ExecPlan, as_exec_plan
from sgl.systems.seq.hf_varlen import check_hf_varlen, hf_attend, hf_varlen_lm
from sgl.systems.seq.plan import StepPlan
from sgl.systems.seq.sp_block import packed_block
from sgl.systems.seq.doc_attention import document_attention, document_ring_attention, document_ulysses_attention
from sgl.systems.seq.varlen import cu_seqlens, shard_bounds

__all__ = ["VARLEN_ARCHS", "StepResult", "VarlenStepExecutor", "single_process_step", "packed_loss_sum",
           "varlen_lm", "varlen_arch", "build_varlen_model"]

#: model implementations the executor runs: our TinyLM and Hugging Face ``LlamaForCausalLM``
VARLEN_ARCHS = ("tiny", "hf-llama")


def varlen_arch(model: torch.nn.Module) -> str:
    """``"tiny"`` for a TinyLM-like model (embed, blocks, norm, head; dense MLP), ``"hf-llama"`` for a
    Hugging Face Llama causal LM; anything else is a :class:`~sgl.errors.PlanError`."""
    if hasattr(model, "blocks") and hasattr(model, "embed"):
        if any(getattr(b, "ffn", None) is not None for b in model.blocks):
            raise PlanError("the varlen executor runs dense-MLP blocks; this model has a custom ffn (MoE)")
        return "tiny"
    check_hf_varlen(model)
    return "hf-llama"


def build_varlen_model(arch: str = "tiny", preset: str = "tiny", seed: int = 0) -> torch.nn.Module:
    """The seeded model of ``arch`` (:data:`VARLEN_ARCHS`) with the shapes of preset ``preset``
    (:func:`~sgl.systems.runtime.models.build_model`; identical on every rank, nothing downloaded)."""
    if arch not in VARLEN_ARCHS:
        raise PlanError(f"the varlen executor runs arch {list(VARLEN_ARCHS)}, got {arch!r}")
    from sgl.systems.runtime.config import ExecConfig
    from sgl.systems.runtime.models import build_model

    return build_model(ExecConfig(model=preset, arch=arch, seed=seed))


def _shard_start(cu: torch.Tensor, strategy: str, group) -> int:
    if strategy == "local":
        return 0
    return shard_bounds(int(cu[-1]), comm.get_world_size(group))[comm.get_rank(group)][0]


def varlen_lm(model, tokens: torch.Tensor, cu: torch.Tensor, strategy: str = "local", group=None) -> torch.Tensor:
    """Logits ``[T_r, vocab]`` of this rank's packed shard (TinyLM or HF Llama); ``strategy`` is local,
    ulysses or ring over ``group``."""
    if not hasattr(model, "blocks"):
        return hf_varlen_lm(model, tokens, cu, _shard_start(cu, strategy, group), hf_attend(cu, strategy, group))
    attend = {"local": lambda q, k, v: document_attention(q, k, v, cu),
              "ulysses": lambda q, k, v: document_ulysses_attention(q, k, v, cu, group),
              "ring": lambda q, k, v: document_ring_attention(q, k, v, cu, group)}[strategy]
    x = model.embed(tokens)
    for block in model.blocks:
        x = packed_block(block, x, attend)
    return model.head(model.norm(x))


@dataclass(frozen=True)
class StepResult:
    """Global token-mean loss, predicted tokens ``N``, and the step's wall time (max over ranks, seconds)."""

    loss: float
    tokens: int
    seconds: float
    rank_seconds: Tuple[float, ...]
    predicted_ms: float


def packed_loss_sum(logits: torch.Tensor, tokens: torch.Tensor, cu: torch.Tensor, start: int) -> torch.Tensor:
    """Next-token cross-entropy summed over the shard ``[start, start + len(logits))`` of a packed batch.

    ``tokens`` is the whole packed batch; a document's last token predicts nothing.
    """
    pos = torch.arange(start, start + logits.shape[0], device=tokens.device)
    keep = ~torch.isin(pos, cu[1:].to(tokens.device) - 1)
    return F.cross_entropy(logits[keep], tokens[pos[keep] + 1], reduction="sum")


def _check_sequences(sequences: Sequence[torch.Tensor], ids: List[int]) -> None:
    if max(ids) >= len(sequences):
        raise PlanError(f"the plan names sequence {max(ids)} but the step has {len(sequences)} sequences")
    for i in ids:
        s = sequences[i]
        if not isinstance(s, torch.Tensor) or s.dim() != 1 or s.numel() < 1 or s.dtype not in (torch.int64, torch.int32):
            raise PlanError(f"sequence {i} must be a non-empty 1-D integer token tensor, got "
                            f"{getattr(s, 'shape', type(s).__name__)}")


class VarlenStepExecutor:
    """Executes step plans on the current ``torch.distributed`` world (module doc).

    ``model`` is a :class:`~sgl.systems.runtime.tiny_lm.TinyLM` (dense MLP blocks) or a Hugging Face
    ``LlamaForCausalLM`` (GQA as its config has it; :func:`build_varlen_model` builds either), the
    same initial weights on every rank; ``arch`` (optional, :data:`VARLEN_ARCHS`) asserts which;
    ``optimizer`` (optional) steps after the gradient all-reduce.
    """

    def __init__(self, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer] = None,
                 arch: Optional[str] = None) -> None:
        found = varlen_arch(model)
        if arch is not None and arch != found:
            raise PlanError(f"arch={arch!r} but the model is {type(model).__name__} ({found!r}); build it with "
                            f"build_varlen_model({arch!r}) or pass arch={found!r}")
        self.arch = found
        self.model = model
        self.optimizer = optimizer
        self.world = comm.get_world_size()
        self.rank = comm.get_rank()
        self.heads = (model.blocks[0].q.out_features // model.blocks[0].head_dim if found == "tiny"
                      else int(model.config.num_attention_heads))
        self._groups: Dict[Tuple[int, ...], object] = {}
        for size in range(2, self.world + 1):                  # the same order on every rank
            for start in range(self.world - size + 1):
                self._group(tuple(range(start, start + size)))

    def _group(self, ranks: Tuple[int, ...]):
        if ranks not in self._groups:
            self._groups[ranks] = None if len(ranks) == self.world and ranks == tuple(range(self.world)) \
                else comm.new_group(list(ranks))
        return self._groups[ranks]

    @property
    def cached_groups(self) -> List[Tuple[int, ...]]:
        """Rank sets with a cached process group."""
        return list(self._groups)

    def prepare(self, plan: Union[StepPlan, Mapping, ExecPlan], sequences: Sequence[torch.Tensor]) -> ExecPlan:
        """Validate ``plan`` against the world and ``sequences``; create the process groups it needs."""
        ep = plan if isinstance(plan, ExecPlan) else as_exec_plan(plan, self.world)
        if ep.devices != self.world:
            raise PlanError(f"the plan is for {ep.devices} devices but the world has {self.world} processes")
        _check_sequences(sequences, ep.sequence_ids())
        for phase in ep.phases:
            for g in phase:
                if g.strategy == "ulysses" and self.heads % g.degree:
                    raise PlanError(f"Ulysses degree {g.degree} does not divide the model's {self.heads} heads; "
                                    f"use ring attention or a degree dividing {self.heads}")
                for mb in g.micro_batches:
                    tokens = sum(int(sequences[i].numel()) for i in mb)
                    if tokens < g.degree:
                        raise PlanError(f"a micro-batch of {tokens} tokens cannot be split over {g.degree} ranks")
        for ranks in ep.rank_groups():
            self._group(ranks)
        return ep

    def _run_micro_batch(self, docs: List[torch.Tensor], ranks: Tuple[int, ...], strategy: str, total: int,
                         device) -> torch.Tensor:
        tokens = torch.cat(docs).to(device=device, dtype=torch.int64)
        cu = cu_seqlens([d.numel() for d in docs]).to(device)
        if len(ranks) == 1:
            a, b, mode, group = 0, tokens.numel(), "local", None
        else:
            a, b = shard_bounds(tokens.numel(), len(ranks))[ranks.index(self.rank)]
            mode, group = strategy, self._group(ranks)
        logits = varlen_lm(self.model, tokens[a:b], cu, mode, group)
        loss = packed_loss_sum(logits, tokens, cu, a)
        (loss / total).backward()
        return loss.detach()

    def step(self, plan: Union[StepPlan, Mapping, ExecPlan], sequences: Sequence[torch.Tensor]) -> StepResult:
        """One training step of ``plan`` over ``sequences`` (indexed by the plan's sequence ids)."""
        ep = self.prepare(plan, sequences)
        params = [p for p in self.model.parameters() if p.requires_grad]
        device = params[0].device
        total = sum(int(sequences[i].numel()) - 1 for i in ep.sequence_ids())
        if total < 1:
            raise PlanError("the plan's sequences hold no next-token target: give documents of length >= 2")
        if self.world > 1:
            comm.barrier()
        t0 = time.perf_counter()
        for p in params:
            p.grad = None
        loss = torch.zeros((), dtype=torch.float64, device=device)
        for phase in ep.phases:
            for g in phase:
                for ranks, mbs in g.replicas():
                    if self.rank not in ranks:
                        continue
                    for mb in mbs:
                        loss += self._run_micro_batch([sequences[i] for i in mb], ranks, g.strategy, total,
                                                      device).to(torch.float64)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        if self.world > 1:
            flat = comm.all_reduce(flat)
            loss = comm.all_reduce(loss)
        offset = 0
        for p in params:
            p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        if self.optimizer is not None:
            self.optimizer.step()
        elapsed = time.perf_counter() - t0
        rank_s = torch.zeros(self.world, dtype=torch.float64, device=device)
        rank_s[self.rank] = elapsed
        if self.world > 1:
            rank_s = comm.all_reduce(rank_s)
        return StepResult(float(loss) / total, total, float(rank_s.max()), tuple(rank_s.tolist()), ep.predicted_ms)


def single_process_step(model: torch.nn.Module, sequences: Sequence[torch.Tensor],
                        ids: Optional[Sequence[int]] = None) -> float:
    """Reference: token-mean next-token loss of ``sequences`` (or ``ids`` of them) with the model's own
    forward, one document at a time; back-propagates into ``model``'s ``.grad`` (cleared first)."""
    ids = list(range(len(sequences))) if ids is None else list(ids)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    total = sum(int(sequences[i].numel()) - 1 for i in ids)
    if total < 1:
        raise PlanError("no next-token target: give documents of length >= 2")
    device = params[0].device
    loss = 0.0
    for i in ids:
        seq = sequences[i].to(device=device, dtype=torch.int64)
        if seq.numel() < 2:
            continue
        out = model(seq[None])
        logits = (out.logits if hasattr(out, "logits") else out)[0]
        part = F.cross_entropy(logits[:-1], seq[1:], reduction="sum")
        (part / total).backward()
        loss += float(part.detach())
    return loss / total
