"""Training the small MoE LM, one process or many: the same loop for every dispatch and placement.

:func:`train_moe_lm` is the per-rank body (run it under ``torchrun`` after ``comm.init()``, or
through :func:`sgl.comm.spawn`).  Each step takes one *global* batch ``[B, S+1]``; rank ``r`` of
``W`` starts with rows ``[r*B/W, (r+1)*B/W)``.  The loss is ``sum of token losses / global
token count + aux / W`` on every rank, so after the gradient all-reduce every rank holds the
single-process gradient of the global batch.  With NetMoE placement samples change ranks inside
an MoE layer; the :class:`SampleContext` tracks which global samples a rank holds, and the
targets are read from the global batch (every rank has it: it is token ids, not activations).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl import comm
from sgl._checks import check_choice, check_int, check_real
from sgl.errors import ConfigError
from sgl.systems.moe.config import MoEConfig
from sgl.systems.moe.layer import MoELayer, moe_aux_loss, moe_layers, update_expert_bias
from sgl.systems.parallel.model import TransformerConfig
from sgl.systems.runtime.tiny_lm import TinyLM

__all__ = ["check_options", "TrainSpec", "SampleContext", "build_moe_lm", "build_model", "train_moe_lm", "DISPATCHES",
           "PLACEMENTS", "BALANCERS", "PRECISIONS"]

DISPATCHES = ("local", "ep", "padded", "lsh", "fsep", "kmeans")  # kmeans: the LSH oracle (benchmarks)
PLACEMENTS = ("none", "netmoe")
PRECISIONS = ("fp32", "bf16")
BALANCERS = ("none", "flexmoe", "laer")


@dataclass
class SampleContext:
    """Global ids of the samples this rank holds right now (NetMoE moves them between ranks)."""

    sample_ids: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))


@dataclass
class TrainSpec:
    """Everything one rank needs to train: shapes, data, dispatch, placement, balancing.

    The model is either :class:`TinyLM` (``model`` + ``moe``) or a Hugging Face Mixtral /
    Qwen2-MoE causal LM built from ``hf_config`` (a ``transformers`` config's ``to_dict()``;
    ``model``/``moe`` stay None) and converted with :func:`sgl.systems.moe.convert`.
    ``precision="bf16"``: forward under bf16 autocast (experts and attention in bf16, fp32 master
    weights and optimizer).  ``grad_sync="bucketed"``: non-expert gradients are all-reduced in
    ``bucket_mb`` buckets during backward; ``"flat"``: one all-reduce after it.  ``device``:
    where the model lives (default: the communication device once ``comm`` is initialised, else
    :func:`sgl.device.get_device`).
    """

    model: TransformerConfig | None
    moe: MoEConfig | None
    batches: torch.Tensor  # [steps, B, S+1] global token batches
    lr: float = 1e-3
    optimizer: str = "adamw"
    dispatch: str = "ep"
    placement: str = "none"
    balance: str = "none"
    ep_size: int | None = None
    lsh_hashes: int = 6
    lsh_proj_dim: int | None = None
    lsh_compensate: bool = True  # also for dispatch='kmeans'
    kmeans_rate: float = 0.2  # dispatch='kmeans': centroids / routed rows of each expert
    fsep_layouts: list[list[list[int]]] | None = None  # per step: per rank the hosted experts
    nodes: int = 1
    netmoe_count_residual: bool = True  # the solver weighs moving a sample's residual stream
    netmoe_refine: int = 0  # min-max swap rounds after NetMoE's two stages
    val_batches: torch.Tensor | None = None
    record_grads: bool = False
    record_traces: bool = False
    seed: int = 0
    timeout: float | None = None
    progress: bool = False
    hf_config: dict[str, Any] | None = None
    precision: str = "fp32"
    grad_sync: str = "bucketed"
    bucket_mb: float = 25.0
    netmoe_overlap: bool = True  # NetMoE solves from the previous step's routing, in a thread
    device: str | None = None
    expert_impl: str | None = None  # HF models: how experts run (TinyLM: MoEConfig.expert_impl)
    fused_optimizer: bool = True  # AdamW as one fused kernel per parameter group (CPU and CUDA)

    def __post_init__(self) -> None:
        check_options(self.dispatch, self.placement, self.balance)
        check_choice(self.precision, "precision", PRECISIONS)
        check_choice(self.grad_sync, "grad_sync", ("bucketed", "flat"))
        check_real(self.bucket_mb, "bucket_mb", 0.0, open_low=True)
        if (self.hf_config is None) == (self.model is None or self.moe is None):
            raise ConfigError("TrainSpec takes either model + moe (TinyLM) or hf_config (a transformers MoE "
                              "config dict), not both and not neither")
        check_choice(self.optimizer, "optimizer", ("sgd", "adamw"))
        check_real(self.lr, "lr", 0.0, open_low=True)
        check_int(self.lsh_hashes, "lsh_hashes", 1)
        check_real(self.kmeans_rate, "kmeans_rate", 0.0, 1.0, open_low=True)
        if self.batches.dim() != 3 or self.batches.dtype != torch.long:
            raise ConfigError(f"batches must be a [steps, B, S+1] int64 tensor, got {tuple(self.batches.shape)} "
                              f"{self.batches.dtype}")


def check_options(dispatch: str, placement: str, balance: str) -> None:
    """The dispatch / placement / balance combination is one this runtime implements."""
    check_choice(dispatch, "dispatch", DISPATCHES)
    check_choice(placement, "placement", PLACEMENTS)
    check_choice(balance, "balance", BALANCERS)
    if balance != "none" and dispatch != "fsep":
        raise ConfigError(f"balance={balance!r} re-lays experts out every step, which needs "
                          "dispatch='fsep'; use --dispatch fsep or --balance none")
    if placement == "netmoe" and dispatch not in ("ep", "local"):
        raise ConfigError(f"placement='netmoe' is implemented on the plain EP dispatch, not dispatch={dispatch!r}")


def build_moe_lm(cfg: TransformerConfig, moe: MoEConfig, seed: int = 0) -> TinyLM:
    """A :class:`TinyLM` whose every FFN is a :class:`MoELayer` (layer ``i`` seeded ``moe.seed + i``)."""
    if moe.hidden_size != cfg.hidden_size:
        raise ConfigError(f"MoEConfig.hidden_size={moe.hidden_size} differs from the model's "
                          f"hidden_size={cfg.hidden_size}")
    torch.manual_seed(seed)
    return TinyLM(cfg, lambda i: MoELayer(replace(moe, seed=moe.seed + 1000 * i)))


def _install(model: nn.Module, spec: TrainSpec, ctx: SampleContext) -> Any:
    """Shard experts and set every layer's dispatcher for ``spec``; returns the parallel helper."""
    from sgl.systems.moe.ep import ExpertParallel

    world = comm.get_world_size()
    if spec.dispatch == "local":
        if world > 1:
            raise ConfigError("dispatch='local' runs in one process; use 'ep' with several ranks")
        return None
    if spec.dispatch == "fsep":
        from sgl.systems.moe.fsep import FSEPRuntime

        return FSEPRuntime(model, spec, ctx)
    ep = ExpertParallel(spec.ep_size, timeout=spec.timeout)
    ep.shard(model, "padded" if spec.dispatch == "padded" else "ep")
    if spec.dispatch == "lsh":
        from sgl.systems.moe.lsh import LSHDispatcher

        for i, layer in enumerate(moe_layers(model)):
            layer.dispatcher = LSHDispatcher(layer.dispatcher, layer.cfg.hidden_size, spec.lsh_hashes,
                                             seed=spec.seed + i, compensate=spec.lsh_compensate,
                                             proj_dim=spec.lsh_proj_dim)
    if spec.dispatch == "kmeans":
        from sgl.systems.moe.oracle import KMeansDispatcher

        for i, layer in enumerate(moe_layers(model)):
            layer.dispatcher = KMeansDispatcher(layer.dispatcher, layer.cfg.hidden_size, spec.kmeans_rate,
                                                seed=spec.seed + i, compensate=spec.lsh_compensate)
    if spec.placement == "netmoe":
        from sgl.systems.moe.netmoe_runtime import NetMoEDispatcher

        if ep.ep_size != world:
            raise ConfigError("placement='netmoe' needs pure expert parallelism (ep_size = world size)")
        for layer in moe_layers(model):
            layer.dispatcher = NetMoEDispatcher(ep, ctx, nodes=spec.nodes,
                                                count_residual=spec.netmoe_count_residual,
                                                refine=spec.netmoe_refine, overlap=spec.netmoe_overlap)
    return ep


