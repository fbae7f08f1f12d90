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

With a ``quantizer`` (the MEMO offload protocol: ``encode(t)`` to a ``uint8`` payload,
``decode(payload, numel)``; e.g. :class:`sgl.comm.compress.TinyScriptQuantizer`), what a
:class:`TSplitBlock` stores for backward is kept as payloads: under ``keep`` the activations its
ops save (on the device), under ``offload`` their host copies, under ``recompute`` / ``split:k``
the (micro-)tensor inputs each micro-op is recomputed from. The forward is unchanged; backward
sees the decoded values. Activations of ``b`` bits take ``~b/32`` of their float32 bytes
(:attr:`TSplitBlock.store`'s counters measure it); parameters and non-differentiable statistics
(norm and softmax statistics) stay exact.

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
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError, PlanError
from sgl.systems.memory.dsa import new_highs
from sgl.systems.memory.block_parts import attention_part, blocks_of, layer_context, layer_kind, tokenwise_part
from sgl.systems.memory.offload import HostStore

__all__ = ["OpCost", "TSplitPlan", "plan_tsplit", "split_apply", "TSplitBlock", "apply_tsplit", "profile_block_ops",
           "CodedStore", "check_quantizer"]

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


def _options(op: OpCost, bandwidth: float, splits: Sequence[int],
             stored: float = 1.0) -> List[Tuple[str, float, float, float]]:
    """(name, kept bytes, working set, added time); ``stored``: the fraction of saved bytes actually stored."""
    opts = [("keep", op.saved * stored, op.work, 0.0), ("offload", 0.0, op.work, op.saved * stored / bandwidth),
            ("recompute", 0.0, op.work, op.time)]
    opts += [(f"split:{k}", 0.0, op.work / k, op.time * (1 + SPLIT_OVERHEAD * (k - 1))) for k in splits if k > 1]
    return opts


def plan_tsplit(costs: Sequence[OpCost], budget: float, bandwidth: float, splits: Sequence[int] = (2, 4, 8),
                time_limit: float = 10.0, stored_fraction: float = 1.0) -> TSplitPlan:
    """The cheapest per-op choice that fits ``budget`` device bytes (exact MIP, HiGHS).

    ``stored_fraction``: the share of an op's saved bytes that ``keep`` / ``offload`` really store --
    ``bits / 32`` when the blocks get a ``bits``-bit quantizer (:func:`apply_tsplit`), 1 when exact.
    """
    import highspy

    budget = check_real(budget, "tsplit budget (bytes)", 0.0, open_low=True)
    bandwidth = check_real(bandwidth, "bandwidth (bytes/s)", 0.0, open_low=True)
    stored = check_real(stored_fraction, "plan_tsplit stored_fraction", 0.0, 1.0, open_low=True)
    if not costs:
        raise ConfigError("plan_tsplit: no ops to plan")
    opts = {op.name: _options(op, bandwidth, splits, stored) for op in costs}
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


def check_quantizer(quantizer: Any, who: str) -> Any:
    """``quantizer`` if it follows the protocol (``encode(t) -> uint8 tensor``, ``decode(payload, numel)``
    -> ``numel`` values), probed on 16 values; ``None`` passes through."""
    if quantizer is None:
        return None
    hint = ("a quantizer needs encode(t) -> uint8 tensor and decode(payload, numel) -> numel floats, "
            "e.g. sgl.comm.compress.TinyScriptQuantizer(4)")
    if not (callable(getattr(quantizer, "encode", None)) and callable(getattr(quantizer, "decode", None))):
        raise ConfigError(f"{who}: {type(quantizer).__name__} has no encode/decode; {hint}")
    probe = torch.linspace(-1, 1, 16)
    try:
        payload = quantizer.encode(probe)
        back = quantizer.decode(payload, probe.numel())
    except Exception as exc:  # noqa: BLE001 -- any failure of a foreign object is the same bad input
        raise ConfigError(f"{who}: {type(quantizer).__name__} failed on 16 values ({exc}); {hint}") from exc
    if not (isinstance(payload, torch.Tensor) and payload.dtype == torch.uint8 and isinstance(back, torch.Tensor)
            and back.numel() == probe.numel() and back.is_floating_point()):
        raise ConfigError(f"{who}: {type(quantizer).__name__} returned {type(payload).__name__} / "
                          f"{type(back).__name__} on 16 values; {hint}")
    return quantizer


class CodedStore:
    """What a :class:`TSplitBlock` stores for backward, float activations as ``quantizer`` payloads.

    Activations (tensors on the autograd graph, at least ``min_numel`` values, not a parameter's
    storage) are encoded; parameters, integer tensors and non-differentiable statistics (norm
    ``rstd``, attention ``logsumexp``) are kept as they are. ``host=True`` keeps everything in host
    memory (exact tensors through a :class:`~sgl.systems.memory.offload.HostStore`). Counters, in
    bytes: ``current`` / ``peak`` of what is stored now; ``coded`` (payload storage) and ``raw``
    (the float bytes those payloads stand for), summed over the stores made.
    """

    def __init__(self, params: List[torch.Tensor], quantizer: Any, min_numel: int = 1024, host: bool = False) -> None:
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.quantizer, self.min_numel, self.host = quantizer, int(min_numel), bool(host)
        self.exact = HostStore(params) if host else None
        self.current = self.peak = self.coded = self.raw = 0

    def _count(self, nbytes: int) -> None:
        self.current += nbytes
        self.peak = max(self.peak, self.current)

    def put(self, t: torch.Tensor, activation: Optional[bool] = None) -> Any:
        """Store ``t``; ``activation`` (default: ``t.requires_grad``) says whether it may be coded."""
        if t.untyped_storage().data_ptr() in self.param_ptrs:
            return ("param", t)
        activation = t.requires_grad if activation is None else activation
        if not (t.is_floating_point() and activation and t.numel() >= self.min_numel):
            return self.keep(t)
        payload = self.quantizer.encode(t.detach())
        if self.host:
            payload = payload.to("cpu", non_blocking=t.device.type == "cuda")
        nbytes = payload.untyped_storage().nbytes()
        self._count(nbytes)
        self.coded += nbytes
        self.raw += t.numel() * t.element_size()
        return ("coded", payload, t.shape, t.dtype, t.device, nbytes)

    def keep(self, t: torch.Tensor) -> Any:
        """Store ``t`` exactly (to host under ``host=True``)."""
        if self.exact is not None:
            return ("host", self.exact.put(t))
        nbytes = t.numel() * t.element_size()
        self._count(nbytes)
        return ("exact", t, nbytes)

    def get(self, packed: Any) -> torch.Tensor:
        if packed[0] == "param":
            return packed[1]
        if packed[0] == "host":
            return self.exact.get(packed[1])
        if packed[0] == "exact":
            self.current -= packed[2]
            return packed[1]
        _, payload, shape, dtype, device, nbytes = packed
        self.current -= nbytes
        return self.quantizer.decode(payload.to(device), int(torch.Size(shape).numel())).reshape(shape).to(dtype)

    def hooks(self) -> Any:
        return torch.autograd.graph.saved_tensors_hooks(self.put, self.get)


@contextmanager
def _replayed_rng(state: Tuple[torch.Tensor, Optional[torch.Tensor]], device: torch.device) -> Iterator[None]:
    """The forward's RNG state again (dropout in a recomputed op draws what it drew), restored after."""
    cuda = device.type == "cuda"
    with torch.random.fork_rng(devices=[device] if cuda else []):
        torch.set_rng_state(state[0])
        if cuda:
            torch.cuda.set_rng_state(state[1], device)
        yield


class _CodedRecompute(torch.autograd.Function):
    """``run(x)`` that keeps only ``x`` (coded; its channels from ``exact_from`` on exactly) and runs
    again from the decoded input in backward -- a checkpoint whose saved input is quantised."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, run: Any, store: CodedStore, exact_from: Optional[int],
                *params: torch.Tensor) -> torch.Tensor:
        ctx.run, ctx.store, ctx.params, ctx.device = run, store, params, x.device
        if exact_from is None:
            ctx.packed = (store.put(x, activation=True), None)
        else:
            ctx.packed = (store.put(x[..., :exact_from], activation=True),
                          store.keep(x[..., exact_from:].detach().clone()))
        ctx.rng = (torch.get_rng_state(), torch.cuda.get_rng_state(x.device) if x.device.type == "cuda" else None)
        with torch.no_grad():
            return run(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Any, ...]:
        head, tail = ctx.packed
        x = ctx.store.get(head)
        if tail is not None:
            x = torch.cat([x, ctx.store.get(tail)], -1)
        x = x.detach().requires_grad_(True)
        with torch.enable_grad(), _replayed_rng(ctx.rng, ctx.device):
            out = ctx.run(x)
        grads = torch.autograd.grad(out, (x,) + ctx.params, grad, allow_unused=True)
        return (grads[0], None, None, None) + tuple(grads[1:])


class TSplitBlock(nn.Module):
    """A Transformer block run by a plan: ``attn`` and ``mlp`` each keep / offload / recompute / split:k.

    Attention splits along the batch axis, the token-wise part (output projection and MLP) along
    the sequence axis; results equal the plain block (forward bit-for-bit on CPU, gradients up to
    summation order).  ``block`` is a :class:`~sgl.systems.runtime.TransformerBlock` or a Hugging
    Face Llama-style decoder layer, called as its model calls it
    (:mod:`sgl.systems.memory.block_parts`).

    Args:
        block: the layer (its weights are used, not copied).
        attn, mlp: ``keep``, ``offload``, ``recompute`` or ``split:K`` for each part.
        quantizer: keep what the block stores for backward as payloads (module docstring; e.g.
            ``TinyScriptQuantizer(4)``); ``None`` stores it exactly, as without the argument.
        min_numel: smaller tensors are stored exactly.

    >>> import torch
    >>> from sgl.comm.compress import TinyScriptQuantizer
    >>> from sgl.systems.parallel import get_model_config
    >>> from sgl.systems.runtime import TransformerBlock
    >>> torch.manual_seed(0); block = TransformerBlock(get_model_config("tiny"))  # doctest: +ELLIPSIS
    <...>
    >>> split = TSplitBlock(block, "keep", "split:2", quantizer=TinyScriptQuantizer(4))
    >>> split(torch.randn(2, 16, 64, requires_grad=True)).sum().backward()
    >>> round(split.store.raw / split.store.coded, 1)   # float32 bytes per payload byte, ~32/4
    7.9
    """

    def __init__(self, block: nn.Module, attn: str = "keep", mlp: str = "keep", quantizer: Any = None,
                 min_numel: int = 1024) -> None:
        super().__init__()
        for opt in (attn, mlp):
            if opt not in ("keep", "offload", "recompute") and not (opt.startswith("split:") and opt[6:].isdigit()):
                raise ConfigError(f"TSplitBlock option must be keep, offload, recompute or split:K, got {opt!r}")
            if opt.startswith("split:") and int(opt[6:]) < 1:
                raise ConfigError(f"TSplitBlock option {opt!r}: split into at least 1 micro-tensor")
        self.kind = layer_kind(block, "TSplitBlock")
        self.block, self.attn, self.mlp = block, attn, mlp
        self.quantizer = check_quantizer(quantizer, "TSplitBlock")
        self.min_numel = check_int(min_numel, "TSplitBlock min_numel", 1)
        params = list(block.parameters())
        self.store = HostStore(params)
        if self.quantizer is not None:
            self.store = CodedStore(params, self.quantizer, self.min_numel)
            self.host_store = CodedStore(params, self.quantizer, self.min_numel, host=True)

    def _run(self, opt: str, fn, x: torch.Tensor, dim: int, exact_from: Optional[int] = None) -> torch.Tensor:
        if self.quantizer is not None and torch.is_grad_enabled():
            return self._run_coded(opt, fn, x, dim, exact_from)
        if opt == "keep" or not torch.is_grad_enabled():
            return fn(x)
        if opt == "offload":
            with self.store.hooks():
                return fn(x)
        if opt == "recompute":
            return checkpoint(fn, x, use_reentrant=False)
        return split_apply(fn, x, int(opt[6:]), dim)

    def _run_coded(self, opt: str, fn, x: torch.Tensor, dim: int, exact_from: Optional[int]) -> torch.Tensor:
        """``_run`` with a quantizer: saved activations, host copies or micro-op inputs as payloads."""
        if opt in ("keep", "offload"):
            with (self.store if opt == "keep" else self.host_store).hooks():
                return fn(x)
        params = tuple(p for p in self.block.parameters() if p.requires_grad)
        chunks = 1 if opt == "recompute" else int(opt[6:])
        parts = [_CodedRecompute.apply(p, fn, self.store, exact_from, *params) for p in x.chunk(chunks, dim)]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim)

    def _attention(self, x: torch.Tensor, ctx):
        """``(fn, input, exact_from)`` of the attention part; per-sample rotary tables travel with ``x`` along
        the batch axis (its channels from ``exact_from`` on, never quantised)."""
        if ctx is None:
            return (lambda t: attention_part(self.block, t)), x, None
        cos, sin = ctx["position_embeddings"]
        mask = ctx.get("attention_mask")
        if mask is not None and mask.dim() > 0 and mask.shape[0] > 1 and self.attn.startswith("split:"):
            raise ConfigError("TSplitBlock splits attention along the batch axis; a per-sample attention_mask is not "
                              "split with it: use attn='keep', 'offload' or 'recompute'")
        if cos.shape[0] == 1:
            return (lambda t: attention_part(self.block, t, ctx)), x, None
        h, d = x.shape[-1], cos.shape[-1]

        def fn(t: torch.Tensor) -> torch.Tensor:
            local = {**ctx, "position_embeddings": (t[..., h:h + d].to(cos.dtype), t[..., h + d:].to(sin.dtype))}
            return attention_part(self.block, t[..., :h], local)

        return fn, torch.cat([x, cos.to(x.dtype), sin.to(x.dtype)], -1), h

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        ctx = layer_context(args, kwargs) if self.kind == "hf" else None
        if (ctx and ctx.get("use_cache")) or (self.kind == "tiny" and (args or kwargs)):
            return self.block(x, *args, **kwargs)
        fn, inp, exact_from = self._attention(x, ctx)
        a = self._run(self.attn, fn, inp, 0, exact_from)
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


def apply_tsplit(model: nn.Module, plan: TSplitPlan, quantizer: Any = None, min_numel: int = 1024) -> nn.Module:
    """Replace layer ``i`` of ``model`` (TinyLM ``blocks`` or HF ``model.layers``) by a :class:`TSplitBlock`
    running ``plan``'s ``l{i}.attn`` / ``l{i}.mlp``; every block stores through ``quantizer`` (``None``: exactly)."""
    quantizer = check_quantizer(quantizer, "apply_tsplit")
    blocks = blocks_of(model)
    for i in range(len(blocks)):
        block = blocks[i].block if isinstance(blocks[i], TSplitBlock) else blocks[i]
        blocks[i] = TSplitBlock(block, plan.choice.get(f"l{i}.attn", "keep"), plan.choice.get(f"l{i}.mlp", "keep"),
                                quantizer=quantizer, min_numel=min_numel)
    return model
