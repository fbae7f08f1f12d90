"""Automatic hybrid-parallel plan search (Galvatron, Galvatron-BMW, OSDP).

One concept per module:

* :mod:`~sgl.systems.parallel.space` -- the strategy space (Galvatron's decision tree), the cluster shape;
* :mod:`~sgl.systems.parallel.model` -- Transformer shapes and presets;
* :mod:`~sgl.systems.parallel.model_profile` -- :class:`ModelProfile` in Galvatron 3.0 and legacy file layouts;
* :mod:`~sgl.systems.parallel.profiles` -- hardware profiles, the shipped set, estimates (re-exports the model side);
* :mod:`~sgl.systems.parallel.cost` -- the memory/time cost model over those profiles;
* :mod:`~sgl.systems.parallel.dp` -- the vectorised layer-wise dynamic program;
* :mod:`~sgl.systems.parallel.partition` -- pipeline stage splits (even, memory, BMW, exact);
* :mod:`~sgl.systems.parallel.search_config` -- :class:`PlanSearchConfig`, :class:`PlanSearchResult`;
* :mod:`~sgl.systems.parallel.search` -- :class:`PlanSearcher`, :func:`search_plan`;
* :mod:`~sgl.systems.parallel.config_io` -- :class:`Plan` and Galvatron plan JSON.

>>> from sgl.systems.parallel import PlanSearchConfig, PlanSearcher, format_plan
>>> searcher = PlanSearcher(PlanSearchConfig(model="llama-7b", memory_gb=24, batch_sizes=(16,), granularity_mb=64))
>>> plan = searcher.search().plan
>>> plan.to_galvatron()["pp_deg"] >= 1
True
"""
from sgl.systems.parallel.config_io import GALVATRON_PLAN_KEYS, Plan, format_plan, load_plan, save_plan
from sgl.systems.parallel.cost import CostModel, CostOptions, OtherOption
from sgl.systems.parallel.dp import LayerDPResult, best_time_by_budget, brute_force_layers, solve_layers
from sgl.systems.parallel.model import MODEL_PRESETS, TransformerConfig, get_model_config
from sgl.systems.parallel.partition import (even_division, exact_partition, minimax_partition, pipeline_time,
                                            refine_partition)
from sgl.systems.parallel.profiles import (
    BUILTIN_PROFILE_DIR,
    PROFILE_LAYOUTS,
    HardwareProfile,
    ModelProfile,
    estimate_model_profile,
    hardware_profile_names,
    load_builtin_profiles,
    load_hardware_profile,
    load_model_profile,
    model_profile_names,
    save_hardware_profile,
    save_model_profile,
)
from sgl.systems.parallel.search import PlanSearcher, search_plan
from sgl.systems.parallel.search_config import BASELINES, PARTITIONS, PlanSearchConfig, PlanSearchResult
from sgl.systems.parallel.space import SEARCH_SPACES, ClusterSpec, Strategy, enumerate_strategies, space_shards

__all__ = [
    "BASELINES", "BUILTIN_PROFILE_DIR", "ClusterSpec", "CostModel", "CostOptions", "GALVATRON_PLAN_KEYS",
    "HardwareProfile", "LayerDPResult", "MODEL_PRESETS", "ModelProfile", "OtherOption", "PARTITIONS",
    "PROFILE_LAYOUTS", "Plan", "PlanSearchConfig", "PlanSearchResult", "PlanSearcher", "SEARCH_SPACES", "Strategy",
    "TransformerConfig", "best_time_by_budget", "brute_force_layers", "enumerate_strategies", "estimate_model_profile",
    "even_division", "exact_partition", "format_plan", "get_model_config", "hardware_profile_names",
    "load_builtin_profiles", "load_hardware_profile", "load_model_profile", "load_plan", "minimax_partition",
    "model_profile_names", "pipeline_time", "refine_partition", "save_hardware_profile", "save_model_profile",
    "save_plan", "search_plan", "solve_layers", "space_shards",
]
