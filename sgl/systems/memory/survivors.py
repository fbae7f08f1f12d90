"""Re-planning for the devices left: Galvatron's plan search on any device count (8 -> 6, 4 -> 3).

Galvatron's strategy tree halves the devices, so :class:`~sgl.systems.parallel.PlanSearcher`
takes powers of two.  When a job loses devices, the survivors are rarely a power of two;
:class:`SurvivorPlanSearcher` is the same search (the layer-wise DP, the stage partition, the
pipeline formula, the cost model of :mod:`sgl.systems.parallel.cost`) over the strategy space
of ``n`` devices on one node: every pipeline degree ``pp | n`` (``pp <= layers``), every TP
degree ``tp | n/pp`` that divides the heads and the FFN width, and
``dp = n / (pp * tp)`` replicated or ZeRO-3.  For 6 devices: DP6, DP3 x TP2, DP2 x TP3, TP6 and
pp in {2, 3, 6}; degrees the model cannot take (TP3 with 4 heads) are dropped and named in
``excluded``.

Profiles of a non-power-of-two group do not exist, so two quantities are estimated from the
profiled ones: the all-reduce bus bandwidth of a group of ``g`` devices is the lower of the
profiled groups bracketing ``g`` (ring bus bandwidth is nearly flat inside a node), and a
layer's activation per sample under TP degree ``t`` is Megatron's ``a + b / t`` (replicated
part ``a``, sharded part ``b``) fitted to the profiled degrees 1 and 2.

``executable=True`` keeps the layouts :func:`~sgl.systems.memory.reshard.restore_worker` builds
(one TP degree on every layer, no pipeline, no ZeRO-3 with TP, consecutive TP groups,
vocabulary-TP 1).  When no plan of the space fits on all ``n`` devices, :func:`replan` says why
(``reason``) and returns the best plan on the most devices that have one (``devices_used``).

>>> r = replan(6, model="llama-7b", batch_sizes=(24,))
>>> r["devices_used"], r["plan"].num_devices
(6, 6)
>>> sorted(r["excluded"])[:2]
['tp=3', 'tp=6']
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from sgl._checks import check_int
from sgl.errors import PlanError
from sgl.systems.parallel.cost import CostModel, CostOptions, OtherOption
from sgl.systems.parallel.model import get_model_config
from sgl.systems.parallel.profiles import HardwareProfile, ModelProfile, load_builtin_profiles
from sgl.systems.parallel.search import PlanSearcher
from sgl.systems.parallel.search_config import PlanSearchConfig
from sgl.systems.parallel.space import Strategy, powers_of_two

__all__ = ["Survivors", "SurvivorPlanSearcher", "replan", "plan_layout", "divisors"]


def divisors(n: int) -> List[int]:
    """Divisors of ``n`` in increasing order.

    >>> divisors(6)
    [1, 2, 3, 6]
    """
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class Survivors:
    """The devices left on one node: any count (the shape the cost model reads from a cluster)."""

    num_nodes: int = 1
    devices_per_node: int = 6

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node


def survivor_hardware(node: HardwareProfile, n: int) -> HardwareProfile:
    """``node``'s bandwidths for groups of up to ``n`` of its devices; unprofiled sizes take the lower bracket."""
    sizes = sorted({g for g, _ in node.allreduce_bw})
    allreduce = {}
    for g in range(2, n + 1):
        for consec in (1, 0):
            known = {s: node.allreduce_bw[(s, consec)] for s in sizes if (s, consec) in node.allreduce_bw}
            if not known:
                continue
            if g in known:
                allreduce[(g, consec)] = known[g]
                continue
            lo = [s for s in known if s < g]
            hi = [s for s in known if s > g]
            bracket = ([known[max(lo)]] if lo else []) + ([known[min(hi)]] if hi else [])
            allreduce[(g, consec)] = min(bracket)
    p2p = {k: v for k, v in node.p2p_bw.items() if k <= n} or dict(node.p2p_bw)
    return HardwareProfile(1, n, allreduce, p2p, node.overlap_coe, source=f"{node.source} (survivors: {n})")


