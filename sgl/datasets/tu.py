r"""Graph-classification datasets in the TU Dortmund text format (Morris et al., 2020).

A dataset ``NAME`` is a folder of text files, one value (or comma-separated row) per line,
with 1-based node ids over the whole collection:

* ``NAME_A.txt``: ``i, j`` per edge (the graphs are stored with both directions);
* ``NAME_graph_indicator.txt``: the graph id (1-based) of every node, non-decreasing;
* ``NAME_graph_labels.txt``: one class per graph (or ``NAME_graph_attributes.txt`` for
  regression targets);
* optional ``NAME_node_labels.txt`` (categorical, one-hot encoded as features, as PyG
  does), ``NAME_node_attributes.txt`` (continuous features), ``NAME_edge_labels.txt``,
  ``NAME_edge_attributes.txt``.

Parsing is vectorized (one ``pandas.read_csv`` per file, a sort and a ``searchsorted`` to
cut the collection into graphs); the only Python loop runs over graphs. Processing
follows PyG's ``TUDataset``: self-loops dropped, duplicate edges merged, graph labels
remapped to ``0..C-1`` in sorted order (MUTAG's ``-1/1`` become ``0/1``), node attributes
used only with ``use_node_attr=True``. Edge labels / attributes (one-hot encoded labels
after the attributes) are kept in ``graph.edge_attr``, aligned with ``graph.indices``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Union

import numpy as np
import torch

from sgl.datasets.download import (
    corrupt_file_error,
    download_zip_folder,
    find_folder,
    target_folder,
)
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.graph_dataset import GraphDataset
from sgl.errors import ConfigError, DatasetError, DownloadError

__all__ = ["load_tu", "read_tu", "tu_files"]

PathLike = Union[str, os.PathLike]

_URL = "https://www.chrsmrrs.com/graphkerneldatasets"

# XuelinHu/Matrix-ResGNN-GraphClassificatio @ f76543d : data/TUDataset/*/raw/ (same bytes as the TU zips)
_SHA256 = {
    "MUTAG_A.txt": "d9656ca7493f3445d737c711710bb36fd432dddd1c0ea32e1d4713c86ebd28e2",
    "MUTAG_edge_labels.txt": "4669ce755075ff86c3240709345745886400908fa637a49310459b9c267b3e56",
    "MUTAG_graph_indicator.txt": "7d520a4d6c7961c0cdeabe076d8fe27e795b6d373485c9a2b744987e560a2056",
    "MUTAG_graph_labels.txt": "a1518ea39ba3426bd42f57396b9c4baffe68e9adc718caeeab0119c6591a5f2c",
    "MUTAG_node_labels.txt": "678f429965490e84dd27713017538c995fc05d1621beac910848b600015ee863",
    "PROTEINS_A.txt": "4c4b33e272fc95cac6d27ed6d5d12b9a852c8610e91fff59f8f0dbdd5a20df67",
    "PROTEINS_graph_indicator.txt": "8d4ff1e852a5c28561e9bffb44cf9490bc552b13a3b6156dd12dc7f44e9afc4a",
    "PROTEINS_graph_labels.txt": "c0ef9810c440775252872318d0c8adc385588e14bc4c47a2c34aa96ee3c7cdcd",
    "PROTEINS_node_attributes.txt": "54eef829abb37e458a5fbf3a3c581e48e5810e220463c2cd951856b9ceb08f07",
    "PROTEINS_node_labels.txt": "f758e8ad3d6e3c026b50833d75f6f90735b94eb3345e4243707f495ca8afea8d",
}

_OPTIONAL = ("node_labels", "node_attributes", "edge_labels", "edge_attributes", "graph_attributes")


def tu_files(name: str) -> List[str]:
    """The required files of TU dataset ``name``: ``NAME_A.txt``, graph indicator, graph labels."""
    return [f"{name}_A.txt", f"{name}_graph_indicator.txt", f"{name}_graph_labels.txt"]


def _read(path: Path, dtype, columns: Optional[int] = None) -> np.ndarray:
    """Read a comma-separated numeric table; every failure names the file."""
    import pandas as pd  # imported on use: keeps `import sgl.datasets` light

    try:
        table = pd.read_csv(path, header=None, sep=",", skipinitialspace=True, dtype=dtype)
    except Exception as exc:  # ValueError for a non-numeric cell, ParserError, EmptyDataError
        raise corrupt_file_error(path, exc) from exc
    values = table.to_numpy()
    # pandas' copy-on-write hands out read-only views; torch.from_numpy needs writable memory.
    values = values if values.flags.writeable else values.copy()
    if values.size == 0 or (columns is not None and values.shape[1] != columns):
        raise corrupt_file_error(path, f"expected {columns or 'some'} comma-separated value(s) per line")
    if np.issubdtype(values.dtype, np.floating) and not np.isfinite(values).all():
        raise corrupt_file_error(path, "contains empty or non-finite values")
    return values


def _one_hot(labels: np.ndarray) -> np.ndarray:
    """PyG's encoding: each label column shifted to start at 0, one-hot, columns concatenated."""
    blocks = []
    for column in labels.T:
        column = column - column.min()
        block = np.zeros((column.size, int(column.max()) + 1), dtype=np.float32)
        block[np.arange(column.size), column] = 1.0
        blocks.append(block)
    return np.concatenate(blocks, axis=1)


