"""Plans the executor builds and the checks a plan passes before any process starts.

:func:`make_plan` gives uniform ``dp`` / ``sdp`` / ``tp`` / ``pp`` plans for tests and
calibration; :func:`check_plan` raises :class:`~sgl.errors.PlanError` naming the dimension of a
plan the executor cannot run (wrong world size or layer count, mixed TP degrees, context /
Ulysses parallelism on TinyLM, with PP or with sequence lengths / heads the degree does not
divide, an OSDP split on a replicated layer, ...) and :func:`check_model` the
degrees the built model's heads or widths do not divide.

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
from sgl.systems.runtime.config import SCHEDULES, ExecConfig
from sgl.systems.runtime.models import Decoder
from sgl.systems.runtime.pipeline import stage_layers

__all__ = ["make_plan", "check_model", "check_plan"]


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
    """Raise :class:`PlanError` unless ``world`` processes of the executor can run ``plan`` as it is.

    The message names the plan dimension at fault; nothing is ever run as a different plan.
    """
    mc = cfg.model_config()
    if plan.num_devices != world:
        raise PlanError(f"plan is for {plan.num_devices} devices but {world} processes run it")
    if len(plan.strategies) != mc.num_layers:
        raise PlanError(f"plan has {len(plan.strategies)} layers, model {mc.name!r} has {mc.num_layers}")
    if plan.global_bsz % plan.chunks:
        raise PlanError(f"global_bsz {plan.global_bsz} is not divisible by chunks {plan.chunks}")
    if plan.pp > mc.num_layers or len(plan.pp_division) != plan.pp or sum(plan.pp_division) != mc.num_layers \
            or min(plan.pp_division) < 1:
        raise PlanError(f"pipeline parallelism: pp={plan.pp} with pp_division {plan.pp_division} does not split the "
                        f"{mc.num_layers} layers of {mc.name!r} into pp stages of at least one layer each")
    if cfg.schedule not in SCHEDULES:
        raise PlanError(f"pipeline schedule {cfg.schedule!r} is not one of {[x for x in SCHEDULES if x]}")
    if plan.pp > 1:
        stage_layers(plan, cfg)
    tps = {s.tp for s in plan.strategies}
    if len(tps) > 1 or world % (plan.pp * next(iter(tps))):
        raise PlanError(f"tensor parallelism: the executor runs one TP degree dividing the {world // plan.pp} "
                        f"devices of a stage for all layers; got {sorted(tps)} (layer-wise TP transitions are not run)")
    tp = next(iter(tps))
    if len({s.tp_consec for s in plan.strategies}) > 1:
        raise PlanError("tensor parallelism: the executor needs the same tp_consecutive_flags on every layer")
    if plan.vtp not in (1, tp):
        raise PlanError(f"vocabulary tensor parallelism: vtp={plan.vtp} must be 1 or the layers' TP degree {tp}")
    _check_sequence(plan, world, cfg, tp)
    for s in plan.strategies:
        mc.check_tp(s.tp, vocab_tp=plan.vtp)
        if s.split > 1 and not (s.sdp or plan.default_dp_type == "zero3"):
            raise PlanError(f"OSDP operator split: split={s.split} on a layer without ZeRO-3 (dp_types_enc=0); "
                            "OSDP splits sharded layers only")
        if s.split > 1 and s.tp > 1:
            raise PlanError(f"OSDP operator split: split={s.split} together with tensor parallelism tp={s.tp} is "
                            "not run; choose one of them for the layer")
        for width in (mc.hidden_size, mc.ffn_hidden_size):
            if width % s.split:
                raise PlanError(f"OSDP operator split: split={s.split} does not divide the layer width {width}")
        if (plan.global_bsz // plan.chunks) % s.dp:
            raise PlanError(f"data parallelism: micro-batch {plan.global_bsz // plan.chunks} is not divisible by "
                            f"dp={s.dp}")


def _check_sequence(plan: Plan, world: int, cfg: ExecConfig, tp: int) -> None:
    """Context parallelism (ring) and Ulysses SP: one degree for all layers, HF decoders, pp = 1."""
    cps = plan.layer_cp()
    sps = {s.sp for s in plan.strategies}
    if len(set(cps)) > 1:
        raise PlanError(f"context parallelism: the executor runs one cp degree for all layers; cp_sizes_enc={cps}")
    if len(sps) > 1:
        raise PlanError("Ulysses sequence parallelism: use_sp must be the same on every layer (layer-wise "
                        "Ulysses / Megatron transitions are not run)")
    cp, sp = cps[0], sps.pop()
    if cfg.sequence_parallel:
        if tp == 1 or sp:
            raise PlanError(f"Megatron sequence parallelism (sequence_parallel=True) shards Megatron-TP layers; the "
                            f"plan's layers have tp={tp}{' with Ulysses use_sp=1' if sp else ''}")
        if cfg.arch == "tiny":
            raise PlanError("Megatron sequence parallelism runs on Hugging Face decoders (arch='hf-llama')")
        if plan.pp > 1:
            raise PlanError(f"Megatron sequence parallelism together with pipeline parallelism pp={plan.pp} is not run")
        if cfg.model_config().seq_length % tp:
            raise PlanError(f"Megatron sequence parallelism: the sequence length {cfg.model_config().seq_length} "
                            f"is not divisible by tp={tp}")
    if plan.vsp and not sp:
        raise PlanError("Ulysses sequence parallelism: vsp=1 on the embedding/head with use_sp=0 on the layers is "
                        "not run; set vsp to the layers' use_sp")
    if cp == 1 and not sp:
        if plan.vcp > 1:
            raise PlanError(f"context parallelism: vcp={plan.vcp} on the embedding/head without cp on the layers")
        return
    kind, degree = ("ring context parallelism (cp_sizes_enc)", cp) if cp > 1 else ("Ulysses sequence parallelism "
                                                                                    "(use_sp=1)", tp)
    if cp > 1 and (sp or tp > 1):
        raise PlanError(f"{kind}: cp={cp} together with tensor / Ulysses parallelism tp={tp} is not run; use one")
    if cp > 1 and plan.vcp != cp:
        raise PlanError(f"context parallelism: vcp={plan.vcp} must be the layers' cp degree {cp} (the embedding and "
                        "LM head run on the same sequence shards)")
    if cfg.arch == "tiny":
        raise PlanError(f"{kind}: runs on Hugging Face decoders (arch='hf-llama'), not on TinyLM")
    if plan.pp > 1:
        raise PlanError(f"{kind}: degree {degree} together with pipeline parallelism pp={plan.pp} is not run")
    if any(s.dp * degree != world for s in plan.strategies):
        raise PlanError(f"{kind}: dp x {degree} must be the {world} devices; the layers have dp="
                        f"{sorted({s.dp for s in plan.strategies})}")
    if plan.vtp > 1:
        raise PlanError(f"{kind}: vocabulary tensor parallelism vtp={plan.vtp} is not run with it; use vtp=1")
    seq = cfg.model_config().seq_length
    if seq % degree:
        raise PlanError(f"{kind}: the sequence length {seq} is not divisible by the degree {degree}")
    if sp and cfg.model_config().num_heads % degree:
        raise PlanError(f"{kind}: num_heads={cfg.model_config().num_heads} is not divisible by the degree {degree}")


def check_model(plan: Plan, decoder: Decoder) -> None:
    """Raise :class:`PlanError` when the built model's heads / KV heads / MLP width do not split ``plan``'s TP."""
    if len(decoder.layers) != len(plan.strategies):
        raise PlanError(f"plan has {len(plan.strategies)} layers, the model has {len(decoder.layers)}")
    tp = plan.strategies[0].tp
    dims = decoder.dims()
    if plan.strategies[0].sp:       # Ulysses splits the attention heads only (KV heads are repeated first)
        dims = {"num_heads": dims["num_heads"]}
    for name, size in dims.items():
        if size % tp:
            raise PlanError(f"tensor parallelism: the model's {name}={size} is not divisible by tp={tp}")
