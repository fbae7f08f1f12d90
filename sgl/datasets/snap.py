"""SNAP edge lists (Leskovec & Krevl, "SNAP Datasets", snap.stanford.edu/data): ego-Facebook.

SNAP publishes graphs as text, one ``u v`` pair of integer ids per line separated by spaces
or tabs, with comment lines starting with ``#``, gzipped on the site (``facebook_combined.txt.gz``).
:func:`read_snap_edges` reads the plain or the gzipped file; :func:`load_snap` finds it under
``root`` (as ``root/<file>``, ``root/<folder>/raw/<file>`` or ``root/<folder>/<file>``, folder
``snap_<name>`` or ``<name>``), downloads the ``.gz`` when it is missing, and builds the
undirected simple graph (both directions, duplicates and self-loops dropped), without
features: these are link-level (and motif) benchmarks.

    >>> import gzip, os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> with gzip.open(os.path.join(root, "facebook_combined.txt.gz"), "wt") as f:
    ...     _ = f.write("# comment\\n0 1\\n1 2\\n2 0\\n2 0\\n")
    >>> g = load_facebook(root=root)
    >>> g.num_nodes, g.num_edges, g.name
    (3, 6, 'facebook')
"""
from __future__ import annotations

import gzip
import io
import os
from pathlib import Path
from typing import Optional, Union

import numpy as np

from sgl.data import Graph
from sgl.datasets.download import corrupt_file_error, fetch, find_folder, target_folder
from sgl.datasets.edges import csr_graph, edges_to_csr
from sgl.errors import DatasetError, DownloadError

__all__ = ["SNAP_GRAPHS", "read_snap_edges", "load_snap", "load_facebook"]

PathLike = Union[str, os.PathLike]

_URL = "https://snap.stanford.edu/data/"
#: name -> (file name on SNAP without ".gz", description)
SNAP_GRAPHS = {
    "facebook": ("facebook_combined.txt", "ego-Facebook friendships: 4,039 nodes, 88,234 undirected edges"),
}


def _text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                return handle.read().decode("utf-8")
        return path.read_text(encoding="utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:  # truncated gzip, bad CRC, binary junk
        raise corrupt_file_error(path, exc) from exc


def read_snap_edges(path: PathLike) -> np.ndarray:
    """``[E, 2]`` int64 edges of a SNAP text edge list (``.txt`` or ``.txt.gz``), comments skipped.

    Raises :class:`~sgl.errors.DatasetError` naming the file and line of the first row that
    is not two non-negative integer ids.
    """
    import pandas as pd  # imported on use: keeps `import sgl.datasets` light

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"SNAP edge list {path} does not exist")
    text = _text(path)
    try:
        frame = pd.read_csv(io.StringIO(text), sep=r"\s+", comment="#", header=None, usecols=[0, 1],
                            dtype=np.int64, engine="c")
        edges = frame.to_numpy()
    except Exception:  # ragged rows, text in an id column, an empty file
        edges = None
    if edges is None or (edges.size and edges.min() < 0):
        for number, line in enumerate(text.splitlines(), start=1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) < 2 or not all(f.isdigit() for f in fields[:2]):
                raise DatasetError(f"{path}, line {number}: expected two non-negative integer ids, got {line!r}")
        if edges is None:
            raise DatasetError(f"{path} has no edges (only comment or blank lines)")
    return np.ascontiguousarray(edges, dtype=np.int64)


def load_snap(name: str, root: Optional[PathLike] = None, download: bool = True) -> Graph:
    """The SNAP graph ``name`` (a key of :data:`SNAP_GRAPHS`) as an undirected :class:`Graph`."""
    if name not in SNAP_GRAPHS:
        raise DatasetError(f"unknown SNAP graph {name!r}; known: {', '.join(sorted(SNAP_GRAPHS))}")
    file_name, _ = SNAP_GRAPHS[name]
    folders = [f"snap_{Path(file_name).stem}", f"snap_{name}", name]
    folder = find_folder(root, folders, [file_name])
    if folder is not None:
        path = folder / file_name
    else:
        gz = file_name + ".gz"
        folder = find_folder(root, folders, [gz])
        if folder is None:
            folder = target_folder(root, folders, [gz])
            if not download:
                raise DatasetError(f"missing {file_name} (or {gz}) in {folder}{os.sep}; put it there or pass "
                                   f"download=True")
            try:
                fetch(_URL + gz, folder / gz)
            except DownloadError as exc:
                raise DownloadError(f"{exc}. Put {file_name} or {gz} in {folder}{os.sep} and retry.") from exc
        path = folder / gz
    edges = read_snap_edges(path)
    n = int(edges.max()) + 1 if edges.size else 1
    indptr, indices, _ = edges_to_csr(edges[:, 0], edges[:, 1], n, undirected=True, remove_self_loops=True)
    return csr_graph(indptr, indices, name=name)


def load_facebook(root: Optional[PathLike] = None, download: bool = True) -> Graph:
    """SNAP ego-Facebook (McAuley & Leskovec 2012): 4,039 nodes, 88,234 undirected friendships."""
    return load_snap("facebook", root=root, download=download)
