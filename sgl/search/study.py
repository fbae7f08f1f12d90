"""Multi-objective search over the design space with optuna (PaSca's search engine).

The optimizer is optuna's multi-objective TPE (``tpe``, default), its Gaussian-process sampler (``gp``:
log-EHVI with several objectives) or NSGA-II (``nsga2``);
``random`` is the baseline; any other optuna sampler object can be passed
(``SearchConfig(sampler=...)``, see :mod:`sgl.search.config`). Studies live in any optuna
storage: in memory, a SQLite file (``study.db`` or ``sqlite:///study.db``) or any RDB URL,
so a search resumes after a crash and several processes or machines can work on one study.
With ``SearchConfig(pruner="halving"|"hyperband")`` every trial reports its validation
accuracy each epoch and unpromising ones end ``PRUNED`` (kept in the study with their design
and the epoch they stopped at, listed in :attr:`SearchResult.pruned`, never on the front).
Every finished trial is committed to the storage as it ends; killing a search loses only the
running trials, which the next run marks ``FAIL`` at once when it runs on the same machine, and
optuna's heartbeat within :data:`~sgl.search.stale.GRACE_PERIOD` seconds otherwise
(:mod:`sgl.search.stale`).

Example:
    >>> import sgl
    >>> from sgl.search import DesignSpace, SearchConfig, run_search, search_train_config
    >>> graph = sgl.datasets.load("karate")
    >>> space = DesignSpace(k=(1, 3), num_layers=(1, 2), hidden=[16], post_steps=(0, 1))
    >>> config = SearchConfig(objectives="accuracy,latency", trials=3, train=search_train_config(epochs=5),
    ...                       progress=False)
    >>> result = run_search(graph, space, config)
    >>> len(result.trials), len(result.front) >= 1
    (3, True)
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from sgl.errors import ConfigError, FeatureError, SearchError
from sgl.search.cache import HopCache
from sgl.search.config import OPTIMIZERS, SearchConfig
from sgl.search.evaluate import EpochPruner
from sgl.search.objectives import Objective, hypervolume_2d, pareto_front, parse_objectives
from sgl.search.space import DesignSpace
from sgl.search.stale import (GRACE_PERIOD, HEARTBEAT_INTERVAL, WORKER_ATTR, fail_dead_trials, report_failed_trial,
                              worker_identity)
from sgl.tasks.config import TrainConfig

__all__ = ["SearchConfig", "SearchResult", "run_search", "open_study", "load_result", "export_config",
           "storage_url", "OPTIMIZERS"]

_META = "sgl_search"


@dataclass
class SearchResult:
    """The completed trials of a study and its Pareto front."""

    study: Any
    objectives: List[Objective]
    trials: List[Dict[str, Any]] = field(default_factory=list)
    cache: Optional[HopCache] = None
    #: trials a pruner stopped: number, design, ``pruned_at_epoch``, ``val_acc`` (best so far)
    pruned: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def front(self) -> List[Dict[str, Any]]:
        return [t for t in self.trials if t["on_front"]]

    def hypervolume(self, reference: Sequence[float], objectives: Sequence[str] = ("accuracy", "latency")) -> float:
        """2-D hypervolume of the completed trials for two of the objectives."""
        directions = []
        for name in objectives:
            match = [o for o in self.objectives if o.name == name]
            if not match:
                raise ConfigError(f"objective {name!r} was not searched; searched: {[o.name for o in self.objectives]}")
            directions.append(match[0].direction)
        return hypervolume_2d([[t["metrics"][n] for n in objectives] for t in self.trials], directions, reference)


def storage_url(storage: Optional[str]) -> Optional[str]:
    """A file path becomes ``sqlite:///<absolute path>``; URLs pass through."""
    if storage is None:
        return None
    text = str(storage)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def _rdb_storage(storage: Optional[str]):
    import optuna

    url = storage_url(storage)
    if url is None:
        return optuna.storages.InMemoryStorage()
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        if path.exists() and path.is_file() and path.stat().st_size > 0:
            with open(path, "rb") as handle:
                if handle.read(16) != b"SQLite format 3\x00":
                    raise SearchError(f"{path} is not a SQLite study file (corrupt or another format); "
                                      f"move it away or pass a different --storage")
        elif not path.parent.is_dir():
            raise SearchError(f"cannot create the study file {path}: folder {path.parent} does not exist")
    try:
        import inspect
        import warnings

        warnings.filterwarnings("ignore", message=".*heartbeat_interval.*")
        # heartbeats let optuna mark trials of a killed process as FAIL instead of RUNNING forever;
        # optuna 4.9 renamed failed_trial_callback to heartbeat_stale_trial_callback
        parameters = inspect.signature(optuna.storages.RDBStorage).parameters
        callback = ("heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in parameters
                    else "failed_trial_callback")
        return _open_rdb(url, heartbeat_interval=HEARTBEAT_INTERVAL, grace_period=GRACE_PERIOD,
                         **{callback: report_failed_trial})
    except Exception as exc:  # sqlalchemy/driver errors: unreachable server, missing driver, corrupt file
        raise SearchError(_storage_failure(url, exc)) from exc


