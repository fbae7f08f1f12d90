r"""A user's own graph from files: ``sgl.datasets.load("file:PATH")`` and ``--dataset file:PATH``.

What ``PATH`` holds is told apart by its content (or ``format=``):

* an **edge list** (CSV, TSV or whitespace-separated text, optionally ``.gz``): one
  ``src dst [weight]`` row per edge, non-negative integer node ids, an optional header line,
  ``#`` / ``%`` comment lines (SNAP's), and an optional first line ``num_nodes num_edges``
  (a *count header*, detected and skipped with a warning; ``count_header=``). Node ids are
  **relabelled** to ``0..n-1`` in sorted order of the ids that appear, and
  ``graph.node_ids[i]`` keeps node ``i``'s id in the files (``relabel=False`` keeps the ids
  as node numbers, gaps becoming isolated nodes; ``num_nodes=`` implies it). The rules are in
  :mod:`sgl.datasets.user_ids`. Node features and labels come from their own files
  (``features=PATH``, ``labels=PATH``, below). Edges are symmetrized unless
  ``undirected=False`` (most edge lists store an undirected edge once); duplicates keep
  their first occurrence;
* a **.npz** archive in one of three layouts: gnn-benchmark (``adj_data, adj_indices, ...``,
  read by :func:`sgl.datasets.read_npz`), the heterophily benchmark (``node_features,
  node_labels, edges, train_masks, ...``, :func:`sgl.datasets.read_heterophily`) or PyG
  ``Data`` attribute names (``edge_index``, optional ``x``, ``y``, ``edge_weight``,
  ``train_mask`` / ``val_mask`` / ``test_mask``, masks ``[n]`` or ``[n, num_splits]``);
* a **saved** :class:`~sgl.data.Graph` (:meth:`Graph.save`) or
  :class:`~sgl.data.HeteroGraph` (:meth:`HeteroGraph.save`);
* a **heterogeneous graph** as a folder in HGB's layout (``node.dat``, ``link.dat``,
  ``label.dat``, ``label.dat.test``) or MAGNN/PyG's (``adjM.npz``, ``node_types.npy``,
  ``features_<t>.npz``, ``labels.npy``, ``train_val_test_idx.npz``; also as a zip such as
  ``IMDB_processed.zip``), read into a :class:`~sgl.data.HeteroGraph`
  (:mod:`sgl.datasets.hetero_files`).

Feature files (:mod:`sgl.datasets.user_node_data`): ``.npy`` (``[n, d]``), ``.npz`` (a scipy
sparse matrix or one array), ``.json`` in MUSAE's layout (``{"0": [feature ids], ...}``: a 0/1
matrix), or text with one row per node (row ``i`` = node ``i``; a header whose first name is
``id``, ``node`` or ``node_id`` makes the first column the node id instead).
``features="onehot"`` uses the identity (Kipf & Welling's choice for featureless graphs).
Label files (:mod:`sgl.datasets.user_labels`): ``.npy``, or text with one label per line,
``id label`` pairs, or several columns (MUSAE's ``id,facebook_id,page_name,page_type``) with
the label column named ``label``/``target``/``class``/``page_type``... or chosen by
``label_column=``. Labels are integers (``-1`` = unlabeled) or **class names**, numbered in
sorted order and kept as ``graph.label_names`` (saved with the graph and in run records).

Without split masks in the files, a seeded stratified random split is drawn
(:func:`sgl.datasets.random_split`, ``train_ratio``/``val_ratio``, default 60/20/20);
``train_ratio``/``val_ratio`` given explicitly re-split a graph whose files carry masks (HGB:
see :mod:`sgl.datasets.hetero_files`). Every malformed row is reported with its file and
line; NaN in a feature file names the file and row.
"""
from __future__ import annotations

import os
import warnings
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np
import torch

from sgl.data import Graph, HeteroGraph
from sgl.datasets.download import corrupt_file_error
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.splits import random_split
from sgl.datasets.tables import check_finite_rows, read_table, sniff
from sgl.datasets.user_ids import drop_count_header, node_index
from sgl.datasets.user_node_data import DENSE_MAX_BYTES, read_features
from sgl.errors import ConfigError, DatasetError

__all__ = ["load_file", "FILE_FORMATS"]

PathLike = Union[str, os.PathLike]

#: values of ``format=``
FILE_FORMATS = ("edgelist", "npz", "graph", "hgb", "magnn")
#: options that only an edge list reads (the other formats carry their own node data)
_EDGELIST_ONLY = ("features", "labels", "label_column", "delimiter", "header", "weighted", "num_nodes", "relabel",
                  "count_header")
