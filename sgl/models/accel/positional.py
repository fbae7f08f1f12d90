r"""Position features from the graph, for graph-free students (NOSMOG-style, Tian et al. 2023).

NOSMOG concatenates a DeepWalk embedding of every node to its features, so an MLP student
can tell structurally different nodes apart. We compute a FastRP-style embedding instead
(Chen et al. 2019): a seeded Gaussian projection ``R`` propagated over the normalised
adjacency,

.. math::
    P = \mathrm{rownorm}\Big(\sum_{i=1}^{k} w_i\, \hat A^{i} R\Big),\qquad R_{vj} \sim \mathcal N(0, 1/d),

which approximates the random-walk co-occurrence DeepWalk factorises, without training.
It is computed once at *training* time; inference reads the rows of ``P`` like any other
per-node feature and touches no graph tensor. A node unseen in training gets the mean of
its observed in-neighbours' rows (NOSMOG's rule for inductive nodes), the only place a
graph is read, and only for new nodes.

Example:
    >>> import sgl
    >>> g = sgl.datasets.load("karate")
    >>> positional_features(g, dim=8, seed=0).shape
    torch.Size([34, 8])
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from sgl._checks import check_int
from sgl.ops import normalized_adjacency, spmm

__all__ = ["positional_features", "inductive_positions"]


def positional_features(graph: Any, dim: int = 64, steps: int = 3, seed: int = 0,
                        weights: Sequence[float] = (1.0, 1.0, 0.5)) -> torch.Tensor:
    """``[num_nodes, dim]`` FastRP position features of ``graph`` (unit rows, seeded)."""
    dim = check_int(dim, "positional_dim", minimum=1)
    steps = check_int(steps, "positional_steps", minimum=1)
    device = graph.indptr.device
    generator = torch.Generator().manual_seed(int(seed))  # drawn on the host: the same rows on every device
    projection = torch.randn(graph.num_nodes, dim, generator=generator).to(device) / dim ** 0.5
    adj = normalized_adjacency(graph).to(device)
    hops = [projection]
    for _ in range(steps):  # torch's SpMM: small and one-off (see sgl.tasks.condense.torch_hops on why not numba)
        hops.append(spmm(adj, hops[-1]))
    out = torch.zeros_like(projection)
    for i, hop in enumerate(hops[1:]):
        out = out + (weights[i] if i < len(weights) else weights[-1]) * hop
    return out / out.norm(dim=1, keepdim=True).clamp_min(1e-12)


def inductive_positions(graph: Any, positions: torch.Tensor, observed: torch.Tensor,
                        new_nodes: torch.Tensor) -> torch.Tensor:
    """Rows for ``new_nodes``: the mean position of each one's observed in-neighbours.

    ``positions`` is ``[len(observed), dim]`` in the order of ``observed`` (node ids of
    ``graph``); a new node without observed neighbours gets zeros.
    """
    device = positions.device
    slot = torch.full((graph.num_nodes,), -1, dtype=torch.long, device=device)
    slot[observed.to(device)] = torch.arange(observed.numel(), device=device)
    row = torch.full((graph.num_nodes,), -1, dtype=torch.long, device=device)
    row[new_nodes.to(device)] = torch.arange(new_nodes.numel(), device=device)
    src, dst = graph.edge_index.to(device)
    keep = (row[dst] >= 0) & (slot[src] >= 0)
    out = torch.zeros(new_nodes.numel(), positions.size(1), dtype=positions.dtype, device=device)
    out.index_add_(0, row[dst[keep]], positions[slot[src[keep]]])
    count = torch.zeros(new_nodes.numel(), dtype=positions.dtype, device=device)
    count.index_add_(0, row[dst[keep]], torch.ones(int(keep.sum()), dtype=positions.dtype, device=device))
    return out / count.clamp_min(1).unsqueeze(1)