def _storage_failure(url: str, exc: BaseException) -> str:
    """What to fix when a storage does not open: a file's problems for SQLite, the server's otherwise."""
    reason = f"{type(exc).__name__}: {exc}"
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else url
        return (f"cannot open the study file {path}: {reason}. Check that the file is a SQLite study "
                f"written by `sgl search` and that its folder is writable, or pass a different --storage")
    return (f"cannot open search storage {url!r}: {reason}. "
            f"Check the URL, that the server is reachable and its driver installed")


#: what a database says when another worker created optuna's tables a moment earlier
_SCHEMA_RACE = ("already exists", "duplicate key", "unique constraint failed: alembic_version")


def _open_rdb(url: str, attempts: int = 6, **kwargs: Any):
    """``RDBStorage(url)``, retried when workers started together race to create its tables.

    On an empty database every worker's ``RDBStorage`` creates the schema; all but the first
    fail with "relation already exists" / "duplicate key ... pg_type" (optuna issue #1092).
    Once one worker has created it, opening again is a no-op, so a short random back-off
    lets any number of workers start at the same moment.
    """
    import random
    import time

    import optuna

    for attempt in range(1, attempts):
        try:
            return optuna.storages.RDBStorage(url, **kwargs)
        except Exception as exc:  # sqlalchemy IntegrityError / ProgrammingError / OperationalError
            if not any(text in str(exc).lower() for text in _SCHEMA_RACE):
                raise
            time.sleep(random.uniform(0.2, 0.6) * attempt)
    return optuna.storages.RDBStorage(url, **kwargs)


def _make_sampler(config: SearchConfig, offset: int):
    import optuna

    if config.sampler is not None:  # the caller's object, with the caller's seed
        return config.sampler
    seed = config.seed + offset  # a resumed search must not replay the first trials' random draws
    if config.optimizer == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if config.optimizer == "gp":
        # Gaussian-process Bayesian optimisation; log-EHVI acquisition with several objectives. The
        # space's conditional parameters (post-processing op/message) are sampled independently by
        # design (docs/search.md): no warning per trial for that
        return optuna.samplers.GPSampler(n_startup_trials=config.startup_trials, seed=seed,
                                         warn_independent_sampling=False)
    if config.optimizer == "nsga2":
        population = max(4, min(20, config.trials // 3))
        return optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    return optuna.samplers.TPESampler(n_startup_trials=config.startup_trials, seed=seed,
                                      constant_liar=config.n_jobs > 1)


def open_study(storage: Optional[str], study_name: Optional[str] = None, *, create: Optional[Dict[str, Any]] = None,
               config: Optional[SearchConfig] = None):
    """Open (or with ``create`` metadata, create-or-resume) a study.

    Raises :class:`~sgl.errors.SearchError` for unreachable or corrupt storage, an unknown
    study name, or a resume whose objectives/space differ from the stored ones.
    """
    import optuna

    optuna.logging.set_verbosity(logging.WARNING)
    rdb = _rdb_storage(storage)
    try:
        summaries = optuna.get_all_study_summaries(rdb, include_best_trial=False)
    except Exception as exc:
        raise SearchError(f"cannot read studies from {storage_url(storage)!r}: {type(exc).__name__}: {exc}") from exc
    names = [s.study_name for s in summaries]
    if create is None:
        if study_name is None:
            if len(names) != 1:
                raise SearchError(f"{storage} holds {len(names)} studies {names}; pick one with --study NAME")
            study_name = names[0]
        if study_name not in names:
            raise SearchError(f"no study {study_name!r} in {storage}; studies there: {names}")
        return optuna.load_study(study_name=study_name, storage=rdb)
    directions = [o.direction for o in config.objective_list]
    if study_name in names:
        study = optuna.load_study(study_name=study_name, storage=rdb)
        stored = study.user_attrs.get(_META)
        if stored is None:
            raise SearchError(f"study {study_name!r} in {storage} was not created by `sgl search`; use another --study")
        for key in ("objectives", "space", "dataset"):
            if stored.get(key) != create.get(key):
                raise SearchError(f"cannot resume study {study_name!r}: it was created with {key}="
                                  f"{stored.get(key)!r}, this run asks for {create.get(key)!r}. "
                                  f"Use the same settings or a new --study name")
        return study
    study = optuna.create_study(study_name=study_name, storage=rdb, directions=directions,
                                sampler=_make_sampler(config, 0), load_if_exists=True)
    study.set_user_attr(_META, create)
    return study


def _completed(study) -> List[Any]:
    import optuna

    return [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]


def _collect(study, objectives: Sequence[Objective]) -> List[Dict[str, Any]]:
    done = [t for t in _completed(study) if "metrics" in t.user_attrs]
    rows = [{"number": t.number, "values": list(t.values), "design": t.user_attrs["design"],
             "metrics": t.user_attrs["metrics"], "model_config": t.user_attrs.get("model_config")} for t in done]
    front = set(pareto_front([r["values"] for r in rows], [o.direction for o in objectives]))
    for i, row in enumerate(rows):
        row["on_front"] = i in front
    return rows


def _collect_pruned(study) -> List[Dict[str, Any]]:
    import optuna

    return [{"number": t.number, "design": t.user_attrs.get("design"),
             "pruned_at_epoch": t.user_attrs.get("pruned_at_epoch"), "val_acc": t.user_attrs.get("pruned_val_acc")}
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.PRUNED,))]


