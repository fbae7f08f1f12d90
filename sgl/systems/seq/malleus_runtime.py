"""Malleus executed: a :class:`~sgl.systems.seq.malleus.MalleusPlan` trains a TinyLM or HF Llama on N processes.

Each rank finds its place in the plan -- pipeline ``p``, stage ``j``, member ``k`` of that stage's
TP group of ``t`` devices -- and holds those layers' shards (:mod:`~sgl.systems.seq.malleus_shard`):
TP degrees may differ between groups, layers between stages and micro-batches between pipelines,
exactly as the plan says.  ``MalleusRunConfig(arch="hf-llama")`` trains a ``transformers``
``LlamaForCausalLM`` of the same shapes instead, sharded the same way by
:mod:`~sgl.systems.seq.malleus_hf` (its heads and KV heads split over each TP group).  A step runs
pipeline ``p``'s ``m_p`` micro-batches (a GPipe schedule over :mod:`sgl.comm` send / recv,
:mod:`~sgl.systems.seq.malleus_pipeline`: the stage leader sends activations to every member of
the next stage and input gradients to every member of the previous one), scales each
micro-batch's loss by ``1 / B`` (``B = Σ m_p``), and sums every gradient over all pipelines
whatever their TP split, so a step equals single-process training on the global batch
(:func:`train_reference`).  The schedule is written by hand rather than taken from
``torch.distributed.pipelining``: its stages are single ranks of one device mesh, and a Malleus
stage is a TP group whose size may differ from its neighbours'.

:func:`inject_straggler` slows one rank by a known factor: after each forward / backward compute
of ``s`` seconds the rank busy-waits ``(factor - 1)·s`` more, holding its core as slower silicon
would.  :meth:`MalleusTrainer.measured_rates` turns the step timings into per-device straggling
rates (compute time over the planner's time of that work at rate 1: micro-batches × (layers ·
``layer_ms`` · (1 + ω_t) / t + the embedding's / head's ms on the first / last stage), normalised),
:meth:`MalleusTrainer.replan` calls :meth:`MalleusPlanner.replan` with them and migrates the
parameters and Adam's moments to the new holders (:mod:`~sgl.systems.seq.malleus_migrate`), so
training continues on the new plan.

>>> import numpy as np
>>> cfg = MalleusRunConfig(model="tiny", micro_batches=4, straggler=inject_straggler(1, 2.0))
>>> plan = cfg.planner(2).plan(np.array([1.0, 2.0]))        # rank 1 is twice as slow
>>> plan.micro_batches, holdings_of(plan)[0].layers
([3, 1], (0, 1, 2, 3))
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from sgl import comm
from sgl._checks import check_choice, check_int, check_real
from sgl.errors import PlanError
from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.runtime.tiny_lm import TinyLM, TransformerBlock, lm_loss
from sgl.systems.seq.malleus import MalleusModel, MalleusPlan, MalleusPlanner
from sgl.systems.seq.malleus_hf import (build_hf_llama, build_hf_stage, check_hf_tp, hf_config, hf_full_values,
                                        hf_param_layout, hf_timing_layer)
from sgl.systems.seq.malleus_migrate import migrate_states
from sgl.systems.seq.malleus_pipeline import BackgroundSender, pipeline_step
from sgl.systems.seq.malleus_shard import (COMM_SECONDS, Holding, build_stage, full_values, param_layout,
                                           reduce_gradients)
from sgl.systems.seq.straggler import Straggler, check_rates, inject_straggler  # noqa: F401 (doctest)

__all__ = ["MALLEUS_ARCHS", "MalleusRunConfig", "MalleusTrainer", "check_malleus_plan",
           "holdings_of", "run_malleus", "train_reference", "assemble_params", "time_layer_ms"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: the models the Malleus runtime trains: our TinyLM and Hugging Face ``LlamaForCausalLM``
MALLEUS_ARCHS = ("tiny", "hf-llama")


@dataclass
class MalleusRunConfig:
    """What a Malleus run trains: model, global batch of ``micro_batches × micro_batch_size`` rows,
    steps, Adam's ``lr``, the planner's ``tp`` / ``pp``, an optional straggler and re-plan step.
    ``arch`` picks the implementation of ``model``'s shapes (:data:`MALLEUS_ARCHS`); ``kv_heads``
    (``"hf-llama"`` only) gives the Llama grouped-query attention with that many KV heads."""

    model: Union[str, TransformerConfig] = "tiny"
    micro_batches: int = 4
    micro_batch_size: int = 2
    steps: int = 3
    lr: float = 1e-3
    seed: int = 0
    dtype: str = "float32"
    tp: int = 1
    pp: int = 1
    straggler: Optional[Straggler] = None
    replan_at: Optional[int] = None          # re-plan and migrate before this step
    replan_rates: Optional[Tuple[float, ...]] = None   # None: the rates measured from the step timings
    threads: Optional[int] = 1               # torch threads per rank (None: leave torch's default)
    layer_ms: float = 1.0                    # the planner's per-layer time (only ratios matter for plans)
    embed_ms: float = 0.0                    # the planner's embedding / head + loss time per micro-batch
    head_ms: float = 0.0
    arch: str = "tiny"
    kv_heads: Optional[int] = None           # hf-llama: KV heads (None: as many as attention heads)

    def __post_init__(self) -> None:
        check_choice(self.arch, "arch", MALLEUS_ARCHS, error=PlanError)
        if self.kv_heads is not None:
            if self.arch != "hf-llama":
                raise PlanError(f"kv_heads applies to arch='hf-llama' only (arch={self.arch!r}); drop it")
            check_int(self.kv_heads, "kv_heads", 1, error=PlanError)
        check_int(self.micro_batches, "micro_batches", 1, error=PlanError)
        check_int(self.micro_batch_size, "micro_batch_size", 1, error=PlanError)
        check_int(self.steps, "steps", 1, error=PlanError)
        check_real(self.lr, "lr", 0.0, open_low=True, error=PlanError)
        check_choice(self.dtype, "dtype", tuple(_DTYPES), error=PlanError)
        if self.replan_at is not None:
            check_int(self.replan_at, "replan_at", 1, self.steps - 1, error=PlanError)
        if self.replan_rates is not None:
            check_rates(self.replan_rates)

    def model_config(self) -> TransformerConfig:
        return get_model_config(self.model)

    def planner(self, world: int) -> MalleusPlanner:
        """The :class:`MalleusPlanner` of this model on ``world`` devices (states in real MB)."""
        mc = self.model_config()
        size = _DTYPES[self.dtype].itemsize
        model = MalleusModel(layers=mc.num_layers, layer_ms=self.layer_ms, micro_batches=self.micro_batches,
                             embed_ms=self.embed_ms, head_ms=self.head_ms,
                             state_mb=3 * mc.layer_params() * size / 2**20,
                             act_mb=self.micro_batch_size * mc.seq_length * mc.hidden_size * 16 * size / 2**20,
                             embed_mb=3 * mc.other_params() * size / 2**20, memory_mb=64 * 1024.0)
        return MalleusPlanner(model, world, self.tp, self.pp, node_size=world)

    def batch(self, step: int, device: torch.device) -> torch.Tensor:
        """The global batch of ``step`` (the same on every rank)."""
        mc = self.model_config()
        gen = torch.Generator().manual_seed(self.seed * 100_003 + step)
        rows = self.micro_batches * self.micro_batch_size
        return torch.randint(0, mc.vocab_size, (rows, mc.seq_length), generator=gen).to(device)


def check_malleus_plan(plan: MalleusPlan, world: int, cfg: MalleusRunConfig) -> None:
    """PlanError unless ``plan`` names each of the ``world`` ranks once and fits the model and batch."""
    mc = cfg.model_config()
    if not plan.pipelines:
        raise PlanError("the Malleus plan has no pipeline: give at least one stage of devices")
    used = [d for p in plan.pipelines for st in p for d in st] + list(plan.idle)
    if sorted(used) != list(range(world)):
        raise PlanError(f"the Malleus plan names devices {sorted(used)} but {world} processes run: give a plan "
                        f"that uses every rank 0..{world - 1} exactly once (in a stage or idle)")
    if len(plan.layers) != len(plan.pipelines) or len(plan.micro_batches) != len(plan.pipelines):
        raise PlanError(f"the plan has {len(plan.pipelines)} pipelines but {len(plan.layers)} layer lists and "
                        f"{len(plan.micro_batches)} micro-batch counts: give one of each per pipeline")
    for p, (stages, ls) in enumerate(zip(plan.pipelines, plan.layers)):
        if len(ls) != len(stages) or min(ls, default=0) < 1 or sum(ls) != mc.num_layers:
            raise PlanError(f"pipeline {p} gives layers {ls} to {len(stages)} stages: give every stage >= 1 "
                            f"layer, {mc.num_layers} in all")
        for st in stages:
            if cfg.arch == "tiny":
                mc.check_tp(len(st), vocab_tp=1)
            else:
                check_hf_tp(hf_config(mc, cfg.kv_heads), len(st))
    if min(plan.micro_batches) < 1 or sum(plan.micro_batches) != cfg.micro_batches:
        raise PlanError(f"the plan's micro-batches {plan.micro_batches} must be >= 1 each and sum to the "
                        f"config's micro_batches={cfg.micro_batches}")


def holdings_of(plan: MalleusPlan) -> Dict[int, Optional[Holding]]:
    """Every rank's :class:`Holding` under ``plan`` (``None`` for idle ranks)."""
    out: Dict[int, Optional[Holding]] = {d: None for d in plan.idle}
    for p, (stages, ls) in enumerate(zip(plan.pipelines, plan.layers)):
        start = 0
        for j, (st, n) in enumerate(zip(stages, ls)):
            for k, d in enumerate(st):
                out[int(d)] = Holding(p, k, len(st), range(start, start + n), j == 0, j == len(stages) - 1)
            start += n
    return out


