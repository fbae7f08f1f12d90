"""Training plans for variable-length sequences (FlexSP, Hydraulis, dynamic DP×CP mesh, per-step
switching, Malleus) on one shared skeleton: length histogram → per-sequence cost ``a·s² + b·s + c``
and memory model → a planner → a plan the runtime can execute.

Stable building blocks (reused by other planners):

* :mod:`~sgl.systems.seq.lengths` -- :func:`read_lengths`, :func:`corpus_lengths`,
  :class:`LengthHistogram`, :class:`GlobalBatchSampler`;
* :mod:`~sgl.systems.seq.cost` -- :class:`SeqStrategy`, :class:`StrategyCost`,
  :class:`SeqCostModel`, the presets :func:`flexsp_cost_model` and :func:`hydraulis_pool`.

Planners: :class:`FlexSPPlanner` (blaster + bucketing + MILP, homogeneous baselines),
:class:`HydraulisPlanner` (replica DP, stage-1 dispatch, stage-2 packing ILP); both return a
:class:`StepPlan` (``validate``, ``to_dict``, ``device_load``).

>>> from sgl.systems.seq import GlobalBatchSampler, flexsp_cost_model
>>> batch = GlobalBatchSampler([512, 1024, 30000], batch_size=8, seed=0).batches(1)[0]
>>> pool = flexsp_cost_model(devices=16).sp_pool(minimum=2)
>>> [p.label for p in pool][:2]
['tp1-pp1-sp2-z3', 'tp1-pp1-sp4-z3']
"""
from sgl.systems.seq.cost import (FLEXSP_ALLTOALL_GBPS, SeqCostModel, SeqHardware, SeqModelSpec, SeqStrategy,
                                  StrategyCost, flexsp_cost_model, hydraulis_pool, longest_supported)
from sgl.systems.seq.flexsp import FlexSPPlanner, check_fits
from sgl.systems.seq.hydraulis import HydraulisPlanner, Replica
from sgl.systems.seq.lengths import GlobalBatchSampler, LengthHistogram, check_lengths, corpus_lengths, read_lengths
from sgl.systems.seq.plan import GroupWork, StepPlan

__all__ = ["read_lengths", "corpus_lengths", "LengthHistogram", "GlobalBatchSampler", "check_lengths",
           "SeqStrategy", "StrategyCost", "SeqModelSpec", "SeqHardware", "SeqCostModel", "flexsp_cost_model",
           "hydraulis_pool", "longest_supported", "FLEXSP_ALLTOALL_GBPS", "FlexSPPlanner", "check_fits",
           "HydraulisPlanner", "Replica", "GroupWork", "StepPlan"]
