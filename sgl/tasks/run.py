"""``run(config) -> record``: the one library entry point behind ``sgl train``.

:func:`run` takes a :class:`~sgl.tasks.RunConfig`, loads the dataset, builds the model,
trains it over the seeds on the path the config names (full-graph or sampled node
classification, out-of-core training, structure learning first, RLU stages, link prediction
(a zoo model as encoder with a pair decoder, or a self-supervised model's embeddings),
clustering, graph classification, CTR; a self-supervised model under task ``node``: pre-training,
then a linear probe) and returns the run record: ``{"config": ..., **results}``, whose
``"config"`` replays the run exactly (``run(RunConfig.from_dict(record["config"]))``). Every
record also carries ``sgl_version``, ``torch_version`` and the ``dataset_hash`` of the data it
ran on (:mod:`sgl.tasks.provenance`).

Example:
    >>> from sgl.tasks import RunConfig, run
    >>> record = run(RunConfig.from_dict({"dataset": "karate", "seeds": 2, "train": {"epochs": 5}}),
    ...              progress=False)
    >>> record["config"]["model"], len(record["runs"]), len(record["dataset_hash"])
    ('sgc', 2, 32)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional

from sgl.errors import ConfigError
from sgl.tasks.provenance import run_provenance, store_hash
from sgl.tasks.run_config import RunConfig
from sgl.tasks.run_parts import check_node_dataset as _check_node_dataset
from sgl.tasks.run_parts import describe as _describe
from sgl.tasks.run_parts import record as _record
from sgl.tasks.run_parts import sampled_setup as _sampled_setup

__all__ = ["run", "ssl_factory"]

Log = Callable[[str], None]


def run(config: RunConfig, log: Optional[Log] = None, progress: bool = True) -> Dict[str, Any]:
    """Run ``config``; ``log`` receives one line per stage (dataset, model, ...), e.g. ``print``."""
    if not isinstance(config, RunConfig):
        raise ConfigError(f"run() takes a RunConfig (RunConfig.from_dict(...) reads a mapping), got "
                          f"{type(config).__name__}")
    if config.procs > 1:  # several processes: spawn them, or join torchrun's (sgl.tasks.dist_run)
        from sgl.tasks.dist_run import run_distributed

        return run_distributed(config, log, progress)
    log = log or (lambda line: None)
    if config.train is not None:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, progress=progress))
    if config.task == "node" and config.self_supervised:
        return _run_probe(config, log, progress)
    if config.task == "node":
        return _run_node(config, log, progress)
    if config.task == "ctr":
        return _run_ctr(config, log)
    if config.supervised_link:
        return _run_link(config, log)
    return _run_ssl(config, log, progress)


# ---------------------------------------------------------------------------- node classification
def _run_node(config: RunConfig, log: Log, progress: bool) -> Dict[str, Any]:
    if config.sampler is not None and config.sampler.out_of_core:
        from sgl.tasks.outofcore import run_out_of_core

        record = run_out_of_core(config, log, progress)
        return {**record, **run_provenance(data_hash=lambda: store_hash(str(config.dataset)[len("store:"):]))}
    import sgl.datasets

    _check_node_dataset(config.dataset)
    if config.sampler is not None:
        return _run_sampled(config, log)
    from sgl.models import build_model, model_config
    from sgl.tasks.node_runs import run_node_classification

    model_cfg = model_config(config.model, **config.model_config)
    graph = sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)
    log(f"dataset: {config.dataset} ({_describe(graph)})")
    if config.structure is not None:
        graph = _learn_structure(config, graph, log, progress)

    from sgl.models.hetero import model_input

    def factory():  # a heterogeneous model is built from the HeteroGraph itself
        return build_model(config.model, model_input(config.model, graph), graph.num_classes, model_cfg)

    log(f"model: {factory()!r}")
    source = getattr(graph, "condensed_from", None)
    if isinstance(source, dict) and source.get("dataset"):  # GCond's protocol: train here, validate/test on the source
        from sgl.tasks.condense_eval import run_condensed

        if config.distill is not None:
            raise ConfigError("--distill-from does not combine with a condensed dataset; train the student on the "
                              "real graph")
        real = sgl.datasets.load(source["dataset"], root=config.root or source.get("root"))
        log(f"condensed from {source['dataset']} ({source.get('method')}); validation and test on its split")
        results = run_condensed(factory, graph, real, config.seeds, config.train)
        return _record(dataclasses.replace(config, model_config=model_cfg.to_dict()), results, graph)
    if config.distill is not None:
        from sgl.tasks.distill import run_distillation

        results = run_distillation(config, graph, factory, log, progress)
        return _record(dataclasses.replace(config, model_config=model_cfg.to_dict()), results, graph)
    results = run_node_classification(factory, graph, config.seeds, config.train, cache_dir=config.cache_dir,
                                      rlu_config=config.rlu)
    return _record(dataclasses.replace(config, model_config=model_cfg.to_dict()), results, graph)


def _learn_structure(config: RunConfig, graph: Any, log: Log, progress: bool) -> Any:
    from sgl.models.gsl import structure_learner
    from sgl.tasks.structure_learning import learn_structure

    s = config.structure
    learner = structure_learner(s.name, progress=progress, **s.options)
    before = graph.num_edges
    pseudo, how = None, ""
    if s.pseudo:
        from sgl.tasks.pseudo_labels import model_pseudo_labels

        pseudo = model_pseudo_labels(graph, s.pseudo, s.pseudo_seeds, device=config.train.device)
        how = f" with {s.pseudo} x{s.pseudo_seeds} pseudo-labels"
    graph = learn_structure(learner, graph, pseudo_labels=pseudo)
    log(f"structure: {s.name} {s.options or ''}{how} -> {graph.num_edges:,} edges (was {before:,})")
    return graph


def _run_sampled(config: RunConfig, log: Log) -> Dict[str, Any]:
    import sgl.datasets
    from sgl.samplers.models import SampledGNN
    from sgl.tasks.minibatch import run_minibatch_node_classification

    sampler_cfg, options, resolved = _sampled_setup(config)
    graph = sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)
    log(f"dataset: {config.dataset} ({_describe(graph)})")

    def factory() -> SampledGNN:
        return SampledGNN(graph.num_features, graph.num_classes, conv=config.model, **options)

    log(f"model: {factory()!r}, sampler: {sampler_cfg.sampler} fanouts {sampler_cfg.fanouts}")
    results = run_minibatch_node_classification(factory, graph, config.seeds, config.train, sampler_cfg)
    return _record(resolved, results, graph)


# ---------------------------------------------------------------------------- self-supervised tasks
def ssl_factory(name: str, in_features: int, overrides: Dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument factory of self-supervised model ``name`` (config checked right away)."""
    from sgl.models.ssl import build_ssl_model, ssl_model_config

    config = ssl_model_config(name, **overrides)
    return lambda: build_ssl_model(name, in_features, config)


