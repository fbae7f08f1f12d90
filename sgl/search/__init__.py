"""PaSca auto-search: the SGAP design space, measured objectives, multi-objective optimizer.

    sgl search --dataset cora --root DIR --objectives accuracy,latency --trials 60 --storage study.db
    sgl search show study.db
    sgl search export study.db --trial 17 > best.yaml && sgl train --config best.yaml

Rooms: ``space`` (the design space), ``objectives`` (what a trial measures), ``cache``
(shared precomputed hops), ``evaluate`` (train and measure one design), ``config``
(:class:`SearchConfig`, containing the trials' :class:`~sgl.tasks.config.TrainConfig`;
any optuna sampler), ``study`` (run, resume and export studies), ``report`` (files and tables),
``hetero`` (the design space and evaluator of the heterogeneous models).
"""
from sgl.search.cache import HopCache
from sgl.search.config import OPTIMIZERS, PRUNERS, SEARCH_TRAIN_DEFAULTS, SearchConfig, search_train_config
from sgl.search.evaluate import DesignEvaluator, EpochPruner
from sgl.search.objectives import OBJECTIVES, MemoryMeter, Objective, hypervolume_2d, pareto_front, parse_objectives
from sgl.search.space import GRAPH_OPERATORS, POST_MESSAGES, POST_OPERATORS, DesignSpace, Knob
from sgl.search.variants import VARIANTS, deploy_variant
from sgl.search.study import (SearchResult, export_config, load_result, make_pruner, open_study, run_search,
                              storage_url)

__all__ = [
    "DesignSpace", "Knob", "GRAPH_OPERATORS", "POST_OPERATORS", "POST_MESSAGES",
    "Objective", "OBJECTIVES", "parse_objectives", "pareto_front", "hypervolume_2d", "MemoryMeter",
    "HopCache", "DesignEvaluator",
    "SearchConfig", "SearchResult", "run_search", "open_study", "load_result", "export_config", "storage_url",
    "OPTIMIZERS", "search_train_config", "SEARCH_TRAIN_DEFAULTS", "PRUNERS", "EpochPruner", "make_pruner",
    "VARIANTS", "deploy_variant",
]