def _counted_states(config: SearchConfig) -> Tuple[Any, ...]:
    """The trial states ``config.trials`` counts: completed, and pruned too when a pruner runs."""
    import optuna

    states = optuna.trial.TrialState
    return (states.COMPLETE,) if config.pruner == "none" else (states.COMPLETE, states.PRUNED)


def make_pruner(config: SearchConfig) -> Optional[EpochPruner]:
    """The config's :class:`~sgl.search.evaluate.EpochPruner` (None for ``pruner="none"``)."""
    if config.pruner == "none":
        return None
    return EpochPruner(config.pruner, config.min_epochs, config.train.epochs, config.reduction_factor)


def load_result(storage: Optional[str], study_name: Optional[str] = None) -> SearchResult:
    """Re-read a stored study (``sgl search show``)."""
    study = open_study(storage, study_name)
    meta = study.user_attrs.get(_META) or {}
    objectives = parse_objectives(meta.get("objectives") or [])
    return SearchResult(study, objectives, _collect(study, objectives), pruned=_collect_pruned(study))


def run_search(graph: Any, space: Optional[DesignSpace] = None, config: Optional[SearchConfig] = None, *,
               dataset: Optional[str] = None, root: Optional[str] = None,
               dataset_options: Optional[Dict[str, Any]] = None, cache: Optional[HopCache] = None) -> SearchResult:
    """Search ``space`` on ``graph`` until the study has ``config.trials`` completed trials
    (or ``config.timeout`` passes); returns all completed trials with the Pareto front.

    ``dataset``/``root``/``dataset_options`` are stored so ``sgl search export`` can write a
    config that ``sgl train --config`` runs; pass them when the graph came from the registry.
    """
    import optuna

    space = space or DesignSpace()
    from sgl.search.hetero import search_parts  # a HeteroGraph searches the heterogeneous space

    space, evaluator_class = search_parts(graph, space)
    config = config or SearchConfig()
    _check_graph(graph)
    name = dataset or getattr(graph, "name", None) or "graph"
    meta = {"dataset": name, "root": root, "dataset_options": dict(dataset_options or {}),
            "objectives": config.objectives, "space": space.to_dict(), "train": _train_dict(config),
            "seed": config.seed, "optimizer": config.optimizer}
    if config.pruner != "none":  # older studies have no such key; resuming with another pruner is allowed
        meta["pruner"] = {"kind": config.pruner, "min_epochs": config.min_epochs,
                          "reduction_factor": config.reduction_factor}
    study_name = config.study_name or f"sgl-{name}"
    study = open_study(config.storage, study_name, create=meta, config=config)
    fail_dead_trials(study)  # trials a killed run left RUNNING, before they confuse the count or the sampler
    study.sampler = _make_sampler(config, len(study.get_trials(deepcopy=False)))
    evaluator = evaluator_class(graph, space, config.train_config(), cache=cache)
    names = [o.name for o in config.objective_list]
    pruner = make_pruner(config)
    counted = _counted_states(config)

    owner = worker_identity()

    def objective(trial) -> Tuple[float, ...]:
        trial.set_user_attr(WORKER_ATTR, owner)
        design = space.suggest(trial)
        trial.set_user_attr("design", design)
        trial.set_user_attr("model_config", space.to_model_config(design))
        metrics = evaluator.evaluate(design, seed=config.seed, on_epoch=_pruning_hook(pruner, trial))
        trial.set_user_attr("metrics", metrics)
        return tuple(metrics[n] for n in names)

    remaining = config.trials - len(study.get_trials(deepcopy=False, states=counted))
    if remaining > 0:
        previous_threads = torch.get_num_threads()
        if config.threads is not None:
            torch.set_num_threads(config.threads)
        bar = None
        if config.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=config.trials, initial=config.trials - remaining, desc=f"search {study_name}",
                       unit="trial", disable=None)

        best = [0.0]  # best validation accuracy this process has seen (the bar's postfix)

        def on_trial(study_, trial_) -> None:
            if bar is not None and trial_.state in counted:
                bar.update(1)
                if trial_.state == optuna.trial.TrialState.COMPLETE:
                    best[0] = max(best[0], trial_.user_attrs["metrics"]["accuracy"])
                bar.set_postfix(best_val=f"{best[0]:.4f}")

        stop = optuna.study.MaxTrialsCallback(config.trials, states=counted)
        try:
            # failed trials (a design that diverges) do not count; cap attempts so a broken space cannot loop forever
            study.optimize(objective, n_trials=3 * remaining + 10, timeout=config.timeout, n_jobs=config.n_jobs,
                           catch=(FeatureError,), callbacks=[stop, on_trial], gc_after_trial=False)
        finally:
            if bar is not None:
                bar.close()
            torch.set_num_threads(previous_threads)
    return SearchResult(study, config.objective_list, _collect(study, config.objective_list), evaluator.cache,
                        pruned=_collect_pruned(study))


