r"""A user's own graph from files: ``sgl.datasets.load("file:PATH")`` and ``--dataset file:PATH``.

Three kinds of files, told apart by their content (or ``format=``):

* an **edge list** (CSV, TSV or whitespace-separated text, optionally ``.gz``): one
  ``src dst [weight]`` row per edge, non-negative integer node ids, an optional header line,
  ``#`` / ``%`` comment lines; node features and labels come from their own files
  (``features=PATH``, ``labels=PATH``, see below). Edges are symmetrized unless
  ``undirected=False`` (most edge lists store an undirected edge once); duplicates keep
  their first occurrence;
* a **.npz** archive in one of three layouts: gnn-benchmark (``adj_data, adj_indices, ...``,
  read by :func:`sgl.datasets.read_npz`), the heterophily benchmark (``node_features,
  node_labels, edges, train_masks, ...``, :func:`sgl.datasets.read_heterophily`) or PyG
  ``Data`` attribute names (``edge_index``, optional ``x``, ``y``, ``edge_weight``,
  ``train_mask`` / ``val_mask`` / ``test_mask``, masks ``[n]`` or ``[n, num_splits]``);
* a **saved** :class:`~sgl.data.Graph` (:meth:`Graph.save`).

Feature files: ``.npy`` (``[n, d]``), ``.npz`` (a scipy sparse matrix or one array), or
text with one row per node (row ``i`` = node ``i``; a header whose first name is ``id``,
``node`` or ``node_id`` makes the first column the node id instead). ``features="onehot"``
uses the identity (Kipf & Welling's choice for featureless graphs). Label files: ``.npy``,
or text with one integer per line (row ``i`` = node ``i``) or ``id label`` pairs; ``-1``
marks an unlabeled node.

Without split masks in the files, a seeded stratified random split is drawn
(:func:`sgl.datasets.random_split`, ``train_ratio``/``val_ratio``, default 60/20/20);
``train_ratio``/``val_ratio`` given explicitly re-split a graph whose files carry masks.
Every malformed row is reported with its file and line; NaN in a feature file names the file
and row.
"""
from __future__ import annotations

import os
import warnings
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np
import torch

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.splits import random_split
from sgl.datasets.tables import Table, check_finite_rows, read_table, sniff
from sgl.errors import ConfigError, DatasetError, SGLError

__all__ = ["load_file", "FILE_FORMATS"]

PathLike = Union[str, os.PathLike]

#: values of ``format=``
FILE_FORMATS = ("edgelist", "npz", "graph")
_ID_NAMES = ("id", "node", "node_id", "nid", "index")
# The identity matrix is n^2 floats: past this many bytes a feature file is the only sane input.
_ONEHOT_MAX_BYTES = 4 * 2**30
#: options that only an edge list reads (the other formats carry their own node data)
_EDGELIST_ONLY = ("features", "labels", "delimiter", "header", "weighted", "num_nodes")
#: PyG ``Data`` keys this loader carries into the Graph
_PYG_KEYS = ("edge_index", "x", "y", "edge_weight", "train_mask", "val_mask", "test_mask", "num_nodes")


def _resolve(path: PathLike, root: Optional[PathLike], what: str) -> Path:
    file = Path(os.path.expanduser(str(path)))
    if not file.is_absolute() and root is not None:
        file = Path(os.path.expanduser(str(root))) / file
    if file.is_dir():
        raise DatasetError(f"{file} is a folder; the {what} must be a file")
    if not file.is_file():
        where = f" (relative paths are read from root={str(root)!r})" if root is not None else ""
        raise DatasetError(f"no {what} at {file}{where}; check the path")
    return file


def _detect_format(path: Path) -> str:
    if not zipfile.is_zipfile(path):
        return "edgelist"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile as exc:
        raise corrupt_file_error(path, exc) from exc
    if names and all(name.endswith(".npy") for name in names):
        return "npz"
    if any(name.endswith("data.pkl") for name in names):  # torch.save's zip layout
        return "graph"
    raise DatasetError(f"{path} is a zip archive but neither a .npz nor a saved Graph (members: "
                       f"{', '.join(names[:5])}); pass format='edgelist', 'npz' or 'graph'")


