"""What a sampler hands to a model: bipartite per-layer blocks and the mini-batch around them.

Both move between devices like a :class:`~sgl.data.Graph` (:mod:`sgl.data.placement`):
``to(device, non_blocking=False)``, ``cpu()``, ``cuda()``, ``pin_memory()`` and ``device``
return a new object with every tensor moved (a mini-batch's blocks included).

Example:
    >>> import torch
    >>> batch = MiniBatch(torch.tensor([3, 1]), [Block(torch.tensor([[1], [0]]), 2, 1)], torch.tensor([3]))
    >>> moved = batch.to("cpu")
    >>> moved.device, moved.blocks[0].edge_index.tolist(), moved is batch
    (device(type='cpu'), [[1], [0]], False)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np
import torch

from sgl.data.placement import DevicePlacement

__all__ = ["Block", "MiniBatch"]


@dataclass
class Block(DevicePlacement):
    """One message-passing layer of a mini-batch: a bipartite graph ``src -> dst``.

    ``edge_index`` is ``[2, E]`` with row 0 = local *source* positions in ``[0, num_src)`` and
    row 1 = local *destination* positions in ``[0, num_dst)``. Destination nodes are the
    first ``num_dst`` source nodes (the DGL/PyG convention), so a layer can read the root
    features as ``x[:num_dst]``; ``SAGEConv((x, x[:num_dst]), edge_index, size=block.size)``
    consumes a block directly.

    ``edge_weight`` (optional) carries per-edge normalisation (GCN or GraphSAINT weights).
    """

    edge_index: torch.Tensor
    num_src: int
    num_dst: int
    edge_weight: Optional[torch.Tensor] = None

    @property
    def size(self) -> Tuple[int, int]:
        return (self.num_src, self.num_dst)

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.size(1))

    def __repr__(self) -> str:
        return f"Block(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges})"


@dataclass
class MiniBatch(DevicePlacement):
    """A sampled computation graph.

    Attributes:
        n_id: ``[num_src of blocks[0]]`` global ids of the input nodes (features are read for these).
        blocks: one :class:`Block` per layer, input side first; ``blocks[i].num_dst ==
            blocks[i + 1].num_src`` except where historical embeddings are injected.
        output_nodes: global ids of the rows the model outputs (the last block's destinations).
        node_norm: optional per-output-row loss weight (GraphSAINT's loss normalisation).
        pruned: global ids of last-layer input nodes whose subtree was pruned because a fresh
            historical embedding stands in for them (OUTRE); they are the *last* ``len(pruned)``
            source nodes of ``blocks[-1]``.
    """

    n_id: torch.Tensor
    blocks: List[Block]
    output_nodes: torch.Tensor
    node_norm: Optional[torch.Tensor] = None
    pruned: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64))
    #: global ids of the last layer's input nodes (``blocks[-1]``'s sources)
    last_input_nodes: Optional[torch.Tensor] = None
    #: input features ``[len(n_id), F]`` when the loader was given a feature source
    x: Optional[torch.Tensor] = None
    #: labels of ``output_nodes`` when the loader was given labels
    y: Optional[torch.Tensor] = None

    @property
    def batch_size(self) -> int:
        return int(self.output_nodes.numel())

    @property
    def computed_inputs(self) -> np.ndarray:
        """Global ids of the last layer's inputs the model computes (not pruned): every entry of
        ``last_input_nodes`` before the trailing ``pruned`` ones."""
        return self.last_input_nodes[:self.last_input_nodes.numel() - self.pruned.numel()].cpu().numpy()

    @property
    def num_sampled_edges(self) -> int:
        return sum(b.num_edges for b in self.blocks)

    def __repr__(self) -> str:
        return (f"MiniBatch(batch_size={self.batch_size}, num_input_nodes={self.n_id.numel()}, "
                f"blocks={self.blocks})")
