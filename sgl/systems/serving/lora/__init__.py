"""LoRA-Inlaid: one multi-task GPTQ base for every adapter, multi-LoRA serving, and its scheduler."""
from sgl.systems.serving.lora.adapters import TARGETS, MultiLoRAServer, next_token_accuracy, train_adapters
from sgl.systems.serving.lora.batched import MixedLoRABatch
from sgl.systems.serving.lora.gptq import GPTQCodes, gptq, gptq_codes, quantized_bytes, rtn
from sgl.systems.serving.lora.int4 import Int4Linear, pack_int4, unpack_int4
from sgl.systems.serving.lora.multitask import MultiTaskQuantizer, quantizable_linears
from sgl.systems.serving.lora.run import LoRABenchConfig, run_lora_bench
from sgl.systems.serving.lora.scales import SCALE_FORMATS, log12_range, log12_round_up, log12_table
from sgl.systems.serving.lora.scheduler import POLICIES, OutputLengthPredictor, Request, simulate

__all__ = ["gptq", "gptq_codes", "GPTQCodes", "rtn", "quantized_bytes", "SCALE_FORMATS", "log12_range", "log12_table",
           "log12_round_up", "Int4Linear", "pack_int4", "unpack_int4", "MultiTaskQuantizer", "quantizable_linears",
           "train_adapters", "MultiLoRAServer", "MixedLoRABatch", "TARGETS", "next_token_accuracy", "Request",
           "OutputLengthPredictor", "simulate", "POLICIES", "LoRABenchConfig", "run_lora_bench"]
