"""Graph augmentations of the contrastive views: dropped edges, dropped feature columns, dropped nodes.

Each takes the current global torch RNG, so a seeded pre-training run draws the same views.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

__all__ = ["drop_nodes"]


def _drop_edges(edge_index: torch.Tensor, p: float, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    if p == 0:
        return edge_index
    keep = torch.rand(edge_index.size(1), device=edge_index.device) >= p
    return edge_index[:, keep]


def drop_nodes(x: torch.Tensor, edge_index: torch.Tensor, p: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drop each node with probability ``p``; the subgraph induced by the kept nodes.

    Returns ``(x[kept], edge_index relabelled to 0..len(kept)-1, kept)``; ``x`` may be a
    sparse COO tensor. At least one node is always kept.

    Example:
        >>> import torch
        >>> x, ei = torch.arange(3.0).view(3, 1), torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
        >>> x_sub, ei_sub, kept = drop_nodes(x, ei, 0.0)
        >>> kept.tolist(), ei_sub.tolist()
        ([0, 1, 2], [[0, 1, 1, 2], [1, 0, 2, 1]])
    """
    n = x.size(0)
    keep = torch.rand(n, device=x.device) >= p
    if not bool(keep.any()):
        keep[torch.randint(0, n, (1,), device=x.device)] = True
    kept = keep.nonzero().flatten()
    new_id = torch.full((n,), -1, dtype=torch.long, device=x.device)
    new_id[kept] = torch.arange(kept.numel(), device=x.device)
    both = keep[edge_index[0]] & keep[edge_index[1]]
    return x.index_select(0, kept), new_id[edge_index[:, both]], kept


def _drop_feature_columns(x: torch.Tensor, p: float) -> torch.Tensor:
    if p == 0:
        return x
    keep = (torch.rand(x.size(1), device=x.device) >= p).to(x.dtype)
    if x.is_sparse:
        x = x.coalesce()
        return torch.sparse_coo_tensor(x.indices(), x.values() * keep[x.indices()[1]], x.shape, check_invariants=False)
    return x * keep
