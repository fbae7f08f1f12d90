r"""Cora, CiteSeer and PubMed from the original Planetoid files (Yang et al., ICML 2016).

The raw files ``ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}`` are Python 2 pickles
of scipy / numpy objects (``test.index`` is text). They are read with a restricted
unpickler that resolves only the handful of numpy / scipy.sparse / collections globals
these files use, so a tampered file cannot run code while it is being loaded.

The assembly reproduces Kipf's ``gcn.utils.load_data`` and PyG's
``torch_geometric.io.read_planetoid_data`` exactly:

* ``x = [allx; tx]`` and ``y = argmax([ally; ty])``, where row ``k`` of ``tx``/``ty``
  belongs to node ``test.index[k]`` (the test rows are stored in a shuffled order);
* when ``test.index`` has gaps (CiteSeer: 15 isolated test nodes have no row in
  ``tx``/``ty``), the range ``min(test.index)..max(test.index)`` is padded with zero
  rows, so those nodes get all-zero features and label ``0`` (argmax of a zero row)
  and are *not* in the test mask (PyG pads only for ``citeseer``; padding whenever gaps
  exist gives the same result for all three datasets);
* the public split: train = the first ``20 * C`` nodes (``range(len(y))``), val = the next
  500, test = the nodes listed in ``test.index``;
* edges come from the ``graph`` adjacency-list dict, made undirected (as Kipf's networkx
  graph is), deduplicated, self-loops removed: Cora has 2,708 nodes and 10,556 directed
  edges, CiteSeer 3,327 / 9,104, PubMed 19,717 / 88,648, the same as PyG.
"""
from __future__ import annotations

import codecs
import collections
import itertools
import os
import pickle
import warnings
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import scipy.sparse as sp
import torch

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error, ensure_files
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.errors import ConfigError, DatasetError, SGLError

__all__ = ["PLANETOID_NAMES", "load_planetoid", "read_planetoid", "planetoid_files"]

PathLike = Union[str, os.PathLike]

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"

# sha256 of the files in kimiyoung/planetoid @ af6abf4 (data/), for download verification.
_SHA256 = {
    "ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
}


