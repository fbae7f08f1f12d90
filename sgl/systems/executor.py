"""Compatibility shim: the executor moved to :mod:`sgl.systems.runtime`.

Re-exports everything the old ``sgl.systems.executor`` module defined; ``build_model`` is the
old name of :func:`sgl.systems.runtime.build_tiny_lm` (renamed so it no longer clashes with
:func:`sgl.models.build_model`).  New code imports :mod:`sgl.systems.runtime`.
"""
from sgl.systems.runtime.config import ExecConfig, batch_for_step
from sgl.systems.runtime.config import build_tiny_lm as build_model
from sgl.systems.runtime.executor import plan_worker, plans_worker, run_plan, run_plans, train_reference
from sgl.systems.runtime.measure import SavedTensorBytes as _SavedBytes  # noqa: F401
from sgl.systems.runtime.measure import local_tensor as _local  # noqa: F401
from sgl.systems.runtime.measure import state_bytes as _state_bytes  # noqa: F401
from sgl.systems.runtime.measure import step_report as _report  # noqa: F401
from sgl.systems.runtime.pipeline import run_pipeline as _run_pipeline  # noqa: F401
from sgl.systems.runtime.plans import check_plan as _check_plan  # noqa: F401
from sgl.systems.runtime.plans import make_plan
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock, lm_loss

__all__ = ["ExecConfig", "TinyLM", "TransformerBlock", "train_reference", "run_plan", "run_plans", "plan_worker",
           "make_plan", "build_model", "batch_for_step", "lm_loss", "plans_worker"]
