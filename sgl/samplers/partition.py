r"""Streaming FENNEL partitioning (one- and two-level) for OUTRE's partition-based batches.

Nodes arrive in id order; node ``v`` joins the partition ``p`` maximising

.. math::
    |N(v) \cap p| \;-\; \alpha\,\gamma\,|p|^{\gamma - 1} \;-\; \sqrt{|\mathrm{train}(p)|}
    \quad\text{if } v \text{ is a training node (else the last term is 0)},

with :math:`\alpha = k^{\gamma-1} |E| / |V|^{\gamma}`, hard caps :math:`|p| \le 1.1 |V|/k`
and :math:`|\mathrm{train}(p)| \le 1.1 |\mathrm{train}|/k` (the OUTRE code's rule, which
balances training nodes so every partition yields similar batches). Only partitions of
``v``'s already-placed neighbours and the currently smallest partition can win (the
penalty grows with size), so a step costs ``O(deg(v) + k)``. The loop is inherently
sequential (each decision depends on the previous ones), hence numba.

For large graphs :func:`fennel_two_level` first splits into ``k1`` parts and then each part
into ``k2`` parts of its induced subgraph (OUTRE: 100 x 100 = 10,000 partitions).

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> from sgl.samplers.partition import fennel_partition
    >>> ring = torch.arange(8)
    >>> g = Graph.from_edge_index(torch.stack([ring, (ring + 1) % 8])).symmetrize()
    >>> parts = fennel_partition(g.indptr.numpy(), g.indices.numpy(), 2)
    >>> sorted(set(parts.tolist())), int((parts == 0).sum())
    ([0, 1], 4)
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from sgl.errors import ConfigError

__all__ = ["fennel_partition", "fennel_two_level", "cross_partition_degree"]


def _fennel_loop(indptr, indices, num_parts, is_train, alpha, gamma, cap, train_cap, passes, patience):
    n = indptr.size - 1
    parts = np.full(n, -1, dtype=np.int64)
    size = np.zeros(num_parts, dtype=np.int64)
    tsize = np.zeros(num_parts, dtype=np.int64)
    gain = np.zeros(num_parts, dtype=np.float64)
    touched = np.empty(num_parts, dtype=np.int64)
    best_parts = parts.copy()
    best_inside = -1
    stale = 0
    rounds = 0
    for sweep in range(passes):
        for v in range(n):
            train_v = is_train[v]
            if sweep > 0:  # restreaming: take v out, then place it again seeing all its neighbours
                old = parts[v]
                size[old] -= 1
                if train_v:
                    tsize[old] -= 1
                parts[v] = -1
            nt = 0
            for e in range(indptr[v], indptr[v + 1]):
                p = parts[indices[e]]
                if p >= 0:
                    if gain[p] == 0.0:
                        touched[nt] = p
                        nt += 1
                    gain[p] += 1.0
            best = -1
            best_score = -1e300
            for i in range(nt + 1):
                if i < nt:
                    p = touched[i]
                else:  # the smallest admissible partition (no neighbours needed)
                    p = -1
                    smallest = 1 << 62
                    for q in range(num_parts):
                        if size[q] < smallest and size[q] < cap and (not train_v or tsize[q] < train_cap):
                            smallest = size[q]
                            p = q
                    if p < 0:
                        continue
                if size[p] >= cap or (train_v and tsize[p] >= train_cap):
                    continue
                score = gain[p] - alpha * gamma * size[p] ** (gamma - 1.0)
                if train_v:
                    score -= math.sqrt(tsize[p])
                if score > best_score:
                    best_score = score
                    best = p
            for i in range(nt):
                gain[touched[i]] = 0.0
            if best < 0:  # every cap is hit (rounding): fall back to the smallest partition
                best = int(np.argmin(size))
            parts[v] = best
            size[best] += 1
            if train_v:
                tsize[best] += 1
        rounds += 1
        inside = 0  # directed edges inside a partition after this sweep
        for v in range(n):
            for e in range(indptr[v], indptr[v + 1]):
                if parts[indices[e]] == parts[v]:
                    inside += 1
        if inside > best_inside:
            best_inside = inside
            best_parts[:] = parts
            stale = 0
        else:  # OUTRE's early stop: no better cut for `patience` sweeps
            stale += 1
            if stale >= patience:
                break
    return best_parts, best_inside, rounds


_COMPILED = None


def _fennel(*args):
    """The loop above compiled by numba on first use (importing numba costs every CLI start)."""
    global _COMPILED
    if _COMPILED is None:
        import numba

        _COMPILED = numba.njit(cache=True)(_fennel_loop)
    return _COMPILED(*args)


def _check_parts(num_parts: int, n: int) -> int:
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
        raise ConfigError(f"num_parts must be a positive integer, got {num_parts!r}")
    if num_parts > n:
        raise ConfigError(f"num_parts={num_parts} exceeds the number of nodes ({n})")
    return int(num_parts)


def fennel_partition(indptr: np.ndarray, indices: np.ndarray, num_parts: int,
                     train_mask: Optional[np.ndarray] = None, gamma: float = 2.0, slack: float = 1.1,
                     passes: int = 3, patience: int = 2, return_stats: bool = False):
    """Partition id (``[num_nodes]``, int64) of every node by streaming FENNEL.

    ``passes > 1`` restreams: every later pass re-places each node knowing all its
    neighbours' partitions (OUTRE's refinement rounds), which sharply lowers the edge cut
    when the id order hides the structure. As in OUTRE's partitioner, restreaming stops early
    once ``patience`` consecutive passes fail to raise the number of edges kept inside a
    partition, and the best assignment seen is returned. With ``return_stats=True`` the result
    is ``(parts, {"passes": run, "inside_fraction": kept edges / all edges})``.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    n = indptr.size - 1
    k = _check_parts(num_parts, n)
    is_train = np.zeros(n, dtype=np.bool_) if train_mask is None else np.ascontiguousarray(train_mask, dtype=np.bool_)
    num_edges = max(1, int(indptr[-1]))
    alpha = k ** (gamma - 1.0) * num_edges / float(n) ** gamma
    cap = int(math.ceil(slack * n / k))
    train_cap = int(math.ceil(slack * max(1, int(is_train.sum())) / k))
    for name, value in (("passes", passes), ("patience", patience)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    parts, inside, run = _fennel(indptr, indices, k, is_train, alpha, float(gamma), cap, train_cap,
                                 int(passes), int(patience))
    if return_stats:
        return parts, {"passes": int(run), "inside_fraction": inside / max(1, indices.size)}
    return parts


def fennel_two_level(indptr: np.ndarray, indices: np.ndarray, k1: int, k2: int,
                     train_mask: Optional[np.ndarray] = None, passes: int = 3, patience: int = 2) -> np.ndarray:
    """``k1 * k2`` partitions: FENNEL into ``k1`` parts, then each part's induced subgraph into ``k2``
    (both levels restream up to ``passes`` times, see :func:`fennel_partition`)."""
    from scipy.sparse import csr_matrix

    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    top = fennel_partition(indptr, indices, k1, train_mask, passes=passes, patience=patience)
    out = np.empty(n, dtype=np.int64)
    adj = csr_matrix((np.ones(indices.size, dtype=np.int8), np.asarray(indices), indptr), shape=(n, n))
    for part in range(k1):
        nodes = np.flatnonzero(top == part)
        if nodes.size == 0:
            continue
        sub = adj[nodes][:, nodes]
        local = fennel_partition(sub.indptr, sub.indices, min(k2, nodes.size),
                                 None if train_mask is None else np.asarray(train_mask)[nodes],
                                 passes=passes, patience=patience)
        out[nodes] = part * k2 + local
    return out


def cross_partition_degree(indptr: np.ndarray, indices: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Per node, the number of its neighbours in *other* partitions (OUTRE's neighbour-cache score)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    dst = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    cross = parts[np.asarray(indices)] != parts[dst]
    return np.bincount(dst[cross], minlength=indptr.size - 1)
