r"""OGB link-property datasets (ogbl-collab, -ddi, -ppa, -citation2) read from OGB's on-disk layout.

As for the node sets (:mod:`sgl.datasets.ogb`), the files are read here, not through ``ogb``'s
loaders (they ``torch.load`` pickled objects, which torch >= 2.6 refuses by default). The
layout (what ``collab.zip`` etc. unpack to) under ``<root>/ogbl_collab/``::

    raw/edge.csv.gz               E lines "src,dst": the *training* graph
    raw/num-node-list.csv.gz      one line: N
    raw/num-edge-list.csv.gz      one line: E
    raw/node-feat.csv.gz          optional: N lines of comma-separated floats
    raw/edge_weight.csv.gz, raw/edge_year.csv.gz   optional (collab), not read
    split/<scheme>/{train,valid,test}.pt    torch-saved dicts of arrays

A split dict holds ``edge`` ``[E, 2]`` (and ``edge_neg`` ``[E', 2]`` for valid/test: one
negative set shared by all positives, ranked by Hits@K), or, for ogbl-citation2,
``source_node``/``target_node`` ``[E]`` and ``target_node_neg`` ``[E, 1000]`` (per-positive
negatives, ranked by MRR); ``weight`` and ``year`` entries are ignored. The arrays may be
numpy arrays (as OGB ships them: loaded with only numpy's array constructors allowed) or
tensors.

The graph comes back with ``graph.link_split``, an :class:`~sgl.data.EdgeSplit` whose
training graph is the graph itself (OGB's raw edges are the training edges), and
``graph.ogb_name``; ``sgl train --task link`` then uses this split and OGB's metric
(Hits@50 for collab) instead of a random one. ``edge_weight`` / ``edge_year`` are not used,
as in OGB's GCN/SAGE baselines.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch

from sgl.data import EdgeSplit, Graph
from sgl.datasets.download import corrupt_file_error, default_root, download_zip_folder
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.errors import ConfigError, DatasetError, DownloadError

__all__ = ["OGB_LINK_DATASETS", "OGBLinkInfo", "load_ogb_link", "read_ogb_link"]

PathLike = Union[str, os.PathLike]


@dataclass(frozen=True)
class OGBLinkInfo:
    """What ``ogb/linkproppred/master.csv`` says about one dataset."""

    url: str
    download_name: str
    split: str
    add_inverse_edge: bool
    metric: str

    def folder(self, name: str) -> str:
        return name.replace("-", "_")  # OGB's convention: "ogbl-collab" lives in "ogbl_collab"


_BASE = "http://snap.stanford.edu/ogb/data/linkproppred/"
#: Copied from ogb 1.3.6 ``linkproppred/master.csv`` (the tests check they still agree).
OGB_LINK_DATASETS: Dict[str, OGBLinkInfo] = {
    "ogbl-collab": OGBLinkInfo(_BASE + "collab.zip", "collab", "time", True, "hits@50"),
    "ogbl-ddi": OGBLinkInfo(_BASE + "ddi.zip", "ddi", "target", True, "hits@20"),
    "ogbl-ppa": OGBLinkInfo(_BASE + "ppassoc.zip", "ppassoc", "throughput", True, "hits@100"),
    "ogbl-citation2": OGBLinkInfo(_BASE + "citation-v2.zip", "citation-v2", "time", False, "mrr"),
}

_RAW = ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz"]


def _canonical(name: str) -> str:
    key = str(name).lower().replace("_", "-")
    if key not in OGB_LINK_DATASETS:
        raise ConfigError(f"unknown OGB link dataset {name!r}; expected one of {', '.join(OGB_LINK_DATASETS)}")
    return key


def _required(info: OGBLinkInfo) -> list:
    return _RAW + [f"split/{info.split}/{part}.pt" for part in ("train", "valid", "test")]


def _numpy_globals() -> list:
    """The numpy constructors an OGB split file needs, under numpy 1.x and 2.x module names."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    dtypes = [type(np.dtype(t)) for t in ("int64", "int32", "float64", "float32", "bool", "int16", "uint8")]
    return [np.ndarray, np.dtype, _reconstruct, (_reconstruct, "numpy.core.multiarray._reconstruct"),
            (_reconstruct, "numpy._core.multiarray._reconstruct"), *dtypes]


def _load_split_file(path: Path) -> Dict[str, Any]:
    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated file, foreign pickle content
        raise corrupt_file_error(path, exc) from exc
    if not isinstance(data, dict):
        raise corrupt_file_error(path, f"expected a dict of arrays, got {type(data).__name__}")
    return data


