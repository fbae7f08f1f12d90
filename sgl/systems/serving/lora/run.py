"""The LoRA-Inlaid run: one shared multi-task 4-bit base vs per-task bases, and the scheduler.

Base: the tiny WikiText-2 Llama (cached). Tasks: WikiText-2 valid text, SST-2 positive and
SST-2 negative sentences, each with its own LoRA adapter. Reports, per task, next-token accuracy
on held-out blocks with the float base, the shared multi-task GPTQ base, a GPTQ base calibrated
on that task only (one base per task, the memory baseline) and round-to-nearest; the memory of
one shared base vs one per task; the packed int4 base in both scale formats (``log12``, ``fp16``):
bytes from its buffers' storages vs bf16 and KL to the float model; and the scheduler (FCFS vs
LoRA-Inlaid) on requests whose output lengths are real text-unit lengths of each task, with step,
prefill and adapter-switch (merge + unmerge) costs measured on this CPU; plus mixed-adapter
batches (gathered LoRA, no switches) with their own measured step costs.
"""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np
import torch

from sgl._checks import check_int
from sgl.systems.serving.lm import TinyLlamaSpec, train_tiny_llama
from sgl.systems.serving.lora.adapters import next_token_accuracy, train_adapters
from sgl.systems.serving.lora.batched import MixedLoRABatch
from sgl.systems.serving.lora.multitask import MultiTaskQuantizer
from sgl.systems.serving.lora.scheduler import OutputLengthPredictor, Request, simulate

__all__ = ["LoRABenchConfig", "run_lora_bench"]


@dataclass
class LoRABenchConfig:
    root: Union[str, Path]
    spec: TinyLlamaSpec = field(default_factory=TinyLlamaSpec)
    train_steps: int = 300
    train_seq_len: int = 512
    train_batch: int = 8
    block: int = 64
    blocks_per_task: int = 96
    adapter_steps: int = 100
    rank: int = 8
    bits: int = 4
    group_size: int = 32
    requests: int = 600
    rates: tuple = (5.0, 40.0)
    cache_dir: Optional[Union[str, Path]] = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("train_steps", "block", "blocks_per_task", "adapter_steps", "rank", "requests"):
            check_int(getattr(self, name), name, minimum=1)


def _task_texts(root) -> Dict[str, list]:
    from sgl.systems.text import load_sst2, wikitext2_documents

    sents, labels = load_sst2(root, "train")
    paragraphs = [p for d in wikitext2_documents(root, "valid") for p in d.split("\n") if len(p.split()) > 3]
    return {"wiki": paragraphs, "positive": [s for s, y in zip(sents, labels) if y == 1][:6000],
            "negative": [s for s, y in zip(sents, labels) if y == 0][:6000]}


def _step_costs(model, tok_len: int, rows=None, repeats: int = 5) -> Dict[str, float]:
    """Measured decode-iteration cost ``a + c b`` (b = batch) and per-token prefill on this CPU.

    ``rows(b)``: a context that makes the ``b`` rows use their own adapters (a mixed batch).
    Each figure is the fastest of ``repeats`` timings (the least disturbed by other load).
    """
    device = next(model.parameters()).device

    def step(b: int) -> float:
        ids = torch.randint(3, 100, (b, tok_len), device=device)
        with torch.no_grad(), (rows(b) if rows is not None else contextlib.nullcontext()):
            out = model(input_ids=ids, use_cache=True)
            nxt, best = ids[:, -1:], float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(5):
                    out = model(input_ids=nxt, cache=out.cache, use_cache=True)
                best = min(best, (time.perf_counter() - start) / 5)
            return best

    t1, t8 = step(1), step(8)
    prefill = float("inf")
    with torch.no_grad(), (rows(1) if rows is not None else contextlib.nullcontext()):
        ids = torch.randint(3, 100, (1, 256), device=device)
        for _ in range(repeats):
            start = time.perf_counter()
            model(input_ids=ids)
            prefill = min(prefill, (time.perf_counter() - start) / 256)
    c = max((t8 - t1) / 7, 0.0)
    return {"step_s": max(t1 - c, 1e-6), "per_request_s": c, "prefill_s_per_token": prefill}


@torch.no_grad()
def _packed(q: MultiTaskQuantizer, model, held, ref) -> Dict[str, Any]:
    """The int4-packed base (4-bit only) per scale format: bytes from its buffers vs bf16, KL, equality
    with the dequantized base of the same format. Leaves ``model`` quantized in ``q``'s own format."""
    from sgl.systems.serving.lora.int4 import Int4Linear
    from sgl.systems.serving.lora.scales import SCALE_FORMATS

    if q.bits != 4:
        return {}

    def one(group_size: int, fmt: str, compare: bool) -> Dict[str, Any]:
        keep, q.group_size = q.group_size, group_size
        try:
            packed = q.packed_model(scale_format=fmt)
        finally:
            q.group_size = keep
        lins = [m for m in packed.modules() if isinstance(m, Int4Linear)]
        res = {"group_size": group_size, "scale_format": fmt, "bytes": sum(m.nbytes() for m in lins),
               "bf16_bytes": sum(2 * m.in_features * m.out_features for m in lins), "kl_vs_float": {}}
        equal = True
        if compare:
            q.quantize(scale_format=fmt)
        for t in held:
            packed.set_adapter(t)
            logits = packed(input_ids=held[t]).logits.float()
            logp = torch.log_softmax(logits, -1)
            res["kl_vs_float"][t] = float(torch.nn.functional.kl_div(logp, ref[t], log_target=True,
                                                                     reduction="none").sum(-1).mean())
            if compare:
                model.set_adapter(t)
                equal &= bool(torch.equal(logits, model(input_ids=held[t]).logits.float()))
        if compare:
            res["logits_equal"] = equal
        return res

    out = {"group_size": q.group_size, "default_format": q.scale_format,
           "formats": {fmt: one(q.group_size, fmt, True) for fmt in SCALE_FORMATS}}
    q.quantize()
    out["other_groups"] = {g: {fmt: one(g, fmt, False) for fmt in SCALE_FORMATS} for g in (64, 128)
                           if g != q.group_size and all(m.in_features % g == 0 for m in q.layers.values())}
    return out