def _local_rows(batch_size: int, rank: int, world: int, device: torch.device) -> torch.Tensor:
    if batch_size % world:
        raise ConfigError(f"global batch {batch_size} is not divisible by {world} ranks")
    per = batch_size // world
    return torch.arange(rank * per, (rank + 1) * per, device=device)


def build_model(spec: TrainSpec) -> nn.Module:
    """The model ``spec`` names (TinyLM with MoE FFNs, or a converted HF MoE LM), on its device."""
    if spec.hf_config is not None:
        from sgl.systems.moe.hf import build_hf_model

        model = build_hf_model(spec.hf_config, spec.seed, spec.expert_impl or "auto")
    else:
        model = build_moe_lm(spec.model, spec.moe, spec.seed)
    return model.to(_device(spec))


def _device(spec: TrainSpec) -> torch.device:
    from sgl.device import get_device

    if spec.device is not None:
        return get_device(spec.device)
    return comm.wire_device() if comm.is_initialized() else get_device()


def _logits(model: nn.Module, ids: torch.Tensor, precision: str) -> torch.Tensor:
    """Forward (HF models return an output object) under bf16 autocast when asked; fp32 logits."""
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = model(input_ids=ids, use_cache=False) if hasattr(model, "config") else model(ids)
    return (out.logits if hasattr(out, "logits") else out).float()