#: PyG ``Data`` keys this loader carries into the Graph
_PYG_KEYS = ("edge_index", "x", "y", "edge_weight", "train_mask", "val_mask", "test_mask", "num_nodes")
_HETERO_MARKER = b"sgl-hetero-1"  # HeteroGraph.save's format tag, as pickled in the archive


def _resolve(path: PathLike, root: Optional[PathLike]) -> Path:
    file = Path(os.path.expanduser(str(path)))
    if not file.is_absolute() and root is not None:
        file = Path(os.path.expanduser(str(root))) / file
    if not file.exists():
        where = f" (relative paths are read from root={str(root)!r})" if root is not None else ""
        raise DatasetError(f"no graph file or folder at {file}{where}; check the path")
    return file


def _detect_format(path: Path) -> str:
    from sgl.datasets.hetero_files import hetero_layout

    if path.is_dir():
        layout = hetero_layout(path)
        if layout is not None:
            return layout
        names = sorted(os.listdir(path))
        hint = ""
        if {"label.dat", "link.dat", "node.dat"} & set(names):
            hint = " It looks like HGB's layout, which needs node.dat, link.dat and label.dat (+ label.dat.test)."
        raise DatasetError(f"{path} is a folder but neither in HGB's layout (node.dat, link.dat, label.dat) nor "
                           f"MAGNN/PyG's (adjM.npz, node_types.npy, ...); it holds {', '.join(names[:8]) or 'nothing'}."
                           f"{hint} For a homogeneous graph, pass the edge list, .npz or saved graph file itself")
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
    if hetero_layout(path) == "magnn":
        return "magnn"
    raise DatasetError(f"{path} is a zip archive but neither a .npz, a saved graph nor MAGNN's layout (members: "
                       f"{', '.join(names[:5])}); pass format='edgelist', 'npz', 'graph' or 'magnn'")