def _pruning_hook(pruner: Optional[EpochPruner], trial: Any):
    """The per-epoch report of one trial: the best validation accuracy so far, judged at each rung."""
    if pruner is None:
        return None
    import optuna

    best = [-math.inf]

    def on_epoch(epochs_done: int, val_acc: float) -> None:
        best[0] = max(best[0], val_acc)
        if pruner.should_prune(trial, epochs_done, best[0]):
            trial.set_user_attr("pruned_at_epoch", epochs_done)
            trial.set_user_attr("pruned_val_acc", best[0])
            raise optuna.TrialPruned(f"validation accuracy {best[0]:.4f} after {epochs_done} epochs is not in the "
                                     f"top 1/{pruner.reduction_factor} of its rung")

    return on_epoch


def _check_graph(graph: Any) -> None:
    """Fail before the first trial, not once per trial: a search needs features, labels, train and val nodes."""
    if getattr(graph, "x", None) is None:
        raise FeatureError("the graph has no node features (graph.x); a search propagates features")
    y = getattr(graph, "y", None)
    if y is None or y.dim() != 1 or y.is_floating_point():
        raise FeatureError("a search needs integer node labels graph.y of shape [num_nodes]")
    for split in ("train", "val"):
        mask = getattr(graph, f"{split}_mask", None)
        if mask is None or not bool(mask.any()):
            raise FeatureError(f"the graph has no {split} nodes ({split}_mask missing or empty); the search "
                               f"trains on train nodes and scores designs on validation nodes")


def _train_dict(config: SearchConfig) -> Dict[str, Any]:
    """The training a replay of a trial needs (``sgl search export``): no device or progress bar,
    and batch sizes only where they differ from :class:`TrainConfig`'s defaults."""
    train = config.train_config().to_dict()
    del train["progress"], train["device"]
    defaults = TrainConfig().to_dict()
    for key in ("batch_size", "eval_batch_size"):
        if train[key] == defaults[key]:
            del train[key]
    return train


def export_config(study, trial_number: int, seeds: int = 5) -> Dict[str, Any]:
    """The ``sgl train --config`` run config of one completed trial."""
    meta = study.user_attrs.get(_META)
    if meta is None:
        raise SearchError("this study was not created by `sgl search`; it holds no run settings to export")
    matches = [t for t in _completed(study) if t.number == trial_number]
    if not matches:
        numbers = [t.number for t in _completed(study)]
        raise SearchError(f"no completed trial {trial_number} in study {study.study_name!r}; "
                          f"completed trials: {numbers[:20]}{' ...' if len(numbers) > 20 else ''}")
    from sgl.search.hetero import space_from_dict  # SGAP or heterogeneous space

    space = space_from_dict(meta["space"])
    model = space.model_name(matches[0].user_attrs["design"]) if hasattr(space, "model_name") else "sgap"
    return {"model": model, "dataset": meta["dataset"], "root": meta.get("root"),
            "dataset_options": meta.get("dataset_options") or {}, "seeds": seeds,
            "model_config": space.to_model_config(matches[0].user_attrs["design"]),
            "train": dict(meta["train"])}


def dumps_config(config: Mapping[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=False)
