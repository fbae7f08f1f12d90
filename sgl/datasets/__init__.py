"""Dataset loaders and the dataset registry.

Every loader finds its raw files under ``root`` (or ``$SGL_DATA`` / ``~/.sgl/datasets``),
downloads missing ones atomically, validates what it reads and raises
:class:`sgl.errors.DatasetError` (or :class:`~sgl.errors.DownloadError`) with a message
that names the file or folder to fix.

Example:
    >>> import sgl
    >>> graph = sgl.datasets.load("karate")
    >>> graph.num_nodes, graph.num_classes
    (34, 2)
    >>> "cora" in [name for name, _, _ in sgl.datasets.list_datasets()]
    True
"""
from sgl.datasets.ctr import (CTRData, build_ctr_store, load_avazu, load_criteo, load_movielens_100k,
                              load_synthetic_ctr, make_synthetic_ctr, open_ctr_store)
from sgl.datasets.download import default_root, fetch
from sgl.datasets.geomgcn import load_geomgcn, read_geomgcn
from sgl.datasets.graph_dataset import GraphDataset
from sgl.datasets.karate import load_karate
from sgl.datasets.npz import load_npz, read_npz
from sgl.datasets.ogb import load_ogb, read_ogb
from sgl.datasets.planetoid import load_planetoid, read_planetoid
from sgl.datasets.registry import dataset_task, list_datasets, load, register
from sgl.datasets.splits import per_class_split, planetoid_split
from sgl.datasets.synthetic import csbm
from sgl.datasets.tu import load_tu, read_tu

__all__ = [
    "load",
    "list_datasets",
    "dataset_task",
    "register",
    "GraphDataset",
    "load_karate",
    "csbm",
    "load_planetoid",
    "read_planetoid",
    "load_npz",
    "read_npz",
    "load_geomgcn",
    "read_geomgcn",
    "load_tu",
    "read_tu",
    "load_ogb",
    "read_ogb",
    "per_class_split",
    "planetoid_split",
    "fetch",
    "default_root",
    "CTRData",
    "make_synthetic_ctr",
    "build_ctr_store",
    "open_ctr_store",
    "load_criteo",
    "load_avazu",
    "load_movielens_100k",
    "load_synthetic_ctr",
]
