"""Running plans: the executor (DDP, FSDP2, TP, PP), the profiler and the small Transformer.

One concept per module:

* :mod:`~sgl.systems.runtime.tiny_lm` -- :class:`TinyLM`, :class:`TransformerBlock`, :func:`lm_loss`;
* :mod:`~sgl.systems.runtime.config` -- :class:`ExecConfig`, the seeded model and batches;
* :mod:`~sgl.systems.runtime.plans` -- uniform plans and the checks a plan passes before spawning;
* :mod:`~sgl.systems.runtime.parallelize` -- DDP / FSDP2 ZeRO-3 / DTensor TP on one rank;
* :mod:`~sgl.systems.runtime.pipeline` -- the 1F1B pipeline over ``sgl.comm`` send/recv;
* :mod:`~sgl.systems.runtime.measure` -- saved-activation and model-state bytes, per-rank reports;
* :mod:`~sgl.systems.runtime.executor` -- :func:`run_plans` / :func:`run_plan`, :func:`train_reference`;
* :mod:`~sgl.systems.runtime.profiler` -- measures a model and the local links into profile JSON.

>>> from sgl.systems.runtime import ExecConfig, make_plan
>>> make_plan("sdp", 2, ExecConfig()).embed_sdp
True
"""
from sgl.systems.runtime.config import ExecConfig, batch_for_step, build_tiny_lm
from sgl.systems.runtime.executor import plan_worker, plans_worker, run_plan, run_plans, train_reference
from sgl.systems.runtime.measure import SavedTensorBytes, local_tensor, state_bytes, step_report
from sgl.systems.runtime.parallelize import DataParallelSetup, parallelize
from sgl.systems.runtime.pipeline import run_pipeline
from sgl.systems.runtime.plans import check_plan, make_plan
from sgl.systems.runtime.profiler import profile_hardware, profile_model, profile_to_dir
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock, lm_loss

__all__ = [
    "DataParallelSetup", "ExecConfig", "SavedTensorBytes", "TinyLM", "TransformerBlock", "batch_for_step",
    "build_tiny_lm", "check_plan", "lm_loss", "local_tensor", "make_plan", "parallelize", "plan_worker",
    "plans_worker", "profile_hardware", "profile_model", "profile_to_dir", "run_pipeline", "run_plan", "run_plans",
    "state_bytes", "step_report", "train_reference",
]
