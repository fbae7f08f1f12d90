"""Megatron sequence parallelism on a tensor-parallel Hugging Face decoder (DTensor styles).

Megatron TP keeps the layer's norms and residual additions replicated over the TP group;
sequence parallelism (Korthikanti et al., 2022) shards them along the sequence instead, so the
hidden state between layers is ``[b, s/tp, h]`` on each rank.  Around each tensor-parallel region
an all-gather (sequence shards -> full sequence) replaces the identity and a reduce-scatter
(partial sums -> sequence shards) replaces the all-reduce:

.. math:: h' = h + \\mathrm{RS}\\bigl(\\mathrm{Attn}_{tp}(\\mathrm{AG}(\\mathrm{Norm}(h)))\\bigr),\\qquad
          y = h' + \\mathrm{RS}\\bigl(\\mathrm{MLP}_{tp}(\\mathrm{AG}(\\mathrm{Norm}(h')))\\bigr).

With :mod:`torch.distributed.tensor.parallel` styles, on top of the model's
``base_model_tp_plan``: the norms get ``SequenceParallel``, the modules that hold the column-wise
matrices (attention, MLP) ``PrepareModuleInput`` (``Shard(1) -> Replicate``: the all-gather), the
row-wise matrices ``RowwiseParallel(output_layouts=Shard(1))`` (the reduce-scatter); the first
layer takes the full embedding output and keeps its own slice (no communication), the final norm
is sequence-parallel and the LM head gathers the sequence again.  The model-level code of
``transformers`` (rotary positions, masks) still sees the full sequence, so nothing else changes.
"""
from __future__ import annotations

from typing import Dict, Sequence

import torch.nn as nn

from sgl.errors import PlanError

__all__ = ["sequence_parallel_layers", "sequence_parallel_ends"]


def _layer_plan(layer: nn.Module, layout: Dict[str, str]) -> Dict[str, object]:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    plan: Dict[str, object] = {}
    parents = set()
    for name, style in layout.items():
        if style == "colwise":
            plan[name] = ColwiseParallel()
            parents.add(name.rsplit(".", 1)[0] if "." in name else "")
        elif style == "rowwise":
            plan[name] = RowwiseParallel(output_layouts=Shard(1))
        else:
            raise PlanError(f"Megatron sequence parallelism: TP style {style!r} of {name!r} is not colwise/rowwise")
    if "" in parents:
        raise PlanError("Megatron sequence parallelism needs the column-wise matrices inside sub-modules "
                        "(attention, MLP) of the layer")
    for parent in parents:
        module = layer.get_submodule(parent)
        if hasattr(module, "q_proj"):        # HF attention is called with hidden_states=... (a keyword)
            plan[parent] = PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                              desired_input_kwarg_layouts={"hidden_states": Replicate()},
                                              use_local_output=True)
        else:
            plan[parent] = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                              use_local_output=True)
    norms = [n for n, m in layer.named_children() if "norm" in n.lower() and not list(m.children())]
    if len(norms) != 2:
        raise PlanError(f"Megatron sequence parallelism needs a pre-norm layer with two norms; "
                        f"{type(layer).__name__} has {norms}")
    for n in norms:
        plan[n] = SequenceParallel()
    return plan


def sequence_parallel_layers(layers: Sequence[nn.Module], layout: Dict[str, str], tp_mesh, first: bool) -> None:
    """Megatron TP + SP on ``layers`` (``first``: ``layers[0]`` is the model's first layer)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import PrepareModuleInput, parallelize_module

    for i, layer in enumerate(layers):
        plan = _layer_plan(layer, layout)
        parallelize_module(layer, tp_mesh, plan)
        if first and i == 0:   # the full embedding output: keep this rank's sequence slice
            parallelize_module(layer, tp_mesh, PrepareModuleInput(input_layouts=(Replicate(),),
                                                                  desired_input_layouts=(Shard(1),),
                                                                  use_local_output=True))


def sequence_parallel_ends(norm: nn.Module, lm_head: nn.Module, tp_mesh, head_is_parallel: bool) -> None:
    """Sequence-parallel final norm; the LM head gathers the sequence (vocabulary-TP heads do it themselves)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import PrepareModuleInput, SequenceParallel, parallelize_module

    parallelize_module(norm, tp_mesh, SequenceParallel())
    if not head_is_parallel:
        parallelize_module(lm_head, tp_mesh, PrepareModuleInput(input_layouts=(Shard(1),),
                                                                desired_input_layouts=(Replicate(),),
                                                                use_local_output=True))
