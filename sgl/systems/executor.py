"""Run a searched plan on a small Transformer with real PyTorch parallelism over :mod:`sgl.comm`.

What each layer strategy becomes (world sizes where one of these is the whole plan, e.g. 2
gloo processes on CPU; NCCL on GPUs runs the same code):

* ``dp`` with every layer replicated -> :class:`torch.nn.parallel.DistributedDataParallel`;
* layers with ``sdp`` -> FSDP2 :func:`torch.distributed.fsdp.fully_shard` per layer (ZeRO-3);
  replicated layers next to them get their gradients all-reduced (mean) after backward, which
  is what DDP does, so DP and ZeRO-3 layers mix as in Galvatron's layer-wise plans;
* ``tp > 1`` -> DTensor tensor parallelism (Megatron layout: q/k/v and the MLP's first
  matrices column-wise, the output projections row-wise) on the ``tp`` dimension of a
  (dp, tp) device mesh -- consecutive or strided TP groups as ``tp_consec`` says -- with
  gradients averaged over the ``dp`` dimension when ``dp > 1``;
* ``pp > 1`` -> a hand-written 1F1B pipeline: stage ``k`` holds its ``pp_division`` layers,
  activations go forward and gradients back with :func:`sgl.comm.send` / :func:`sgl.comm.recv`;
* ``ckpt`` -> :func:`torch.utils.checkpoint.checkpoint` around that layer.

Every rank builds the same initial weights from the seed, so losses can be compared with
:func:`train_reference` (one process, the whole batch).  Per-rank measurements come back too:
step time, model-state bytes (parameters + gradients + Adam states actually held) and the peak
of activation bytes saved for backward (counted with saved-tensor hooks).

>>> from sgl.systems.executor import ExecConfig, train_reference
>>> losses = train_reference(ExecConfig(steps=2, global_bsz=4))
>>> len(losses), losses[0] > losses[1]
(2, True)
"""
from __future__ import annotations

import contextlib
import resource
import time
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from sgl import comm
from sgl.errors import PlanError
from sgl.systems.plan.config_io import Plan
from sgl.systems.plan.model import TransformerConfig, get_model_config

__all__ = ["ExecConfig", "TinyLM", "TransformerBlock", "train_reference", "run_plan", "run_plans", "plan_worker", "make_plan"]


@dataclass
class ExecConfig:
    """Model preset, steps, batch and optimiser of an execution."""

    model: str = "tiny"
    steps: int = 4
    global_bsz: int = 8
    chunks: int = 1
    lr: float = 1e-3
    seed: int = 0
    threads: int = 1

    def model_config(self) -> TransformerConfig:
        return get_model_config(self.model)


class TransformerBlock(nn.Module):
    """Pre-norm decoder layer: causal self-attention and a gated (SwiGLU) or GELU MLP."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        h, f = cfg.hidden_size, cfg.ffn_hidden_size
        self.head_dim = cfg.head_dim
        self.ln1 = nn.LayerNorm(h)
        self.q = nn.Linear(h, h, bias=False)
        self.k = nn.Linear(h, h, bias=False)
        self.v = nn.Linear(h, h, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.ln2 = nn.LayerNorm(h)
        self.w1 = nn.Linear(h, f, bias=False)
        self.w3 = nn.Linear(h, f, bias=False) if cfg.gated_mlp else None
        self.w2 = nn.Linear(f, h, bias=False)
        self.checkpoint = False

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        y = self.ln1(x)
        # Under tensor parallelism q/k/v hold heads/tp heads locally: infer the count.
        q = self.q(y).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k(y).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v(y).view(b, s, -1, self.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        y = self.ln2(x)
        hidden = F.silu(self.w1(y)) * self.w3(y) if self.w3 is not None else F.gelu(self.w1(y))
        return x + self.w2(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            return checkpoint(self._forward, x, use_reentrant=False)
        return self._forward(x)


class TinyLM(nn.Module):
    """Embedding, ``num_layers`` :class:`TransformerBlock`, final norm and LM head."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.blocks = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def __repr__(self) -> str:
        c = self.cfg
        return f"TinyLM(layers={c.num_layers}, hidden={c.hidden_size}, heads={c.num_heads}, vocab={c.vocab_size})"


def lm_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def batch_for_step(cfg: ExecConfig, step: int) -> torch.Tensor:
    """The global batch of step ``step`` (same on every rank)."""
    mc = cfg.model_config()
    gen = torch.Generator().manual_seed(cfg.seed * 100_003 + step)
    return torch.randint(0, mc.vocab_size, (cfg.global_bsz, mc.seq_length), generator=gen)


