r"""Heterophilous benchmarks in the Geom-GCN format (Pei et al., ICLR 2020).

Texas, Wisconsin, Cornell (WebKB), Chameleon, Squirrel (Wikipedia) and Actor ("film")
ship as three kinds of files in the graphdml-uiuc-jlu/geom-gcn repository:

* ``new_data/<name>/out1_node_feature_label.txt``: a header line, then
  ``id<TAB>f1,f2,...<TAB>label`` per node (for Actor the middle column lists the indices
  of the non-zero binary features instead of a dense vector);
* ``new_data/<name>/out1_graph_edges.txt``: a header line, then ``src<TAB>dst`` per edge;
* ``splits/<name>_split_0.6_0.2_<i>.npz``, ``i = 0..9``: ``train_mask``, ``val_mask``,
  ``test_mask`` (despite the name, about 48/32/20 % of the nodes).

Like PyG's ``WebKB`` / ``WikipediaNetwork(geom_gcn_preprocess=True)`` / ``Actor``, edges
are kept as given (directed), deduplicated, self-loops kept; ``to_undirected=True``
symmetrizes them, which many heterophily papers do.

The same six graphs also ship re-packed in the heterophily benchmark's single-``.npz``
layout (``chameleon.npz``, ``chameleon_directed.npz``, ``texas.npz``, ``actor.npz`` ... in
yandex-research/heterophilous-graphs; see :mod:`sgl.datasets.heterophily`), with their 10
splits inside. :func:`load_geomgcn` reads whichever layout is on disk: the raw files first,
then ``<name>.npz`` (undirected: each edge stored once) or ``<name>_directed.npz``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Union

import numpy as np
import torch

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error, ensure_files, find_folder
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.datasets.heterophily import find_heterophily_npz, read_heterophily
from sgl.errors import ConfigError, DatasetError, DownloadError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GEOMGCN_NAMES", "load_geomgcn", "read_geomgcn"]

PathLike = Union[str, os.PathLike]

# Pinned to the commit PyG's WikipediaNetwork uses, so the checksums below stay valid.
_URL = "https://raw.githubusercontent.com/graphdml-uiuc-jlu/geom-gcn/f1fc0d14b3b019c562737240d06ec83b07d16a8f"

#: Registered name -> the dataset's folder / file prefix in the geom-gcn repository.
GEOMGCN_NAMES = {
    "texas": "texas",
    "wisconsin": "wisconsin",
    "cornell": "cornell",
    "chameleon": "chameleon",
    "squirrel": "squirrel",
    "actor": "film",
}

_FEATURES = "out1_node_feature_label.txt"
_EDGES = "out1_graph_edges.txt"

# graphdml-uiuc-jlu/geom-gcn @ f1fc0d1 : new_data/, splits/
_SHA256 = {
    "texas": {
        _EDGES: "0fe85183243a78cbee9b85a684f8240963d04d1020d10e9cd2b8cfb25e33b476",
        _FEATURES: "cf5a3ca346cdd1210b8342e22517fcbbdae658065b7a3145f59350e50e6236a3",
        "texas_split_0.6_0.2_0.npz": "7ba77bf7a8856fcc0ab15623a611b8cdce994e820f577da914123fb4f45272b0",
        "texas_split_0.6_0.2_1.npz": "21cc244a96e3c51ad7993afb4dd227f90e467d82b964bb42d7d9fc500a6ef87f",
        "texas_split_0.6_0.2_2.npz": "b9e96a699ccf3a4c31ffbd03e52b25570889833425d20fa44e06c37b327cf61e",
        "texas_split_0.6_0.2_3.npz": "1a7deeb1285009789d5e6045d7e39f7d019c9223d9a75a2b7ce5e26d33b51f63",
        "texas_split_0.6_0.2_4.npz": "b5419ff3fe31adcae66fdb085d4f47d0b188e9436ab59f438632af969aafc674",
        "texas_split_0.6_0.2_5.npz": "68405fd1b9ff6105d99717220ecbd198785e338bf4a73abee722bbc9703d2667",
        "texas_split_0.6_0.2_6.npz": "8ad78b973164e70e5ac0d282e79adcbc6006e373909fbdfd72a13131e09040b8",
        "texas_split_0.6_0.2_7.npz": "a84bcbf997365bddf5fdf72ed49dc7e435e475f8c6210f8cdee7c8581a2bd6df",
        "texas_split_0.6_0.2_8.npz": "65ba65f296f91d40d2d7d3c9369b67415094a7e254c6eee48cd6d6531c586fdf",
        "texas_split_0.6_0.2_9.npz": "4306981d654ad8835c000c1f73fb6c1e60dfe99e26c13a6073f3b0f4cc3ce6ee",
    },
    "wisconsin": {
        _EDGES: "ebd213511c88fce1eda450c2f920600c4b8cbb38f02384856bcc47c6ec1807ae",
        _FEATURES: "a32b0aa38d42f0d36841e8a8cb646d197f0ff33a182ac75a2b4476aeed3c7e4b",
        "wisconsin_split_0.6_0.2_0.npz": "f66f641e191d35d491cd3b63d6c2cd93c4b436da398984b44c19a8d4d7e7b1a5",
        "wisconsin_split_0.6_0.2_1.npz": "534aeb97266bd5a85a8587adf8eebad3f2e001c1240610f24b62c0ad0c2466ee",
        "wisconsin_split_0.6_0.2_2.npz": "047a5b641778ec3a4c76055fd7f18ecb2424c0952f20dfff7e1b17749d8acbdd",
        "wisconsin_split_0.6_0.2_3.npz": "706c27b4c51d046c0316f1e915f093e4a1fff48b3436b3e7c421eab596a99e77",
        "wisconsin_split_0.6_0.2_4.npz": "7ee813605eec086457aaff022cf3837f2f893fcf8bd37e3a8d2ff0c80e4c4f87",
        "wisconsin_split_0.6_0.2_5.npz": "8094ac2bdaf2cbea8f7a48df66a0800c809b2fd5942740e6b0441b660d3a0dd5",
        "wisconsin_split_0.6_0.2_6.npz": "c423a8deea9b18f9ecb6cfd703578e2159df167de01fe7e6195b88995010252d",
        "wisconsin_split_0.6_0.2_7.npz": "57ad808c8d4dd94dc4404124370bbcebb3dcc597c2bea6457bf05f220adf1527",
        "wisconsin_split_0.6_0.2_8.npz": "27d4d62a2a6aea2cdc399302237512ab0d64fb0c84e648112f97c5896274e42f",
        "wisconsin_split_0.6_0.2_9.npz": "3c149cd124a19021031609e0d7743a7be59aae4f88c8d38410138e8f06f5daaf",
    },
}

_NUM_SPLITS = 10


def _split_file(prefix: str, split: int) -> str:
    return f"{prefix}_split_0.6_0.2_{split}.npz"


def _read_table(path: Path, dtype) -> pd.DataFrame:
    import pandas as pd  # imported on use: keeps `import sgl.datasets` light

    try:
        table = pd.read_csv(path, sep="\t", header=0, dtype=dtype)
    except Exception as exc:  # ParserError, ValueError on a non-integer cell, EmptyDataError
        raise corrupt_file_error(path, exc) from exc
    if table.empty:
        raise corrupt_file_error(path, "no rows after the header")
    return table


def _read_nodes(path: Path, sparse_features: bool):
    table = _read_table(path, str)
    if table.shape[1] != 3 or table.isna().any().any():
        raise corrupt_file_error(path, "expected 'id<TAB>features<TAB>label' on every line")
    try:
        ids = table.iloc[:, 0].to_numpy(dtype=np.int64)
        labels = table.iloc[:, 2].to_numpy(dtype=np.int64)
        counts = table.iloc[:, 1].str.count(",").to_numpy() + 1
        # One join + one parse instead of a Python loop over rows.
        values = np.array(",".join(table.iloc[:, 1]).split(","), dtype=np.int64 if sparse_features else np.float32)
    except (TypeError, ValueError, OverflowError) as exc:
        raise corrupt_file_error(path, f"a node id, feature or label is not a number ({exc})") from exc
    n = ids.size
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise corrupt_file_error(path, f"node ids must be 0..{n - 1}, each exactly once")
    if sparse_features:
        if values.min() < 0:
            raise corrupt_file_error(path, "feature indices must be non-negative")
        x = np.zeros((n, int(values.max()) + 1), dtype=np.float32)
        x[np.repeat(ids, counts), values] = 1.0
    else:
        if np.unique(counts).size != 1:
            raise corrupt_file_error(path, f"rows have different feature counts ({counts.min()}..{counts.max()})")
        x = np.empty((n, int(counts[0])), dtype=np.float32)
        x[ids] = values.reshape(n, -1)
    y = np.empty(n, dtype=np.int64)
    y[ids] = labels
    if y.min() < 0:
        raise corrupt_file_error(path, "labels must be non-negative")
    return x, y


def _read_split(path: Path, n: int):
    try:
        with np.load(path, allow_pickle=False) as archive:
            masks = [np.asarray(archive[k]) for k in ("train_mask", "val_mask", "test_mask")]
    except Exception as exc:  # missing keys, bad zip
        raise corrupt_file_error(path, exc) from exc
    for mask in masks:
        if mask.shape != (n,):
            raise corrupt_file_error(path, f"a mask has shape {mask.shape}, expected ({n},) for {n} nodes")
    return [torch.from_numpy(m.astype(bool)) for m in masks]


def read_geomgcn(folder: PathLike, name: str, split: int = 0, to_undirected: bool = False) -> Graph:
    """Read a Geom-GCN dataset from ``folder`` (no download); ``name`` is its file prefix
    (``texas``, ..., ``film`` for Actor).

    Example:
        >>> import os
        >>> from sgl.datasets import read_geomgcn
        >>> folder = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "geomgcn", "texas")
        >>> g = read_geomgcn(folder, "texas", split=3) if os.path.isdir(folder) else None
        >>> (g.num_nodes, g.num_features, g.num_classes) if g is not None else (183, 1703, 5)
        (183, 1703, 5)
    """
    folder = Path(folder)
    prefix = str(name).lower()
    x, y = _read_nodes(folder / _FEATURES, sparse_features=prefix == "film")
    n = y.size
    edges = _read_table(folder / _EDGES, np.int64).to_numpy()
    if edges.shape[1] != 2:
        raise corrupt_file_error(folder / _EDGES, "expected 'src<TAB>dst' on every line")
    if edges.min() < 0 or edges.max() >= n:
        raise corrupt_file_error(folder / _EDGES, f"edge endpoints must be node ids in 0..{n - 1}")
    indptr, indices, _ = edges_to_csr(edges[:, 0], edges[:, 1], n, undirected=to_undirected)
    train, val, test = _read_split(folder / _split_file(prefix, split), n)
    graph = csr_graph(indptr, indices, x=torch.from_numpy(x), y=torch.from_numpy(y),
                      train_mask=train, val_mask=val, test_mask=test, name=prefix)
    graph.split, graph.num_splits = split, _NUM_SPLITS
    return graph


def _npz_candidates(key: str, to_undirected: Optional[bool]) -> List[str]:
    """Heterophily-layout files holding graph ``key``, in order of preference."""
    if to_undirected is False:  # the undirected archives store each edge once: no direction to keep
        return [f"{key}_directed.npz"]
    return [f"{key}.npz", f"{key}_directed.npz"]


def load_geomgcn(
    name: str,
    root: Optional[PathLike] = None,
    split: int = 0,
    to_undirected: Optional[bool] = None,
    download: bool = True,
) -> Graph:
    """Texas, Wisconsin, Cornell, Chameleon, Squirrel or Actor with split ``split`` of 10.

    Args:
        name: ``texas``, ``wisconsin``, ``cornell``, ``chameleon``, ``squirrel`` or ``actor``.
        root: folder holding the files directly or in ``<name>/`` or ``<name>/raw/``;
            default ``$SGL_DATA`` or ``~/.sgl/datasets``. Either layout is read: the
            Geom-GCN raw files, or the heterophily benchmark's ``<name>.npz`` /
            ``<name>_directed.npz``. When neither is there, the raw files are downloaded
            from graphdml-uiuc-jlu/geom-gcn.
        split: which of the 10 standard splits fills the masks (0..9).
        to_undirected: ``None`` (default) keeps the edges as the files store them (raw and
            ``*_directed.npz``: directed; ``<name>.npz``: undirected); ``True`` symmetrizes;
            ``False`` insists on directed edges (raw files or ``<name>_directed.npz``).
        download: set ``False`` to fail instead of downloading.

    Example:
        >>> import os
        >>> from sgl.datasets import load_geomgcn
        >>> root = os.path.join(os.environ.get("SGL_TEST_DATA", "/nonexistent"), "geomgcn")
        >>> g = load_geomgcn("wisconsin", root=root, split=0) if os.path.isdir(root) else None
        >>> g.num_nodes if g is not None else 251
        251
    """
    key = str(name).lower()
    if key not in GEOMGCN_NAMES:
        raise ConfigError(f"unknown Geom-GCN dataset {name!r}; expected one of {', '.join(GEOMGCN_NAMES)}")
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 0 <= split < _NUM_SPLITS:
        raise ConfigError(f"split must be an integer in 0..{_NUM_SPLITS - 1}, got {split!r}")
    if to_undirected is not None and not isinstance(to_undirected, bool):
        raise ConfigError(f"to_undirected must be true, false or None, got {to_undirected!r}")
    prefix = GEOMGCN_NAMES[key]
    files = [_FEATURES, _EDGES, _split_file(prefix, int(split))]
    folders = [key] if key == prefix else [key, prefix]
    if find_folder(root, folders, files) is None:
        npz = find_heterophily_npz(root, folders, _npz_candidates(key, to_undirected))
        if npz is not None:
            return read_heterophily(npz, int(split), to_undirected, name=key)
    urls = {
        _FEATURES: f"{_URL}/new_data/{prefix}/{_FEATURES}",
        _EDGES: f"{_URL}/new_data/{prefix}/{_EDGES}",
        files[2]: f"{_URL}/splits/{files[2]}",
    }
    try:
        folder = ensure_files(root, folders, files, urls, _SHA256.get(prefix), download=download)
    except (DatasetError, DownloadError) as exc:
        alternatives = " or ".join(_npz_candidates(key, to_undirected))
        raise type(exc)(f"{exc} Alternatively, put {alternatives} (the heterophily benchmark's single-file "
                        f"layout) there.") from exc
    graph = read_geomgcn(folder, prefix, int(split), bool(to_undirected))
    graph.name = key
    return graph
