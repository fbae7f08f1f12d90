r"""The motifs SGL counts: names, definitions and the tables that classify a 3-node pattern.

Undirected graphs have one size-2 motif (``edge``) and two connected size-3 motifs: the open
``wedge`` (an induced path ``a - c - b``) and the ``triangle``. Directed graphs have two size-2
motifs (``asym_edge``: ``u -> v`` only, ``mutual_edge``: both ways) and the 13 connected
3-node motifs ``M1`` .. ``M13`` of Benson, Gleich & Leskovec, "Higher-order organization of
complex networks" (Science 2016), with the networkx/MAN triad code of each:

======  ====  ===================================================  =======
motif   MAN   edges (nodes 0, 1, 2)                                 closed
======  ====  ===================================================  =======
M1      030C  0->1, 1->2, 2->0 (a cycle)                            yes
M2      120C  0<->1, 1->2, 2->0                                     yes
M3      210   0<->1, 1<->2, 2->0                                    yes
M4      300   all six                                               yes
M5      030T  0->1, 0->2, 1->2 (feed-forward loop)                  yes
M6      120D  0<->1, 2->0, 2->1                                     yes
M7      120U  0<->1, 0->2, 1->2                                     yes
M8      021D  0->1, 0->2                                            no
M9      021C  1->0, 0->2                                            no
M10     021U  1->0, 2->0                                            no
M11     111U  0<->1, 0->2                                           no
M12     111D  0<->1, 2->0                                           no
M13     201   0<->1, 0<->2                                          no
======  ====  ===================================================  =======

Counts are of *induced* instances: three nodes form ``M8`` only when there is no edge between
the two ends. A neighbour ``w`` of ``v`` has one of three *types* seen from ``v``: ``OUT``
(``v -> w`` only), ``IN`` (``w -> v`` only) or ``BI`` (both); the tables below are indexed by
these types (1, 2, 3: the bits "v -> w" and "w -> v").

    >>> classify(((0, 1), (1, 2), (2, 0)))
    'M1'
    >>> closed_motif(OUT, OUT, OUT), open_motif(BI, OUT)   # v->a, v->b, a->b; v<->a, v->b
    ('M5', 'M11')
"""
from __future__ import annotations

import itertools
from typing import Dict, Iterable, Optional, Sequence, Tuple

from sgl.errors import ConfigError

__all__ = ["UNDIRECTED_MOTIFS", "DIRECTED_MOTIFS", "CLOSED_MOTIFS", "OPEN_MOTIFS", "MOTIF_EDGES", "MAN_CODES",
           "OUT", "IN", "BI", "TYPES", "flip", "classify", "closed_motif", "open_motif", "check_motif"]

OUT, IN, BI = 1, 2, 3
TYPES = (OUT, IN, BI)

UNDIRECTED_MOTIFS: Tuple[str, ...] = ("edge", "wedge", "triangle")
CLOSED_MOTIFS: Tuple[str, ...] = tuple(f"M{k}" for k in range(1, 8))
OPEN_MOTIFS: Tuple[str, ...] = tuple(f"M{k}" for k in range(8, 14))
DIRECTED_MOTIFS: Tuple[str, ...] = ("asym_edge", "mutual_edge") + CLOSED_MOTIFS + OPEN_MOTIFS

_BI01 = ((0, 1), (1, 0))
MOTIF_EDGES: Dict[str, Tuple[Tuple[int, int], ...]] = {
    "M1": ((0, 1), (1, 2), (2, 0)),
    "M2": _BI01 + ((1, 2), (2, 0)),
    "M3": _BI01 + ((1, 2), (2, 1), (2, 0)),
    "M4": _BI01 + ((1, 2), (2, 1), (0, 2), (2, 0)),
    "M5": ((0, 1), (0, 2), (1, 2)),
    "M6": _BI01 + ((2, 0), (2, 1)),
    "M7": _BI01 + ((0, 2), (1, 2)),
    "M8": ((0, 1), (0, 2)),
    "M9": ((1, 0), (0, 2)),
    "M10": ((1, 0), (2, 0)),
    "M11": _BI01 + ((0, 2),),
    "M12": _BI01 + ((2, 0),),
    "M13": _BI01 + ((0, 2), (2, 0)),
}
MAN_CODES: Dict[str, str] = {"M1": "030C", "M2": "120C", "M3": "210", "M4": "300", "M5": "030T", "M6": "120D",
                             "M7": "120U", "M8": "021D", "M9": "021C", "M10": "021U", "M11": "111U",
                             "M12": "111D", "M13": "201"}

_PAIRS = ((0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1))


def _code(edges: Iterable[Tuple[int, int]], perm: Sequence[int] = (0, 1, 2)) -> int:
    present = {(perm[a], perm[b]) for a, b in edges}
    return sum(1 << k for k, pair in enumerate(_PAIRS) if pair in present)


def _canonical(edges: Iterable[Tuple[int, int]]) -> int:
    edges = tuple(edges)
    return min(_code(edges, perm) for perm in itertools.permutations(range(3)))


_BY_CODE: Dict[int, str] = {_canonical(edges): name for name, edges in MOTIF_EDGES.items()}


def classify(edges: Iterable[Tuple[int, int]]) -> Optional[str]:
    """The motif ``M1`` .. ``M13`` formed by directed ``edges`` on nodes 0, 1, 2 (None: not connected)."""
    return _BY_CODE.get(_canonical(edges))


def flip(kind: int) -> int:
    """The type of ``v`` seen from ``w`` when ``w`` has type ``kind`` seen from ``v``."""
    return {OUT: IN, IN: OUT, BI: BI}[kind]


def _edges_of(pairs: Iterable[Tuple[int, int, int]]) -> Tuple[Tuple[int, int], ...]:
    out = []
    for a, b, kind in pairs:
        if kind & OUT:
            out.append((a, b))
        if kind & IN:
            out.append((b, a))
    return tuple(out)


def closed_motif(va: int, vb: int, ab: int) -> str:
    """Motif of the triangle ``v, a, b`` where ``a``/``b`` have types ``va``/``vb`` from ``v`` and
    ``b`` has type ``ab`` from ``a``."""
    return classify(_edges_of(((0, 1, va), (0, 2, vb), (1, 2, ab))))  # type: ignore[return-value]


def open_motif(va: int, vb: int) -> str:
    """Motif of the open wedge centred at ``v`` whose ends have types ``va`` and ``vb`` from ``v``."""
    return classify(_edges_of(((0, 1, va), (0, 2, vb))))  # type: ignore[return-value]


def check_motif(motif: str) -> str:
    """``motif`` if it names a motif (undirected or directed), else a :class:`ConfigError` listing them."""
    if motif not in UNDIRECTED_MOTIFS + DIRECTED_MOTIFS:
        raise ConfigError(f"motif must be one of {', '.join(UNDIRECTED_MOTIFS)} (undirected) or "
                          f"{', '.join(DIRECTED_MOTIFS)} (directed), got {motif!r}")
    return motif
