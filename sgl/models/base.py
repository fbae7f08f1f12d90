"""The SGAP contract shared by every scalable (decoupled) GNN.

A scalable model has three stages (Zhang et al., PaSca / SGL):

1. :meth:`SGAPModel.precompute` — parameter-free: a graph operator propagates the
   features ``k`` hops (:func:`sgl.ops.propagate_hops`) and a message operator combines
   the hops into what the trainable part consumes. Done once, before training.
2. :meth:`SGAPModel.forward` — a trainable base model on mini-batches of precomputed rows.
3. :meth:`SGAPModel.postprocess` — optional parameter-free smoothing of predictions over
   the graph (identity by default).

Nothing trains or propagates in a constructor: building a model is cheap and pure.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional, Union

import torch
from torch import nn

from sgl.ops import GraphOperator, get_operator, propagate_hops

__all__ = ["SGAPModel"]


class SGAPModel(nn.Module):
    """Base class: subclasses set ``self.graph_op``/``self.k`` and implement
    :meth:`combine_hops` (the message operator) and :meth:`forward` (the base model)."""

    def __init__(self, graph_op: Union[str, GraphOperator], k: int) -> None:
        super().__init__()
        self.graph_op = get_operator(graph_op)
        self.k = int(k)

    def combine_hops(self, hops: List[torch.Tensor]) -> torch.Tensor:
        """Message operator: turn ``[X, ÂX, ..., Â^k X]`` into the base model's input."""
        raise NotImplementedError  # abstract: defined by each model

    @torch.no_grad()
    def precompute(self, graph: Any, x: Optional[torch.Tensor] = None, *,
                   cache_dir: Optional[Union[str, os.PathLike]] = None, progress: bool = False) -> torch.Tensor:
        """Propagate and combine the features; returns one row per node."""
        hops = propagate_hops(graph, x, self.k, self.graph_op, cache_dir=cache_dir, progress=progress)
        return self.combine_hops(hops)

    def postprocess(self, graph: Any, logits: torch.Tensor) -> torch.Tensor:
        """Parameter-free post-propagation of predictions (identity unless overridden)."""
        return logits