def _check_rows(path: Path, values: np.ndarray, expected: int, what: str) -> None:
    if values.shape[0] != expected:
        raise DatasetError(
            f"{path} has {values.shape[0]} lines but there are {expected} {what}; the files disagree, "
            f"one of them is truncated or corrupt: delete them to re-download"
        )


def read_tu(folder: PathLike, name: str, use_node_attr: bool = False, use_edge_attr: bool = True) -> GraphDataset:
    """Read TU dataset ``name`` from ``folder`` (no download).

    Example:
        >>> import os
        >>> from sgl.datasets import read_tu
        >>> folder = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "tu", "MUTAG")
        >>> ds = read_tu(folder, "MUTAG") if os.path.isdir(folder) else None
        >>> (len(ds), ds.num_classes, ds.num_features) if ds is not None else (188, 2, 7)
        (188, 2, 7)
    """
    folder = Path(folder)
    path = {part: folder / f"{name}_{part}.txt" for part in ("A", "graph_indicator", "graph_labels") + _OPTIONAL}
    for part in ("A", "graph_indicator"):
        if not path[part].is_file():
            raise DatasetError(f"missing {path[part].name} in {folder}{os.sep}")

    batch = _read(path["graph_indicator"], np.int64, 1)[:, 0] - 1
    num_nodes = batch.size
    if batch.min() < 0 or np.any(np.diff(batch) < 0):
        raise corrupt_file_error(path["graph_indicator"], "graph ids must be >= 1 and non-decreasing")
    sizes = np.bincount(batch)
    if np.any(sizes == 0):
        raise corrupt_file_error(path["graph_indicator"], f"graph {int(np.argmin(sizes)) + 1} has no nodes")
    num_graphs = sizes.size
    node_start = np.concatenate([[0], np.cumsum(sizes)])

    edges = _read(path["A"], np.int64, 2) - 1
    if edges.min() < 0 or edges.max() >= num_nodes:
        raise corrupt_file_error(path["A"], f"node ids must be in 1..{num_nodes} (the graph indicator's length)")
    if not np.array_equal(batch[edges[:, 0]], batch[edges[:, 1]]):
        raise corrupt_file_error(path["A"], "an edge joins nodes of two different graphs")

    if path["graph_labels"].is_file():
        raw_labels = _read(path["graph_labels"], np.int64, 1)[:, 0]
        _check_rows(path["graph_labels"], raw_labels, num_graphs, "graphs")
        labels = torch.from_numpy(np.unique(raw_labels, return_inverse=True)[1].reshape(-1).astype(np.int64))
    elif path["graph_attributes"].is_file():
        targets = _read(path["graph_attributes"], np.float32)
        _check_rows(path["graph_attributes"], targets, num_graphs, "graphs")
        labels = torch.from_numpy(targets[:, 0] if targets.shape[1] == 1 else targets)
    else:
        raise DatasetError(f"missing {name}_graph_labels.txt (or {name}_graph_attributes.txt) in {folder}{os.sep}")

    features = []
    if use_node_attr and path["node_attributes"].is_file():
        attributes = _read(path["node_attributes"], np.float32)
        _check_rows(path["node_attributes"], attributes, num_nodes, "nodes")
        features.append(attributes)
    if path["node_labels"].is_file():
        node_labels = _read(path["node_labels"], np.int64)
        _check_rows(path["node_labels"], node_labels, num_nodes, "nodes")
        features.append(_one_hot(node_labels))
    x = np.concatenate(features, axis=1) if features else None

    edge_features = []
    if use_edge_attr and path["edge_attributes"].is_file():
        attributes = _read(path["edge_attributes"], np.float32)
        _check_rows(path["edge_attributes"], attributes, edges.shape[0], "edges")
        edge_features.append(attributes)
    if use_edge_attr and path["edge_labels"].is_file():
        edge_labels = _read(path["edge_labels"], np.int64)
        _check_rows(path["edge_labels"], edge_labels, edges.shape[0], "edges")
        edge_features.append(_one_hot(edge_labels))
    edge_attr = np.concatenate(edge_features, axis=1) if edge_features else None

    # One global CSR over all nodes; every graph's nodes are a contiguous id range, so each
    # graph is a slice of it (its edges are grouped by destination, hence by graph).
    indptr, indices, edge_ids = edges_to_csr(edges[:, 0], edges[:, 1], num_nodes, remove_self_loops=True)
    if edge_attr is not None:
        edge_attr = edge_attr[edge_ids]

    graphs = []
    for g in range(num_graphs):
        lo, hi = node_start[g], node_start[g + 1]
        e_lo, e_hi = indptr[lo], indptr[hi]
        graph = csr_graph(
            indptr[lo:hi + 1] - e_lo, indices[e_lo:e_hi] - lo,
            x=None if x is None else torch.from_numpy(x[lo:hi]),
        )
        if edge_attr is not None:
            graph.edge_attr = torch.from_numpy(edge_attr[e_lo:e_hi])
        graphs.append(graph)
    return GraphDataset(graphs, labels, name=name)


