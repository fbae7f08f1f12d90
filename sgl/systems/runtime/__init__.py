"""Running plans: the executor (DDP, FSDP2, TP, PP), the profiler and the small Transformer.

The executor runs :class:`TinyLM` (the fast test model) and Hugging Face decoders
(``ExecConfig(arch="hf-llama")``: ``transformers``' ``LlamaForCausalLM``).

One concept per module:

* :mod:`~sgl.systems.runtime.tiny_lm` -- :class:`TinyLM`, :class:`TransformerBlock`, :func:`lm_loss`;
* :mod:`~sgl.systems.runtime.config` -- :class:`ExecConfig`, the seeded model and batches;
* :mod:`~sgl.systems.runtime.plans` -- uniform plans and the checks a plan passes before spawning;
* :mod:`~sgl.systems.runtime.models` -- :class:`Decoder`, the generic view of TinyLM or a Hugging Face
  causal LM (embedding, layers, head, TP layout), and :func:`build_model`;
* :mod:`~sgl.systems.runtime.parallelize` -- DDP / FSDP2 ZeRO-2/3 / DTensor TP / vocabulary TP on one rank;
* :mod:`~sgl.systems.runtime.osdp` -- OSDP's operator split (:class:`SplitLinear`);
* :mod:`~sgl.systems.runtime.cp` -- ring context parallelism and Ulysses SP on HF decoders
  (sequence shards, attention through :mod:`sgl.systems.seq`);
* :mod:`~sgl.systems.runtime.megatron_sp` -- Megatron sequence parallelism on TP layers;
* :mod:`~sgl.systems.runtime.pipeline` -- PP through ``torch.distributed.pipelining`` schedules;
* :mod:`~sgl.systems.runtime.measure` -- saved-activation and model-state bytes, per-rank reports;
* :mod:`~sgl.systems.runtime.executor` -- :func:`run_plans` / :func:`run_plan`, :func:`train_reference`;
* :mod:`~sgl.systems.runtime.profiler` -- measures a model and the local links into profile JSON.

>>> from sgl.systems.runtime import ExecConfig, make_plan
>>> make_plan("sdp", 2, ExecConfig()).embed_sdp
True
"""
from sgl.systems.runtime.config import SCHEDULES, ExecConfig, batch_for_step, build_tiny_lm
from sgl.systems.runtime.cp import (SequenceSetup, enable_sequence_attention, sequence_mode, sequence_setup,
                                    shard_loss, shard_tokens)
from sgl.systems.runtime.executor import plan_worker, plans_worker, run_plan, run_plans, train_reference
from sgl.systems.runtime.measure import SavedTensorBytes, local_tensor, state_bytes, step_report
from sgl.systems.runtime.models import ARCHS, Decoder, build_model, decoder_of, set_checkpoint
from sgl.systems.runtime.megatron_sp import sequence_parallel_ends, sequence_parallel_layers
from sgl.systems.runtime.osdp import SplitLinear, split_linears
from sgl.systems.runtime.parallelize import DataParallelSetup, parallelize
from sgl.systems.runtime.pipeline import Stage, run_pipeline
from sgl.systems.runtime.plans import check_model, check_plan, make_plan
from sgl.systems.runtime.profiler import profile_hardware, profile_model, profile_to_dir
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock, lm_loss

__all__ = [
    "ARCHS", "DataParallelSetup", "Decoder", "ExecConfig", "SCHEDULES", "SavedTensorBytes", "SequenceSetup",
    "SplitLinear", "Stage", "enable_sequence_attention", "sequence_mode", "sequence_parallel_ends",
    "sequence_parallel_layers", "sequence_setup", "shard_loss", "shard_tokens",
    "TinyLM", "TransformerBlock", "batch_for_step", "build_model", "build_tiny_lm", "check_model", "check_plan",
    "decoder_of", "set_checkpoint", "split_linears", "lm_loss", "local_tensor", "make_plan", "parallelize",
    "plan_worker",
    "plans_worker", "profile_hardware", "profile_model", "profile_to_dir", "run_pipeline", "run_plan", "run_plans",
    "state_bytes", "step_report", "train_reference",
]
