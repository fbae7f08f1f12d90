"""LLM/MoE systems on SGL's device and communication layer (no graph code).

Rooms (DESIGN.md "Layout"):

* :mod:`sgl.systems.parallel` -- Galvatron / Galvatron-BMW / OSDP hybrid-parallel plan search:
  strategy space, cost model over Galvatron-format profiles (the shipped A100 files live in
  ``sgl/systems/profiles/``), vectorised layer-wise DP, stage partitions, Galvatron JSON plans.
* :mod:`sgl.systems.runtime` -- runs a plan on a small Transformer with DDP, FSDP2, DTensor
  tensor parallelism and a 1F1B pipeline over :mod:`sgl.comm`, and measures a model and the
  local links into profile JSON (the profiler).
* :mod:`sgl.systems.moe` -- MoE layer, expert parallelism, NetMoE, LSH-MoE, FlexMoE / LAER-MoE, FSEP.
* :mod:`sgl.systems.seq` -- lengths, per-sequence cost model, FlexSP, Hydraulis, dynamic mesh,
  per-step switching, Malleus, Ulysses / ring attention.
* :mod:`sgl.systems.data` -- DataSculpt packing, LobRA, Spindle.
* :mod:`sgl.systems.memory` -- MEMO, DSA plans, TSPLIT, paged optimizer states, resharding, partial-reduce.
* :mod:`sgl.systems.serving` -- PQCache, Student Parallelism, LoRA-Inlaid, heterogeneous-GPU plans.
* :mod:`sgl.systems.text` -- WikiText-2 / SST-2 readers and a BPE tokenizer trained here.

These rooms are imported on demand (``import sgl.systems.moe``).

Old names kept for compatibility: :mod:`sgl.systems.plan` (= ``parallel``, with ``SearchConfig`` /
``SearchResult``), :mod:`sgl.systems.executor` (with ``build_model``) and :mod:`sgl.systems.profiler`.

``parallel`` and ``plan`` load with the package (numpy only); ``runtime`` imports torch and
loads on first use, so ``import sgl.systems`` stays light.

>>> import sgl.systems
>>> "plan" in sgl.systems.__all__ and "parallel" in sgl.systems.__all__ and "runtime" in sgl.systems.__all__
True
>>> sgl.systems.runtime.TinyLM.__name__
'TinyLM'
"""
from sgl.systems import parallel, plan

__all__ = ["parallel", "plan", "runtime"]


def __getattr__(name):
    if name == "runtime":
        import importlib

        module = importlib.import_module("sgl.systems.runtime")
        globals()["runtime"] = module
        return module
    raise AttributeError(f"module 'sgl.systems' has no attribute {name!r}")
