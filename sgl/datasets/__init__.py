"""Dataset loaders and the dataset registry.

Every loader finds its raw files under ``root`` (or ``$SGL_DATA`` / ``~/.sgl/datasets``),
downloads missing ones atomically, validates what it reads and raises
:class:`sgl.errors.DatasetError` (or :class:`~sgl.errors.DownloadError`) with a message
that names the file or folder to fix. ``load("file:PATH")`` reads a user's own graph.

The names below are imported on first use (PEP 562), so ``import sgl.datasets`` and
:func:`list_datasets` stay free of torch: ``sgl datasets list`` starts in a fraction of a
second.

Example:
    >>> import sgl
    >>> graph = sgl.datasets.load("karate")
    >>> graph.num_nodes, graph.num_classes
    (34, 2)
    >>> "cora" in [name for name, _, _ in sgl.datasets.list_datasets()]
    True
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from sgl.datasets.registry import dataset_task, list_datasets, load, register

#: public name -> the submodule defining it (imported when the name is first used)
_LAZY = {
    "CTRData": "ctr", "build_ctr_store": "ctr", "load_avazu": "ctr", "load_criteo": "ctr",
    "load_movielens_100k": "ctr", "load_synthetic_ctr": "ctr", "make_synthetic_ctr": "ctr", "open_ctr_store": "ctr",
    "default_root": "download", "fetch": "download",
    "load_geomgcn": "geomgcn", "read_geomgcn": "geomgcn",
    "load_heterophily": "heterophily", "read_heterophily": "heterophily",
    "GraphDataset": "graph_dataset",
    "load_acm": "hetero", "load_imdb": "hetero", "read_acm": "hetero", "read_imdb": "hetero",
    "load_ogbn_mag": "hetero_mag", "read_ogbn_mag": "hetero_mag",
    "synthetic_mag": "hetero_synthetic", "write_ogb_hetero_layout": "hetero_synthetic",
    "load_karate": "karate",
    "load_npz": "npz", "read_npz": "npz",
    "load_ogb": "ogb", "read_ogb": "ogb",
    "load_ogb_link": "ogb_link", "read_ogb_link": "ogb_link",
    "load_planetoid": "planetoid", "read_planetoid": "planetoid",
    "per_class_split": "splits", "planetoid_split": "splits", "random_split": "splits",
    "csbm": "synthetic",
    "load_tu": "tu", "read_tu": "tu",
    "load_file": "user_files",
}

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
    "load_heterophily",
    "read_heterophily",
    "load_file",
    "load_tu",
    "read_tu",
    "load_ogb",
    "read_ogb",
    "load_ogb_link",
    "read_ogb_link",
    "load_acm",
    "read_acm",
    "load_imdb",
    "read_imdb",
    "load_ogbn_mag",
    "read_ogbn_mag",
    "synthetic_mag",
    "write_ogb_hetero_layout",
    "per_class_split",
    "planetoid_split",
    "random_split",
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        # ``sgl.datasets.edges`` etc. after a bare ``import sgl.datasets``, as before the
        # package became lazy
        if name.startswith("_") or importlib.util.find_spec(f"sgl.datasets.{name}") is None:
            raise AttributeError(f"module 'sgl.datasets' has no attribute {name!r}")
        return importlib.import_module(f"sgl.datasets.{name}")
    value = getattr(importlib.import_module(f"sgl.datasets.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