def _ids(data: Dict[str, Any], key: str, path: Path, n: int, shape: Tuple[Optional[int], ...]) -> torch.Tensor:
    """``data[key]`` as an int64 tensor of ``shape`` (None = any size) with node ids in ``[0, n)``."""
    if key not in data:
        raise corrupt_file_error(path, f"the split lacks the entry {key!r} (has {sorted(data)})")
    value = torch.as_tensor(np.asarray(data[key]) if not isinstance(data[key], torch.Tensor) else data[key])
    if value.is_floating_point() or value.dim() != len(shape) or any(
            want is not None and got != want for got, want in zip(value.shape, shape)):
        raise corrupt_file_error(path, f"{key!r} must be integer node ids of shape "
                                       f"{tuple('*' if s is None else s for s in shape)}, got {tuple(value.shape)}")
    value = value.long()
    if value.numel() and (int(value.min()) < 0 or int(value.max()) >= n):
        raise corrupt_file_error(path, f"{key!r} has node ids outside 0..{n - 1}")
    return value


def _edge_split(folder: Path, info: OGBLinkInfo, graph: Graph) -> EdgeSplit:
    n = graph.num_nodes
    parts = {part: _load_split_file(folder / "split" / info.split / f"{part}.pt") for part in ("train", "valid", "test")}
    paths = {part: folder / "split" / info.split / f"{part}.pt" for part in parts}
    sets: Dict[str, torch.Tensor] = {}
    neg_per_pos = 0
    for part, data in parts.items():
        path = paths[part]
        if "source_node" in data:  # ogbl-citation2: per-positive negative targets
            source = _ids(data, "source_node", path, n, (None,))
            sets[f"{part}_pos"] = torch.stack([source, _ids(data, "target_node", path, n, (source.numel(),))])
            if part != "train":
                neg = _ids(data, "target_node_neg", path, n, (source.numel(), None))
                neg_per_pos = neg.size(1)
                sets[f"{part}_neg"] = torch.stack([source.repeat_interleave(neg_per_pos), neg.reshape(-1)])
        else:
            sets[f"{part}_pos"] = _ids(data, "edge", path, n, (None, 2)).t()
            if part != "train":
                sets[f"{part}_neg"] = _ids(data, "edge_neg", path, n, (None, 2)).t()
    train = sets["train_pos"]
    lo, hi = torch.minimum(train[0], train[1]), torch.maximum(train[0], train[1])
    keys = torch.unique((lo * n + hi)[lo != hi])  # each training edge once, u < v
    return EdgeSplit(graph, sets["valid_pos"], sets["valid_neg"], sets["test_pos"], sets["test_neg"],
                     train_pos=torch.stack([keys // n, keys % n]), metric=info.metric, neg_per_pos=neg_per_pos)


def read_ogb_link(folder: PathLike, name: str, to_undirected: bool = True) -> Graph:
    """Read an OGB link dataset from its dataset folder (the one holding ``raw/`` and ``split/``).

    Example:
        >>> import gzip, os, tempfile, torch
        >>> from sgl.datasets import read_ogb_link
        >>> folder = tempfile.mkdtemp()
        >>> files = {"raw/edge.csv.gz": "0,1\\n1,2\\n2,3\\n", "raw/num-node-list.csv.gz": "5\\n",
        ...          "raw/num-edge-list.csv.gz": "3\\n"}
        >>> for rel, text in files.items():
        ...     os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
        ...     with gzip.open(os.path.join(folder, rel), "wt") as f:
        ...         _ = f.write(text)
        >>> os.makedirs(os.path.join(folder, "split", "target"))
        >>> held_out = {"edge": torch.tensor([[3, 4]]), "edge_neg": torch.tensor([[0, 4], [0, 3]])}
        >>> for part, data in (("train", {"edge": torch.tensor([[0, 1], [1, 2], [2, 3]])}),
        ...                    ("valid", held_out), ("test", held_out)):
        ...     torch.save(data, os.path.join(folder, "split", "target", f"{part}.pt"))
        >>> g = read_ogb_link(folder, "ogbl-ddi")
        >>> g.num_nodes, g.num_edges, g.link_split.metric, g.link_split.test_neg.tolist()
        (5, 6, 'hits@20', [[0, 0], [4, 3]])
    """
    from sgl.datasets.ogb import _read_csv

    name = _canonical(name)
    info = OGB_LINK_DATASETS[name]
    folder = Path(folder)
    missing = [rel for rel in _required(info) if not (folder / rel).is_file()]
    if missing:
        raise DatasetError(f"missing {', '.join(missing)} in {folder}{os.sep}")
    edges = _read_csv(folder / "raw/edge.csv.gz", np.int64)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise corrupt_file_error(folder / "raw/edge.csv.gz", "expected 'src,dst' on every line")
    n = int(np.sum(_read_csv(folder / "raw/num-node-list.csv.gz", np.int64)))
    num_edges = int(np.sum(_read_csv(folder / "raw/num-edge-list.csv.gz", np.int64)))
    if n <= 0:
        raise corrupt_file_error(folder / "raw/num-node-list.csv.gz", f"num-node-list says {n} nodes")
    src, dst = edges[:, 0], edges[:, 1]
    if src.size != num_edges:
        raise DatasetError(f"the edge list in {folder / 'raw'} has {src.size} edges but num-edge-list says "
                           f"{num_edges}; a file is truncated or corrupt: delete {folder} to re-download")
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise DatasetError(f"the edge list in {folder / 'raw'} has node ids outside 0..{n - 1}; delete {folder} "
                           f"to re-download")
    x = None
    if (folder / "raw/node-feat.csv.gz").is_file():
        feat = np.asarray(_read_csv(folder / "raw/node-feat.csv.gz", np.float32), dtype=np.float32)
        if feat.ndim != 2 or feat.shape[0] != n:
            raise corrupt_file_error(folder / "raw/node-feat.csv.gz",
                                     f"node features have shape {feat.shape}, expected {n} rows")
        x = torch.from_numpy(feat)
    if info.add_inverse_edge:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    indptr, indices, _ = edges_to_csr(src, dst, n, undirected=to_undirected, deduplicate=to_undirected)
    graph = csr_graph(indptr, indices, x=x, name=name)
    graph.ogb_name = name
    graph.link_split = _edge_split(folder, info, graph)
    return graph


def _dataset_folder(root: Optional[PathLike], name: str, info: OGBLinkInfo) -> Tuple[Optional[Path], Path]:
    """(folder holding every required file or None, folder to download into)."""
    if root is None:
        candidates = [default_root() / info.folder(name)]
    else:
        root = Path(root).expanduser()
        candidates = [root / info.folder(name), root]
    for folder in candidates:
        if all((folder / rel).is_file() for rel in _required(info)):
            return folder, folder
    return None, candidates[0]


def load_ogb_link(name: str, root: Optional[PathLike] = None, to_undirected: bool = True,
                  download: bool = True) -> Graph:
    """ogbl-collab, ogbl-ddi, ogbl-ppa or ogbl-citation2 with OGB's official edge split.

    Args:
        name: the dataset (case-insensitive, ``_`` works for ``-``).
        root: the folder holding ``ogbl_collab/`` (OGB's own ``root``), or the dataset folder
            itself; default ``$SGL_DATA`` or ``~/.sgl/datasets``. A missing dataset is
            downloaded from OGB's server unless ``download=False``.
        to_undirected: symmetrize and deduplicate the training edges (default, as OGB's
            baselines); ``False`` keeps them as OGB stores them (plus the inverse edges
            where OGB adds them).

    Returns the training graph with ``graph.link_split`` (an :class:`~sgl.data.EdgeSplit`:
    validation/test positives and negatives, ``metric`` = OGB's) and ``graph.ogb_name``.

    Example:
        >>> from sgl.datasets import load_ogb_link
        >>> try:
        ...     load_ogb_link("ogbl-collab", root="/nonexistent/folder", download=False)
        ... except Exception as err:
        ...     print(type(err).__name__)
        DatasetError
    """
    name = _canonical(name)
    info = OGB_LINK_DATASETS[name]
    found, target = _dataset_folder(root, name, info)
    if found is None:
        required = _required(info)
        if not download:
            raise DatasetError(f"{name} is not in {target}{os.sep}: expected {', '.join(required)} there (the layout "
                               f"of {info.url.rsplit('/', 1)[-1]}); pass download=True to fetch it")
        try:
            download_zip_folder(info.url, target, info.download_name, last=["raw", "split"])
        except DownloadError as exc:
            raise DownloadError(f"{exc}. Put the files {', '.join(required)} (the unpacked "
                                f"{info.url.rsplit('/', 1)[-1]}) in {target}{os.sep} and retry.") from exc
        found = target
    return read_ogb_link(found, name, to_undirected=to_undirected)