class MalleusTrainer:
    """One rank of a Malleus run: its shards, Adam, the step schedule, rates and re-planning.

    In one process (collectives are identities) it trains the plain model:

    >>> cfg = MalleusRunConfig(model="tiny", micro_batches=2, micro_batch_size=1, lr=1e-2)
    >>> trainer = MalleusTrainer(0, 1, cfg.planner(1).plan([1.0]), cfg)
    >>> first, _ = trainer.step(0)
    >>> abs(first - train_reference(cfg)[0][0]) < 1e-5
    True
    """

    def __init__(self, rank: int, world: int, plan: MalleusPlan, cfg: MalleusRunConfig) -> None:
        check_malleus_plan(plan, world, cfg)
        self.rank, self.world, self.cfg = rank, world, cfg
        self.mc = cfg.model_config()
        self.device, self.dtype = comm.wire_device(), _DTYPES[cfg.dtype]
        self.hf = hf_config(self.mc, cfg.kv_heads) if cfg.arch == "hf-llama" else None
        self.layout = param_layout(self.mc) if self.hf is None else hf_param_layout(self.hf)
        self.planner = cfg.planner(world)
        self.groups: Dict[Tuple[int, ...], Any] = {}
        self.steps_done = 0
        self.rates = np.ones(world)
        self.sender = BackgroundSender(enabled=comm.get_backend() == "gloo")
        if self.hf is None:
            torch.manual_seed(cfg.seed)
            full = full_values(TinyLM(self.mc).to(self.dtype))
        else:
            full = hf_full_values(build_hf_llama(self.mc, cfg.seed, cfg.kv_heads).to(self.dtype))
        self._install(plan, {key: torch.stack([v, torch.zeros_like(v), torch.zeros_like(v)])
                             for key, v in self._my_shards(full, holdings_of(plan).get(rank)).items()})

    # ------------------------------------------------------------------ state
    def _my_shards(self, full, holding: Optional[Holding]) -> Dict[tuple, torch.Tensor]:
        if holding is None:
            return {}
        return {(s.unit, s.name): full[(s.unit, s.name)][holding.slice_of(s)]
                for s in self.layout if s.unit in holding.units}

    def _install(self, plan: MalleusPlan, states: Dict[tuple, torch.Tensor]) -> None:
        """Build this rank's stage and Adam from stacked ``[param, exp_avg, exp_avg_sq]`` shards."""
        self.plan, self.holdings = plan, holdings_of(plan)
        for stages in plan.pipelines:            # every rank creates every group, in plan order
            for st in stages:
                if len(st) > 1 and tuple(st) not in self.groups:
                    self.groups[tuple(st)] = comm.new_group(list(st))
        self.holding = self.holdings.get(self.rank)
        self.stage, self.opt = None, None
        self._compute = [0.0, 0]                 # compute seconds and steps since the last plan
        if self.holding is None:
            return
        p, j, _ = self.position
        group = self.groups.get(tuple(plan.pipelines[p][j]))
        values = {k: v[0] for k, v in states.items()}
        if self.hf is None:
            self.stage = build_stage(self.mc, self.holding, values, group, self.device, self.dtype)
        else:
            self.stage = build_hf_stage(self.hf, self.holding, values, group, self.device, self.dtype)
        self.opt = torch.optim.Adam(self.stage.parameters(), lr=self.cfg.lr)
        if self.steps_done:
            for key, p_ in self.stage.param_map().items():
                self.opt.state[p_] = {"step": torch.tensor(float(self.steps_done)),
                                      "exp_avg": states[key][1].clone(), "exp_avg_sq": states[key][2].clone()}

    def _states(self) -> Dict[tuple, torch.Tensor]:
        if self.stage is None:
            return {}
        out = {}
        for key, p in self.stage.param_map().items():
            st = self.opt.state.get(p, {})
            zero = torch.zeros_like(p.data)
            out[key] = torch.stack([p.data, st.get("exp_avg", zero), st.get("exp_avg_sq", zero)])
        return out

    @property
    def position(self) -> Tuple[int, int, int]:
        """``(pipeline, stage, member)`` of this rank."""
        for p, stages in enumerate(self.plan.pipelines):
            for j, st in enumerate(stages):
                if self.rank in st:
                    return p, j, list(st).index(self.rank)
        raise PlanError(f"rank {self.rank} is idle under this plan")

    # ------------------------------------------------------------------ one step
    def _timed(self, fn):
        c0, t0 = COMM_SECONDS[0], time.perf_counter()
        out = fn()
        seconds = max(0.0, time.perf_counter() - t0 - (COMM_SECONDS[0] - c0))
        straggler = self.cfg.straggler
        self._compute[0] += straggler.slow_down(self.rank, seconds) if straggler else seconds
        return out

    def _pipeline_step(self, tokens: torch.Tensor) -> float:
        p, j, _ = self.position
        first, mbs = sum(self.plan.micro_batches[:p]), self.cfg.micro_batch_size
        micro = [tokens[i * mbs:(i + 1) * mbs] for i in range(first, first + self.plan.micro_batches[p])]
        return pipeline_step(self.stage, self.plan.pipelines[p], j, self.rank, micro, self.cfg.micro_batches,
                             (mbs, self.mc.seq_length, self.mc.hidden_size), self.device, self.dtype, self._timed,
                             self.sender)

    def step(self, step: int) -> Tuple[float, float]:
        """Train on step ``step``'s global batch; ``(global mean loss, step seconds)``, equal on every rank."""
        tokens = self.cfg.batch(step, self.device)
        comm.barrier()
        started = time.perf_counter()
        loss = 0.0
        if self.stage is not None:
            self.opt.zero_grad(set_to_none=True)
            loss = self._pipeline_step(tokens)
        if len(self.plan.pipelines) > 1 or any(len(st) > 1 for st in self.plan.pipelines[0]):
            # (skipped for one pipeline of one-device stages: every gradient has one holder, nothing to sum)
            reduce_gradients(self.stage, self.holding, self.layout, self.device, self.dtype)
        if self.opt is not None:
            self.opt.step()
        seconds = comm.all_reduce(torch.tensor([time.perf_counter() - started], dtype=torch.float64,
                                               device=self.device), op="max")
        total = comm.all_reduce(torch.tensor([loss], dtype=torch.float64, device=self.device), op="sum")
        self.steps_done += 1
        self._compute[1] += 1
        return float(total[0]), float(seconds[0])

    # ------------------------------------------------------------------ rates and re-planning
    @property
    def compute_totals(self) -> Tuple[float, int]:
        """``(compute seconds, steps)`` of this rank since the last plan (the straggler's slow-down included)."""
        return float(self._compute[0]), int(self._compute[1])

    def measured_rates(self) -> np.ndarray:
        """Straggling rates from the compute time of the steps since the last plan (all ranks agree)."""
        mine = float("nan")
        if self.holding is not None and self._compute[1]:
            h = self.holding
            m = self.planner.model               # ms of this rank's work at rate 1, fixed parts included
            work = self.plan.micro_batches[h.pipeline] * (len(h.layers) * m.layer_ms * (1 + m.overhead(h.t)) / h.t
                                                          + m.embed_ms * h.first + m.head_ms * h.last)
            mine = self._compute[0] / self._compute[1] / work
        got = torch.cat(comm.all_gather(torch.tensor([mine], dtype=torch.float64, device=self.device)))
        per = got.cpu().numpy()
        known = np.isfinite(per)
        if not known.any():
            return self.rates.copy()
        rates = self.rates.copy()                # idle ranks keep their last known rate
        rates[known] = per[known] / per[known].min()
        return rates

    def probe_rates(self, repeats: int = 5) -> np.ndarray:
        """Rates from a probe every rank runs at once: one full layer's forward + backward on one
        micro-batch (:func:`time_layer_ms`, the straggler's slow-down applied), all-gathered.  The
        ranks contend alike during the probe, which step timings on a shared CPU do not ensure."""
        ms = time_layer_ms(self.cfg, repeats, rank=self.rank, sync=True)
        got = torch.cat(comm.all_gather(torch.tensor([ms], dtype=torch.float64, device=self.device)))
        per = got.cpu().numpy()
        return per / per.min()

    def replan(self, rates: Optional[Sequence[float]] = None) -> Dict[str, Any]:
        """Re-plan for ``rates`` (default: measured from the step timings) and migrate the model states."""
        rates = self.measured_rates() if rates is None else check_rates(rates, self.world)
        new = self.planner.replan(self.plan, rates)
        digest = float(zlib.crc32(repr(new.to_dict()).encode()))
        check = comm.all_reduce(torch.tensor([digest, -digest], dtype=torch.float64, device=self.device), op="max")
        if float(check[0]) != -float(check[1]):
            raise PlanError("the ranks computed different Malleus plans from the same rates; cannot migrate")
        self.rates = np.asarray(rates, dtype=float)
        return {"rates": [round(float(r), 3) for r in rates], "plan": new.to_dict(),
                "planned_mb": float(new.migration_mb)} | self.migrate_to(new)

    def migrate_to(self, plan: MalleusPlan) -> Dict[str, float]:
        """Move parameters and Adam states to ``plan`` (the same on every rank) and continue on it."""
        check_malleus_plan(plan, self.world, self.cfg)
        started = time.perf_counter()
        states, received = migrate_states(self.rank, self.layout, self.holdings, holdings_of(plan), self._states(),
                                          self.device, self.dtype)
        self._install(plan, states)
        total = comm.all_reduce(torch.tensor([float(received)], dtype=torch.float64, device=self.device), op="sum")
        return {"received_mb": float(total[0]) * self.dtype.itemsize / 2**20,
                "migration_s": time.perf_counter() - started}

    def shards(self) -> Dict[tuple, Tuple[Tuple[int, ...], int, int, int, torch.Tensor]]:
        """``(unit, name) -> (full shape, split dim or -1, lo, hi, this rank's shard on the CPU)``."""
        if self.stage is None:
            return {}
        specs = {(s.unit, s.name): s for s in self.layout}
        out = {}
        for key, p in self.stage.param_map().items():
            spec = specs[key]
            lo, hi = self.holding.interval(spec)
            dim = -1 if spec.kind == "rep" else spec.split_dim
            out[key] = (spec.shape, dim, lo, hi, p.detach().cpu().clone())
        return out


