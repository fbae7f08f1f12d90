"""LLM/MoE systems on SGL's device and communication layer (no graph code).

* :mod:`sgl.systems.plan` -- Galvatron / Galvatron-BMW / OSDP hybrid-parallel plan search:
  strategy space, cost model over Galvatron-format profiles, vectorised layer-wise DP,
  Galvatron JSON plans.
* :mod:`sgl.systems.executor` -- runs a plan on a small Transformer with DDP, FSDP2, DTensor
  tensor parallelism and a 1F1B pipeline over :mod:`sgl.comm`.
* :mod:`sgl.systems.profiler` -- measures a model and the local links into profile JSON.

>>> import sgl.systems
>>> "plan" in sgl.systems.__all__
True
"""
from sgl.systems import plan

__all__ = ["plan"]
