"""Containers for what a model's precompute stage hands to training."""
from __future__ import annotations

from typing import Any, List, Sequence, Union

import torch

__all__ = ["NodeFeatures", "FullGraphInput", "to_device"]


class NodeFeatures:
    """Precomputed per-node inputs: one ``[n, d]`` tensor, or a list of hop tensors.

    A model whose message operator is learnable keeps every hop and combines them per
    mini-batch; indexing returns the rows of every hop, so the trainer never needs to
    know which case it is in.

        >>> feats = NodeFeatures([torch.zeros(5, 2), torch.ones(5, 2)])
        >>> [t.shape for t in feats[torch.tensor([0, 3])]]
        [torch.Size([2, 2]), torch.Size([2, 2])]
    """

    def __init__(self, data: Union[torch.Tensor, Sequence[torch.Tensor]]) -> None:
        self.data = data if isinstance(data, torch.Tensor) else list(data)
        first = self.data if isinstance(self.data, torch.Tensor) else self.data[0]
        self.num_nodes = int(first.size(0))

    @property
    def is_hops(self) -> bool:
        return not isinstance(self.data, torch.Tensor)

    def __getitem__(self, index: torch.Tensor) -> Union[torch.Tensor, List[torch.Tensor]]:
        if isinstance(self.data, torch.Tensor):
            return self.data[index]
        return [hop[index] for hop in self.data]

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        if isinstance(self.data, torch.Tensor):
            return f"NodeFeatures({tuple(self.data.shape)})"
        return f"NodeFeatures({len(self.data)} hops x {tuple(self.data[0].shape)})"


class FullGraphInput:
    """What a full-batch message-passing model consumes: features and the whole graph."""

    def __init__(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: Any = None) -> None:
        self.x, self.edge_index, self.edge_weight = x, edge_index, edge_weight
        self.num_nodes = int(x.size(0))

    def to(self, device: torch.device) -> "FullGraphInput":
        weight = None if self.edge_weight is None else self.edge_weight.to(device)
        return FullGraphInput(self.x.to(device), self.edge_index.to(device), weight)

    def __len__(self) -> int:
        return self.num_nodes


def to_device(batch: Any, device: torch.device) -> Any:
    """Move a tensor, a list of tensors or a :class:`FullGraphInput` to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, (list, tuple)):
        return [t.to(device) for t in batch]
    return batch.to(device)
