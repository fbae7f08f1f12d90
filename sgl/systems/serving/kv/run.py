"""The KV-selection benchmark: every method at several budgets on long WikiText-2 contexts.

A tiny Llama is trained on WikiText-2 train (cached); contexts are windows of the test split's
token stream (articles joined), ``context`` tokens of prompt followed by ``steps`` decoded
tokens. For every (method, budget) the rows hold the means over contexts of
:func:`~sgl.systems.serving.kv.evaluate.evaluate_selection`, plus the decode-step latency of
full attention on the same contexts (a CPU calibration, not a GPU figure).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

from sgl._checks import check_int
from sgl.systems.serving.kv.budget import check_budget
from sgl.systems.serving.kv.evaluate import evaluate_selection, full_logits
from sgl.systems.serving.kv.pq import check_subvectors
from sgl.systems.serving.kv.selectors import METHODS, make_selector
from sgl.systems.serving.lm import TinyLlamaSpec, train_tiny_llama

__all__ = ["KVBenchConfig", "run_kv_bench", "kv_memory"]


@dataclass
class KVBenchConfig:
    """Settings of :func:`run_kv_bench` (the CLI's ``sgl serve bench`` flags)."""

    root: Union[str, Path]
    methods: Sequence[str] = METHODS
    budgets: Sequence[float] = (0.05, 0.1, 0.2)
    context: int = 2048
    steps: int = 32
    contexts: int = 2
    train_steps: int = 300
    train_seq_len: int = 512
    train_batch: int = 8
    train_attention: str = "eager"
    documents: Optional[int] = None
    spec: TinyLlamaSpec = field(default_factory=TinyLlamaSpec)
    num_subvectors: int = 2
    bits: int = 6
    sink: int = 4
    recent_ratio: float = 0.5
    cache_blocks: int = 16
    block_size: int = 16
    cache_dir: Optional[Union[str, Path]] = None
    seed: int = 0
    progress: bool = False

    def __post_init__(self) -> None:
        self.methods = [make_selector(m).name for m in self.methods]   # validates the names
        self.budgets = [check_budget(b) for b in self.budgets]
        for name in ("context", "steps", "contexts", "train_steps", "train_seq_len", "train_batch"):
            check_int(getattr(self, name), name, minimum=2 if name in ("context", "steps") else 1)
        make_selector("pqcache", 0.1, num_subvectors=self.num_subvectors, bits=self.bits, sink=self.sink,
                      recent_ratio=self.recent_ratio, cache_blocks=self.cache_blocks, block_size=self.block_size)
        check_subvectors(self.num_subvectors, self.spec.hidden_size // self.spec.heads)


def _options(method: str, cfg: KVBenchConfig) -> Dict[str, Any]:
    opts: Dict[str, Any] = {"sink": cfg.sink, "recent_ratio": cfg.recent_ratio}
    if method == "pqcache":
        opts.update(num_subvectors=cfg.num_subvectors, bits=cfg.bits, offload=True, cache_blocks=cfg.cache_blocks,
                    block_size=cfg.block_size)
    if method == "random":
        opts.update(seed=cfg.seed)
    return opts


def run_kv_bench(cfg: KVBenchConfig) -> Dict[str, Any]:
    """``{"rows": [...], "full_step_ms": ..., "model": {...}}`` (see the module docstring)."""
    from sgl.systems.text import encode_corpus, wikitext2_documents

    model, tok = train_tiny_llama(cfg.root, spec=cfg.spec, steps=cfg.train_steps, seq_len=cfg.train_seq_len,
                                  batch_size=cfg.train_batch, documents=cfg.documents, seed=cfg.seed,
                                  cache_dir=cfg.cache_dir, progress=cfg.progress, train_attention=cfg.train_attention)
    span = cfg.context + cfg.steps
    docs, parts, have = wikitext2_documents(cfg.root, "test"), [], 0
    for start in range(0, len(docs), 8):          # encode only as much of the test split as needed
        parts.append(encode_corpus(tok, docs[start:start + 8]))
        have += parts[-1].numel()
        if have >= span * cfg.contexts:
            break
    stream = torch.cat(parts)
    if stream.numel() < span * cfg.contexts:
        from sgl.errors import ConfigError
        raise ConfigError(f"WikiText-2 test has {stream.numel()} tokens, fewer than contexts*(context+steps) = "
                          f"{span * cfg.contexts}")
    windows = [stream[i * span:(i + 1) * span] for i in range(cfg.contexts)]
    refs = [full_logits(model, w) for w in windows]
    full = [evaluate_selection(model, w, cfg.context, None, cfg.steps, r) for w, r in zip(windows, refs)]
    rows: List[Dict[str, Any]] = []
    jobs = [(m, b) for b in cfg.budgets for m in cfg.methods]
    if cfg.progress:
        from tqdm import tqdm
        jobs = tqdm(jobs, desc="kv methods", leave=False)
    for method, budget in jobs:
        res, tiers = [], []
        for w, r in zip(windows, refs):
            sel = make_selector(method, budget, **_options(method, cfg))
            res.append(evaluate_selection(model, w, cfg.context, sel, cfg.steps, r))
            if getattr(sel, "store", None) is not None:
                tiers.append(sel.store.stats())
        row = {"method": method, "budget": budget}
        for key in res[0]:
            row[key] = float(sum(r[key] for r in res) / len(res))
        if tiers:   # the slow-tier traffic of PQCache with / without the LFU block cache
            requested = sum(s["requested"] for s in tiers)
            row["lfu_hit_rate"] = sum(s["hits"] for s in tiers) / requested if requested else 0.0
            for key in ("bytes_per_step", "bytes_per_step_late", "bytes_per_step_no_cache"):
                row[key] = float(sum(s[key] for s in tiers) / len(tiers))
        rows.append(row)
    return {"rows": rows, "full_step_ms": sum(f["step_ms"] for f in full) / len(full),
            "ppl_full": sum(f["ppl_full"] for f in full) / len(full),
            "model": {"layers": cfg.spec.layers, "heads": cfg.spec.heads, "kv_heads": cfg.spec.kv_heads,
                      "hidden": cfg.spec.hidden_size, "train_steps": cfg.train_steps, "context": cfg.context,
                      "steps": cfg.steps, "contexts": cfg.contexts}}


@torch.no_grad()
def kv_memory(model: Any, ids: torch.Tensor, budgets: Sequence[float] = (0.1,), steps: int = 16,
              **options: Any) -> List[Dict[str, Any]]:
    """Device KV bytes of :class:`~.cache.PQKVCache` against the full ``DynamicCache`` on one greedy ``generate()``.

    For each budget both runs use a PQCache selector with ``options``; the rows hold the bytes
    measured from the caches' tensors after ``steps`` new tokens, their ratio, and whether the
    generated ids are equal (today's selection over a full cache vs the tiered cache).
    """
    from transformers import DynamicCache

    from sgl.systems.serving.kv.cache import PQKVCache, kv_cache_bytes
    from sgl.systems.serving.kv.hook import kv_selection

    ids = torch.as_tensor(ids)
    ids = ids.reshape(1, -1) if ids.dim() == 1 else ids
    kw = dict(max_new_tokens=check_int(steps, "steps", minimum=1), do_sample=False, pad_token_id=0)
    rows = []
    for budget in budgets:
        sel = make_selector("pqcache", budget, **options)
        with kv_selection(model, sel):
            full = DynamicCache()
            start = time.perf_counter()
            old = model.generate(ids, cache=full, **kw)
            old_s = time.perf_counter() - start
        sel = make_selector("pqcache", budget, **options)
        with kv_selection(model, sel):
            tiered = PQKVCache.for_model(model, sel)
            start = time.perf_counter()
            new = model.generate(ids, cache=tiered, **kw)
            new_s = time.perf_counter() - start
        full_bytes = kv_cache_bytes(full)
        rows.append({"budget": budget, "full_bytes": full_bytes, "device_bytes": tiered.device_bytes(),
                     "host_bytes": tiered.host_bytes(), "ratio": tiered.device_bytes() / full_bytes,
                     "equal": bool(torch.equal(old, new)), "full_cache_s": old_s, "tiered_s": new_s})
    return rows
