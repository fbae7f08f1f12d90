"""Spindle's device mapping: the exact least-P2P placement of every lane of every wave (small instances).

The planner's lanes ``u`` (a GPU group of width ``w_u`` running some operators, in wave
``wave_u``) each need a device block; a lane's candidate blocks ``b`` are the contiguous ones of
its width (inside one node when ``w_u`` fits in a node, node-aligned otherwise,
:func:`candidate_blocks`), and the lanes of one wave need disjoint blocks. An operator's input
from an operator of an earlier lane ``u'`` costs ``p2p(out_mb, b', b)`` (:class:`LinkModel`), so
the total P2P time is a quadratic function of the choices. Linearised with ``y_{u'b'ub} = x_u'b'·x_ub``
held by both marginals (exact for binary ``x``; a much tighter relaxation than ``y ≥ x + x' − 1``),
the mapping is the MILP

    min Σ_{u'→u} Σ_{b', b} C_{u'u}(b', b)·y_{u'b'ub}
    s.t. Σ_b x_ub = 1 (every lane placed),  Σ_{u ∈ wave, b ∋ d} x_ub <= 1 (every device once a wave),
         Σ_b' y_{u'b'ub} = x_ub,  Σ_b y_{u'b'ub} = x_u'b',  y >= 0,  x ∈ {0, 1}

with ``C_{u'u}(b', b) = Σ_{edges p→v, p ∈ u', v ∈ u} p2p(out_p, b', b)`` (HiGHS, zero gap). It is
exact over all waves at once, unlike the greedy rule (wave by wave, lanes by incoming megabytes,
each to its cheapest free block) that the planner falls back to when the instance has more than
``max_lanes`` lanes or the MILP more than ``max_vars`` columns (size limits, so the choice is
deterministic; ``time_limit`` is only a safety net). :func:`exact_mapping` returns ``None`` then,
or when no disjoint set of contiguous blocks holds a wave's lanes.

>>> from sgl.systems.data.spindle_sim import LinkModel
>>> link = LinkModel(2, 100.0, 10.0)   # two nodes of two GPUs
>>> blocks, cost = exact_mapping([2, 1], [0, 1], {(0, 1): [100.0]}, 4, link)
>>> blocks[1][0] in blocks[0], cost        # the consumer sits on its producer's node: no transfer
(True, 0.0)
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from sgl._checks import check_int
from sgl.errors import PlanError

__all__ = ["candidate_blocks", "exact_mapping", "mapping_cost"]

Block = Tuple[int, ...]


def candidate_blocks(width: int, devices: int, per_node: int) -> List[Block]:
    """Contiguous blocks of ``width`` of ``devices`` ids (in one node if ``width <= per_node``, else node-aligned)."""
    check_int(width, "width", minimum=1, error=PlanError)
    out = []
    for s in range(devices - width + 1):
        if width <= per_node and s // per_node != (s + width - 1) // per_node:
            continue
        if width > per_node and s % per_node:
            continue
        out.append(tuple(range(s, s + width)))
    return out


def mapping_cost(blocks: Sequence[Block], edges: Dict[Tuple[int, int], Sequence[float]], link) -> float:
    """Total P2P seconds of a placement: ``Σ_{(u', u)} Σ_mb p2p(mb, blocks[u'], blocks[u])``."""
    return float(sum(link.p2p(mb, blocks[a], blocks[b]) for (a, b), mbs in edges.items() for mb in mbs))


def exact_mapping(widths: Sequence[int], wave_of: Sequence[int], edges: Dict[Tuple[int, int], Sequence[float]],
                  devices: int, link, max_vars: int = 30000, max_lanes: int = 16,
                  time_limit: float = 20.0) -> Tuple[Optional[List[Block]], float]:
    """``(block per lane, total P2P seconds)`` of the MILP in the module docstring, or ``(None, inf)``."""
    import scipy.sparse as sp

    from sgl.systems.seq.milp import solve_milp

    check_int(devices, "devices", minimum=1, error=PlanError)
    if len(widths) != len(wave_of):
        raise PlanError(f"{len(widths)} lane widths but {len(wave_of)} wave indices")
    if not widths:
        return [], 0.0
    if len(widths) > max_lanes:
        return None, float("inf")
    options = [candidate_blocks(w, devices, link.devices_per_node) for w in widths]
    if any(not o for o in options):
        return None, float("inf")
    xcol, cols = {}, 0
    for u, opts in enumerate(options):
        for b in range(len(opts)):
            xcol[u, b] = cols
            cols += 1
    # y_{u'b'ub} for every block pair of every feeding lane pair, tied to x by both marginals
    # (Σ_b' y = x_ub, Σ_b y = x_u'b'): exact for binary x, and a far tighter relaxation than y >= x + x' - 1
    pair_cost = []
    for (a, u), mbs in edges.items():
        if wave_of[a] >= wave_of[u]:
            raise PlanError(f"lane {a} feeds lane {u} of the same or an earlier wave")
        pair_cost.append((a, u, np.array([[sum(link.p2p(mb, src, dst) for mb in mbs) for dst in options[u]]
                                          for src in options[a]])))
    n = cols + sum(m.size for _, _, m in pair_cost)
    if n > max_vars:
        return None, float("inf")
    rows, r_lo, r_hi = [], [], []
    for u, opts in enumerate(options):
        rows.append({xcol[u, b]: 1.0 for b in range(len(opts))})
        r_lo.append(1.0)
        r_hi.append(1.0)
    for w in sorted(set(wave_of)):
        for d in range(devices):
            row = {xcol[u, b]: 1.0 for u, opts in enumerate(options) if wave_of[u] == w
                   for b, blk in enumerate(opts) if d in blk}
            if len(row) > 1:
                rows.append(row)
                r_lo.append(-np.inf)
                r_hi.append(1.0)
    c = np.zeros(n)
    first = cols
    for a, u, m in pair_cost:
        ids = first + np.arange(m.size).reshape(m.shape)
        c[first:first + m.size] = 1e6 * m.ravel()  # microseconds: HiGHS' absolute gap (1e-6) is negligible
        for j in range(m.shape[1]):
            rows.append({**{int(k): 1.0 for k in ids[:, j]}, xcol[u, j]: -1.0})
            r_lo.append(0.0)
            r_hi.append(0.0)
        for i in range(m.shape[0]):
            rows.append({**{int(k): 1.0 for k in ids[i, :]}, xcol[a, i]: -1.0})
            r_lo.append(0.0)
            r_hi.append(0.0)
        first += m.size
    r_idx = [i for i, row in enumerate(rows) for _ in row]
    c_idx = [j for row in rows for j in row]
    values = [v for row in rows for v in row.values()]
    A = sp.coo_matrix((values, (r_idx, c_idx)), shape=(len(rows), n))
    integrality = np.zeros(n, dtype=bool)
    integrality[:cols] = True
    hi = np.concatenate([np.ones(cols), np.full(n - cols, np.inf)])
    result = solve_milp(c, A.tocsr(), r_lo, r_hi, np.zeros(n), hi, integrality, time_limit=time_limit, gap=0.0)
    if result.x is None or result.status != "optimal":
        return None, float("inf")
    blocks = [options[u][max(range(len(opts)), key=lambda b: result.x[xcol[u, b]])] for u, opts in enumerate(options)]
    return blocks, mapping_cost(blocks, edges, link)