def survivor_profile(profile: ModelProfile, tps: Sequence[int]) -> ModelProfile:
    """``profile`` with activation entries for the TP degrees ``tps``: Megatron's ``a + b / t`` fit."""
    act = dict(profile.act_mb)
    a1 = act[1]
    a2 = act.get(2, a1 / 2)
    sharded = 2.0 * (a1 - a2)
    for t in tps:
        if t not in act:
            act[t] = (a1 - sharded) + sharded / t
    return dataclasses.replace(profile, act_mb=act)


class _SurvivorCost(CostModel):
    """The cost model with embedding/head options over divisors of the stage (not only powers of two)."""

    vtp_limit: Optional[int] = None
    embed_zero3: bool = True

    def other_options(self, pp: int, *, sdp: bool = True) -> List[OtherOption]:
        per_stage = self.cluster.num_devices // pp
        sdp = sdp and self.embed_zero3
        out = []
        for vtp in divisors(per_stage):
            if self.vtp_limit is not None and vtp > self.vtp_limit:
                continue
            if self.config.vocab_size % vtp == 0 and self.config.num_heads % vtp == 0:
                for shard in ((False, True) if per_stage // vtp > 1 and sdp else (False,)):
                    out.append(OtherOption(vtp, shard))
        return out


class SurvivorPlanSearcher(PlanSearcher):
    """:class:`~sgl.systems.parallel.PlanSearcher` over the strategies of ``devices`` devices (any count).

    The strategy space of one pipeline degree ``pp | n``:

    .. math:: \\{(pp, tp, dp, zero3, ckpt) : tp \\mid n/pp,\\ tp \\mid heads, ffn;\\ dp = n/(pp\\,tp)\\}

    searched with the same layer DP, partition and cost model as Galvatron's tree; ``config.profile_dir``
    holds the profiled node of ``node_devices`` devices (default: the shipped 8-GPU A100 files) whose
    devices survive.  On a power of two it finds Galvatron's plan (tested).

    >>> s = SurvivorPlanSearcher(PlanSearchConfig(model="llama-7b", batch_sizes=(24,), granularity_mb=64), 6)
    >>> sorted({st.tp for st in s._strategies(1)}), sorted(t.pp for t in s.tasks() if t.chunks == 8)
    ([1, 2], [1, 2, 3, 6])
    """

    def __init__(self, config: PlanSearchConfig, devices: int, *, executable: bool = False,
                 node_devices: int = 8) -> None:
        config.validate()
        if config.space != "full" or config.mode != "galvatron":
            raise PlanError(f"the survivors' search covers the full Galvatron space; got space={config.space!r}, "
                            f"mode={config.mode!r}")
        self.config = config
        self.model = get_model_config(config.model)
        self.devices = check_int(devices, "devices", 1, node_devices)
        self.executable = executable
        self.cluster = Survivors(1, self.devices)
        profile, node = load_builtin_profiles(self.model, 1, node_devices, config.profile_dir)
        self.excluded: Dict[str, str] = {}
        self._tps = self._tp_degrees()
        hardware = survivor_hardware(node, self.devices)
        options = CostOptions(pipeline_type=config.pipeline_type, default_dp_type=config.default_dp_type,
                              bct_fct_coe=config.bct_fct_coe, bytes_per_value=config.bytes_per_value)
        self.cost = _SurvivorCost(self.model, survivor_profile(profile, self._tps), hardware, self.cluster, options)
        if executable:
            self.cost.vtp_limit = 1
        limit = min(self.devices, config.max_pp or self.devices, self.model.num_layers)
        self._pps = [p for p in divisors(self.devices) if p <= limit]
        for p in divisors(self.devices):
            if p > 1 and p not in self._pps:
                self.excluded[f"pp={p}"] = (f"{p} pipeline stages exceed the model's {self.model.num_layers} layers"
                                            if p > self.model.num_layers else f"max_pp={config.max_pp}")
        if executable and len(self._pps) > 1:
            for p in self._pps[1:]:
                self.excluded[f"pp={p}"] = "the restore builds pp=1 layouts (a pipeline stage holds part of the model)"
            self._pps = [1]
        self._max_pp = max(self._pps)
        self.only_tp: Optional[int] = None

    def _tp_degrees(self) -> List[int]:
        m, c = self.model, self.config
        out = []
        for t in divisors(self.devices):
            sizes = [f"{name}={size}" for name, size in (("num_heads", m.num_heads),
                                                          ("ffn_hidden_size", m.ffn_hidden_size)) if size % t]
            why = [f"{' and '.join(sizes)} not divisible by {t}"] if sizes else []
            if c.max_tp is not None and t > c.max_tp:
                why.append(f"above max_tp={c.max_tp}")
            if why:
                self.excluded[f"tp={t}"] = "; ".join(why)
            else:
                out.append(t)
        return out

    def _strategies(self, pp: int, space: Optional[str] = None) -> List[Strategy]:
        if self.devices % pp:
            return []
        per_stage = self.devices // pp
        c = self.config
        out = []
        for tp in self._tps:
            if per_stage % tp or (self.only_tp is not None and tp != self.only_tp):
                continue
            dp = per_stage // tp
            zero3 = (False, True) if dp > 1 and c.space in ("full", "sdp") else (False,)
            if self.executable and tp > 1:
                zero3 = (False,)
            consecs = (True, False) if tp > 1 and dp > 1 and c.tp_consec_choices and not self.executable else (True,)
            for sdp in zero3:
                for consec in consecs:
                    for ck in ((False, True) if c.ckpt else (False,)):
                        out.append(Strategy(pp, tp, dp, sdp, consec, ck))
        return out

    def pipeline_degrees(self):
        """Every pipeline degree dividing the surviving device count (not only powers of two)."""
        return list(self._pps)

    def search_executable(self, memory_gb: Optional[float] = None):
        """Best plan with one TP degree on every layer (a search per degree, the fastest kept)."""
        best, errors = None, []
        for tp in self._tps:
            self.only_tp = tp
            self.cost.embed_zero3 = tp == 1     # the executor does not combine ZeRO-3 with TP
            try:
                result = self.search(memory_gb)
            except PlanError as exc:
                errors.append(f"tp={tp}: {exc}")
                continue
            finally:
                self.only_tp = None
                self.cost.embed_zero3 = True
            if best is None or result.plan.throughput > best.plan.throughput:
                best = result
        if best is None:
            raise PlanError("; ".join(errors) or "no TP degree divides the model on these devices")
        return best


def plan_layout(plan: Any) -> Dict[str, Any]:
    """A short description of a plan: degrees and per-layer labels."""
    s = plan.strategies
    return {"pp": plan.pp, "tp": sorted({x.tp for x in s}), "dp": sorted({x.dp for x in s}),
            "zero3_layers": sum(x.sdp for x in s), "chunks": plan.chunks, "global_bsz": plan.global_bsz,
            "layers": [x.label for x in s], "vtp": plan.vtp, "embed_zero3": plan.embed_sdp,
            "samples_per_s": plan.throughput}


def replan(devices: int, model: str = "llama-7b", memory_gb: float = 80.0, *, batch_sizes: Sequence[int] = (16,),
           executable: bool = False, **options: Any) -> Dict[str, Any]:
    """The plan search's best plan for exactly the ``devices`` left (one node of the profiled 8-GPU A100 type).

    Returns ``plan``, ``devices_left``, ``devices_used`` (``devices`` unless no plan fits there; then the
    most devices with a plan, and ``reason`` says why), ``excluded`` (degrees the model cannot take, with why).
    """
    devices = check_int(devices, "devices", 1, 8, error=PlanError)
    cfg = PlanSearchConfig(model=model, num_nodes=1, devices_per_node=8, memory_gb=memory_gb,
                           batch_sizes=tuple(batch_sizes), granularity_mb=options.pop("granularity_mb", 64), **options)
    reasons: List[str] = []
    excluded: Dict[str, str] = {}
    for n in range(devices, 0, -1):
        searcher = SurvivorPlanSearcher(cfg, n, executable=executable)
        if n == devices:
            excluded = dict(searcher.excluded)
        try:
            result = searcher.search_executable() if executable else searcher.search()
        except PlanError as exc:
            reasons.append(f"{n} devices: {exc}" + (f" (excluded: {searcher.excluded})" if searcher.excluded else ""))
            continue
        out = {"plan": result.plan, "devices_left": devices, "devices_used": n, "excluded": excluded,
               "seconds": result.seconds, "layout": plan_layout(result.plan)}
        if reasons:
            out["reason"] = "; ".join(reasons)
        return out
    raise PlanError(f"no plan for {get_model_config(model).name} on {devices} or fewer devices: " + "; ".join(reasons))
