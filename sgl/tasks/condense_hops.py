"""``[X, ÂX, ..., Â^k X]`` with torch's SpMM, for the small, one-off propagations of condensation.

Not :func:`sgl.ops.propagate_hops`: its numba kernels run on numba's OpenMP threading layer,
whose worker threads keep spinning for a few seconds after each call and, on a busy 2-core
machine, were measured to slow every following small torch op (a 20x7 softmax: 5 us -> 24 ms)
-- and gradient matching is thousands of small ops. ``OMP_WAIT_POLICY=PASSIVE`` also avoids it.

    >>> import sgl
    >>> [tuple(h.shape) for h in torch_hops(sgl.datasets.load("karate"), torch.eye(34), 2)]
    [(34, 34), (34, 34), (34, 34)]
"""
from __future__ import annotations

from typing import Any, List

import torch

from sgl.ops import normalized_adjacency, spmm

__all__ = ["torch_hops"]


def torch_hops(graph: Any, x: torch.Tensor, k: int) -> List[torch.Tensor]:
    """``k`` hops of the symmetric-normalised adjacency with self-loops (GCN's) over ``x``."""
    adj = normalized_adjacency(graph).to(x.device)
    hops = [x]
    for _ in range(k):
        hops.append(spmm(adj, hops[-1]))
    return hops