def time_layer_ms(cfg: MalleusRunConfig, repeats: int = 3, rank: Optional[int] = None, sync: bool = False) -> float:
    """Median ms of one full layer's forward + backward on one micro-batch on this process (slowed
    down as ``cfg.straggler`` says when ``rank`` is given; with ``sync`` every repeat starts at a
    barrier, so all ranks compute at once and none gets a core to itself while another idles)."""
    mc = cfg.model_config()
    device = comm.wire_device()
    gen = torch.Generator().manual_seed(cfg.seed)
    if cfg.arch == "tiny":
        block = TransformerBlock(mc).to(device=device, dtype=_DTYPES[cfg.dtype])
    else:
        block = hf_timing_layer(mc, cfg.kv_heads, device, _DTYPES[cfg.dtype])
    x = torch.randn(cfg.micro_batch_size, mc.seq_length, mc.hidden_size, generator=gen,
                    dtype=_DTYPES[cfg.dtype]).to(device).requires_grad_()
    block(x).sum().backward()                            # warm-up
    times = []
    for _ in range(check_int(repeats, "repeats", 1, error=PlanError)):
        if sync:
            comm.barrier()
        t0 = time.perf_counter()
        block(x).sum().backward()
        seconds = time.perf_counter() - t0
        if rank is not None and cfg.straggler is not None:
            seconds = cfg.straggler.slow_down(rank, seconds)
        times.append(seconds * 1e3)
    return float(np.median(times))


