"""Training beyond device memory and surviving lost devices (MEMO, TSPLIT, pages, resharding, partial-reduce).

* :mod:`~sgl.systems.memory.offload` -- :class:`TokenOffloadBlock`, MEMO's token-wise offload/recompute;
* :mod:`~sgl.systems.memory.block_parts` -- a TinyLM block or a Hugging Face decoder layer as its
  attention and token-wise parts (what MEMO and TSPLIT split);
* :mod:`~sgl.systems.memory.alpha` -- :func:`offload_ratio`, the alpha LP, and its measured inputs;
* :mod:`~sgl.systems.memory.trace` -- :class:`AllocTrace`, the tensor-lifetime tracer;
* :mod:`~sgl.systems.memory.dsa` -- the DSA MIP, first/best-fit replays, the sum-of-live bound;
* :mod:`~sgl.systems.memory.tsplit` -- TSPLIT micro-tensor splitting and its keep/split/offload/recompute planner;
* :mod:`~sgl.systems.memory.pages` -- :class:`PagedAdam`, Angel-PTM-style pages over host and SSD;
* :mod:`~sgl.systems.memory.page_train` -- :func:`train_paged` (resumable after SIGKILL), :func:`train_in_memory`;
* :mod:`~sgl.systems.memory.reshard` -- DCP sharded async checkpoints restored into another layout;
* :mod:`~sgl.systems.memory.survivors` -- :func:`replan`, the plan search on exactly the devices left (any count);
* :mod:`~sgl.systems.memory.recovery` -- periodic committed async checkpoints, SIGKILL, resume; steps lost;
* :mod:`~sgl.systems.memory.preduce` -- partial-reduce (group-of-P, staleness-aware averaging over a TCPStore);
* :mod:`~sgl.systems.memory.bilevel` -- MEMO's bi-level plan (one layer, then the whole model).

>>> from sgl.systems.memory import AllocTrace, live_lower_bound
>>> live_lower_bound(AllocTrace([3, 5], [0, 1], [2, 3]))
8
"""
from sgl.systems.memory.alpha import AlphaPlan, measure_offload_inputs, offload_ratio
from sgl.systems.memory.bilevel import BilevelPlan, plan_bilevel
from sgl.systems.memory.dsa import (DSAPlan, best_fit, best_offline, brute_force_dsa, caching_allocator_peak,
                                    check_plan, first_fit, greedy_by_size, live_lower_bound, solve_dsa)
from sgl.systems.memory.offload import HostStore, TokenOffloadBlock, wrap_blocks
from sgl.systems.memory.page_train import train_in_memory, train_paged
from sgl.systems.memory.pages import PagedAdam
from sgl.systems.memory.recovery import (PeriodicCheckpointer, committed_steps, kill_and_resume, latest_checkpoint,
                                        recovery_worker)
from sgl.systems.memory.preduce import (PartialReduce, preduce_worker, regression_problem, staleness_weights,
                                        sync_worker)
from sgl.systems.memory.survivors import SurvivorPlanSearcher, Survivors, plan_layout, replan
from sgl.systems.memory.reshard import (architecture, check_checkpoint, layout_name, layout_plan, model_fingerprint,
                                       restore_worker, save_worker)
from sgl.systems.memory.block_parts import attention_part, blocks_of, layer_kind, tokenwise_part
from sgl.systems.memory.trace import AllocTrace, TensorLifetimeTracer, record_lm_trace, record_trace
from sgl.systems.memory.tsplit import (CodedStore, OpCost, TSplitBlock, TSplitPlan, apply_tsplit, check_quantizer,
                                       plan_tsplit, profile_block_ops, split_apply)

__all__ = [
    # MEMO offload and alpha
    "AlphaPlan", "HostStore", "TokenOffloadBlock", "measure_offload_inputs", "offload_ratio", "wrap_blocks",
    # TinyLM / Hugging Face decoder layers as attention + token-wise parts
    "attention_part", "blocks_of", "layer_kind", "tokenwise_part",
    # traces and DSA plans
    "AllocTrace", "BilevelPlan", "DSAPlan", "TensorLifetimeTracer", "best_fit", "best_offline", "brute_force_dsa",
    "caching_allocator_peak", "check_plan", "first_fit", "greedy_by_size", "live_lower_bound", "plan_bilevel",
    "record_lm_trace", "record_trace", "solve_dsa",
    # TSPLIT
    "CodedStore", "OpCost", "TSplitBlock", "TSplitPlan", "apply_tsplit", "check_quantizer", "plan_tsplit",
    "profile_block_ops", "split_apply",
    # Angel-PTM pages
    "PagedAdam", "train_in_memory", "train_paged",
    # resharding checkpoints
    "SurvivorPlanSearcher", "Survivors", "architecture", "check_checkpoint", "layout_name", "layout_plan", "model_fingerprint",
    "plan_layout", "replan", "restore_worker", "save_worker",
    "PeriodicCheckpointer", "committed_steps", "kill_and_resume", "latest_checkpoint", "recovery_worker",
    # partial-reduce
    "PartialReduce", "preduce_worker", "regression_problem", "staleness_weights", "sync_worker",
]