def build_model(cfg: ExecConfig) -> TinyLM:
    torch.manual_seed(cfg.seed)
    return TinyLM(cfg.model_config())


def train_reference(cfg: ExecConfig) -> List[float]:
    """Single-process training on the whole batch: the losses a parallel run must reproduce."""
    torch.set_num_threads(cfg.threads)
    model = build_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    for step in range(cfg.steps):
        tokens = batch_for_step(cfg, step)
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model(tokens), tokens)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


# ----------------------------------------------------------------------------- measurement
class _SavedBytes:
    """Peak bytes of activations saved for backward (parameters excluded)."""

    def __init__(self, params: Sequence[torch.Tensor]) -> None:
        self.param_ptrs = {_local(p).data_ptr() for p in params}
        self.current = 0
        self.peak = 0

    def pack(self, t: torch.Tensor):
        local = _local(t)
        size = 0 if local.data_ptr() in self.param_ptrs else local.numel() * local.element_size()
        self.current += size
        self.peak = max(self.peak, self.current)
        return (t, size)

    def unpack(self, packed):
        t, size = packed
        self.current -= size
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _state_bytes(params: Sequence[torch.Tensor], opt: torch.optim.Optimizer) -> int:
    total = 0
    for p in params:
        total += _local(p).numel() * _local(p).element_size()
        if p.grad is not None:
            total += _local(p.grad).numel() * _local(p.grad).element_size()
    for state in opt.state.values():
        for value in state.values():
            if torch.is_tensor(value) and value.dim() > 0:
                total += _local(value).numel() * _local(value).element_size()
    return total


# ----------------------------------------------------------------------------- plans
def make_plan(kind: str, world_size: int, cfg: ExecConfig, *, ckpt: bool = False) -> Plan:
    """Uniform plans for the executor's tests and calibration: ``dp``, ``sdp``, ``tp``, ``pp``."""
    from sgl.systems.plan.space import Strategy

    layers = cfg.model_config().num_layers
    if kind == "dp":
        s, pp = Strategy(1, 1, world_size, ckpt=ckpt), 1
    elif kind == "sdp":
        s, pp = Strategy(1, 1, world_size, sdp=True, ckpt=ckpt), 1
    elif kind == "tp":
        s, pp = Strategy(1, world_size, 1, ckpt=ckpt), 1
    elif kind == "pp":
        s, pp = Strategy(world_size, 1, 1, ckpt=ckpt), world_size
    else:
        raise PlanError(f"unknown plan kind {kind!r}; choose dp, sdp, tp or pp")
    base, extra = divmod(layers, pp)
    division = [base + (1 if k >= pp - extra else 0) for k in range(pp)]
    return Plan(1, world_size, pp, division, cfg.chunks, cfg.global_bsz, [s] * layers,
                embed_sdp=(kind == "sdp"), model=cfg.model)


