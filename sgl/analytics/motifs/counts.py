r"""Exact per-vertex counts of the size-2 and size-3 motifs, by sparse matrix algebra.

**Undirected** (on the support ``S`` with degrees ``d``). Orient every edge from the lower to
the higher vertex in the order (degree, id), ``R = S`` restricted to ``rank(i) < rank(j)``; a
triangle ``a < b < c`` is then one path ``a → b → c`` closed by ``a → c``. With

.. math::

    X = (R R) \odot R,

``X[a, c]`` counts the middle vertices of the triangles whose lowest vertex is ``a`` and
highest ``c``. One masked product (:mod:`~sgl.analytics.motifs.products`) gives its row sums
(triangles by lowest vertex), column sums (by highest) and the middle-vertex marginal, whose sum
is ``t``, the triangles at every vertex. The product only expands the short upward lists (at
most :math:`\sqrt{2m}` long): ``sum_b d⁻(b) d⁺(b)`` steps instead of the ``sum_v d(v)²`` of the
symmetric :math:`(S S) \odot S`. Open wedges (induced paths) are counted from
degrees: :math:`\binom{d_v}{2} - t_v` centred at ``v`` and :math:`(S d)_v - d_v - 2 t_v` with ``v``
as an end; totals are :math:`T = \mathbf 1^\top X \mathbf 1` triangles and
:math:`\sum_v \binom{d_v}{2} - 3T` wedges.

**Directed** (types ``OUT``/``IN``/``BI`` as in :mod:`~sgl.analytics.motifs.adjacency`, with
matrices :math:`T_x`). For types ``x, y, z``,

.. math::

    q_{xyz}(v) = \big((T_x T_z) \odot T_y\big)\mathbf 1 \;=\;
    \#\{(a, b) : a \text{ has type } x,\ b \text{ type } y \text{ from } v,\ b \text{ type } z \text{ from } a\}.

A closed motif ``M`` contains ``v`` in :math:`\tfrac12 \sum_{(x,y,z) \to M} q_{xyz}(v)`
instances (each triangle is seen as ``(a, b)`` and ``(b, a)``). An open motif with end types
``{x, y}`` at its centre has :math:`N_{xy}(v) = d_x d_y - [x{=}y] d_x - \sum_z q_{xyz}(v)`
ordered end pairs centred at ``v``, and ``v`` is one of its ends
:math:`E_{xy}(v) = (T_{\bar x} d_y)_v - [x{=}y]\, d_{\bar x}(v) - \sum_z q_{\bar x z y}(v)` times
(:math:`\bar x` is the type seen from the other side). Nine sparse products serve all 13 motifs.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

import numpy as np

from sgl._checks import check_bool, check_choice
from sgl.analytics.motifs.adjacency import TypedAdjacency, oriented_support, undirected_support
from sgl.analytics.motifs.catalog import (CLOSED_MOTIFS, DIRECTED_MOTIFS, OPEN_MOTIFS, TYPES, UNDIRECTED_MOTIFS,
                                          closed_motif, flip, open_motif)
from sgl.analytics.motifs.products import ENGINES, masked_product_sums
from sgl.analytics.motifs.result import MotifCounts

__all__ = ["count_motifs", "count_undirected", "count_directed", "closed_configs", "open_configs"]


def _pairs(d: np.ndarray) -> np.ndarray:
    return d * (d - 1) // 2


def _steps(progress: bool, total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not progress, leave=False)


def count_undirected(graph: Any, progress: bool = False, engine: str = "numba") -> MotifCounts:
    """Edges, open wedges and triangles containing every vertex of the undirected view of ``graph``.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> # a triangle 0-1-2 with a tail 2-3
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 3]]))
        >>> counts = count_undirected(g)
        >>> counts["triangle"].tolist(), counts["wedge"].tolist(), counts.totals
        ([1, 1, 1, 0], [1, 1, 2, 2], {'edge': 4, 'wedge': 2, 'triangle': 1})
    """
    s = undirected_support(graph)
    with _steps(progress, 1, "triangles") as bar:
        r = oriented_support(s)
        ((lowest, highest, middle),) = masked_product_sums(r, r, [r], engine)
        bar.update()
    d = np.diff(s.indptr).astype(np.int64)
    t = lowest + highest + middle
    triangles = int(lowest.sum())
    neighbour_degrees = s.astype(np.int64) @ d
    wedges = (_pairs(d) - t) + (neighbour_degrees - d - 2 * t)
    totals = {"edge": int(d.sum()) // 2, "wedge": int(_pairs(d).sum()) - 3 * triangles, "triangle": triangles}
    return MotifCounts(UNDIRECTED_MOTIFS, np.column_stack([d, wedges, t]), totals, directed=False)


def closed_configs(motif: str) -> Iterable[Tuple[int, int, int]]:
    """The ``(x, y, z)`` type triples whose triangle is ``motif`` (see the module docstring)."""
    return [(x, y, z) for x in TYPES for y in TYPES for z in TYPES if closed_motif(x, y, z) == motif]


def open_configs(motif: str) -> Iterable[Tuple[int, int]]:
    """The ordered ``(x, y)`` end types of an open ``motif`` at its centre."""
    return [(x, y) for x in TYPES for y in TYPES if open_motif(x, y) == motif]


def count_directed(graph: Any, progress: bool = False, engine: str = "numba") -> MotifCounts:
    """Asymmetric and mutual edges and the 13 directed 3-node motifs containing every vertex.

    Example:
        >>> import torch
        >>> from sgl.data import Graph
        >>> # a feed-forward loop 0->1, 0->2, 1->2 plus 2->3
        >>> g = Graph.from_edge_index(torch.tensor([[0, 0, 1, 2], [1, 2, 2, 3]]))
        >>> counts = count_directed(g)
        >>> counts["M5"].tolist(), counts["M9"].tolist(), counts.totals["M5"], counts.totals["M9"]
        ([1, 1, 1, 0], [1, 1, 2, 2], 1, 2)
    """
    typed = TypedAdjacency.from_graph(graph)
    deg = {kind: typed.degree(kind) for kind in TYPES}
    masks = [typed.of(y) for y in TYPES]
    q: Dict[Tuple[int, int, int], np.ndarray] = {}
    with _steps(progress, len(TYPES) ** 2, "typed paths") as bar:
        for x in TYPES:
            for z in TYPES:
                sums = masked_product_sums(typed.of(x), typed.of(z), masks, engine)
                for y, (rows, _, _) in zip(TYPES, sums):
                    q[(x, y, z)] = rows
                bar.update()
    columns = {"asym_edge": deg[TYPES[0]] + deg[TYPES[1]], "mutual_edge": deg[TYPES[2]]}
    totals = {"asym_edge": int(typed.out.nnz), "mutual_edge": int(typed.bi.nnz) // 2}
    for motif in CLOSED_MOTIFS:
        twice = sum(q[c] for c in closed_configs(motif))
        columns[motif] = twice // 2
        totals[motif] = int(columns[motif].sum()) // 3
    for motif in OPEN_MOTIFS:
        centre = np.zeros(typed.num_nodes, dtype=np.int64)
        end = np.zeros(typed.num_nodes, dtype=np.int64)
        for x, y in open_configs(motif):
            adjacent = sum(q[(x, y, z)] for z in TYPES)
            centre += deg[x] * deg[y] - (deg[x] if x == y else 0) - adjacent
            back = flip(x)
            closed_ends = sum(q[(back, z, y)] for z in TYPES)
            end += typed.of(back).astype(np.int64) @ deg[y] - (deg[back] if x == y else 0) - closed_ends
        columns[motif] = centre // 2 + end
        totals[motif] = int(centre.sum()) // 2
    return MotifCounts(DIRECTED_MOTIFS, np.column_stack([columns[m] for m in DIRECTED_MOTIFS]), totals,
                       directed=True)


def count_motifs(graph: Any, directed: bool = False, progress: bool = False,
                 engine: str = "numba") -> MotifCounts:
    """Per-vertex counts and totals of every size-2 and size-3 motif of ``graph``.

    Args:
        graph: an :class:`sgl.data.Graph` or a square scipy sparse matrix (``M[i, j] != 0`` is
            an edge ``i -> j``); weights, duplicates and self-loops are ignored.
        directed: count the 13 directed motifs ``M1`` .. ``M13`` (and asymmetric/mutual edges)
            instead of edges, wedges and triangles of the undirected view.
        progress: show a progress bar over the sparse products.
        engine: ``"numba"`` (masked products without output matrices, the fast default) or
            ``"scipy"`` (SciPy SpGEMM then masking; the same counts).

    Returns:
        :class:`MotifCounts`: ``per_vertex[v, k]`` = instances of motif ``k`` containing ``v``.

    Example:
        >>> import sgl
        >>> counts = count_motifs(sgl.datasets.load("karate"))
        >>> counts.totals
        {'edge': 78, 'wedge': 393, 'triangle': 45}
        >>> int(counts["triangle"][0])
        18
    """
    check_bool(directed, "directed")
    check_choice(engine, "engine", ENGINES)
    return (count_directed if directed else count_undirected)(graph, progress, engine)