def make_optimizer(params: list, spec: TrainSpec, device: torch.device) -> torch.optim.Optimizer:
    """SGD, or AdamW (fused into one kernel per group when ``spec.fused_optimizer`` and the device has it:
    about 10x less time than torch's CPU default, the per-parameter loop, on the ~50 M-parameter MoE)."""
    if spec.optimizer == "sgd":
        return torch.optim.SGD(params, lr=spec.lr)
    fused = spec.fused_optimizer and device.type in ("cpu", "cuda")
    return torch.optim.AdamW(params, lr=spec.lr, weight_decay=0.0, fused=fused or None)


def train_moe_lm(rank: int, world: int, spec: TrainSpec) -> dict[str, Any]:
    """Train on ``spec.batches``; returns losses (global, every rank equal), timings, grads, traces."""
    torch.set_num_threads(1)
    model = build_model(spec)
    device = next(model.parameters()).device
    ctx = SampleContext()
    par = _install(model, spec, ctx)
    if par is not None and spec.grad_sync == "bucketed":
        par.overlap_gradients(model, spec.bucket_mb)
    params = list(model.parameters())  # FSEP: the shards, so optimizer state never moves
    opt = make_optimizer(params, spec, device)
    steps = spec.batches.shape[0]
    out: dict[str, Any] = {"loss": [], "step_time": [], "grads": [], "traces": [], "sent_rows": 0, "dropped": []}
    it = range(steps)
    if spec.progress and rank == 0:
        from tqdm import tqdm

        it = tqdm(it, desc=f"moe {spec.dispatch}", unit="step")
    for step in it:
        t0 = time.perf_counter()
        span = torch.profiler.record_function("sgl.moe.step")   # one range per step, for profiles
        span.__enter__()
        if par is not None and hasattr(par, "begin_step"):
            par.begin_step(step)
        batch = spec.batches[step].to(device)
        loss, local_loss = _loss(model, batch, rank, world, ctx, spec.precision)
        out["dropped"].append([layer.last_assignment.dropped for layer in moe_layers(model)])  # this rank's
        opt.zero_grad(set_to_none=True)
        (local_loss + moe_aux_loss(model) / world).backward()
        if par is not None:
            par.sync_gradients(model)
        if spec.record_grads:
            out["grads"].append(_grads(model, par))
        if spec.record_traces:
            out["traces"].append(_trace(model, ctx, batch.shape[0]))
        opt.step()
        update_expert_bias(model)
        span.__exit__(None, None, None)
        out["step_time"].append(time.perf_counter() - t0)
        out["loss"].append(float(loss))
    out["sent_rows"] = sum(layer.dispatcher.sent_rows for layer in moe_layers(model))
    out["layout_changes"] = getattr(par, "plans_applied", 0)
    out["moved_samples"] = sum(getattr(layer.dispatcher, "moved", 0) for layer in moe_layers(model))
    out["routed_rows"] = sum(getattr(layer.dispatcher, "routed_rows", layer.dispatcher.sent_rows)
                             for layer in moe_layers(model))
    if spec.val_batches is not None:
        out["val_loss"] = evaluate(model, spec.val_batches, rank, world, ctx, spec.precision)
        compressed = [layer.dispatcher for layer in moe_layers(model) if hasattr(layer.dispatcher, "enabled")]
        if compressed:  # LSH / k-means: the same model evaluated with exact (uncompressed) dispatch
            for d in compressed:
                d.enabled = False
            out["val_loss_exact"] = evaluate(model, spec.val_batches, rank, world, ctx, spec.precision)
            for d in compressed:
                d.enabled = True
    return out


