"""Edge lists for the analytics commands: SNAP-style text files, ``.npy`` arrays, or a registered dataset.

``--dataset`` takes a registered name (``cora``, ``karate``, ...; read with ``--root``) or
``edges:PATH`` for an edge-list file: one edge per line, ids separated by spaces, tabs or
commas, extra columns (weights, timestamps) ignored, lines starting with ``#`` or ``%`` skipped,
as SNAP and KONECT publish them; or an ``(E, 2)`` integer ``.npy`` array. Ids are used as they
are, so ``num_nodes = max id + 1``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.txt")
    >>> _ = open(path, "w").write("# a comment\\n0 1\\n1\\t2\\n2,3\\n")
    >>> edges, n = read_edge_list(path)
    >>> edges.tolist(), n
    ([[0, 1], [1, 2], [2, 3]], 4)
"""
from __future__ import annotations

import os
import re
from typing import Optional, Tuple, Union

import numpy as np

from sgl.errors import DatasetError

__all__ = ["read_edge_list", "load_edges", "EDGES_PREFIX"]

PathLike = Union[str, os.PathLike]
EDGES_PREFIX = "edges:"


def read_edge_list(path: PathLike) -> Tuple[np.ndarray, int]:
    """``(edges (E, 2) int64, num_nodes)`` from a text edge list or an ``.npy`` array."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DatasetError(f"edge list {path} does not exist")
    if path.endswith(".npy"):
        try:
            edges = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DatasetError(f"cannot read edge array {path}: {exc}") from exc
        if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
            raise DatasetError(f"{path} must hold an (E, 2) integer array, got {edges.shape} {edges.dtype}")
    else:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
        lines = [line for line in text.splitlines() if line.strip() and line.lstrip()[:1] not in ("#", "%")]
        if not lines:
            return np.zeros((0, 2), dtype=np.int64), 1
        columns = len(re.split(r"[\s,]+", lines[0].strip()))
        if columns < 2:
            raise DatasetError(f"{path}: the first edge line {lines[0]!r} has fewer than two ids")
        tokens = re.split(r"[\s,]+", "\n".join(lines).strip())
        if len(tokens) != columns * len(lines):
            raise DatasetError(f"{path}: every edge line must have {columns} columns like the first one "
                               f"({len(tokens)} values on {len(lines)} lines)")
        try:
            edges = np.array(tokens).reshape(len(lines), columns)[:, :2].astype(np.int64)
        except ValueError as exc:
            raise DatasetError(f"{path} holds a value that is not an integer vertex id ({exc})") from exc
    edges = np.ascontiguousarray(edges, dtype=np.int64)
    if edges.size and edges.min() < 0:
        raise DatasetError(f"{path} has a negative vertex id {int(edges.min())}; ids must be >= 0")
    return edges, int(edges.max()) + 1 if edges.size else 1


def load_edges(spec: str, root: Optional[PathLike] = None) -> Tuple[np.ndarray, int]:
    """Edges of ``spec``: ``edges:PATH`` or a registered node-level dataset (its ``edge_index``)."""
    if spec.startswith(EDGES_PREFIX):
        return read_edge_list(spec[len(EDGES_PREFIX):])
    import sgl.datasets
    from sgl.data import Graph

    graph = sgl.datasets.load(spec, root=root)
    if not isinstance(graph, Graph):
        raise DatasetError(f"dataset {spec!r} is a collection of graphs, not one graph; pass a node-level "
                           f"dataset or edges:PATH")
    return graph.edge_index.numpy().T.copy(), graph.num_nodes