def _run_probe(config: RunConfig, log: Log, progress: bool) -> Dict[str, Any]:
    """Node classification by a self-supervised model: pre-train per seed, then the linear probe."""
    import sgl.datasets
    from sgl.tasks.linear_probe import run_linear_probe

    _check_node_dataset(config.dataset)
    graph = sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)
    log(f"dataset: {config.dataset} ({_describe(graph)})")
    factory = ssl_factory(config.model, graph.num_features, config.model_config)
    opts = config.task_options
    log(f"model: {factory()!r}; linear probe: {opts['probe_epochs']} epochs, lr {opts['probe_lr']}, weight decay "
        f"{opts['probe_weight_decay']}, {'standardised' if opts['probe_standardize'] else 'raw'} embeddings")
    results = run_linear_probe(factory, graph, config.seeds, lr=opts["probe_lr"],
                               weight_decay=opts["probe_weight_decay"], epochs=opts["probe_epochs"],
                               standardize=opts["probe_standardize"], progress=progress)
    return _record(config, results, graph)


def _run_ssl(config: RunConfig, log: Log, progress: bool) -> Dict[str, Any]:
    import sgl.datasets
    from sgl.data import Graph

    data = sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)
    opts = config.task_options
    if config.task == "graph":
        from sgl.tasks.graph_classification import run_graph_classification

        if isinstance(data, Graph):
            raise ConfigError(f"dataset {config.dataset!r} is a single graph; graph classification needs a "
                              f"collection such as mutag or proteins")
        factory = ssl_factory(config.model, data.num_features, config.model_config)
        log(f"dataset: {config.dataset} ({len(data)} graphs, {data.num_classes} classes); model: {factory()!r}")
        results = run_graph_classification(factory, data, config.seeds, opts["folds"], opts["pooling"],
                                           opts["classifier"], progress=progress)
    elif config.task == "link":
        from sgl.tasks.link_prediction import run_link_prediction

        if not isinstance(data, Graph):
            raise ConfigError(f"dataset {config.dataset!r} is a graph collection; link prediction needs one graph")
        if getattr(data, "link_split", None) is not None:
            raise ConfigError(f"dataset {config.dataset!r} comes with its own edge split, which self-supervised link "
                              f"prediction (a random split) would discard; train a supervised encoder on it instead "
                              f"(--model gcn, sage, sgc, gamlp...)")
        factory = ssl_factory(config.model, data.num_features, config.model_config)
        log(f"dataset: {config.dataset} ({data.num_nodes:,} nodes, {data.num_edges:,} edges); model: {factory()!r}")
        results = run_link_prediction(factory, data, config.seeds, opts["val_ratio"], opts["test_ratio"],
                                      progress=progress)
    else:
        from sgl.tasks.clustering import run_clustering

        if not hasattr(data, "num_nodes"):
            raise ConfigError(f"dataset {config.dataset!r} is a graph collection; node clustering needs one graph")
        if isinstance(opts["n_init"], bool) or not isinstance(opts["n_init"], int) or opts["n_init"] < 1:
            raise ConfigError(f"--cluster-n-init must be >= 1, got {opts['n_init']}")
        factory = ssl_factory(config.model, data.num_features, config.model_config)
        log(f"dataset: {config.dataset} ({data.num_nodes:,} nodes, {data.num_classes} classes); model: {factory()!r}")
        results = run_clustering(factory, data, config.seeds, n_init=opts["n_init"], progress=progress)
    return {"task": config.task, "model": config.model, "dataset": config.dataset, **_record(config, results, data)}


