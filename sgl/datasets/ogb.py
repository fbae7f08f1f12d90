r"""OGB node-property datasets read straight from OGB's on-disk layout.

``ogb``'s own loaders cache with ``torch.load`` of pickled objects, which torch >= 2.6
refuses by default, so the raw files are read here with pandas/numpy instead. The layout
(what ``arxiv.zip`` etc. unpack to) under ``<root>/ogbn_arxiv/``::

    raw/edge.csv.gz            E lines "src,dst" (gzip, no header)
    raw/num-node-list.csv.gz   one line: N
    raw/num-edge-list.csv.gz   one line: E
    raw/node-feat.csv.gz       N lines of comma-separated floats
    raw/node-label.csv.gz      N lines: class id (NaN = unlabeled)
    raw/node_year.csv.gz       optional, N lines
    split/<scheme>/{train,valid,test}.csv.gz   node ids, one per line

ogbn-papers100M ships the same content as numpy archives (``raw/data.npz`` with
``edge_index``, ``node_feat``, ``num_nodes_list``, ``num_edges_list``, ``node_year``, and
``raw/node-label.npz``); both layouts are read. Edges are used as OGB defines them
(ogbn-products stores one direction and adds the inverse edges; ogbn-arxiv and
papers100M are directed citation graphs), then ``to_undirected=True`` (the default, as
in almost every leaderboard entry) symmetrizes and deduplicates them.

Every graph carries ``graph.ogb_name`` so a trainer can pick ``ogb``'s ``Evaluator``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error, default_root, download_zip_folder
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.errors import ConfigError, DatasetError, DownloadError

__all__ = ["OGB_NODE_DATASETS", "OGBNodeInfo", "load_ogb", "read_ogb"]

PathLike = Union[str, os.PathLike]


@dataclass(frozen=True)
class OGBNodeInfo:
    """What ``ogb/nodeproppred/master.csv`` says about one dataset."""

    url: str
    download_name: str
    split: str
    add_inverse_edge: bool
    binary: bool
    num_classes: int

    def folder(self, name: str) -> str:
        # OGB's own convention: "ogbn-arxiv" lives in "ogbn_arxiv".
        return name.replace("-", "_")


#: Copied from ogb 1.3.6 ``nodeproppred/master.csv`` (the tests check they still agree).
OGB_NODE_DATASETS: Dict[str, OGBNodeInfo] = {
    "ogbn-arxiv": OGBNodeInfo("http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip",
                              "arxiv", "time", False, False, 40),
    "ogbn-products": OGBNodeInfo("http://snap.stanford.edu/ogb/data/nodeproppred/products.zip",
                                 "products", "sales_ranking", True, False, 47),
    "ogbn-papers100M": OGBNodeInfo("http://snap.stanford.edu/ogb/data/nodeproppred/papers100M-bin.zip",
                                   "papers100M-bin", "time", False, True, 172),
}

_CSV = ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz",
        "raw/node-feat.csv.gz", "raw/node-label.csv.gz"]
_BINARY = ["raw/data.npz", "raw/node-label.npz"]


def _canonical(name: str) -> str:
    key = str(name).lower().replace("_", "-")
    for known in OGB_NODE_DATASETS:
        if known.lower() == key:
            return known
    raise ConfigError(f"unknown OGB node dataset {name!r}; expected one of {', '.join(OGB_NODE_DATASETS)}")


def _required(info: OGBNodeInfo) -> List[str]:
    splits = [f"split/{info.split}/{part}.csv.gz" for part in ("train", "valid", "test")]
    return (_BINARY if info.binary else _CSV) + splits


def _read_csv(path: Path, dtype=None) -> np.ndarray:
    import pandas as pd  # imported on use: keeps `import sgl.datasets` light

    try:
        values = pd.read_csv(path, compression="gzip", header=None, dtype=dtype).to_numpy()
    except Exception as exc:  # BadGzipFile, EOFError, zlib.error, ParserError, ValueError
        raise corrupt_file_error(path, exc) from exc
    # pandas' copy-on-write hands out read-only views; torch.from_numpy needs writable memory.
    return values if values.flags.writeable else values.copy()


def _read_npz(path: Path, keys: Tuple[str, ...]) -> Dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [k for k in keys if k not in archive.files]
            if missing:
                raise corrupt_file_error(path, f"the archive lacks the keys {', '.join(missing)}")
            return {k: archive[k] for k in archive.files if k in keys or k.startswith("node_")}
    except DatasetError:
        raise
    except Exception as exc:  # BadZipFile, truncated members
        raise corrupt_file_error(path, exc) from exc


def _labels(values: np.ndarray, path: Path, n: int) -> torch.Tensor:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != n:
        raise corrupt_file_error(path, f"labels have shape {values.shape}, expected {n} rows")
    if values.shape[1] == 1:
        values = values[:, 0]
        # OGB marks unlabeled nodes (papers100M) with NaN; SGL uses -1.
        labels = np.where(np.isnan(values), -1, values).astype(np.int64)
        return torch.from_numpy(labels)
    # Multi-task targets (not used by the three datasets here) stay float.
    return torch.from_numpy(values.astype(np.float32))


def read_ogb(folder: PathLike, name: str, to_undirected: bool = True) -> Graph:
    """Read an OGB node dataset from its dataset folder (the one holding ``raw/`` and ``split/``).

    Example:
        >>> import gzip, os, tempfile
        >>> from sgl.datasets import read_ogb
        >>> folder = tempfile.mkdtemp()
        >>> files = {"raw/edge.csv.gz": "0,1\\n1,2\\n", "raw/num-node-list.csv.gz": "3\\n",
        ...          "raw/num-edge-list.csv.gz": "2\\n", "raw/node-feat.csv.gz": "0.5,1\\n1,0\\n0,0\\n",
        ...          "raw/node-label.csv.gz": "0\\n1\\n0\\n", "split/time/train.csv.gz": "0\\n",
        ...          "split/time/valid.csv.gz": "1\\n", "split/time/test.csv.gz": "2\\n"}
        >>> for rel, text in files.items():
        ...     os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
        ...     with gzip.open(os.path.join(folder, rel), "wt") as f:
        ...         _ = f.write(text)
        >>> g = read_ogb(folder, "ogbn-arxiv")
        >>> g.num_nodes, g.num_edges, g.ogb_name, g.split_sizes()
        (3, 4, 'ogbn-arxiv', (1, 1, 1))
    """
    name = _canonical(name)
    info = OGB_NODE_DATASETS[name]
    folder = Path(folder)
    missing = [rel for rel in _required(info) if not (folder / rel).is_file()]
    if missing:
        raise DatasetError(f"missing {', '.join(missing)} in {folder}{os.sep}")
    year = None
    if info.binary:
        data = _read_npz(folder / "raw/data.npz", ("edge_index", "num_nodes_list", "num_edges_list", "node_feat"))
        edges = np.asarray(data["edge_index"])
        if edges.ndim != 2 or edges.shape[0] != 2:
            raise corrupt_file_error(folder / "raw/data.npz", f"edge_index has shape {edges.shape}, expected [2, E]")
        src, dst = edges[0], edges[1]
        num_nodes_list, num_edges_list = data["num_nodes_list"], data["num_edges_list"]
        feat = data["node_feat"]
        year = data.get("node_year")
        raw_labels = _read_npz(folder / "raw/node-label.npz", ("node_label",))["node_label"]
        bad_source = folder / "raw/data.npz"
        label_path = folder / "raw/node-label.npz"
    else:
        edges = _read_csv(folder / "raw/edge.csv.gz", np.int64)
        if edges.ndim != 2 or edges.shape[1] != 2:
            raise corrupt_file_error(folder / "raw/edge.csv.gz", "expected 'src,dst' on every line")
        src, dst = edges[:, 0], edges[:, 1]
        num_nodes_list = _read_csv(folder / "raw/num-node-list.csv.gz", np.int64)
        num_edges_list = _read_csv(folder / "raw/num-edge-list.csv.gz", np.int64)
        feat = _read_csv(folder / "raw/node-feat.csv.gz", np.float32)
        raw_labels = _read_csv(folder / "raw/node-label.csv.gz", np.float64)
        if (folder / "raw/node_year.csv.gz").is_file():
            year = _read_csv(folder / "raw/node_year.csv.gz", np.int64)
        bad_source = folder / "raw/node-feat.csv.gz"
        label_path = folder / "raw/node-label.csv.gz"

    n = int(np.sum(num_nodes_list))
    num_edges = int(np.sum(num_edges_list))
    if n <= 0:
        raise corrupt_file_error(folder / "raw", f"num-node-list says {n} nodes")
    if src.size != num_edges:
        raise DatasetError(
            f"the edge list in {folder / 'raw'} has {src.size} edges but num-edge-list says {num_edges}; "
            f"a file is truncated or corrupt: delete {folder} to re-download"
        )
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise DatasetError(f"the edge list in {folder / 'raw'} has node ids outside 0..{n - 1}; delete {folder} "
                           f"to re-download")
    feat = np.asarray(feat, dtype=np.float32)
    if feat.ndim != 2 or feat.shape[0] != n:
        raise corrupt_file_error(bad_source, f"node features have shape {feat.shape}, expected {n} rows")
    y = _labels(raw_labels, label_path, n)

    if info.add_inverse_edge:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    indptr, indices, _ = edges_to_csr(src, dst, n, undirected=to_undirected, deduplicate=to_undirected)

    masks = []
    for part in ("train", "valid", "test"):
        path = folder / "split" / info.split / f"{part}.csv.gz"
        index = _read_csv(path, np.int64).reshape(-1)
        if index.size and (index.min() < 0 or index.max() >= n):
            raise corrupt_file_error(path, f"node ids must be in 0..{n - 1}")
        masks.append(torch.from_numpy(index))
    graph = csr_graph(indptr, indices, x=torch.from_numpy(feat), y=y,
                      train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], name=name)
    graph.ogb_name = name
    if year is not None:
        year = np.asarray(year).reshape(-1)
        if year.size != n:
            raise DatasetError(f"node_year in {folder / 'raw'} has {year.size} entries for {n} nodes; "
                               f"delete {folder} to re-download")
        graph.node_year = torch.from_numpy(year.astype(np.int64))
    return graph


def _dataset_folder(root: Optional[PathLike], name: str, info: OGBNodeInfo) -> Tuple[Optional[Path], Path]:
    """(folder holding every required file or None, folder to download into)."""
    required = _required(info)
    if root is None:
        candidates = [default_root() / info.folder(name)]
    else:
        root = Path(root).expanduser()
        candidates = [root / info.folder(name), root]
    for folder in candidates:
        if all((folder / rel).is_file() for rel in required):
            return folder, folder
    return None, candidates[0]


def load_ogb(
    name: str,
    root: Optional[PathLike] = None,
    to_undirected: bool = True,
    download: bool = True,
) -> Graph:
    """ogbn-arxiv, ogbn-products or ogbn-papers100M with OGB's official split.

    Args:
        name: ``"ogbn-arxiv"``, ``"ogbn-products"`` or ``"ogbn-papers100M"`` (case-insensitive,
            ``_`` works for ``-``).
        root: the folder holding ``ogbn_arxiv/`` (OGB's own ``root``), or the dataset folder
            itself; default ``$SGL_DATA`` or ``~/.sgl/datasets``. A missing dataset is
            downloaded from OGB's server (arxiv 81 MB, products 1.4 GB, papers100M 57 GB).
        to_undirected: symmetrize and deduplicate the edges (default); ``False`` keeps the
            edges exactly as OGB defines them.
        download: set ``False`` to fail instead of downloading.

    The masks come from ``split/<scheme>/`` (time for arxiv and papers100M, sales_ranking
    for products); unlabeled nodes (papers100M) have ``y = -1``; ``graph.ogb_name`` names
    the dataset for ``ogb.nodeproppred.Evaluator`` and ``graph.node_year`` holds the
    publication years when the dataset has them.

    Example:
        >>> from sgl.datasets import load_ogb
        >>> try:
        ...     load_ogb("ogbn-arxiv", root="/nonexistent/folder", download=False)
        ... except Exception as err:
        ...     print(type(err).__name__)
        DatasetError
    """
    name = _canonical(name)
    info = OGB_NODE_DATASETS[name]
    found, target = _dataset_folder(root, name, info)
    if found is None:
        required = _required(info)
        if not download:
            raise DatasetError(
                f"{name} is not in {target}{os.sep}: expected {', '.join(required)} there "
                f"(the layout of {info.url.rsplit('/', 1)[-1]}); pass download=True to fetch it"
            )
        try:
            download_zip_folder(info.url, target, info.download_name, last=["raw", "split"])
        except DownloadError as exc:
            raise DownloadError(
                f"{exc}. Put the files {', '.join(required)} (the unpacked {info.url.rsplit('/', 1)[-1]}) "
                f"in {target}{os.sep} and retry."
            ) from exc
        found = target
    return read_ogb(found, name, to_undirected=to_undirected)
