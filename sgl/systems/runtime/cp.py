"""Context parallelism (ring) and Ulysses sequence parallelism on Hugging Face decoders.

A plan layer with ``cp_sizes_enc = g > 1`` (ring context parallelism) or ``use_sp = 1`` with
TP degree ``g`` (Ulysses: Galvatron's SP runs in place of Megatron TP) splits every sequence of
``s`` tokens over a *sequence group* of ``g`` ranks: rank ``c`` of the group holds tokens
``[c s/g, (c+1) s/g)`` of each sample, with their *global* positions as ``position_ids`` (so the
rotary embedding is the unsplit model's).  Only attention mixes tokens; it is swapped through
``transformers``' attention interface for a registered implementation:

* ``"sgl_ring"`` -- :func:`sgl.systems.seq.ring.ring_attention` (K/V blocks travel the ring,
  online-softmax merge);
* ``"sgl_ulysses"`` -- :func:`sgl.systems.seq.ulysses.ulysses_attention` (all-to-all from
  sequence to head shards and back; the head count must be divisible by ``g``).

The batch is folded into the head axis (``[b, H, s/g, d] -> [s/g, b H, d]``: attention is
independent per sample and head), so one call serves the whole micro-batch.  The weights are
replicated over the group; with the loss of the local tokens scaled by ``g`` (:func:`shard_loss`),
averaging gradients over the ``dp x g`` ranks -- what DDP / FSDP2 over all of them do -- gives
the gradient of the unsplit model:

.. math:: \\nabla L = \\frac{1}{dp}\\sum_{d} \\frac{1}{g}\\sum_{c} g\\,\\nabla \\frac{1}{N}
          \\sum_{t \\in \\text{shard}(c)} \\ell_t .

>>> import torch
>>> tokens = torch.arange(12).view(2, 6)
>>> local, pos = shard_tokens(tokens, rank=1, degree=3)
>>> local.tolist(), pos.tolist()
([[2, 3], [8, 9]], [[2, 3]])
>>> logits = torch.zeros(2, 6, 16)
>>> full = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 16), tokens[:, 1:].reshape(-1))
>>> parts = [shard_loss(logits[:, 2 * c:2 * c + 2], tokens, c, 3) for c in range(3)]
>>> bool(torch.isclose(sum(parts) / 3, full))
True
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan

__all__ = ["RING", "ULYSSES", "SequenceSetup", "enable_sequence_attention", "flat_plan", "register_attention",
           "sequence_mode", "sequence_setup", "shard_loss", "shard_tokens"]

RING, ULYSSES = "sgl_ring", "sgl_ulysses"


def sequence_mode(plan: Plan) -> Tuple[str, int]:
    """``("ring", cp)``, ``("ulysses", tp)`` or ``("", 1)``: how ``plan``'s layers split sequences."""
    cps = plan.layer_cp()
    if any(c > 1 for c in cps):
        return "ring", max(cps)
    if any(s.sp for s in plan.strategies):
        return "ulysses", max(s.tp for s in plan.strategies)
    return "", 1


