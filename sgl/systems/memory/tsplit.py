"""TSPLIT: split tensor operations into micro-tensors, and plan keep/split/offload/recompute per tensor.

A block's two big operations are its attention sub-layer (independent per sample: split along the
batch axis) and its MLP (independent per token: split along the sequence axis).  Running an op on
``k`` micro-tensors with each micro-op checkpointed holds one micro-tensor's temporaries at a time,
``~ W / k`` instead of ``W`` for the op's working set.  For every op the planner picks one option

* ``keep``: its saved tensors ``m`` stay on the device, no extra time;
* ``offload``: saved tensors go to host memory (time ``m / B`` if not hidden);
* ``recompute``: nothing saved, its forward ``t_f`` runs again in backward;
* ``split:k``: recompute in ``k`` micro-tensors, working set ``W / k``, time ``t_f`` plus overhead;

minimising the added time subject to ``sum(saved kept) + max(working set) <= budget`` -- a
multiple-choice knapsack with a max term, solved exactly as a MIP with HiGHS.

>>> costs = [OpCost("l0.mlp", saved=100, work=80, time=1.0), OpCost("l1.mlp", saved=100, work=80, time=1.0)]
>>> plan = plan_tsplit(costs, budget=200, bandwidth=50)   # one op's saved tensors fit
>>> sorted(plan.choice.values()), plan.peak <= 200
(['keep', 'recompute'], True)
>>> sorted(plan_tsplit(costs, budget=60, bandwidth=50).choice.values())   # working sets must shrink
['split:2', 'split:2']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError, PlanError
from sgl.systems.memory.dsa import new_highs
from sgl.systems.memory.block_parts import attention_part, blocks_of, layer_context, layer_kind, tokenwise_part
from sgl.systems.memory.offload import HostStore

__all__ = ["OpCost", "TSplitPlan", "plan_tsplit", "split_apply", "TSplitBlock", "apply_tsplit", "profile_block_ops"]

SPLIT_OVERHEAD = 0.05  # relative cost of one extra micro-op launch, per split


@dataclass
class OpCost:
    """Profiled cost of one op: saved bytes, working-set bytes, forward seconds."""

    name: str
    saved: float
    work: float
    time: float


@dataclass
class TSplitPlan:
    """Per-op choice, modelled device peak and added seconds."""

    choice: Dict[str, str]
    peak: float
    extra_time: float
    status: str = ""
    options: Dict[str, List[Tuple[str, float, float, float]]] = field(default_factory=dict)


def _options(op: OpCost, bandwidth: float, splits: Sequence[int]) -> List[Tuple[str, float, float, float]]:
    """(name, kept bytes, working set, added time)."""
    opts = [("keep", op.saved, op.work, 0.0), ("offload", 0.0, op.work, op.saved / bandwidth),
            ("recompute", 0.0, op.work, op.time)]
    opts += [(f"split:{k}", 0.0, op.work / k, op.time * (1 + SPLIT_OVERHEAD * (k - 1))) for k in splits if k > 1]
    return opts


def plan_tsplit(costs: Sequence[OpCost], budget: float, bandwidth: float, splits: Sequence[int] = (2, 4, 8),
                time_limit: float = 10.0) -> TSplitPlan:
    """The cheapest per-op choice that fits ``budget`` device bytes (exact MIP, HiGHS)."""
    import highspy

    budget = check_real(budget, "tsplit budget (bytes)", 0.0, open_low=True)
    bandwidth = check_real(bandwidth, "bandwidth (bytes/s)", 0.0, open_low=True)
    if not costs:
        raise ConfigError("plan_tsplit: no ops to plan")
    opts = {op.name: _options(op, bandwidth, splits) for op in costs}
    minimum = max(min(o[2] for o in v) for v in opts.values())
    if minimum > budget:
        raise PlanError(f"tsplit budget {budget:.0f} B is below the minimum working set {minimum:.0f} B "
                        f"(the largest op split {max(splits)} ways, nothing kept); raise the budget or allow more splits")
    cols = [(name, o) for name, v in opts.items() for o in v]
    n = len(cols)
    w = n  # column of the max working-set variable W
    h = new_highs(time_limit)
    cost = [o[3] for _, o in cols] + [0.0]
    h.addVars(n + 1, np.zeros(n + 1), np.concatenate([np.ones(n), [budget]]))
    h.changeColsCost(n + 1, np.arange(n + 1, dtype=np.int32), np.array(cost))
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * n))
    names = list(opts)
    for name in names:  # one option per op
        idx = [i for i, (nm, _) in enumerate(cols) if nm == name]
        h.addRow(1.0, 1.0, len(idx), np.array(idx, dtype=np.int32), np.ones(len(idx)))
        # W >= working set of the chosen option
        h.addRow(-math.inf, 0.0, len(idx) + 1, np.array(idx + [w], dtype=np.int32),
                 np.array([cols[i][1][2] for i in idx] + [-1.0]))
    h.addRow(-math.inf, budget, n + 1, np.arange(n + 1, dtype=np.int32),
             np.array([o[1] for _, o in cols] + [1.0]))
    h.run()
    status = h.modelStatusToString(h.getModelStatus())
    x = np.asarray(h.getSolution().col_value)
    if len(x) != n + 1 or status not in ("Optimal", "Time limit reached"):
        raise PlanError(f"plan_tsplit: no plan fits {budget:.0f} B (HiGHS: {status})")
    choice = {}
    kept, work, extra = 0.0, 0.0, 0.0
    for i, (name, o) in enumerate(cols):
        if x[i] > 0.5:
            choice[name] = o[0]
            kept += o[1]
            work = max(work, o[2])
            extra += o[3]
    return TSplitPlan(choice, kept + work, extra, status, opts)


def split_apply(fn, x: torch.Tensor, chunks: int, dim: int, recompute: bool = True) -> torch.Tensor:
    """``fn`` over ``chunks`` micro-tensors of ``x`` along ``dim`` (each checkpointed), concatenated."""
    chunks = check_int(chunks, "chunks", 1)
    parts = x.chunk(chunks, dim)
    if not (recompute and torch.is_grad_enabled()):
        return torch.cat([fn(p) for p in parts], dim)
    return torch.cat([checkpoint(fn, p, use_reentrant=False) for p in parts], dim)


class TSplitBlock(nn.Module):
    """A Transformer block run by a plan: ``attn`` and ``mlp`` each keep / offload / recompute / split:k.

    Attention splits along the batch axis, the token-wise part (output projection and MLP) along
    the sequence axis; results equal the plain block (forward bit-for-bit on CPU, gradients up to
    summation order).  ``block`` is a :class:`~sgl.systems.runtime.TransformerBlock` or a Hugging
    Face Llama-style decoder layer, called as its model calls it
    (:mod:`sgl.systems.memory.block_parts`).
    """

    def __init__(self, block: nn.Module, attn: str = "keep", mlp: str = "keep") -> None:
        super().__init__()
        for opt in (attn, mlp):
            if opt not in ("keep", "offload", "recompute") and not (opt.startswith("split:") and opt[6:].isdigit()):
                raise ConfigError(f"TSplitBlock option must be keep, offload, recompute or split:K, got {opt!r}")
        self.kind = layer_kind(block, "TSplitBlock")
        self.block, self.attn, self.mlp = block, attn, mlp
        self.store = HostStore(list(block.parameters()))

    def _run(self, opt: str, fn, x: torch.Tensor, dim: int) -> torch.Tensor:
        if opt == "keep" or not torch.is_grad_enabled():
            return fn(x)
        if opt == "offload":
            with self.store.hooks():
                return fn(x)
        if opt == "recompute":
            return checkpoint(fn, x, use_reentrant=False)
        return split_apply(fn, x, int(opt[6:]), dim)

    def _attention(self, x: torch.Tensor, ctx):
        """``(fn, input)`` of the attention part; per-sample rotary tables travel with ``x`` along the batch axis."""
        if ctx is None:
            return (lambda t: attention_part(self.block, t)), x
        cos, sin = ctx["position_embeddings"]
        mask = ctx.get("attention_mask")
        if mask is not None and mask.dim() > 0 and mask.shape[0] > 1 and self.attn.startswith("split:"):
            raise ConfigError("TSplitBlock splits attention along the batch axis; a per-sample attention_mask is not "
                              "split with it: use attn='keep', 'offload' or 'recompute'")
        if cos.shape[0] == 1:
            return (lambda t: attention_part(self.block, t, ctx)), x
        h, d = x.shape[-1], cos.shape[-1]

        def fn(t: torch.Tensor) -> torch.Tensor:
            local = {**ctx, "position_embeddings": (t[..., h:h + d].to(cos.dtype), t[..., h + d:].to(sin.dtype))}
            return attention_part(self.block, t[..., :h], local)

        return fn, torch.cat([x, cos.to(x.dtype), sin.to(x.dtype)], -1)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        ctx = layer_context(args, kwargs) if self.kind == "hf" else None
        if (ctx and ctx.get("use_cache")) or (self.kind == "tiny" and (args or kwargs)):
            return self.block(x, *args, **kwargs)
        fn, inp = self._attention(x, ctx)
        a = self._run(self.attn, fn, inp, 0)
        xa = torch.cat([x, a], -1)
        h = x.shape[-1]
        return self._run(self.mlp, lambda t: tokenwise_part(self.block, t[..., :h], t[..., h:]), xa, 1)


def profile_block_ops(model: nn.Module, tokens: torch.Tensor) -> List[OpCost]:
    """Measured saved bytes, working set and forward seconds of each block's attention and MLP.

    ``model``: a TinyLM or a Hugging Face causal LM (its layers get their model's rotary positions).
    """
    import time

    from sgl.systems.memory.trace import record_trace
    from sgl.systems.memory.dsa import live_lower_bound
    from sgl.systems.runtime.models import decoder_of

    dec = decoder_of(model)
    costs = []
    with torch.no_grad():
        x = dec.embed(tokens)
    for i, block in enumerate(blocks_of(model)):
        layer_kind(block, "profile_block_ops")
        x = x.detach().requires_grad_(True)
        ctx = dec.layer_kwargs(x) or None
        steps = [("attn", lambda t: attention_part(block, t, ctx), x)]
        with torch.no_grad():
            a = attention_part(block, x, ctx)
        steps.append(("mlp", lambda t: tokenwise_part(block, t[..., :x.shape[-1]], t[..., x.shape[-1]:]),
                      torch.cat([x, a], -1).detach().requires_grad_(True)))
        for name, fn, inp in steps:
            saved = []
            with torch.autograd.graph.saved_tensors_hooks(
                    lambda t: saved.append(t.numel() * t.element_size() if t.untyped_storage().data_ptr() not in
                                           {p.untyped_storage().data_ptr() for p in block.parameters()} else 0) or t,
                    lambda t: t):
                out = fn(inp)
            trace = record_trace(lambda _: torch.autograd.grad(fn(inp).sum(), inp))
            t0 = time.perf_counter()
            with torch.no_grad():
                fn(inp)
            costs.append(OpCost(f"l{i}.{name}", float(sum(saved)), float(live_lower_bound(trace)),
                                time.perf_counter() - t0))
            del out
        with torch.no_grad():
            x = dec.run_layer(block, x)
    return costs


def apply_tsplit(model: nn.Module, plan: TSplitPlan) -> nn.Module:
    """Replace layer ``i`` of ``model`` (TinyLM ``blocks`` or HF ``model.layers``) by a :class:`TSplitBlock`
    running ``plan``'s ``l{i}.attn`` / ``l{i}.mlp``."""
    blocks = blocks_of(model)
    for i in range(len(blocks)):
        block = blocks[i].block if isinstance(blocks[i], TSplitBlock) else blocks[i]
        blocks[i] = TSplitBlock(block, plan.choice.get(f"l{i}.attn", "keep"), plan.choice.get(f"l{i}.mlp", "keep"))
    return model