# ---------------------------------------------------------------------------- node data files
def _read_features(spec: Any, root: Optional[PathLike], num_nodes: Optional[int]) -> np.ndarray:
    path = _resolve(spec, root, "feature file")
    if path.suffix == ".npy":
        x = _load_array(path)
    elif path.suffix == ".npz":
        x = _load_npz_matrix(path)
    else:
        layout = sniff(path, what="feature file")
        has_id = layout.header is not None and layout.header[0].strip().lower() in _ID_NAMES
        table = read_table(layout, id_columns=1 if has_id else 0, what="feature file")
        if layout.num_columns - has_id < 1:
            raise DatasetError(f"{path}: no feature columns besides the node id")
        x = _place_rows(table, path, "feature", num_nodes) if has_id else table.values
        return x.astype(np.float32)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
        raise DatasetError(f"{path}: features must be a numeric [num_nodes, num_features] array, got shape "
                           f"{x.shape} and dtype {x.dtype}")
    x = x.astype(np.float32)
    check_finite_rows(x, path, "features")
    return x


def _place_rows(table: Table, path: Path, what: str, num_nodes: Optional[int]) -> np.ndarray:
    """Rows keyed by the id column -> an array indexed by node id (missing rows: 0 / -1)."""
    ids = table.ids[:, 0]
    _, first, counts = np.unique(ids, return_index=True, return_counts=True)
    if (counts > 1).any():
        raise DatasetError(f"{path}: node {int(ids[first[counts > 1][0]])} has more than one {what} row")
    n = max(int(ids.max()) + 1, num_nodes or 0)
    if what == "feature" and ids.size < n:  # a label may be missing (unlabeled), a feature row may not
        missing = np.setdiff1d(np.arange(n), ids)
        raise DatasetError(f"{path}: node {int(missing[0])} has no feature row ({missing.size} nodes lack one); "
                           f"give every node 0..{n - 1} a row")
    out = np.full((n, table.values.shape[1]), -1.0 if what == "label" else 0.0)
    out[ids] = table.values
    return out


def _load_array(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # truncated, pickled object arrays, not an .npy
        raise corrupt_file_error(path, exc) from exc


def _load_npz_matrix(path: Path) -> np.ndarray:
    import scipy.sparse as sp

    try:
        return sp.load_npz(path).toarray()
    except Exception:
        pass  # not a scipy sparse archive: an np.savez with one array
    try:
        with np.load(path, allow_pickle=False) as archive:
            if len(archive.files) != 1:
                raise DatasetError(f"{path}: a feature .npz must hold a scipy sparse matrix or exactly one array, "
                                   f"found {', '.join(archive.files)}")
            return np.asarray(archive[archive.files[0]])
    except SGLError:
        raise
    except Exception as exc:
        raise corrupt_file_error(path, exc) from exc


def _read_labels(spec: Any, root: Optional[PathLike], num_nodes: Optional[int]) -> np.ndarray:
    path = _resolve(spec, root, "label file")
    if path.suffix == ".npy":
        y = _load_array(path)
        if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)):
            raise DatasetError(f"{path}: labels must be a 1-D integer array, got shape {y.shape} and dtype {y.dtype}")
        return y.astype(np.int64)
    layout = sniff(path, what="label file")
    if layout.num_columns not in (1, 2):
        raise DatasetError(f"{path}: a label file has one label per line or 'id label' pairs, not "
                           f"{layout.num_columns} columns")
    table = read_table(layout, id_columns=layout.num_columns - 1, int_columns=1, what="label file")
    if layout.num_columns == 1:
        return table.ids[:, 0]
    y = _place_rows(Table(table.ids[:, :1], table.ids[:, 1:].astype(np.float64)), path, "label", num_nodes)
    return y[:, 0].astype(np.int64)


