"""Automatic hybrid-parallel plan search (Galvatron, Galvatron-BMW, OSDP).

>>> from sgl.systems.plan import SearchConfig, PlanSearcher, format_plan
>>> searcher = PlanSearcher(SearchConfig(model="llama-7b", memory_gb=24, batch_sizes=(16,), granularity_mb=64))
>>> plan = searcher.search().plan
>>> plan.to_galvatron()["pp_deg"] >= 1
True
"""
from sgl.systems.plan.config_io import Plan, format_plan, load_plan, save_plan
from sgl.systems.plan.cost import CostModel, CostOptions, OtherOption
from sgl.systems.plan.dp import LayerDPResult, best_time_by_budget, brute_force_layers, solve_layers
from sgl.systems.plan.model import MODEL_PRESETS, TransformerConfig, get_model_config
from sgl.systems.plan.profiles import (
    BUILTIN_PROFILE_DIR,
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
from sgl.systems.plan.search import BASELINES, PARTITIONS, PlanSearcher, SearchConfig, SearchResult, search_plan
from sgl.systems.plan.space import SEARCH_SPACES, ClusterSpec, Strategy, enumerate_strategies

__all__ = [
    "BASELINES", "BUILTIN_PROFILE_DIR", "ClusterSpec", "CostModel", "CostOptions", "HardwareProfile",
    "LayerDPResult", "MODEL_PRESETS", "ModelProfile", "OtherOption", "PARTITIONS", "Plan", "PlanSearcher",
    "SEARCH_SPACES", "SearchConfig", "SearchResult", "Strategy", "TransformerConfig", "best_time_by_budget",
    "brute_force_layers", "enumerate_strategies", "estimate_model_profile", "format_plan", "get_model_config",
    "hardware_profile_names", "load_builtin_profiles", "load_hardware_profile", "load_model_profile", "load_plan",
    "model_profile_names", "save_hardware_profile", "save_model_profile", "save_plan", "search_plan", "solve_layers",
]
