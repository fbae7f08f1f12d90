"""Mixture-of-Experts training: the MoE layer, expert parallelism on :mod:`sgl.comm`, NetMoE sample
placement, LSH-MoE compression, FlexMoE / LAER-MoE balancing and the FSEP runtime.

One module per job: ``config``/``router``/``experts``/``layer`` (the layer), ``ep`` (EP, padded
dispatch, groups, gradient sync), ``netmoe`` + ``netmoe_runtime`` + ``netmoe_bound`` (the ceiling
of any placement) + ``netmoe_refine`` (min–max swaps), ``lsh`` + ``oracle`` (k-means, the ceiling of centroid compression),
``balance`` + ``fsep``, ``hf`` (:func:`convert`: Hugging Face Mixtral / Qwen2-MoE onto
``MoELayer``), ``grad_sync`` (bucketed gradient all-reduce overlapped with backward),
``topology`` (the α–β all-to-all model), ``traces`` (the on-disk format), ``train`` (the per-rank
loop), ``workload`` (WikiText-2), ``plan`` (modelled reports for ``sgl moe plan``).

>>> import torch
>>> from sgl.systems.moe import MoEConfig, MoELayer
>>> layer = MoELayer(MoEConfig(hidden_size=8, ffn_hidden_size=16, num_experts=4, top_k=2))
>>> layer(torch.randn(3, 8)).shape
torch.Size([3, 8])
"""
from sgl.systems.moe.balance import (CostParams, flexmoe_plan, iteration_time, laer_placement, laer_plan,
                                     laer_replicas, route_tokens, static_layout)
from sgl.systems.moe.config import MoEConfig
from sgl.systems.moe.ep import EPDispatcher, ExpertParallel, PaddedDispatcher, all_to_all_autograd
from sgl.systems.moe.experts import EXPERT_IMPLS, ExpertBank, run_experts
from sgl.systems.moe.fsep import FSEPRuntime, FSEPShard, round_robin_layout
from sgl.systems.moe.grad_sync import BucketedGradSync, all_reduce_flat
from sgl.systems.moe.hf import SUPPORTED_MODEL_TYPES, build_hf_model, convert, load_hf_config
from sgl.systems.moe.layer import (Dispatcher, LocalDispatcher, MoELayer, moe_aux_loss, moe_layers,
                                   update_expert_bias)
from sgl.systems.moe.lsh import CrossPolytopeLSH, LSHDispatcher, lsh_compress
from sgl.systems.moe.netmoe import combine_volume, device_counts, netmoe_placement, original_placement, placement_cost
from sgl.systems.moe.netmoe_bound import placement_lower_bound, placement_lp_bound, relaxed_nodes
from sgl.systems.moe.netmoe_refine import netmoe_refined, refine_placement
from sgl.systems.moe.netmoe_runtime import NetMoEDispatcher
from sgl.systems.moe.oracle import KMeansDispatcher, kmeans_compress
from sgl.systems.moe.router import Assignment, TopKRouter, balance_loss
from sgl.systems.moe.topology import Topology, alltoall_time
from sgl.systems.moe.traces import RoutingTrace, load_laer_loads, load_trace, save_trace, synthetic_trace
from sgl.systems.moe.train import SampleContext, TrainSpec, build_model, build_moe_lm, train_moe_lm
from sgl.systems.moe.workload import WikiTextMoEConfig, run_wikitext_moe, wikitext_batches

__all__ = [
    "MoEConfig", "MoELayer", "TopKRouter", "Assignment", "balance_loss", "ExpertBank", "run_experts", "EXPERT_IMPLS",
    "Dispatcher", "convert", "build_hf_model", "load_hf_config", "SUPPORTED_MODEL_TYPES", "BucketedGradSync",
    "all_reduce_flat",
    "LocalDispatcher", "EPDispatcher", "PaddedDispatcher", "ExpertParallel", "all_to_all_autograd",
    "moe_layers", "moe_aux_loss", "update_expert_bias",
    "Topology", "alltoall_time", "netmoe_placement", "original_placement", "device_counts", "combine_volume",
    "placement_cost", "NetMoEDispatcher", "placement_lower_bound", "placement_lp_bound", "relaxed_nodes",
    "refine_placement", "netmoe_refined",
    "CrossPolytopeLSH", "lsh_compress", "LSHDispatcher", "kmeans_compress", "KMeansDispatcher",
    "CostParams", "static_layout", "route_tokens", "iteration_time", "flexmoe_plan", "laer_replicas",
    "laer_placement", "laer_plan", "FSEPRuntime", "FSEPShard", "round_robin_layout",
    "RoutingTrace", "save_trace", "load_trace", "synthetic_trace", "load_laer_loads",
    "TrainSpec", "SampleContext", "build_moe_lm", "build_model", "train_moe_lm",
    "WikiTextMoEConfig", "wikitext_batches", "run_wikitext_moe",
]
