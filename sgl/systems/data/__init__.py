"""Data organisation for LLM training: DataSculpt context-window packing and its baselines.

* :mod:`~sgl.systems.data.corpus` — documents (WikiText-2 sections, text/JSONL folders, chunked reads);
* :mod:`~sgl.systems.data.embed` — TF-IDF + SVD embeddings, or any encoder;
* :mod:`~sgl.systems.data.cluster` — faiss spherical k-means and the ISODATA variant;
* :mod:`~sgl.systems.data.packing` — the :class:`Packing` type, overlong policy, greedy / BFD /
  concatenation packers, the ICLM similarity chain;
* :mod:`~sgl.systems.data.datasculpt` — the pipeline (:func:`pack_documents`, :func:`pack_arrays`);
* :mod:`~sgl.systems.data.stream` — the same pipeline over a corpus larger than memory;
* Spindle — :mod:`~sgl.systems.data.spindle_dag` (operator DAG, scaling curves, waves),
  :mod:`~sgl.systems.data.spindle_alloc` (makespan bisection, rounding, lane packing),
  :mod:`~sgl.systems.data.spindle_sim` (links, replay, checks), :mod:`~sgl.systems.data.spindle`
  (planner, device mapping, baselines);
* LobRA — :mod:`~sgl.systems.data.lora` and :mod:`~sgl.systems.data.lora_train` (multi-LoRA on
  one frozen model, the joint training loop; import torch, so not re-exported here),
  :mod:`~sgl.systems.data.lobra` (replica MILP, dispatch, replay), :mod:`~sgl.systems.data.lobra_study`
  (comparison, lower bounds), :mod:`~sgl.systems.data.lobra_pool` (the LoRA memory model's scheme pool),
  :mod:`~sgl.systems.data.lobra_search` (replica-set hill climb), :mod:`~sgl.systems.data.lobra_dynamic`
  (per-step reconfiguring plan);
* plans executed on processes (import torch, so loaded on first use): :mod:`~sgl.systems.data.lobra_runtime`
  (replica sets with per-task adapters, per-step dispatch, per-adapter gradient groups),
  :mod:`~sgl.systems.data.lobra_models` (the LoRA-wrapped TinyLM or Hugging Face Llama base),
  :mod:`~sgl.systems.data.lobra_dynamic_run` (the dynamic plan re-planned and executed step by step),
  :mod:`~sgl.systems.data.lobra_measure` (:func:`measure_lobra`), :mod:`~sgl.systems.data.spindle_model`
  (a multi-task multi-modal model with real encoders; :mod:`~sgl.systems.data.spindle_hf` its Hugging Face
  Llama LM tower), :mod:`~sgl.systems.data.spindle_runtime` (the
  wavefront schedule on processes), :mod:`~sgl.systems.data.spindle_measure` (:func:`measure_spindle`).

>>> from sgl.systems.data import PackConfig, pack_documents
>>> r = pack_documents(["a b c"] * 4, PackConfig(window=6, method="bfd"))
>>> r.metrics["windows"], r.metrics["fill_rate"]
(2, 1.0)
"""
from sgl.systems.data.cluster import assign_clusters, isodata_centroids, kmeans_centroids
from sgl.systems.data.corpus import (iter_corpus, read_corpus, tokenizer_lengths, whitespace_tokens,
                                     wikitext2_sections)
from sgl.systems.data.datasculpt import PACK_METHODS, PackConfig, PackResult, pack_arrays, pack_documents
from sgl.systems.data.embed import HiddenStateEncoder, TfidfSvdEncoder
from sgl.systems.data.lobra_dynamic import dynamic_replay, lobra_dynamic_compare
from sgl.systems.data.lobra_pool import lobra_pool, lora_pool
from sgl.systems.data.lobra_search import search_candidates
from sgl.systems.data.lobra_study import (best_homogeneous, compute_ceiling, gpu_seconds_lower_bound, lobra_compare,
                                          replica_sets, static_plan_bound, step_time_bound)
from sgl.systems.data.metrics import packing_metrics
from sgl.systems.data.packing import OVERLONG_POLICIES, Packing, bfd_assign, concat_segments, greedy_assign
from sgl.systems.data.spindle import (SpindleConfig, SpindlePlanner, SpindleResult, big_pipeline, compare_baselines,
                                      even_split, spindle_lower_bound)
from sgl.systems.data.spindle_alloc import continuous_makespan, pack_wave, round_allocation
from sgl.systems.data.spindle_map import exact_mapping, mapping_cost
from sgl.systems.data.spindle_dag import ScalingCurve, SpindleOp, TaskDAG, load_dag, mtmm_dag
from sgl.systems.data.spindle_sim import LinkModel, Schedule, replay, validate_schedule
from sgl.systems.data.stream import pack_stream

__all__ = ["PackConfig", "PackResult", "PACK_METHODS", "pack_documents", "pack_arrays", "pack_stream", "Packing",
           "OVERLONG_POLICIES", "greedy_assign", "bfd_assign", "concat_segments", "packing_metrics",
           "TfidfSvdEncoder", "HiddenStateEncoder", "kmeans_centroids", "isodata_centroids", "assign_clusters",
           "iter_corpus", "read_corpus", "wikitext2_sections", "whitespace_tokens", "tokenizer_lengths",
           "ScalingCurve", "SpindleOp", "TaskDAG", "load_dag", "mtmm_dag", "continuous_makespan", "round_allocation",
           "pack_wave", "LinkModel", "Schedule", "replay", "validate_schedule", "SpindleConfig", "SpindlePlanner",
           "SpindleResult", "big_pipeline", "even_split", "compare_baselines", "spindle_lower_bound",
           "lobra_compare", "best_homogeneous", "compute_ceiling", "gpu_seconds_lower_bound", "replica_sets",
           "step_time_bound", "static_plan_bound", "lora_pool", "lobra_pool", "search_candidates", "dynamic_replay",
           "lobra_dynamic_compare",
           "exact_mapping", "mapping_cost",
           "LobraStep", "LobraRuntime", "plan_step", "replica_layout", "measure_lobra", "MultiModalModel",
           "spindle_dag", "ExecPlan", "SpindleRuntime", "spindle_exec_plan", "big_pipeline_plan", "even_split_plan",
           "measure_spindle", "build_lora_base", "DynamicLobraPlanner", "run_dynamic", "LlamaTower"]

#: names whose modules import torch: loaded on first access so ``import sgl.systems.data`` stays light
_LAZY = {"LobraStep": "lobra_runtime", "LobraRuntime": "lobra_runtime", "plan_step": "lobra_runtime",
         "replica_layout": "lobra_runtime", "measure_lobra": "lobra_measure", "MultiModalModel": "spindle_model",
         "spindle_dag": "spindle_model", "ExecPlan": "spindle_runtime", "SpindleRuntime": "spindle_runtime",
         "spindle_exec_plan": "spindle_runtime", "big_pipeline_plan": "spindle_runtime",
         "even_split_plan": "spindle_runtime", "measure_spindle": "spindle_measure",
         "build_lora_base": "lobra_models", "DynamicLobraPlanner": "lobra_dynamic_run",
         "run_dynamic": "lobra_dynamic_run", "LlamaTower": "spindle_hf"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"sgl.systems.data.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