def _labels_with_unlabeled(y: np.ndarray) -> np.ndarray:
    # -1 marks unlabeled nodes in text files; in a .npy any negative value does
    return np.where(y < 0, -1, y)


# ---------------------------------------------------------------------------- the three formats
def _read_edgelist(path: Path, root: Optional[PathLike], options: Dict[str, Any]) -> Graph:
    layout = sniff(path, options["delimiter"] if options["delimiter"] is not None else "auto", options["header"],
                   what="edge list")
    weighted = options["weighted"]
    if layout.num_columns not in (2, 3):
        raise DatasetError(f"{path}: an edge list has 2 columns (src, dst) or 3 (src, dst, weight), found "
                           f"{layout.num_columns} in its first row; remove the extra columns")
    if weighted and layout.num_columns != 3:
        raise DatasetError(f"{path}: weighted=True needs a third (weight) column; the file has 2")
    table = read_table(layout, id_columns=2, what="edge list")
    src, dst = table.ids[:, 0], table.ids[:, 1]
    x = y = None
    feature_rows = label_rows = 0
    if options["features"] is not None and str(options["features"]).lower() != "onehot":
        x = _read_features(options["features"], root, options["num_nodes"])
        feature_rows = x.shape[0]
    if options["labels"] is not None:
        y = _read_labels(options["labels"], root, options["num_nodes"])
        label_rows = y.shape[0]
    n = _num_nodes(path, src, dst, feature_rows, label_rows, options["num_nodes"])
    if str(options["features"]).lower() == "onehot":
        if 4 * n * n > _ONEHOT_MAX_BYTES:
            raise ConfigError(f"features='onehot' needs {4 * n * n / 2**30:.1f} GiB for {n:,} nodes; pass a "
                              f"feature file (features=PATH) instead")
        x = np.eye(n, dtype=np.float32)
    x, y = _pad(x, n, 0.0), _pad(y, n, -1)
    undirected = True if options["undirected"] is None else bool(options["undirected"])
    indptr, indices, ids = edges_to_csr(src, dst, n, undirected=undirected)
    weight = None
    if layout.num_columns == 3 and weighted is not False:
        w = table.values[:, 0].astype(np.float32)
        weight = w[ids % len(src)] if len(src) else w
    return csr_graph(indptr, indices, weight, x=None if x is None else torch.from_numpy(x),
                     y=None if y is None else torch.from_numpy(_labels_with_unlabeled(y)), name=path.stem)


def _num_nodes(path: Path, src: np.ndarray, dst: np.ndarray, feature_rows: int, label_rows: int,
               given: Optional[int]) -> int:
    largest = int(max(src.max(), dst.max())) + 1 if src.size else 0
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise ConfigError(f"num_nodes must be a positive integer, got {given!r}")
        if largest > given:
            raise DatasetError(f"{path}: node id {largest - 1} is out of range for num_nodes={given}")
        for rows, what in ((feature_rows, "feature"), (label_rows, "label")):
            if rows > given:
                raise DatasetError(f"the {what} file has {rows} rows but num_nodes={given}")
        return given
    n = max(largest, feature_rows, label_rows)
    if feature_rows and feature_rows < largest:
        raise DatasetError(f"{path}: node id {largest - 1} has no row in the feature file ({feature_rows} rows); "
                           f"give every node a feature row")
    if n == 0:
        raise DatasetError(f"{path}: the edge list has no edges and no node data")
    return n


def _pad(array: Optional[np.ndarray], n: int, fill: float) -> Optional[np.ndarray]:
    if array is None or array.shape[0] >= n:
        return array
    pad = np.full((n - array.shape[0],) + array.shape[1:], fill, dtype=array.dtype)
    return np.concatenate([array, pad])