def _is_saved_hetero(path: Path) -> bool:
    """Whether a torch.save archive holds a HeteroGraph (its format tag is in the pickle)."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickle = next((n for n in archive.namelist() if n.endswith("data.pkl")), None)
            return pickle is not None and _HETERO_MARKER in archive.read(pickle)
    except (zipfile.BadZipFile, OSError):
        return False


def _labels_with_unlabeled(y: np.ndarray) -> np.ndarray:
    # -1 marks unlabeled nodes in text files; in a .npy any negative value does
    return np.where(y < 0, -1, y)


# ---------------------------------------------------------------------------- the formats
def _read_edgelist(path: Path, root: Optional[PathLike], options: Dict[str, Any]) -> Graph:
    from sgl.datasets.user_labels import read_labels

    layout = sniff(path, options["delimiter"] if options["delimiter"] is not None else "auto", options["header"],
                   what="edge list")
    weighted = options["weighted"]
    if layout.num_columns not in (2, 3):
        raise DatasetError(f"{path}: an edge list has 2 columns (src, dst) or 3 (src, dst, weight), found "
                           f"{layout.num_columns} in its first row; remove the extra columns")
    if weighted and layout.num_columns != 3:
        raise DatasetError(f"{path}: weighted=True needs a third (weight) column; the file has 2")
    table = read_table(layout, id_columns=2, what="edge list")
    ids, values = table.ids, table.values
    if layout.header is None and layout.num_columns == 2 and drop_count_header(path, ids[:, 0], ids[:, 1],
                                                                                options["count_header"]):
        ids, values = ids[1:], values[1:]
    src, dst = ids[:, 0], ids[:, 1]
    onehot = str(options["features"]).lower() == "onehot"
    features = read_features(options["features"], root) if options["features"] is not None and not onehot else None
    labels = read_labels(options["labels"], root, options["label_column"]) if options["labels"] is not None else None
    if options["label_column"] is not None and labels is None:
        raise ConfigError("label_column picks the column of a label file; pass labels=PATH too")
    index = node_index(path, src, dst, [rows for rows in (features, labels) if rows is not None],
                       options["relabel"], options["num_nodes"])
    n = index.num_nodes
    x = None if features is None else index.place(features, "feature")
    y = None if labels is None else _labels_with_unlabeled(index.place(labels, "label"))
    if onehot:
        if 4 * n * n > DENSE_MAX_BYTES:
            raise ConfigError(f"features='onehot' needs {4 * n * n / 2**30:.1f} GiB for {n:,} nodes; pass a "
                              f"feature file (features=PATH) instead")
        x = np.eye(n, dtype=np.float32)
    undirected = True if options["undirected"] is None else bool(options["undirected"])
    indptr, indices, order = edges_to_csr(index.position(src), index.position(dst), n, undirected=undirected)
    weight = None
    if layout.num_columns == 3 and weighted is not False:
        w = values[:, 0].astype(np.float32)
        weight = w[order % len(src)] if len(src) else w
    graph = csr_graph(indptr, indices, weight, x=None if x is None else torch.from_numpy(np.ascontiguousarray(x)),
                      y=None if y is None else torch.from_numpy(y), name=path.stem)
    if index.node_ids is not None:
        graph.node_ids = torch.from_numpy(index.node_ids)
    if labels is not None and labels.names is not None:
        graph.label_names = list(labels.names)
    return graph


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
    label_column: Optional[Union[str, int]] = None,
    delimiter: Optional[str] = None,
    header: Optional[bool] = None,
    weighted: Optional[bool] = None,
    undirected: Optional[bool] = None,
    relabel: Optional[bool] = None,
    count_header: Optional[bool] = None,
    num_nodes: Optional[int] = None,
    train_ratio: Optional[float] = None,
    val_ratio: Optional[float] = None,
    seed: int = 0,
    split: Optional[int] = None,
) -> Union[Graph, HeteroGraph]:
    """A :class:`~sgl.data.Graph` (or :class:`~sgl.data.HeteroGraph`) from a user's files (see
    the module docstring for the formats).

    Args:
        path: the edge list, ``.npz``, saved graph, or heterogeneous folder/zip; relative paths
            are read from ``root`` when it is given.
        format: ``"edgelist"``, ``"npz"``, ``"graph"``, ``"hgb"`` or ``"magnn"``; ``None``
            detects it.
        features, labels: node-data files of an edge list (``features="onehot"``: identity).
        label_column: the label file's column (header name or 0-based position).
        delimiter: ``"tab"``, ``","``, ``"whitespace"``, ...; ``None`` detects it.
        header: whether the first line is a header; ``None`` detects it.
        weighted: read the third column as edge weights (``None``: when there is one).
        undirected: symmetrize the edges (``None``: yes for edge lists, as stored otherwise).
        relabel: number the ids that appear ``0..n-1`` (default; ``graph.node_ids`` keeps the
            originals); ``False`` keeps ids as node numbers.
        count_header: a first ``num_nodes num_edges`` line: ``None`` detects it, ``True``
            drops the first row, ``False`` reads it as an edge.
        num_nodes: node count when isolated nodes have no row anywhere (raw ids: implies
            ``relabel=False``).
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

    A SNAP file with a count header and sparse ids:

        >>> _ = (folder / "snap.txt").write_text("# Nodes: 3 Edges: 2\\n3\\t2\\n10\\t500\\n500\\t26196\\n")
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):
        ...     g = sgl.datasets.load_file(folder / "snap.txt")
        >>> g.num_nodes, g.node_ids.tolist()
        (3, [10, 500, 26196])
    """
    file = _resolve(path, root)
    fmt = _detect_format(file) if format is None else str(format).lower().replace("-", "")
    if fmt not in FILE_FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FILE_FORMATS)}, got {format!r}")
    if file.is_dir() and fmt not in ("hgb", "magnn"):
        raise DatasetError(f"{file} is a folder; format={fmt!r} reads a file (a folder is read as HGB or MAGNN)")
    options = dict(features=features, labels=labels, label_column=label_column, delimiter=delimiter, header=header,
                   weighted=weighted, undirected=undirected, relabel=relabel, count_header=count_header,
                   num_nodes=num_nodes, seed=seed, split=split)
    if fmt != "edgelist":
        given = [key for key in _EDGELIST_ONLY if options[key] is not None]
        if fmt in ("hgb", "magnn") and undirected is not None:
            given.append("undirected")
        if given:
            kind = {"npz": "a .npz archive", "graph": "a saved graph"}.get(fmt, f"a heterogeneous graph ({fmt})")
            raise ConfigError(f"{file.name} is {kind}, which carries its own node data; the option(s) "
                              f"{', '.join(given)} apply to edge lists only")
    if fmt != "npz" and split is not None:
        raise ConfigError(f"split picks one of the mask sets of a multi-split .npz; {file.name} is not one, so "
                          f"remove it (train_ratio / val_ratio / seed set a random split)")
    options["split"] = 0 if split is None else split
    if fmt == "hgb":
        from sgl.datasets.hetero_hgb import read_hgb

        return read_hgb(file, train_ratio=train_ratio, val_ratio=val_ratio, seed=seed)
    if fmt == "edgelist":
        graph = _read_edgelist(file, root, options)
    elif fmt == "npz":
        graph = _read_any_npz(file, options)
    elif fmt == "magnn":
        from sgl.datasets.hetero_files import read_magnn

        graph = read_magnn(file)
    elif _is_saved_hetero(file):
        graph = HeteroGraph.load(file)
        if undirected:
            raise ConfigError(f"{file.name} is a saved HeteroGraph, whose relations are read both ways already; "
                              f"remove undirected")
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