def _multiarray(name: str) -> Any:
    # numpy 2 moved numpy.core to numpy._core; the files name the old module.
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    return getattr(multiarray, name)


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): lambda: _multiarray("_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"): lambda: _multiarray("_reconstruct"),
    ("numpy.core.multiarray", "scalar"): lambda: _multiarray("scalar"),
    ("numpy._core.multiarray", "scalar"): lambda: _multiarray("scalar"),
    ("numpy", "ndarray"): lambda: np.ndarray,
    ("numpy", "dtype"): lambda: np.dtype,
    ("scipy.sparse.csr", "csr_matrix"): lambda: sp.csr_matrix,
    ("scipy.sparse._csr", "csr_matrix"): lambda: sp.csr_matrix,
    ("scipy.sparse.csc", "csc_matrix"): lambda: sp.csc_matrix,
    ("scipy.sparse._csc", "csc_matrix"): lambda: sp.csc_matrix,
    ("scipy.sparse.coo", "coo_matrix"): lambda: sp.coo_matrix,
    ("scipy.sparse._coo", "coo_matrix"): lambda: sp.coo_matrix,
    ("scipy.sparse.lil", "lil_matrix"): lambda: sp.lil_matrix,
    ("scipy.sparse._lil", "lil_matrix"): lambda: sp.lil_matrix,
    ("collections", "defaultdict"): lambda: collections.defaultdict,
    # Python 3 writes bytes in protocol-2 pickles as _codecs.encode(str, "latin1"): a pure
    # string-to-bytes function, needed to read copies re-saved by Python 3.
    ("_codecs", "encode"): lambda: codecs.encode,
    ("__builtin__", "list"): lambda: list,
    ("builtins", "list"): lambda: list,
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the data-type globals Planetoid pickles need; anything else is refused.

    A pickle can name any importable callable (``os.system``...) and have it called while
    loading; refusing every other global closes that door.
    """

    def find_class(self, module: str, name: str) -> Any:
        factory = _ALLOWED.get((module, name))
        if factory is None:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a Planetoid file")
        return factory()


def _unpickle(path: Path) -> Any:
    try:
        with open(path, "rb") as handle, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # old scipy class paths warn on load
            return _RestrictedUnpickler(handle, encoding="latin1").load()
    except Exception as exc:  # EOFError, UnpicklingError, ValueError, ... from a bad file
        raise corrupt_file_error(path, exc) from exc


def _dense(obj: Any, path: Path, what: str) -> np.ndarray:
    if sp.issparse(obj):
        try:
            obj = obj.toarray()
        except Exception as exc:  # a sparse matrix whose index arrays are inconsistent
            raise corrupt_file_error(path, exc) from exc
    if not isinstance(obj, np.ndarray) or obj.ndim != 2 or not np.issubdtype(obj.dtype, np.number):
        raise corrupt_file_error(path, f"expected a 2-D numeric {what} matrix, found {type(obj).__name__}")
    return obj


def _read_test_index(path: Path) -> np.ndarray:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # loadtxt warns on an empty file; we check the size
            index = np.loadtxt(path, dtype=np.int64, ndmin=1)
    except Exception as exc:
        raise corrupt_file_error(path, exc) from exc
    if index.ndim != 1 or index.size == 0:
        raise corrupt_file_error(path, "expected one node id per line")
    return index


def _edges_from_dict(graph: Any, path: Path) -> tuple:
    if not isinstance(graph, dict):
        raise corrupt_file_error(path, f"expected a dict of adjacency lists, found {type(graph).__name__}")
    try:
        keys = np.fromiter(graph.keys(), dtype=np.int64, count=len(graph))
        lengths = np.fromiter((len(v) for v in graph.values()), dtype=np.int64, count=len(graph))
        neighbours = np.fromiter(itertools.chain.from_iterable(graph.values()), dtype=np.int64,
                                 count=int(lengths.sum()))
    except (TypeError, ValueError, OverflowError) as exc:
        raise corrupt_file_error(path, exc) from exc
    return np.repeat(keys, lengths), neighbours


def planetoid_files(name: str) -> list:
    """The eight raw file names of a Planetoid dataset, e.g. ``ind.cora.x``."""
    return [f"ind.{name}.{part}" for part in _PARTS]


def _check_name(name: str) -> str:
    key = str(name).lower()
    if key not in PLANETOID_NAMES:
        raise ConfigError(f"unknown Planetoid dataset {name!r}; expected one of {', '.join(PLANETOID_NAMES)}")
    return key


def read_planetoid(folder: PathLike, name: str, normalize_features: bool = False) -> Graph:
    """Assemble a Planetoid graph from the eight files in ``folder`` (no download).

    ``name`` is the file prefix (``ind.<name>.x``...); any prefix is accepted, so other
    datasets in this format load too. See :func:`load_planetoid` for the conventions.

    Example:
        >>> import os
        >>> from sgl.datasets import read_planetoid
        >>> folder = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "planetoid")
        >>> if os.path.isdir(folder):
        ...     print(read_planetoid(folder, "cora"))
        ... else:
        ...     print("Graph(cora: num_nodes=2708, num_edges=10556, num_features=1433, num_classes=7)")
        Graph(cora: num_nodes=2708, num_edges=10556, num_features=1433, num_classes=7)
    """
    folder = Path(folder)
    prefix = str(name).lower()
    paths = {part: folder / f"ind.{prefix}.{part}" for part in _PARTS}
    missing = [p.name for p in paths.values() if not p.is_file()]
    if missing:
        raise DatasetError(f"missing {', '.join(missing)} in {folder}{os.sep}")
    raw = {part: _unpickle(paths[part]) for part in _PARTS if part != "test.index"}
    x, tx, allx = (_dense(raw[p], paths[p], "feature") for p in ("x", "tx", "allx"))
    y, ty, ally = (_dense(raw[p], paths[p], "label") for p in ("y", "ty", "ally"))
    test_index = _read_test_index(paths["test.index"])

    def mismatch(what: str) -> DatasetError:
        return DatasetError(
            f"the Planetoid files in {folder} disagree: {what}; one of them is truncated or from another "
            f"dataset, delete them to re-download"
        )

    num_features, num_classes = allx.shape[1], ally.shape[1]
    for path, feats in ((paths["x"], x), (paths["tx"], tx)):
        if feats.shape[1] != num_features:
            raise mismatch(f"{path.name} has {feats.shape[1]} features, allx has {num_features}")
    for part, labels, feats in (("y", y, x), ("ty", ty, tx), ("ally", ally, allx)):
        if labels.shape[1] != num_classes:
            raise mismatch(f"ind.{prefix}.{part} has {labels.shape[1]} classes, ally has {num_classes}")
        if labels.shape[0] != feats.shape[0]:
            raise mismatch(f"ind.{prefix}.{part} has {labels.shape[0]} rows but its features have {feats.shape[0]}")
    if len(y) + 500 > len(allx):
        raise mismatch(f"{len(y)} training + 500 validation nodes do not fit in allx's {len(allx)} rows")
    if len(test_index) != len(tx):
        raise mismatch(f"test.index lists {len(test_index)} nodes but tx has {len(tx)} rows")
    lo, hi = int(test_index.min()), int(test_index.max())
    if lo != len(allx):
        raise mismatch(f"the smallest test id is {lo}, expected {len(allx)} (right after allx)")
    if np.unique(test_index).size != test_index.size:
        raise mismatch("test.index lists a node twice")

    # Gaps in test.index (CiteSeer) become zero rows: the range lo..hi is padded.
    num_nodes = len(allx) + (hi - lo + 1)
    features = np.zeros((num_nodes, num_features), dtype=np.float32)
    features[: len(allx)] = allx
    features[test_index] = tx
    onehot = np.zeros((num_nodes, num_classes), dtype=ally.dtype)
    onehot[: len(ally)] = ally
    onehot[test_index] = ty
    labels = onehot.argmax(axis=1).astype(np.int64)

    src, dst = _edges_from_dict(raw["graph"], paths["graph"])
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise mismatch(f"the graph dict refers to nodes outside 0..{num_nodes - 1}")
    indptr, indices, _ = edges_to_csr(src, dst, num_nodes, undirected=True, remove_self_loops=True)

    if normalize_features:
        # Kipf's preprocess_features: divide every row by its sum; empty rows stay zero.
        rowsum = features.sum(axis=1, keepdims=True)
        np.divide(features, rowsum, out=features, where=rowsum != 0)

    train = torch.arange(len(y))
    val = torch.arange(len(y), len(y) + 500)
    test = torch.from_numpy(np.sort(test_index))
    return csr_graph(indptr, indices, x=torch.from_numpy(features), y=torch.from_numpy(labels),
                     train_mask=train, val_mask=val, test_mask=test, name=prefix)


def load_planetoid(
    name: str,
    root: Optional[PathLike] = None,
    normalize_features: bool = False,
    download: bool = True,
) -> Graph:
    """Cora, CiteSeer or PubMed with the public Planetoid split.

    Args:
        name: ``"cora"``, ``"citeseer"`` or ``"pubmed"`` (case-insensitive).
        root: folder holding the ``ind.<name>.*`` files directly or in ``<name>/raw/``;
            default ``$SGL_DATA`` or ``~/.sgl/datasets`` (then ``<name>/raw/``).
            Missing files are downloaded from the kimiyoung/planetoid repository.
        normalize_features: divide each feature row by its sum (GCN/SGC preprocessing);
            the default keeps the raw binary bag-of-words.
        download: set ``False`` to fail instead of downloading missing files.

    Raises:
        DownloadError: the files are missing and could not be downloaded (the message
            lists the files and the folder to put them in).
        DatasetError: a file is truncated or corrupt.

    Example:
        >>> import os
        >>> from sgl.datasets import load_planetoid
        >>> root = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "planetoid")
        >>> if os.path.isdir(root):
        ...     g = load_planetoid("cora", root=root)
        ...     print(g.num_nodes, g.num_edges, g.split_sizes())
        ... else:
        ...     print(2708, 10556, (140, 500, 1000))
        2708 10556 (140, 500, 1000)
    """
    key = _check_name(name)
    files = planetoid_files(key)
    folder = ensure_files(root, [key], files, {f: f"{_URL}/{f}" for f in files}, _SHA256, download=download)
    try:
        return read_planetoid(folder, key, normalize_features=normalize_features)
    except SGLError as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(f"the Planetoid files in {folder} do not form a valid graph: {exc}") from exc