def run_lora_bench(cfg: LoRABenchConfig) -> Dict[str, Any]:
    from sgl.systems.text import encode_corpus, lm_blocks

    base, tok = train_tiny_llama(cfg.root, spec=cfg.spec, steps=cfg.train_steps, seq_len=cfg.train_seq_len,
                                 batch_size=cfg.train_batch, seed=cfg.seed, cache_dir=cfg.cache_dir)
    texts = _task_texts(cfg.root)
    blocks = {t: lm_blocks(encode_corpus(tok, x), cfg.block)[: cfg.blocks_per_task] for t, x in texts.items()}
    half = cfg.blocks_per_task // 2
    train = {t: b[:half] for t, b in blocks.items()}
    held = {t: b[half:] for t, b in blocks.items()}
    model = train_adapters(copy.deepcopy(base), train, rank=cfg.rank, steps=cfg.adapter_steps, seed=cfg.seed)

    ref: Dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def kl(t: str) -> float:   # mean per-token KL(float || current base) with task t's adapter
        logp = torch.log_softmax(model(input_ids=held[t]).logits.float(), -1)
        return float(torch.nn.functional.kl_div(logp, ref[t], log_target=True, reduction="none").sum(-1).mean())

    def accs(name: str) -> Dict[str, float]:
        out = {}
        for t in blocks:
            model.set_adapter(t)
            out[t] = next_token_accuracy(model, held[t])
            if name != "float":
                result["kl_vs_float"].setdefault(name, {})[t] = kl(t)
        return out

    with torch.no_grad():
        for t in blocks:
            model.set_adapter(t)
            ref[t] = torch.log_softmax(model(input_ids=held[t]).logits.float(), -1)
    result: Dict[str, Any] = {"accuracy": {}, "kl_vs_float": {}}
    result["accuracy"]["float"] = accs("float")
    q = MultiTaskQuantizer(model, bits=cfg.bits, group_size=cfg.group_size)
    calib = {t: [b[i:i + 8] for i in range(0, len(b), 8)] for t, b in train.items()}
    start = time.perf_counter()
    for t in blocks:
        q.add_task(t, calib[t], adapter=t)
    calib_s = time.perf_counter() - start
    start = time.perf_counter()
    q.quantize()
    quant_s = time.perf_counter() - start
    result["accuracy"]["shared_gptq"] = accs("shared_gptq")
    own, own_kl = {}, {}
    for t in blocks:                      # one base per task, each calibrated on its own task only
        q.quantize([t])
        model.set_adapter(t)
        own[t], own_kl[t] = next_token_accuracy(model, held[t]), kl(t)
    result["accuracy"]["per_task_gptq"] = own
    result["kl_vs_float"]["per_task_gptq"] = own_kl
    q.quantize(method="rtn")
    result["accuracy"]["rtn"] = accs("rtn")
    q.quantize()
    quant, fp16 = q.memory_bytes()
    result["memory_bytes"] = {"shared_quantized": quant, "per_task_quantized": quant * len(blocks),
                              "float16_base": fp16}
    result["packed_int4"] = _packed(q, model, held, ref)
    result["incremental"] = {"calibration_s_per_task": calib_s / len(blocks), "quantize_s": quant_s}
    # the scheduler, on requests with real output lengths (tokens of the next text unit of the task)
    costs = _step_costs(model, 64)
    start = time.perf_counter()
    for _ in range(3):
        model.merge_adapter()
        model.unmerge_adapter()
    switch_s = (time.perf_counter() - start) / 3
    lengths = {t: [len(e.ids) for e in tok.encode_batch(x[:2000])] for t, x in texts.items()}
    names = list(blocks)
    mixer = MixedLoRABatch(model, names)   # one batch, any mix of the tasks (gathered per-row LoRA)
    mixed_costs = _step_costs(model, 64, rows=lambda b: mixer.rows([names[i % len(names)] for i in range(b)]))
    result["scheduler"] = {"costs": dict(costs, switch_s=switch_s), "mixed_costs": mixed_costs}
    for rate in cfg.rates:
        rng = np.random.default_rng(cfg.seed)
        reqs, now = [], 0.0
        for i in range(cfg.requests):
            now += float(rng.exponential(1.0 / rate))
            t = names[int(rng.integers(len(names)))]
            j = int(rng.integers(1, len(lengths[t])))
            reqs.append(Request(i, t, now, max(1, lengths[t][j - 1]), max(1, min(lengths[t][j], 256))))
        history, live = reqs[: cfg.requests // 3], reqs[cfg.requests // 3:]
        pred = OutputLengthPredictor().fit(history)
        runs = {p: simulate(live, p, switch_s=switch_s, predictor=pred, **costs) for p in ("fcfs", "inlaid")}
        runs["mixed"] = simulate(live, "mixed", switch_s=switch_s, predictor=pred, **mixed_costs)
        result["scheduler"][f"rate={rate:g}"] = runs
    return result