def _read_pyg_npz(path: Path, arrays: Dict[str, np.ndarray], split: int, undirected: Optional[bool]) -> Graph:
    edge_index = arrays["edge_index"]
    dropped = sorted(set(arrays) - set(_PYG_KEYS) - ({"edge_attr"} if _is_weight(arrays) else set()))
    if dropped:
        warnings.warn(f"{path.name}: the arrays {', '.join(dropped)} have no place in an sgl Graph and are not "
                      f"loaded (a Graph carries x, y, edge weights and the three masks)", stacklevel=4)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or not np.issubdtype(edge_index.dtype, np.integer):
        raise corrupt_file_error(path, f"edge_index has shape {edge_index.shape} and dtype {edge_index.dtype}; "
                                       f"expected [2, E] integers")
    x = arrays.get("x")
    if x is not None:
        x = x.astype(np.float32)
        check_finite_rows(x if x.ndim == 2 else x[:, None], path, "x")
    y = arrays.get("y")
    n = int(arrays["num_nodes"]) if "num_nodes" in arrays else max(
        int(edge_index.max()) + 1 if edge_index.size else 0, 0 if x is None else len(x), 0 if y is None else len(y))
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise corrupt_file_error(path, f"edge_index holds ids outside 0..{n - 1}")
    weight = arrays.get("edge_weight", arrays.get("edge_attr") if _is_weight(arrays) else None)
    if weight is not None and weight.reshape(-1).shape != (edge_index.shape[1],):
        raise corrupt_file_error(path, f"edge_weight has shape {weight.shape}; expected ({edge_index.shape[1]},)")
    if weight is not None:
        weight = weight.reshape(-1)
    indptr, indices, ids = edges_to_csr(edge_index[0], edge_index[1], n, undirected=bool(undirected))
    if weight is not None:
        weight = weight.astype(np.float32)[ids % edge_index.shape[1]]
    masks = {}
    for key in ("train_mask", "val_mask", "test_mask"):
        if key in arrays:
            mask = arrays[key].astype(bool)
            if mask.ndim == 2:  # PyG keeps several splits as columns ([n, num_splits])
                if not 0 <= split < mask.shape[1]:
                    raise ConfigError(f"split must be in 0..{mask.shape[1] - 1} for {path.name}, got {split!r}")
                mask = mask[:, split]
            masks[key] = torch.from_numpy(np.ascontiguousarray(mask))
    return csr_graph(indptr, indices, weight, x=None if x is None else torch.from_numpy(x),
                     y=None if y is None else torch.from_numpy(np.asarray(y)), name=path.stem, **masks)


def _is_weight(arrays: Dict[str, np.ndarray]) -> bool:
    """A one-column ``edge_attr`` (and no ``edge_weight``) is read as the edge weights."""
    attr = arrays.get("edge_attr")
    if "edge_weight" in arrays or attr is None or attr.ndim not in (1, 2):
        return False
    return attr.ndim == 1 or attr.shape[1] == 1


def _read_any_npz(path: Path, options: Dict[str, Any]) -> Graph:
    from sgl.datasets.heterophily import HETEROPHILY_KEYS, read_heterophily
    from sgl.datasets.npz import read_npz

    try:
        with np.load(path, allow_pickle=False) as archive:
            keys = set(archive.files)
            arrays = {k: np.asarray(archive[k]) for k in keys} if "edge_index" in keys else {}
    except Exception as exc:
        raise corrupt_file_error(path, exc) from exc
    if "adj_data" in keys:
        if options["undirected"] is False:
            raise ConfigError(f"{path.name} is a gnn-benchmark archive, which is always read undirected (as PyG "
                              f"does); remove undirected=False")
        return read_npz(path, seed=options["seed"], name=path.stem)
    if set(HETEROPHILY_KEYS) <= keys:
        return read_heterophily(path, options["split"], options["undirected"], name=path.stem)
    if "edge_index" in keys:
        return _read_pyg_npz(path, arrays, options["split"], options["undirected"])
    raise DatasetError(f"{path}: unknown .npz layout (keys: {', '.join(sorted(keys))}); expected gnn-benchmark "
                       f"(adj_data, ...), heterophily ({', '.join(HETEROPHILY_KEYS)}) or PyG (edge_index, x, y, ...)")


