"""Plans the executor builds and the checks a plan passes before any process starts.

:func:`make_plan` gives uniform ``dp`` / ``sdp`` / ``tp`` / ``pp`` plans for tests and
calibration; :func:`check_plan` raises :class:`~sgl.errors.PlanError` for a plan the executor
cannot run (wrong world size or layer count, mixed TP degrees, ZeRO-3 with TP, Ulysses SP,
context parallelism, ...).

>>> from sgl.systems.runtime.config import ExecConfig
>>> plan = make_plan("pp", 2, ExecConfig())
>>> plan.pp, plan.pp_division
(2, [2, 2])
>>> check_plan(plan, 2, ExecConfig())
"""
from __future__ import annotations

from sgl.errors import PlanError
from sgl.systems.parallel.config_io import Plan
from sgl.systems.parallel.partition import even_division
from sgl.systems.parallel.space import Strategy
from sgl.systems.runtime.config import ExecConfig

__all__ = ["make_plan", "check_plan"]


def make_plan(kind: str, world_size: int, cfg: ExecConfig, *, ckpt: bool = False) -> Plan:
    """Uniform plans for the executor's tests and calibration: ``dp``, ``sdp``, ``tp``, ``pp``."""
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
    return Plan(1, world_size, pp, even_division(layers, pp), cfg.chunks, cfg.global_bsz, [s] * layers,
                embed_sdp=(kind == "sdp"), model=cfg.model)


def check_plan(plan: Plan, world: int, cfg: ExecConfig) -> None:
    """Raise :class:`PlanError` unless ``world`` processes of the executor can run ``plan``."""
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
    if any(c > 1 for c in plan.layer_cp()) or plan.vcp > 1 or plan.vsp:
        raise PlanError("the executor does not run context parallelism (cp_sizes_enc, vcp) or a Ulysses "
                        "embedding/head (vsp=1)")
    if plan.default_dp_type == "zero3":
        raise PlanError("the executor reads ZeRO-3 from dp_types_enc / vocab_sdp only; a plan with "
                        "default_dp_type='zero3' needs dp_types_enc=1 on its layers and vocab_sdp=1 instead")
    for s in plan.strategies:
        if s.sp:
            raise PlanError("the executor does not run Ulysses sequence parallelism (use_sp=1) yet")
        mc.check_tp(s.tp, vocab_tp=1)
    for s in plan.strategies:
        if (plan.global_bsz // plan.chunks) % s.dp:
            raise PlanError(f"micro-batch {plan.global_bsz // plan.chunks} is not divisible by dp={s.dp}")
