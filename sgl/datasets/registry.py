"""The dataset registry: one name per dataset, used by :func:`load` and the CLI.

Names are case-insensitive and ``_`` is read as ``-`` (``"OGBN_ARXIV"`` finds
``ogbn-arxiv``). Any TU dataset loads as ``"tu:<NAME>"`` (e.g. ``"tu:NCI1"``) and a user's
own files as ``"file:<PATH>"`` (an edge list, a ``.npz`` or a saved
:class:`~sgl.data.Graph`; see :func:`sgl.datasets.load_file`), without being registered. A
misspelt name raises :class:`sgl.errors.DatasetError` listing the valid names and the
closest match.

This module is light on purpose: it imports only the standard library and
:mod:`sgl.errors`. Built-in entries name their loader as ``module:function`` and import it
on :func:`load`, so listing datasets (``sgl datasets list``) loads neither torch nor numpy.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from sgl.errors import ConfigError, DatasetError

__all__ = ["register", "load", "list_datasets", "dataset_task"]

PathLike = Union[str, os.PathLike]

_TASKS = ("node", "graph", "link", "recommendation", "ctr")
#: name prefixes that load without registration: TU sets by name, a user's own files
_PREFIXES = ("tu:", "file:")


@dataclass(frozen=True)
class _LazyLoader:
    """``module:function`` (with leading positional ``args``), imported on first use.

    ``adapt`` names a wrapper applied after import: ``"without_root"`` for loaders that read
    no files (built-in, synthetic), ``"synthetic"`` for the CSBM generator's defaults.
    """

    module: str
    function: str
    args: Tuple[Any, ...] = ()
    adapt: Optional[str] = None

    def resolve(self) -> Callable[..., Any]:
        func = getattr(importlib.import_module(self.module), self.function)
        if self.adapt == "synthetic":
            func = _synthetic_defaults(func)
        if self.adapt in ("without_root", "synthetic"):
            func = _without_root(func)
        return functools.partial(func, *self.args) if self.args else func


@dataclass(frozen=True)
class _Entry:
    name: str
    loader: Union[Callable[..., Any], _LazyLoader]
    description: str
    task: str

    def resolve(self) -> Callable[..., Any]:
        return self.loader.resolve() if isinstance(self.loader, _LazyLoader) else self.loader


_REGISTRY: Dict[str, _Entry] = {}


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _check_entry(name: str, task: str, overwrite: bool) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"a dataset name must be a non-empty string, got {name!r}")
    if task not in _TASKS:
        raise ConfigError(f"task must be one of {', '.join(_TASKS)}; got {task!r}")
    key = _key(name)
    if key.startswith(_PREFIXES):
        raise ConfigError("names starting with 'tu:' or 'file:' are reserved (TU datasets by name, a user's files)")
    if key in _REGISTRY and not overwrite:
        raise ConfigError(f"a dataset named {_REGISTRY[key].name!r} is already registered; pass overwrite=True")
    return key


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
    if not callable(loader):
        raise ConfigError(f"loader for {name!r} must be callable, got {type(loader).__name__}")
    key = _check_entry(name, task, overwrite)
    _REGISTRY[key] = _Entry(name.strip(), loader, str(description), task)


def register_lazy(name: str, target: str, description: str, task: str = "node", args: Tuple[Any, ...] = (),
                  adapt: Optional[str] = None, overwrite: bool = False) -> None:
    """Register a loader by its import path ``"package.module:function"`` (imported on :func:`load`).

    ``args`` are passed first (e.g. the dataset's name to a family loader). This keeps
    :func:`list_datasets` free of heavy imports; a wrong path fails on the first load.

    Example:
        >>> from sgl.datasets.registry import register_lazy, load
        >>> register_lazy("karate-lazy", "sgl.datasets.karate:load_karate", "karate, imported on load",
        ...               adapt="without_root", overwrite=True)
        >>> load("karate-lazy", seed=2).num_nodes
        34
    """
    module, sep, function = str(target).partition(":")
    if not sep or not module or not function:
        raise ConfigError(f"a lazy loader is 'package.module:function', got {target!r}")
    key = _check_entry(name, task, overwrite)
    _REGISTRY[key] = _Entry(name.strip(), _LazyLoader(module, function, tuple(args), adapt), str(description), task)


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
    if os.path.exists(os.path.expanduser(name.strip())):
        hint = f" {name!r} is a path: to load your own files, pass 'file:{name.strip()}'."
    return DatasetError(
        f"unknown dataset {name!r}.{hint} Valid names: {', '.join(names)} "
        f"(and 'tu:<NAME>' for any TU graph-classification dataset, 'file:<PATH>' for your own graph)"
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


def load(name: str, root: Optional[PathLike] = None, transform: Optional[Callable[[Any], Any]] = None,
         **kwargs: Any) -> Any:
    """Load a registered dataset by name.

    Args:
        name: a name from :func:`list_datasets` (case-insensitive), ``"tu:<NAME>"``, or
            ``"file:<PATH>"`` for a user's own graph (a relative ``PATH`` is read from
            ``root`` when given).
        root: where its files are (or go); ``None`` = ``$SGL_DATA`` or ``~/.sgl/datasets``.
        transform: a callable applied to the loaded dataset before it is returned: to the
            :class:`~sgl.data.Graph` (or :class:`~sgl.data.HeteroGraph`...), and to each graph
            of a :class:`~sgl.datasets.GraphDataset`. It runs once, at load time (PyG's
            ``transform`` runs at every access; for a random augmentation call it per epoch
            instead). A ``torch_geometric`` transform goes through
            :func:`sgl.data.pyg_transform`, e.g. ``transform=pyg_transform(T.NormalizeFeatures())``.
        **kwargs: the dataset's own options (e.g. ``normalize_features=True`` for Planetoid,
            ``split=3`` for Geom-GCN sets, ``num_nodes=10**6`` for ``synthetic``,
            ``features=PATH`` / ``labels=PATH`` for ``file:``).

    Returns:
        A :class:`~sgl.data.Graph` for node-level datasets, a
        :class:`~sgl.datasets.GraphDataset` for graph classification.

    Example:
        >>> import sgl
        >>> sgl.datasets.load("Karate").num_nodes
        34
        >>> sgl.datasets.load("synthetic", num_nodes=500, num_features=8, seed=1).num_nodes
        500
        >>> sgl.datasets.load("karate", transform=lambda g: g.add_self_loops()).num_edges
        190

    Raises:
        DatasetError: the name is unknown (the message lists the closest names).
        ConfigError: an option is unknown to the dataset, or ``transform`` is not callable or
            returns ``None``.
    """
    if transform is not None:
        if not callable(transform):
            raise ConfigError(f"transform must be a callable taking and returning the loaded graph, got "
                              f"{type(transform).__name__}; for a torch_geometric transform pass "
                              f"sgl.data.pyg_transform(T.NormalizeFeatures()) (an instance, wrapped)")
        return _transformed(load(name, root=root, **kwargs), transform)
    if not isinstance(name, str):
        raise DatasetError(f"a dataset name must be a string, got {type(name).__name__}")
    key = _key(name)
    if key.startswith("tu:"):
        from sgl.datasets.tu import load_tu

        tu_name = name.strip()[3:]
        _check_options(name, load_tu, {"name": tu_name, "root": root, **kwargs}, hidden=("root", "name"))
        return load_tu(tu_name, root=root, **kwargs)
    if key.startswith("file:"):
        from sgl.datasets.user_files import load_file

        path = name.strip()[len("file:"):]
        _check_options(name, load_file, {"path": path, "root": root, **kwargs}, hidden=("root", "path"))
        return load_file(path, root=root, **kwargs)
    entry = _REGISTRY.get(key)
    if entry is None:
        raise _unknown(name)
    loader = entry.resolve()
    _check_options(entry.name, loader, {"root": root, **kwargs})
    return loader(root=root, **kwargs)


def _transformed(dataset: Any, transform: Callable[[Any], Any]) -> Any:
    """``transform(dataset)``, or a GraphDataset of ``transform(graph)`` for each of its graphs."""
    from sgl.datasets.graph_dataset import GraphDataset

    def apply(item: Any) -> Any:
        out = transform(item)
        if out is None:
            raise ConfigError(f"the transform {transform!r} returned None; it must return the transformed "
                              f"{type(item).__name__} (end an in-place function with `return graph`)")
        return out

    if isinstance(dataset, GraphDataset):
        return GraphDataset([apply(graph) for graph in dataset.graphs], dataset.labels, name=dataset.name)
    return apply(dataset)


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


def _synthetic_defaults(csbm: Callable[..., Any]) -> Callable[..., Any]:
    """The CSBM generator with Cora's size as the default ``num_nodes``."""

    def synthetic(num_nodes: int = 2708, **kwargs: Any) -> Any:
        return csbm(num_nodes, **kwargs)

    synthetic.__signature__ = inspect.signature(csbm).replace(  # type: ignore[attr-defined]
        parameters=[p.replace(default=2708) if p.name == "num_nodes" else p
                    for p in inspect.signature(csbm).parameters.values()]
    )
    return synthetic


def _register_builtins() -> None:
    from sgl.datasets.catalog import BUILTIN_DATASETS

    for name, target, description, task, args, adapt in BUILTIN_DATASETS:
        register_lazy(name, target, description, task=task, args=args, adapt=adapt)


_register_builtins()