def _check_plan(plan: Plan, world: int, cfg: ExecConfig) -> None:
    mc = cfg.model_config()
    if plan.num_devices != world:
        raise PlanError(f"plan is for {plan.num_devices} devices but {world} processes run it")
    if len(plan.strategies) != mc.num_layers:
        raise PlanError(f"plan has {len(plan.strategies)} layers, model {mc.name!r} has {mc.num_layers}")
    if plan.global_bsz % plan.chunks:
        raise PlanError(f"global_bsz {plan.global_bsz} is not divisible by chunks {plan.chunks}")
    tps = {s.tp for s in plan.strategies}
    if plan.pp > 1 and (plan.pp != world or tps != {1}):
        raise PlanError("the executor runs pipeline plans with pp = world size and tp = 1 "
                        f"(got pp={plan.pp}, tp={sorted(tps)} on {world} processes)")
    if len(tps) > 1 or world % next(iter(tps)):
        raise PlanError(f"the executor runs one TP degree dividing the world size {world} for all layers; "
                        f"got {sorted(tps)}")
    if tps != {1}:
        if any(s.sdp for s in plan.strategies) or plan.embed_sdp:
            raise PlanError("the executor does not combine ZeRO-3 with tensor parallelism yet; "
                            "use dp_types_enc=0 on TP layers")
        if len({s.tp_consec for s in plan.strategies}) > 1:
            raise PlanError("the executor needs the same tp_consecutive_flags on every layer")
    for s in plan.strategies:
        if s.sp:
            raise PlanError("the executor does not run Ulysses sequence parallelism (use_sp=1) yet")
        mc.check_tp(s.tp, vocab_tp=1)
    for s in plan.strategies:
        if (plan.global_bsz // plan.chunks) % s.dp:
            raise PlanError(f"micro-batch {plan.global_bsz // plan.chunks} is not divisible by dp={s.dp}")


def plan_worker(rank: int, world: int, plan_json: Dict[str, Any], cfg_dict: Dict[str, Any]) -> Dict[str, Any]:
    """Body of one process (module level so :func:`sgl.comm.spawn` can pickle it)."""
    cfg = ExecConfig(**cfg_dict)
    torch.set_num_threads(cfg.threads)
    plan = Plan.from_galvatron(plan_json, num_devices=world)
    _check_plan(plan, world, cfg)
    # Gloo runs on CPU; NCCL on this rank's GPU (the weights are built on CPU from the seed
    # first, so every backend starts from the same model).
    device = torch.device("cuda", comm.get_local_rank()) if comm.get_backend() == "nccl" else torch.device("cpu")
    model = build_model(cfg).to(device)
    for block, s in zip(model.blocks, plan.strategies):
        block.checkpoint = s.ckpt
    if plan.pp > 1:
        return _run_pipeline(rank, world, plan, cfg, model, device)
    tp = plan.strategies[0].tp
    dp = world // tp
    ddp_model: nn.Module = model
    manual_sync: List[nn.Parameter] = []
    dp_group = None
    if tp > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        # Consecutive TP groups: ranks r*tp .. r*tp+tp-1 (intra-node); strided: every dp-th rank.
        if plan.strategies[0].tp_consec:
            mesh = init_device_mesh(device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
        else:
            mesh = init_device_mesh(device.type, (tp, dp), mesh_dim_names=("tp", "dp"))
        layout = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel(),
                  "w1": ColwiseParallel(), "w2": RowwiseParallel()}
        if model.blocks[0].w3 is not None:
            layout["w3"] = ColwiseParallel()
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], layout)
        dp_rank = mesh.get_local_rank("dp")
        if dp > 1:
            # DP across TP groups: every gradient (local shards of TP weights, replicated
            # norms/embedding/head) is averaged over the DP group, as DDP would.
            dp_group = mesh["dp"].get_group()
            manual_sync = list(model.parameters())
    else:
        dp_rank = rank
        sharded = [s.sdp for s in plan.strategies]
        if not any(sharded) and not plan.embed_sdp:
            from torch.nn.parallel import DistributedDataParallel

            ddp_model = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
        else:
            from torch.distributed.fsdp import fully_shard

            for block, sdp in zip(model.blocks, sharded):
                if sdp:
                    fully_shard(block)
            if plan.embed_sdp:
                fully_shard(model)
            owned = {id(p) for block, sdp in zip(model.blocks, sharded) if sdp for p in block.parameters()}
            manual_sync = [p for p in model.parameters() if id(p) not in owned and not plan.embed_sdp]
    per_rank = plan.global_bsz // dp
    local_tokens = lambda tokens: tokens[dp_rank * per_rank:(dp_rank + 1) * per_rank]  # noqa: E731
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    counter = _SavedBytes(list(model.parameters()))
    losses, times = [], []
    for step in range(cfg.steps):
        tokens = local_tokens(batch_for_step(cfg, step)).to(device)
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        micro = tokens.chunk(plan.chunks)
        total = 0.0
        for i, mb in enumerate(micro):
            sync = contextlib.nullcontext()
            if isinstance(ddp_model, nn.parallel.DistributedDataParallel) and i < len(micro) - 1:
                sync = ddp_model.no_sync()
            with sync, counter.hooks():
                loss = lm_loss(ddp_model(mb), mb) / len(micro)
                loss.backward()
            total += float(loss.detach())
        for p in manual_sync:
            if p.grad is not None:
                comm.all_reduce(_local(p.grad), op="mean", group=dp_group)
        opt.step()
        times.append(time.perf_counter() - started)
        # Every rank of a TP group holds the same loss, so the world mean is the DP mean.
        losses.append(float(comm.all_reduce(torch.tensor([total], device=device), op="mean")))
    return _report(losses, times, list(model.parameters()), opt, counter)


