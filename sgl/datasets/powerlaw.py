"""Seeded power-law graphs in O(E) numpy: the Chung–Lu model.

Vertex ``i`` gets weight ``w_i ∝ (i + i0)^(-1 / (gamma - 1))``, so the expected degrees follow a
power law ``P(d) ∝ d^-gamma``; each of ``E`` edges picks both endpoints independently with
probability ``w / sum(w)``. Self-loops and repeated pairs are dropped (so slightly fewer than
``E`` edges remain, most of the loss at the hubs), and vertex ids are shuffled so that an id says
nothing about a degree. ``networkx``'s Barabási–Albert generator builds the same kind of graph
in pure Python, ~100x slower at a million edges.

    >>> edges = chung_lu_edges(1000, avg_degree=8, seed=0)
    >>> edges.shape[1], bool((edges[:, 0] < edges[:, 1]).all())
    (2, True)
"""
from __future__ import annotations

import numpy as np

from sgl._checks import check_int, check_real

__all__ = ["chung_lu_edges"]


def chung_lu_edges(num_nodes: int, avg_degree: float = 10.0, exponent: float = 2.5, *, seed: int = 0,
                   max_degree_share: float = 0.1) -> np.ndarray:
    """``(E, 2)`` undirected edges ``u < v`` of a Chung–Lu graph with degree exponent ``exponent``.

    Args:
        num_nodes: vertices (ids ``0 .. num_nodes - 1``).
        avg_degree: target mean degree (``E = num_nodes * avg_degree / 2`` sampled edges).
        exponent: the power-law exponent ``gamma > 2``.
        seed: random seed.
        max_degree_share: largest expected degree as a share of ``num_nodes`` (the offset
            ``i0`` of the weights is chosen so the biggest hub expects this many neighbours).
    """
    check_int(num_nodes, "num_nodes", minimum=2)
    check_real(avg_degree, "avg_degree", 0.0, float(num_nodes - 1), open_low=True)
    check_real(exponent, "exponent", 2.0, open_low=True)
    check_real(max_degree_share, "max_degree_share", 0.0, 1.0, open_low=True)
    rng = np.random.default_rng(seed)
    alpha = 1.0 / (exponent - 1.0)
    ranks = np.arange(num_nodes, dtype=np.float64)
    weights = (ranks + 1.0) ** -alpha
    degrees = weights * avg_degree * num_nodes / weights.sum()
    # shift the ranks until the largest expected degree fits the cap
    cap = max_degree_share * num_nodes
    if degrees[0] > cap:
        offset = (degrees[0] / cap) ** (1.0 / alpha)
        weights = (ranks + offset) ** -alpha
    probability = weights / weights.sum()
    num_edges = int(round(num_nodes * avg_degree / 2))
    ends = rng.choice(num_nodes, size=(num_edges, 2), p=probability)
    ends = rng.permutation(num_nodes)[ends]
    ends = np.sort(ends[ends[:, 0] != ends[:, 1]], axis=1)
    keys = np.sort(ends[:, 0] * np.int64(num_nodes) + ends[:, 1])
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys
    return np.stack([keys // num_nodes, keys % num_nodes], axis=1)
