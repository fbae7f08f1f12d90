"""Turn a plan's layer strategies into PyTorch parallelism on one rank, for any :class:`Decoder`.

The ranks form a ``(pp, dp, tp)`` device mesh (``(pp, tp, dp)`` when TP groups are strided,
``tp_consecutive_flags=0``); :func:`make_mesh` builds it.  On the layers of this rank
(:func:`shard_stage`):

* ``tp > 1`` -> DTensor tensor parallelism on the ``tp`` dimension, with the layout the model
  ships (``base_model_tp_plan`` of a Hugging Face model; Megatron's for TinyLM), plus Megatron
  sequence parallelism under ``ExecConfig(sequence_parallel=True)`` (:mod:`~sgl.systems.runtime.megatron_sp`);
* ZeRO-3 layers (``dp_types_enc=1``, or ``default_dp_type="zero3"``) -> FSDP2
  :func:`torch.distributed.fsdp.fully_shard` per layer on the ``dp`` dimension (2-D with TP);
  ``default_dp_type="zero2"`` -> the same with ``reshard_after_forward=False`` (ZeRO-2: the
  gathered weights stay for backward, gradients and optimiser states are sharded);
* OSDP's operator split (``split > 1``) -> every linear matrix of the layer becomes ``split``
  slices (:mod:`sgl.systems.runtime.osdp`), each sharded on its own, so one slice is gathered
  at a time;
* the embedding / LM head -> vocabulary TP when ``vtp > 1`` (rows of the embedding, columns of
  the head), ZeRO-3 when ``vocab_sdp``, ZeRO-2 under ``default_dp_type="zero2"``;
* everything left replicated -> DDP when the whole model is replicated (no TP, no pipeline),
  otherwise gradients averaged over the ``dp`` group after backward, which is what DDP does
  (:attr:`DataParallelSetup.manual_sync`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

import torch
import torch.nn as nn

from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan
from sgl.systems.runtime.models import Decoder, decoder_of
from sgl.systems.runtime.osdp import split_linears

__all__ = ["DataParallelSetup", "make_mesh", "parallelize", "shard_stage", "tensor_parallel", "vocab_parallel"]


@dataclass
class DataParallelSetup:
    """The module to call, the parameters to all-reduce by hand, and this rank's DP coordinates."""

    module: nn.Module
    dp: int
    dp_rank: int
    manual_sync: List[nn.Parameter] = field(default_factory=list)
    dp_group: Optional[Any] = None      # None: the world group
    sharded_units: int = 0              # modules FSDP2 shards on their own (layers, OSDP slices, root)


def make_mesh(device: torch.device, plan: Plan, world: int):
    """The ``(pp, dp, tp)`` mesh of ``plan`` on ``world`` ranks (PP outermost, as Galvatron places it)."""
    from torch.distributed.device_mesh import init_device_mesh

    s = plan.strategies[0]
    tp = s.tp
    dp = world // (plan.pp * tp)
    if s.tp_consec:
        return init_device_mesh(device.type, (plan.pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    return init_device_mesh(device.type, (plan.pp, tp, dp), mesh_dim_names=("pp", "tp", "dp"))


def tensor_parallel(decoder: Decoder, layers: Sequence[nn.Module], tp_mesh, sequence_parallel: bool = False,
                    first: bool = True) -> None:
    """DTensor TP on ``layers`` with the model's own layout (colwise / rowwise styles).

    ``sequence_parallel``: Megatron SP on top (:mod:`sgl.systems.runtime.megatron_sp`); ``first``
    says ``layers`` starts with the model's first layer.
    """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    layout = decoder.tp_layout()
    if sequence_parallel:
        from sgl.systems.runtime.megatron_sp import sequence_parallel_layers

        sequence_parallel_layers(layers, layout, tp_mesh, first)
        return
    unknown = sorted({v for v in layout.values() if v not in styles})
    if unknown:
        raise PlanError(f"tensor parallelism: the model's TP plan uses styles {unknown}; the executor runs "
                        f"{sorted(styles)}")
    for layer in layers:
        parallelize_module(layer, tp_mesh, {name: styles[style]() for name, style in layout.items()})


def vocab_parallel(decoder: Decoder, tp_mesh, embed: bool, head: bool) -> None:
    """Vocabulary TP (``vtp``): the embedding split by vocabulary rows, the LM head by output columns."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    if embed:
        parallelize_module(decoder.embed_module, tp_mesh, RowwiseParallel(input_layouts=Replicate()))
    if head:
        parallelize_module(decoder.lm_head, tp_mesh, ColwiseParallel(output_layouts=Replicate()))


def shard_stage(decoder: Decoder, plan: Plan, layer_ids: Sequence[int], dp_mesh, root: nn.Module,
                with_vocab: bool) -> List[nn.Module]:
    """FSDP2 / OSDP on this rank's layers (and the embedding/head through ``root``); the sharded modules."""
    from torch.distributed.fsdp import fully_shard

    dp = dp_mesh.size() if dp_mesh is not None else 1
    sharded: List[nn.Module] = []
    for i in layer_ids:
        s, layer = plan.strategies[i], decoder.layers[i]
        zero3 = s.sdp or plan.default_dp_type == "zero3"
        slices = split_linears(layer, s.split) if s.split > 1 else []
        if dp == 1:
            continue
        for piece in slices:
            fully_shard(piece, mesh=dp_mesh, reshard_after_forward=zero3)
        if zero3 or plan.default_dp_type == "zero2":
            fully_shard(layer, mesh=dp_mesh, reshard_after_forward=zero3)
            sharded.append(layer)
        sharded.extend(slices)
    if dp > 1 and with_vocab and (plan.embed_sdp or plan.default_dp_type in ("zero2", "zero3")):
        fully_shard(root, mesh=dp_mesh, reshard_after_forward=plan.embed_sdp or plan.default_dp_type == "zero3")
        sharded.append(root)
    return sharded


def _unsharded(params, sharded: Sequence[nn.Module]) -> List[nn.Parameter]:
    owned = {id(p) for m in sharded for p in m.parameters()}
    return [p for p in params if id(p) not in owned]


def parallelize(model: nn.Module, plan: Plan, rank: int, world: int, device: torch.device,
                sequence_parallel: bool = False) -> DataParallelSetup:
    """Apply TP (+ Megatron SP), FSDP2 ZeRO-2/3, OSDP splits and DDP to ``model`` in place as ``plan`` (pp = 1) says."""
    decoder = decoder_of(model)
    mesh = make_mesh(device, plan, world)
    tp, dp = mesh["tp"].size(), mesh["dp"].size()
    dp_rank = mesh.get_local_rank("dp")
    if tp > 1:
        tensor_parallel(decoder, list(decoder.layers), mesh["tp"], sequence_parallel)
        if plan.vtp > 1:
            vocab_parallel(decoder, mesh["tp"], embed=True, head=True)
        if sequence_parallel:
            from sgl.systems.runtime.megatron_sp import sequence_parallel_ends

            sequence_parallel_ends(decoder.norm, decoder.lm_head, mesh["tp"], head_is_parallel=plan.vtp > 1)
    sharded = shard_stage(decoder, plan, range(len(decoder.layers)), mesh["dp"], model, with_vocab=True)
    if dp == 1:
        return DataParallelSetup(model, dp, dp_rank)
    if not sharded and tp == 1:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
        return DataParallelSetup(ddp, dp, dp_rank)
    manual = _unsharded(list(model.parameters()), sharded)
    return DataParallelSetup(model, dp, dp_rank, manual, mesh["dp"].get_group(), len(sharded))