def load_tu(
    name: str,
    root: Optional[PathLike] = None,
    use_node_attr: bool = False,
    use_edge_attr: bool = True,
    download: bool = True,
) -> GraphDataset:
    """Any TU graph-classification dataset by its (case-sensitive) name, e.g. ``"MUTAG"``.

    Args:
        name: the TU name (``MUTAG``, ``PROTEINS``, ``NCI1``, ``ENZYMES``...).
        root: folder holding the ``NAME_*.txt`` files directly or in ``NAME/`` or
            ``NAME/raw/``; default ``$SGL_DATA`` or ``~/.sgl/datasets``. Missing files are
            downloaded as ``NAME.zip`` from the TU collection.
        use_node_attr: prepend the continuous node attributes to the one-hot node labels
            (PyG's ``use_node_attr``; off by default, as in PyG).
        use_edge_attr: keep edge labels/attributes in ``graph.edge_attr``.
        download: set ``False`` to fail instead of downloading.

    Returns:
        A :class:`~sgl.datasets.GraphDataset` whose ``labels`` are the graph classes.

    Example:
        >>> import os
        >>> from sgl.datasets import load_tu
        >>> root = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "tu")
        >>> ds = load_tu("PROTEINS", root=root) if os.path.isdir(root) else None
        >>> len(ds) if ds is not None else 1113
        1113
    """
    if not isinstance(name, str) or not name or any(c in name for c in "/\\"):
        raise ConfigError(f"a TU dataset name is a plain name such as 'MUTAG', got {name!r}")
    files = tu_files(name)
    folder = find_folder(root, [name], files[:2])
    if folder is None:
        folder = target_folder(root, [name], files)
        if not download:
            raise DatasetError(f"missing {', '.join(files)} in {folder}{os.sep}; put them there (or pass download=True)")
        url = f"{_URL}/{name}.zip"
        try:
            download_zip_folder(url, folder, name, sha256=_SHA256, last=files)
        except DownloadError as exc:
            optional = ", ".join(f"{name}_{part}.txt" for part in _OPTIONAL)
            raise DownloadError(
                f"{exc}. Put the files {', '.join(files)} (and those of {optional} the dataset has) "
                f"in {folder}{os.sep} and retry."
            ) from exc
    return read_tu(folder, name, use_node_attr=use_node_attr, use_edge_attr=use_edge_attr)