# ---------------------------------------------------------------------------- entry point
def load_file(
    path: PathLike,
    root: Optional[PathLike] = None,
    *,
    format: Optional[str] = None,
    features: Optional[PathLike] = None,
    labels: Optional[PathLike] = None,
    delimiter: Optional[str] = None,
    header: Optional[bool] = None,
    weighted: Optional[bool] = None,
    undirected: Optional[bool] = None,
    num_nodes: Optional[int] = None,
    train_ratio: Optional[float] = None,
    val_ratio: Optional[float] = None,
    seed: int = 0,
    split: Optional[int] = None,
) -> Graph:
    """A :class:`~sgl.data.Graph` from a user's files (see the module docstring for the formats).

    Args:
        path: the edge list, ``.npz`` or saved graph; relative paths are read from ``root``
            when it is given.
        format: ``"edgelist"``, ``"npz"`` or ``"graph"``; ``None`` detects it.
        features, labels: node-data files of an edge list (``features="onehot"``: identity).
        delimiter: ``"tab"``, ``","``, ``"whitespace"``, ...; ``None`` detects it.
        header: whether the first line is a header; ``None`` detects it.
        weighted: read the third column as edge weights (``None``: when there is one).
        undirected: symmetrize the edges (``None``: yes for edge lists, as stored otherwise).
        num_nodes: node count when isolated nodes have no row anywhere.
        train_ratio, val_ratio: the seeded stratified split (defaults 0.6 / 0.2) drawn when
            the files carry no masks; given explicitly, they replace the files' masks.
        seed: the split's seed. split: which mask column of a multi-split ``.npz``.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import sgl
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "edges.csv").write_text("src,dst,weight\\n0,1,1.0\\n1,2,0.5\\n2,3,2.0\\n3,0,1.0\\n")
        >>> _ = (folder / "labels.txt").write_text("0\\n0\\n1\\n1\\n")
        >>> g = sgl.datasets.load("file:edges.csv", root=folder, features="onehot", labels="labels.txt",
        ...                       train_ratio=0.5, val_ratio=0.0)
        >>> g.num_nodes, g.num_edges, g.num_features, g.num_classes, g.split_sizes()
        (4, 8, 4, 2, (2, 0, 2))
    """
    file = _resolve(path, root, "graph file")
    fmt = _detect_format(file) if format is None else str(format).lower().replace("-", "")
    if fmt not in FILE_FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FILE_FORMATS)}, got {format!r}")
    options = dict(features=features, labels=labels, delimiter=delimiter, header=header, weighted=weighted,
                   undirected=undirected, num_nodes=num_nodes, seed=seed, split=split)
    if fmt != "edgelist":
        given = [key for key in _EDGELIST_ONLY if options[key] is not None]
        if given:
            raise ConfigError(f"{file.name} is a {'.npz archive' if fmt == 'npz' else 'saved Graph'}, which carries "
                              f"its own node data; the option(s) {', '.join(given)} apply to edge lists only")
    if fmt != "npz" and split is not None:
        raise ConfigError(f"split picks one of the mask sets of a multi-split .npz; {file.name} is not one, so "
                          f"remove it (train_ratio / val_ratio / seed set a random split)")
    options["split"] = 0 if split is None else split
    if fmt == "edgelist":
        graph = _read_edgelist(file, root, options)
    elif fmt == "npz":
        graph = _read_any_npz(file, options)
    else:
        graph = Graph.load(file)
        if undirected:
            graph = graph.symmetrize()
    has_masks = any(getattr(graph, m) is not None for m in ("train_mask", "val_mask", "test_mask"))
    if graph.y is not None and (not has_masks or train_ratio is not None or val_ratio is not None):
        if graph.y.dim() != 1 or graph.y.is_floating_point():
            raise DatasetError(f"{file}: a random split needs one integer class per node; the labels have shape "
                               f"{tuple(graph.y.shape)} and dtype {graph.y.dtype}")
        masks = random_split(graph.y, 0.6 if train_ratio is None else train_ratio,
                             0.2 if val_ratio is None else val_ratio, seed=seed)
        graph.train_mask, graph.val_mask, graph.test_mask = masks
    return graph
