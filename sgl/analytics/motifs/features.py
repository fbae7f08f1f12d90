r"""Motif features of every vertex: counts and centralities as one standardised feature matrix.

Columns (``log1p`` of counts, which span orders of magnitude on power-law graphs):

* ``log1p`` of the undirected counts (edges, open wedges, triangles at the vertex),
* the local clustering coefficient :math:`c_v = t_v / \binom{d_v}{2}` (0 below degree 2),
* ``log1p`` of the motif degree and ``log(n · π_M)`` of the motif PageRank on ``W_M``,
* with ``directed=True`` also ``log1p`` of the 15 directed counts (``asym_edge``, ``mutual_edge``,
  ``M1`` .. ``M13``).

Each column is then standardised to zero mean and unit variance (constant columns become 0).

    >>> import sgl
    >>> x, names = motif_features(sgl.datasets.load("karate"))
    >>> tuple(x.shape), names[:4]
    ((34, 6), ['log1p_edge', 'log1p_wedge', 'log1p_triangle', 'clustering'])
"""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np
import torch

from sgl.analytics.motifs.centrality import weighted_pagerank
from sgl.analytics.motifs.counts import count_motifs
from sgl.analytics.motifs.weighted import motif_adjacency

__all__ = ["motif_features"]


def _standardize(columns: np.ndarray) -> np.ndarray:
    mean, std = columns.mean(axis=0), columns.std(axis=0)
    return np.divide(columns - mean, std, out=np.zeros_like(columns), where=std > 1e-12)


def motif_features(graph: Any, motif: str = "triangle", directed: bool = False) -> Tuple[torch.Tensor, List[str]]:
    """``([n, F] float32 features, F column names)`` of motif counts and centralities.

    Args:
        graph: an :class:`sgl.data.Graph` or a square scipy sparse matrix.
        motif: the motif of the centralities (motif degree and PageRank on ``W_M``).
        directed: also add the directed motif counts.
    """
    counts = count_motifs(graph)
    columns = [np.log1p(counts[name].astype(np.float64)) for name in counts.names]
    names = [f"log1p_{name}" for name in counts.names]
    d = counts["edge"].astype(np.float64)
    pairs = d * (d - 1) / 2
    columns.append(np.divide(counts["triangle"], pairs, out=np.zeros_like(pairs), where=pairs > 0))
    names.append("clustering")
    weights = motif_adjacency(graph, motif)
    columns.append(np.log1p(np.asarray(weights.sum(axis=1)).ravel().astype(np.float64)))
    columns.append(np.log(weights.shape[0] * weighted_pagerank(weights)))
    names += [f"log1p_{motif}_degree", f"log_{motif}_pagerank"]
    if directed:
        directed_counts = count_motifs(graph, directed=True)
        columns += [np.log1p(directed_counts[name].astype(np.float64)) for name in directed_counts.names]
        names += [f"log1p_{name}" for name in directed_counts.names]
    table = _standardize(np.column_stack(columns))
    return torch.from_numpy(table.astype(np.float32)), names