def shard_tokens(tokens: torch.Tensor, rank: int, degree: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s contiguous slice of every sequence of ``tokens`` ``[b, s]`` and its global positions."""
    s = tokens.shape[1]
    if s % degree:
        raise PlanError(f"sequence length {s} is not divisible by the sequence-parallel degree {degree}")
    n = s // degree
    pos = torch.arange(rank * n, (rank + 1) * n, device=tokens.device)[None]
    return tokens[:, rank * n:(rank + 1) * n], pos


def shard_loss(logits: torch.Tensor, tokens: torch.Tensor, rank: int, degree: int) -> torch.Tensor:
    """``degree`` x this shard's part of the next-token loss of ``tokens`` (mean over the group = full loss).

    ``logits`` are the shard's ``[b, s/degree, V]``; the target of its last token is the first
    token of the next shard, and the sequence's last token has none.
    """
    b, s = tokens.shape
    n = s // degree
    start = rank * n
    targets = tokens[:, start + 1:start + n + 1]
    used = logits[:, :targets.shape[1]]
    total = F.cross_entropy(used.reshape(-1, used.shape[-1]), targets.reshape(-1), reduction="sum")
    return total * degree / (b * (s - 1))


def _sequence_attention(kind: str):
    from sgl.systems.seq.ring import ring_attention
    from sgl.systems.seq.ulysses import ulysses_attention

    def attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None, dropout: float = 0.0,
                  **kwargs: Any):
        if dropout:
            raise PlanError(f"{kind} attention runs without attention dropout; the model asks for {dropout} "
                            "(set attention_dropout=0 in its config)")
        group, degree = module.sgl_seq_group, module.sgl_seq_degree
        b, h, n, d = query.shape
        rep = h // key.shape[1]
        if rep > 1:          # grouped-query attention: KV head j serves query heads j*rep .. j*rep+rep-1
            key, value = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
        q, k, v = (t.permute(2, 0, 1, 3).reshape(n, b * h, d) for t in (query, key, value))
        cu = torch.tensor([0, n * degree], device=query.device)
        if kind == RING:
            out = ring_attention(q, k, v, cu, group, scale=scaling)
        else:
            if scaling is not None and abs(scaling - d ** -0.5) > 1e-12:
                raise PlanError(f"Ulysses attention computes with scale 1/sqrt(head_dim); the model uses {scaling}")
            out = ulysses_attention(q, k, v, cu, group)
        return out.reshape(n, b, h, d).transpose(0, 1), None

    return attention


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """The sequence-parallel kernels build their own causal masks from global token indices."""
    return None


def register_attention() -> None:
    """Register ``"sgl_ring"`` / ``"sgl_ulysses"`` with ``transformers``' attention and mask interfaces."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    for kind in (RING, ULYSSES):
        AttentionInterface.register(kind, _sequence_attention(kind))
        AttentionMaskInterface.register(kind, _no_mask)


def enable_sequence_attention(model: nn.Module, kind: str, group: Any, degree: int) -> None:
    """Make every attention module of Hugging Face ``model`` run ``kind`` (ring / ulysses) over ``group``."""
    if kind not in ("ring", "ulysses"):
        raise PlanError(f"sequence attention {kind!r} is not one of ['ring', 'ulysses']")
    register_attention()
    name = RING if kind == "ring" else ULYSSES
    for module in model.modules():
        if hasattr(module, "q_proj") and hasattr(module, "o_proj"):
            module.sgl_seq_group, module.sgl_seq_degree = group, degree
    model.config._attn_implementation = name


def flat_plan(plan: Plan, world: int) -> Plan:
    """``plan`` with its sequence groups seen as data parallelism (the weights are replicated over them).

    Used only to place the weights: DDP / ZeRO over all ``dp x g`` ranks is exactly the gradient
    averaging context / Ulysses parallelism needs; the tokens are split by :class:`SequenceSetup`.
    """
    strategies = [replace(s, tp=1, dp=world // plan.pp, sp=False, tp_consec=True) for s in plan.strategies]
    return replace(plan, strategies=strategies, cp_sizes=[], vcp=1, vsp=False)


@dataclass
class SequenceSetup:
    """This rank's place in a ``(dp, g)`` grid: its data-parallel slice and its sequence shard."""

    kind: str
    degree: int
    dp: int
    dp_rank: int
    seq_rank: int
    group: Any

    def local_batch(self, tokens: torch.Tensor) -> torch.Tensor:
        per = tokens.shape[0] // self.dp
        return tokens[self.dp_rank * per:(self.dp_rank + 1) * per]

    def loss(self, module: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
        """``degree`` x the local shard's loss of micro-batch ``tokens`` (see :func:`shard_loss`)."""
        local, pos = shard_tokens(tokens, self.seq_rank, self.degree)
        out = module(input_ids=local, position_ids=pos)
        return shard_loss(out.logits if hasattr(out, "logits") else out, tokens, self.seq_rank, self.degree)


def sequence_setup(model: nn.Module, plan: Plan, world: int, device: torch.device) -> SequenceSetup:
    """Build the ``(dp, g)`` mesh, swap ``model``'s attention and return this rank's :class:`SequenceSetup`."""
    from torch.distributed.device_mesh import init_device_mesh

    kind, degree = sequence_mode(plan)
    dp = world // degree
    strided = kind == "ulysses" and not plan.strategies[0].tp_consec
    if strided:
        mesh = init_device_mesh(device.type, (degree, dp), mesh_dim_names=("seq", "dp"))
    else:
        mesh = init_device_mesh(device.type, (dp, degree), mesh_dim_names=("dp", "seq"))
    group = mesh["seq"].get_group()
    enable_sequence_attention(model, kind, group, degree)
    return SequenceSetup(kind, degree, dp, mesh.get_local_rank("dp"), mesh.get_local_rank("seq"), group)
