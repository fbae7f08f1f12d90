"""The dataset registry: one name per dataset, used by :func:`load` and the CLI.

Names are case-insensitive and ``_`` is read as ``-`` (``"OGBN_ARXIV"`` finds
``ogbn-arxiv``). Any TU dataset loads as ``"tu:<NAME>"`` (e.g. ``"tu:NCI1"``) without
being registered. A misspelt name raises :class:`sgl.errors.DatasetError` listing the
valid names and the closest match.
"""
from __future__ import annotations

import difflib
import functools
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from sgl.datasets.geomgcn import load_geomgcn
from sgl.datasets.karate import load_karate
from sgl.datasets.npz import load_npz
from sgl.datasets.ogb import load_ogb
from sgl.datasets.planetoid import load_planetoid
from sgl.datasets.synthetic import csbm
from sgl.datasets.tu import load_tu
from sgl.errors import ConfigError, DatasetError

__all__ = ["register", "load", "list_datasets", "dataset_task"]

PathLike = Union[str, os.PathLike]

_TASKS = ("node", "graph", "link", "recommendation", "ctr")


@dataclass(frozen=True)
class _Entry:
    name: str
    loader: Callable[..., Any]
    description: str
    task: str


_REGISTRY: Dict[str, _Entry] = {}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def register(name: str, loader: Callable[..., Any], description: str, task: str = "node",
             overwrite: bool = False) -> None:
    """Register ``loader`` under ``name``; :func:`load` calls ``loader(root=root, **kwargs)``.

    Args:
        name: the dataset's name (matched case-insensitively, ``_`` = ``-``).
        loader: a callable taking ``root`` (a folder or ``None``) and keyword options.
        description: one line shown by ``sgl datasets`` / :func:`list_datasets`.
        task: ``"node"``, ``"graph"``, ``"link"``, ``"recommendation"`` or ``"ctr"``.
        overwrite: replace an existing entry instead of raising.

    Example:
        >>> from sgl.datasets import register, load, load_karate
        >>> register("my-karate", lambda root=None: load_karate(seed=1), "karate, split seed 1",
        ...          overwrite=True)
        >>> load("MY_KARATE").num_nodes
        34
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"a dataset name must be a non-empty string, got {name!r}")
    if not callable(loader):
        raise ConfigError(f"loader for {name!r} must be callable, got {type(loader).__name__}")
    if task not in _TASKS:
        raise ConfigError(f"task must be one of {', '.join(_TASKS)}; got {task!r}")
    key = _key(name)
    if key.startswith("tu:"):
        raise ConfigError("names starting with 'tu:' are reserved for TU datasets loaded by name")
    if key in _REGISTRY and not overwrite:
        raise ConfigError(f"a dataset named {_REGISTRY[key].name!r} is already registered; pass overwrite=True")
    _REGISTRY[key] = _Entry(name.strip(), loader, str(description), task)


def list_datasets() -> List[Tuple[str, str, str]]:
    """``(name, description, task)`` for every registered dataset, sorted by name.

    Example:
        >>> from sgl.datasets import list_datasets
        >>> ("cora", "node") in [(name, task) for name, _, task in list_datasets()]
        True
    """
    return [(e.name, e.description, e.task) for _, e in sorted(_REGISTRY.items())]


def dataset_task(name: str) -> Optional[str]:
    """The task a registered dataset is for (``"node"``, ``"ctr"``, ...), ``None`` if unknown.

    Example:
        >>> from sgl.datasets import dataset_task
        >>> dataset_task("Cora"), dataset_task("synthetic_ctr"), dataset_task("nope")
        ('node', 'ctr', None)
    """
    entry = _REGISTRY.get(_key(str(name)))
    return entry.task if entry is not None else None


def _unknown(name: str) -> DatasetError:
    names = sorted(e.name for e in _REGISTRY.values())
    close = difflib.get_close_matches(_key(name), list(_REGISTRY), n=1, cutoff=0.6)
    hint = f" Did you mean {_REGISTRY[close[0]].name!r}?" if close else ""
    return DatasetError(
        f"unknown dataset {name!r}.{hint} Valid names: {', '.join(names)} "
        f"(and 'tu:<NAME>' for any TU graph-classification dataset)"
    )


def _check_options(entry_name: str, loader: Callable[..., Any], kwargs: Dict[str, Any],
                   hidden: Tuple[str, ...] = ("root",)) -> None:
    try:
        signature = inspect.signature(loader)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    try:
        signature.bind(**kwargs)
    except TypeError as exc:
        options = [p for p in signature.parameters if p not in hidden
                   and signature.parameters[p].kind not in (inspect.Parameter.VAR_KEYWORD,
                                                            inspect.Parameter.VAR_POSITIONAL)]
        raise ConfigError(
            f"dataset {entry_name!r} does not accept these options ({exc}); "
            f"valid options: {', '.join(options) or 'none'}"
        ) from None


def load(name: str, root: Optional[PathLike] = None, **kwargs: Any) -> Any:
    """Load a registered dataset by name.

    Args:
        name: a name from :func:`list_datasets` (case-insensitive), or ``"tu:<NAME>"``.
        root: where its files are (or go); ``None`` = ``$SGL_DATA`` or ``~/.sgl/datasets``.
        **kwargs: the dataset's own options (e.g. ``normalize_features=True`` for Planetoid,
            ``split=3`` for Geom-GCN sets, ``num_nodes=10**6`` for ``synthetic``).

    Returns:
        A :class:`~sgl.data.Graph` for node-level datasets, a
        :class:`~sgl.datasets.GraphDataset` for graph classification.

    Example:
        >>> import sgl
        >>> sgl.datasets.load("Karate").num_nodes
        34
        >>> sgl.datasets.load("synthetic", num_nodes=500, num_features=8, seed=1).num_nodes
        500
    """
    if not isinstance(name, str):
        raise DatasetError(f"a dataset name must be a string, got {type(name).__name__}")
    key = _key(name)
    if key.startswith("tu:"):
        tu_name = name.strip()[3:]
        _check_options(name, load_tu, {"name": tu_name, "root": root, **kwargs}, hidden=("root", "name"))
        return load_tu(tu_name, root=root, **kwargs)
    entry = _REGISTRY.get(key)
    if entry is None:
        raise _unknown(name)
    _check_options(entry.name, entry.loader, {"root": root, **kwargs})
    return entry.loader(root=root, **kwargs)


def _without_root(func: Callable[..., Any]) -> Callable[..., Any]:
    """Adapt a loader that needs no files (built-in, synthetic) to the ``root=`` convention."""

    @functools.wraps(func)
    def wrapper(root: Optional[PathLike] = None, **kwargs: Any) -> Any:
        return func(**kwargs)

    sig = inspect.signature(func)
    root_param = inspect.Parameter("root", inspect.Parameter.KEYWORD_ONLY, default=None)
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values()]
    wrapper.__signature__ = sig.replace(parameters=[root_param] + params)  # type: ignore[attr-defined]
    return wrapper


def _synthetic(num_nodes: int = 2708, **kwargs: Any) -> Any:
    return csbm(num_nodes, **kwargs)


_synthetic.__signature__ = inspect.signature(csbm).replace(  # type: ignore[attr-defined]
    parameters=[p.replace(default=2708) if p.name == "num_nodes" else p
                for p in inspect.signature(csbm).parameters.values()]
)


def _register_builtins() -> None:
    register("karate", _without_root(load_karate),
             "Zachary's Karate Club, built in: 34 nodes, 2 factions, one-hot features")
    register("synthetic", _without_root(_synthetic),
             "seeded contextual stochastic block model (CSBM) with tunable homophily")
    for name, title in (("cora", "Cora"), ("citeseer", "CiteSeer"), ("pubmed", "PubMed")):
        register(name, functools.partial(load_planetoid, name),
                 f"{title} citation graph, Planetoid files and public split")
    for name, title in (("cora-npz", "Cora (gnn-benchmark npz)"),
                        ("amazon-computers", "Amazon Computers co-purchase graph"),
                        ("amazon-photo", "Amazon Photo co-purchase graph"),
                        ("coauthor-cs", "Coauthor CS co-authorship graph"),
                        ("coauthor-physics", "Coauthor Physics co-authorship graph")):
        register(name, functools.partial(load_npz, name), f"{title}, gnn-benchmark npz, per-class random split")
    for name, title in (("texas", "Texas WebKB"), ("wisconsin", "Wisconsin WebKB"), ("cornell", "Cornell WebKB"),
                        ("chameleon", "Chameleon Wikipedia"), ("squirrel", "Squirrel Wikipedia"),
                        ("actor", "Actor (film) co-occurrence")):
        register(name, functools.partial(load_geomgcn, name),
                 f"{title} heterophilous graph, Geom-GCN files and 10 splits")
    register("mutag", functools.partial(load_tu, "MUTAG"), "MUTAG molecules (TU), 188 graphs, 2 classes",
             task="graph")
    register("proteins", functools.partial(load_tu, "PROTEINS"), "PROTEINS (TU), 1,113 graphs, 2 classes",
             task="graph")
    register("ogbn-arxiv", functools.partial(load_ogb, "ogbn-arxiv"),
             "OGB arXiv citation graph, 169k nodes, 40 classes, time split")
    register("ogbn-products", functools.partial(load_ogb, "ogbn-products"),
             "OGB Amazon products graph, 2.4M nodes, 47 classes, sales-rank split")
    register("ogbn-papers100M", functools.partial(load_ogb, "ogbn-papers100M"),
             "OGB papers100M citation graph, 111M nodes, 172 classes (binary npz layout)")
    from sgl.datasets import ctr

    register("criteo", ctr.load_criteo, "Criteo display ads CTR: label, 13 dense, 26 categorical "
             "(streaming TSV/CSV, or the HET sampled .npy arrays)", task="ctr")
    register("avazu", ctr.load_avazu, "Avazu mobile ads CTR: 22 categorical fields", task="ctr")
    register("movielens-100k", ctr.load_movielens_100k,
             "MovieLens-100k as implicit CTR (rating >= 4), user/item/age/gender/occupation/genre", task="ctr")
    register("synthetic-ctr", ctr.load_synthetic_ctr,
             "seeded synthetic CTR: Zipf ids per field, planted logistic ground truth", task="ctr")


_register_builtins()