def _worker_threads(cfg: MalleusRunConfig) -> None:
    """Pin a spawned rank's torch threads (2 ranks on 2 cores must not oversubscribe them)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)


def _worker(rank: int, world: int, plan: MalleusPlan, cfg: MalleusRunConfig) -> Dict[str, Any]:
    _worker_threads(cfg)
    trainer = MalleusTrainer(rank, world, plan, cfg)
    losses, times, migration = [], [], None
    for s in range(cfg.steps):
        if cfg.replan_at == s:
            migration = trainer.replan(cfg.replan_rates)
        loss, seconds = trainer.step(s)
        losses.append(loss)
        times.append(seconds)
    trainer.sender.close()
    return {"losses": losses, "step_s": times, "migration": migration, "shards": trainer.shards()}


def run_malleus(plan: MalleusPlan, cfg: MalleusRunConfig, world: int, *, timeout: float = 120.0,
                backend: str = "gloo") -> List[Dict[str, Any]]:
    """Train ``cfg.steps`` steps of ``plan`` on ``world`` local processes; one report per rank."""
    check_int(world, "world", 1, error=PlanError)
    check_malleus_plan(plan, world, cfg)
    if cfg.straggler is not None and cfg.straggler.rank >= world:
        raise PlanError(f"straggler rank {cfg.straggler.rank} does not exist among {world} processes")
    if cfg.replan_rates is not None:
        check_rates(cfg.replan_rates, world)
    return comm.spawn(_worker, world, plan, cfg, timeout=timeout, backend=backend)


def assemble_params(reports: Sequence[Dict[str, Any]]) -> Dict[tuple, torch.Tensor]:
    """The full parameters from every rank's shards (DP replicas agree; the first one seen wins)."""
    out: Dict[tuple, torch.Tensor] = {}
    for report in reports:
        for key, (shape, dim, lo, hi, shard) in report["shards"].items():
            full = out.setdefault(key, torch.full(shape, float("nan"), dtype=shard.dtype))
            if dim < 0:
                full.copy_(shard)
            else:
                full.narrow(dim, lo, hi - lo).copy_(shard)
    return out


def train_reference(cfg: MalleusRunConfig) -> Tuple[List[float], Dict[tuple, torch.Tensor]]:
    """Single-process training on the same global batches: losses and final parameters."""
    if cfg.arch == "tiny":
        torch.manual_seed(cfg.seed)
        model = TinyLM(cfg.model_config()).to(_DTYPES[cfg.dtype])
        values, device = full_values, model.head.weight.device
    else:
        model = build_hf_llama(cfg.model_config(), cfg.seed, cfg.kv_heads).to(_DTYPES[cfg.dtype])
        values, device = hf_full_values, model.lm_head.weight.device
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    for s in range(cfg.steps):
        tokens = cfg.batch(s, device)
        opt.zero_grad(set_to_none=True)
        out = model(tokens)
        loss = lm_loss(out if cfg.arch == "tiny" else out.logits, tokens)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses, {k: v.clone() for k, v in values(model).items()}
