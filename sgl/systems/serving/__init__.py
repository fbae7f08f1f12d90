"""Serving: PQCache KV retrieval, Student Parallelism, LoRA-Inlaid, heterogeneous-GPU serving plans.

Built on ``transformers`` decoders/encoders with tiny configs trained here (no weights can be
downloaded); the same code serves a user's checkpoint. Subpackages: :mod:`.kv`, :mod:`.students`,
:mod:`.lora`, :mod:`.hetero`; see ``docs/serving.md``.
"""
from sgl.systems.serving.hetero import ServingProblem, load_problem, plan_min_cost, plan_serving
from sgl.systems.serving.kv import (METHODS, KVBudget, KVMetrics, LFUBlockCache, PQIndex, kv_selection,
                                    make_selector)
from sgl.systems.serving.lm import TinyLlamaSpec, train_tiny_llama
from sgl.systems.serving.lora import MultiLoRAServer, MultiTaskQuantizer, simulate
from sgl.systems.serving.students import AdaptivePruning, StudentEnsemble, distil_students

__all__ = ["KVBudget", "PQIndex", "LFUBlockCache", "make_selector", "METHODS", "kv_selection", "KVMetrics",
           "StudentEnsemble", "distil_students", "AdaptivePruning", "MultiTaskQuantizer", "MultiLoRAServer",
           "simulate", "ServingProblem", "load_problem", "plan_serving", "plan_min_cost", "TinyLlamaSpec",
           "train_tiny_llama"]
