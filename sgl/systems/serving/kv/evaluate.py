"""Teacher-forced decoding with a KV selector vs full attention on the same real text.

:func:`evaluate_selection` prefills ``prompt_len`` tokens, then decodes the next ``steps``
tokens of the text one at a time through the model's cache with the selector choosing each
step's KV (the hook's metrics compare every layer's sparse attention with exact attention on
the same q, K, V). The logits are compared with one full-attention forward over the whole text:
next-token agreement ``mean[argmax p_sparse = argmax p_full]`` and perplexity
``exp(-mean log p(x_{t+1}))`` of both.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Dict, Optional

import torch

from sgl._checks import check_int
from sgl.errors import ConfigError
from sgl.systems.serving.kv.hook import KVMetrics, kv_selection
from sgl.systems.serving.kv.selectors import KVSelector

__all__ = ["evaluate_selection", "full_logits"]


@torch.no_grad()
def full_logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """Logits ``[T, V]`` of one full-attention forward over ``ids [T]``."""
    return model(input_ids=ids.reshape(1, -1)).logits[0].float()


@torch.no_grad()
def evaluate_selection(model: Any, ids: torch.Tensor, prompt_len: int, selector: Optional[KVSelector], steps: int,
                       reference: Optional[torch.Tensor] = None) -> Dict[str, float]:
    """Quality of ``selector`` on ``ids [>= prompt_len + steps]``; ``reference`` = :func:`full_logits`.

    ``selector=None`` decodes with the model's own full attention (the latency baseline).
    """
    ids = torch.as_tensor(ids).reshape(-1)
    prompt_len = check_int(prompt_len, "prompt_len", minimum=2)
    steps = check_int(steps, "steps", minimum=1)
    if ids.numel() < prompt_len + steps:
        raise ConfigError(f"evaluate_selection: {ids.numel()} ids < prompt_len + steps = {prompt_len + steps}")
    if reference is None:
        reference = full_logits(model, ids[: prompt_len + steps])
    metrics = KVMetrics()
    logits, seconds = [], 0.0
    with (kv_selection(model, selector, metrics) if selector is not None else contextlib.nullcontext()):
        out = model(input_ids=ids[None, :prompt_len], use_cache=True)
        cache = out.cache
        for i in range(steps - 1):
            start = time.perf_counter()
            out = model(input_ids=ids[None, prompt_len + i: prompt_len + i + 1], cache=cache, use_cache=True)
            seconds += time.perf_counter() - start
            cache = out.cache
            logits.append(out.logits[0, -1].float())
    if not logits:
        raise ConfigError("evaluate_selection needs steps >= 2 (the first prediction comes from the prompt)")
    sparse = torch.stack(logits)                                     # predicts ids[prompt_len + 1 ...]
    full = reference[prompt_len: prompt_len + steps - 1]
    target = ids[prompt_len + 1: prompt_len + steps]
    nll = lambda lg: float(torch.nn.functional.cross_entropy(lg, target))  # noqa: E731
    result = metrics.summary()
    result.update(agreement=float((sparse.argmax(-1) == full.argmax(-1)).float().mean()),
                  ppl=math.exp(nll(sparse)), ppl_full=math.exp(nll(full)),
                  step_ms=1000.0 * seconds / (steps - 1))
    return result