def _loss(model: nn.Module, batch: torch.Tensor, rank: int, world: int,
          ctx: SampleContext, precision: str = "fp32") -> tuple[float, torch.Tensor]:
    rows = _local_rows(batch.shape[0], rank, world, batch.device)
    ctx.sample_ids = rows.clone()
    logits = _logits(model, batch[rows, :-1], precision)
    targets = batch[ctx.sample_ids, 1:]  # NetMoE may have moved samples: read theirs
    total = targets.numel() * world
    local = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum") / total
    glob = comm.all_reduce(local.detach().clone())
    return float(glob), local


@torch.no_grad()
def evaluate(model: nn.Module, batches: torch.Tensor, rank: int, world: int, ctx: SampleContext,
             precision: str = "fp32") -> float:
    """Mean next-token loss over ``batches`` ``[n, B, S+1]`` (global, equal on every rank)."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    losses = [_loss(model, b.to(device), rank, world, ctx, precision)[0] for b in batches]
    model.train(was)
    return sum(losses) / max(1, len(losses))


def _grads(model: nn.Module, par: Any) -> dict[str, torch.Tensor]:
    """Gradients by name; expert gradients as full ``[E, ...]`` tensors (gathered over EP)."""
    if par is not None and hasattr(par, "full_grads"):
        return par.full_grads(model)
    out = {}
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        g = p.grad.detach().clone()
        if getattr(p, "sgl_expert", False) and par is not None and par.ep_size > 1:
            g = torch.cat(comm.all_gather(g, group=par.ep_group))
        out[name] = g.cpu()
    return out


def _trace(model: nn.Module, ctx: SampleContext, batch_size: int) -> torch.Tensor:
    """``[layers, B, E]`` per-sample expert pair counts of the last forward, in global sample order."""
    per_layer = []
    for layer in moe_layers(model):
        a, (b, s) = layer.last_assignment, layer.last_tokens
        e = layer.cfg.num_experts
        sample = a.token // s
        local = torch.bincount(sample * e + a.expert, minlength=b * e).view(b, e)
        ids = getattr(layer.dispatcher, "input_sample_ids", None)
        ids = ctx.sample_ids if ids is None else ids
        counts = torch.cat(comm.all_gather(local))
        order = torch.cat(comm.all_gather(ids))
        full = torch.zeros(batch_size, e, dtype=torch.long, device=counts.device)
        full[order] = counts
        per_layer.append(full)
    return torch.stack(per_layer).cpu()
