"""Training plans for variable-length sequences (FlexSP, Hydraulis, dynamic DP×CP mesh, per-step
switching, Malleus) on one shared skeleton: length histogram → per-sequence cost ``a·s² + b·s + c``
and memory model → a planner → a plan the runtime can execute.

Stable building blocks (reused by other planners):

* :mod:`~sgl.systems.seq.lengths` -- :func:`read_lengths`, :func:`corpus_lengths`,
  :class:`LengthHistogram`, :class:`GlobalBatchSampler`;
* :mod:`~sgl.systems.seq.cost` -- :class:`SeqStrategy`, :class:`StrategyCost`,
  :class:`SeqCostModel`, the presets :func:`flexsp_cost_model` and :func:`hydraulis_pool`.

Planners: :class:`FlexSPPlanner` (blaster + bucketing + MILP, homogeneous baselines),
:class:`HydraulisPlanner` (replica DP, stage-1 dispatch, stage-2 packing ILP),
:class:`DynamicMeshPlanner` (per-micro-batch DP×CP groupings with regrouping cost) -- all return a
:class:`StepPlan` (``validate``, ``to_dict``, ``device_load``) -- :class:`SwitchingPlanner`
(one strategy per step, switching cost, Viterbi) and :class:`MalleusPlanner` (straggler-aware
TP grouping, pipeline layouts, layer / micro-batch ILPs, re-planning with migration volume).

Calibration: :func:`calibrate_machine` measures this machine (attention's quadratic term, linear
layers, a per-micro-batch constant, memory per token, α/β of all-reduce, all-to-all and send/recv)
into a :class:`MachineProfile` (JSON, ``sgl plan calibrate``) whose ``seq_cost_model()`` /
``malleus_model()`` the planners accept; :func:`predict_step_ms` is a plan's predicted step time.

Runtime on :mod:`sgl.comm` (correctness, CPU/gloo): :func:`ulysses_attention`, :func:`ring_attention`,
packed varlen masks (:func:`cu_seqlens`, :func:`varlen_attention`) and
:func:`sequence_parallel_block` for the small Transformer's layer.  Plans run:
:class:`VarlenStepExecutor` executes any of these planners' step plans on N processes (mixed SP
degrees, Ulysses or ring per group, :func:`as_exec_plan` for the dict form), equal to
:func:`single_process_step`; :func:`measure_planners` measures planners against static strategies
with a cost model fitted on this machine (:class:`FittedCostModel`).

>>> from sgl.systems.seq import GlobalBatchSampler, flexsp_cost_model
>>> batch = GlobalBatchSampler([512, 1024, 30000], batch_size=8, seed=0).batches(1)[0]
>>> pool = flexsp_cost_model(devices=16).sp_pool(minimum=2)
>>> [p.label for p in pool][:2]
['tp1-pp1-sp2-z3', 'tp1-pp1-sp4-z3']
"""
from sgl.systems.seq.calibrate import calibrate_cost_model
from sgl.systems.seq.compare import Comparison, compare
from sgl.systems.seq.exec_plan import ExecGroup, ExecPlan, as_exec_plan
from sgl.systems.seq.fitted_cost import BudgetedCostModel, FittedCostModel, executed_step_ms, fit_strategy
from sgl.systems.seq.cost import (FLEXSP_ALLTOALL_GBPS, SeqCostModel, SeqHardware, SeqModelSpec, SeqStrategy,
                                  StrategyCost, flexsp_cost_model, hydraulis_pool, longest_supported)
from sgl.systems.seq.flexsp import FlexSPPlanner, check_fits
from sgl.systems.seq.hydraulis import HydraulisPlanner, Replica
from sgl.systems.seq.lengths import GlobalBatchSampler, LengthHistogram, check_lengths, corpus_lengths, read_lengths
from sgl.systems.seq.malleus import MalleusModel, MalleusPlan, MalleusPlanner, hybrid_layouts, plan_any_layout
from sgl.systems.seq.malleus_oracle import oracle_ceiling
from sgl.systems.seq.mesh import DynamicMeshPlanner
from sgl.systems.seq.plan import GroupWork, StepPlan
from sgl.systems.seq.profile import LinkFit, MachineProfile, predict_step_ms
from sgl.systems.seq.profile_fit import calibrate_machine
from sgl.systems.seq.straggler import check_rates, measure_rates, straggler_setting, straggling_rates
from sgl.systems.seq.switching import SwitchingPlanner, SwitchingResult, switch_pool

#: the torch runtime (imported on first use, so the planners load without torch)
_RUNTIME = {"ulysses_attention": "ulysses", "ring_attention": "ring", "cu_seqlens": "varlen",
            "varlen_attention": "varlen", "sequence_parallel_block": "sp_block",
            "sequence_parallel_lm": "sp_block", "VarlenStepExecutor": "executor", "StepResult": "executor",
            "single_process_step": "executor", "varlen_lm": "executor", "document_attention": "doc_attention",
            "document_ulysses_attention": "doc_attention", "document_ring_attention": "doc_attention",
            "measure_planners": "measure", "MeasureSetup": "measure", "MeasureResult": "measure",
            "VARLEN_ARCHS": "executor", "build_varlen_model": "executor", "hf_varlen_lm": "hf_varlen"}


def __getattr__(name: str):
    if name in _RUNTIME:
        import importlib

        return getattr(importlib.import_module(f"sgl.systems.seq.{_RUNTIME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["read_lengths", "corpus_lengths", "LengthHistogram", "GlobalBatchSampler", "check_lengths",
           "SeqStrategy", "StrategyCost", "SeqModelSpec", "SeqHardware", "SeqCostModel", "flexsp_cost_model",
           "hydraulis_pool", "longest_supported", "FLEXSP_ALLTOALL_GBPS", "FlexSPPlanner", "check_fits",
           "HydraulisPlanner", "Replica", "GroupWork", "StepPlan", "DynamicMeshPlanner", "SwitchingPlanner",
           "SwitchingResult", "switch_pool", "MalleusModel", "MalleusPlan", "MalleusPlanner", "check_rates",
           "hybrid_layouts", "plan_any_layout", "oracle_ceiling",
           "measure_rates", "straggler_setting", "straggling_rates", "ulysses_attention", "ring_attention",
           "cu_seqlens", "varlen_attention", "sequence_parallel_block", "sequence_parallel_lm", "calibrate_cost_model", "compare",
           "Comparison", "MachineProfile", "LinkFit", "calibrate_machine", "predict_step_ms"]