def _report(losses, times, params, opt, counter) -> Dict[str, Any]:
    steady = times[1:] or times
    return {
        "losses": losses,
        "step_ms": 1000.0 * sorted(steady)[len(steady) // 2],
        "model_state_mb": _state_bytes(params, opt) / 2 ** 20,
        "activation_peak_mb": counter.peak / 2 ** 20,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def _run_pipeline(rank: int, world: int, plan: Plan, cfg: ExecConfig, model: TinyLM,
                  device: torch.device) -> Dict[str, Any]:
    """1F1B: stage k runs its layers; forward activations go to k+1, gradients come back."""
    first, last = rank == 0, rank == world - 1
    start = sum(plan.pp_division[:rank])
    mine = list(model.blocks)[start:start + plan.pp_division[rank]]
    params = [p for b in mine for p in b.parameters()]
    if first:
        params += list(model.embed.parameters())
    if last:
        params += list(model.norm.parameters()) + list(model.head.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr)
    counter = _SavedBytes(params)
    mc = cfg.model_config()
    chunks = plan.chunks
    mb_size = plan.global_bsz // chunks
    shape = (mb_size, mc.seq_length, mc.hidden_size)
    losses, times = [], []

    def forward(tokens: torch.Tensor, i: int):
        with counter.hooks():
            if first:
                x = model.embed(tokens)
            else:
                x = comm.recv(shape, rank - 1, tag=i).requires_grad_()
            inp = x
            for block in mine:
                x = block(x)
            if last:
                out = lm_loss(model.head(model.norm(x)), tokens) / chunks
            else:
                out = x
        return inp, out

    def backward(inp: torch.Tensor, out: torch.Tensor, i: int) -> None:
        if last:
            out.backward()
        else:
            grad = comm.recv(shape, rank + 1, tag=10_000 + i)
            out.backward(grad)
        if not first:
            comm.send(inp.grad, rank - 1, tag=10_000 + i)

    for step in range(cfg.steps):
        micro = batch_for_step(cfg, step).to(device).chunk(chunks)
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        in_flight = []
        total = 0.0
        warmup = min(world - rank - 1, chunks)
        # Stage k runs pp-k-1 forwards ahead.  In the steady phase it takes the gradient of
        # its oldest micro-batch *before* posting its newest activation: with blocking
        # send/recv that order is deadlock-free (each successor already sent that gradient).
        done_f = 0
        for _ in range(warmup):
            inp, out = forward(micro[done_f], done_f)
            comm.send(out.detach(), rank + 1, tag=done_f)
            in_flight.append((inp, out, done_f))
            done_f += 1
        while in_flight or done_f < chunks:
            pending = None
            if done_f < chunks:
                inp, out = forward(micro[done_f], done_f)
                if last:
                    total += float(out.detach())
                in_flight.append((inp, out, done_f))
                pending = (out, done_f)
                done_f += 1
            inp, out, i = in_flight.pop(0)
            backward(inp, out, i)
            if pending is not None and not last:
                comm.send(pending[0].detach(), rank + 1, tag=pending[1])
        opt.step()
        times.append(time.perf_counter() - started)
        loss = torch.tensor([total], device=device)
        comm.broadcast(loss, src=world - 1)
        losses.append(float(loss.detach()))
    return _report(losses, times, params, opt, counter) | {"stage": rank}


def plans_worker(rank: int, world: int, plan_jsons: List[Dict[str, Any]], cfg_dicts: List[Dict[str, Any]]):
    """Run several plans one after another in the same process group (saves start-up time)."""
    return [plan_worker(rank, world, p, c) for p, c in zip(plan_jsons, cfg_dicts)]


def run_plans(plans: Sequence[Plan], cfg: ExecConfig, *, timeout: float = 300.0,
              backend: str = "gloo") -> List[List[Dict[str, Any]]]:
    """Run each plan in ``num_devices`` local processes; ``out[i][rank]`` is a report.

    ``backend="gloo"`` runs on CPU; ``"nccl"`` puts rank ``r`` on GPU ``r`` (one GPU per rank).

    Raises:
        PlanError: a plan the executor cannot run (checked before any process starts).
        CommError: a process failed or the run exceeded ``timeout`` seconds.
    """
    if not plans:
        return []
    world = plans[0].num_devices
    cfgs = []
    for plan in plans:
        if plan.num_devices != world:
            raise PlanError("run_plans needs plans for the same number of devices")
        c = ExecConfig(**{**asdict(cfg), "global_bsz": plan.global_bsz, "chunks": plan.chunks})
        _check_plan(plan, world, c)
        cfgs.append(asdict(c))
    by_rank = comm.spawn(plans_worker, world, [p.to_galvatron() for p in plans], cfgs, timeout=timeout,
                         backend=backend)
    return [[by_rank[r][i] for r in range(world)] for i in range(len(plans))]


def run_plan(plan: Plan, cfg: ExecConfig, *, timeout: float = 120.0, backend: str = "gloo") -> List[Dict[str, Any]]:
    """Run one plan; one report per rank (see :func:`run_plans`)."""
    return run_plans([plan], cfg, timeout=timeout, backend=backend)[0]