# ---------------------------------------------------------------------------- supervised link prediction
def _run_link(config: RunConfig, log: Log) -> Dict[str, Any]:
    """A zoo model as link encoder + a pair decoder (:mod:`sgl.tasks.link_supervised`)."""
    import sgl.datasets
    from sgl.data import Graph
    from sgl.models import build_model, model_config
    from sgl.tasks.link_supervised import run_supervised_link_prediction

    model_cfg = model_config(config.model, **config.model_config)
    graph = sgl.datasets.load(config.dataset, root=config.root, **config.dataset_options)
    if not isinstance(graph, Graph):
        raise ConfigError(f"dataset {config.dataset!r} is not a single homogeneous graph; link prediction needs one")
    if graph.x is None:
        raise ConfigError(f"dataset {config.dataset!r} has no node features, which --model {config.model} encodes; "
                          f"pick a dataset with features (self-supervised models need them too)")
    opts = dict(config.task_options)
    width = opts.pop("embed_dim")
    split = getattr(graph, "link_split", None)
    log(f"dataset: {config.dataset} ({graph.num_nodes:,} nodes, {graph.num_edges:,} edges, {graph.num_features} "
        f"features; {'its own edge split, ' + split.metric if split is not None else 'random edge split, auc'} "
        f"selects the epoch)")

    def factory() -> Any:
        return build_model(config.model, graph.num_features, width, model_cfg)

    log(f"model: {factory()!r} -> {opts['decoder']} decoder")
    results = run_supervised_link_prediction(factory, graph, config.seeds, config.train, **opts)
    return {"task": "link", "model": config.model, "dataset": config.dataset,
            **_record(dataclasses.replace(config, model_config=model_cfg.to_dict()), results, graph)}


# ---------------------------------------------------------------------------- CTR
def _run_ctr(config: RunConfig, log: Log) -> Dict[str, Any]:
    from sgl.tasks.ctr_run import run_ctr_config  # also the rank body of --procs (HET / HET-GMP workers)

    return run_ctr_config(config, log)
