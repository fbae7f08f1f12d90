"""A searched plan, its Galvatron JSON form and a readable table.

:meth:`Plan.to_galvatron` writes the keys of Galvatron 3.0's runtime: ``pp_deg``,
``tp_sizes_enc``, ``tp_consecutive_flags``, ``cp_sizes_enc``, ``dp_types_enc``, ``use_sp``,
``checkpoint``, ``global_bsz``, ``chunks``, ``pp_division``, ``pipeline_type``,
``default_dp_type``, ``vtp``, ``vsp``, ``vcp`` and ``vocab_sdp`` (ZeRO-3 on embedding and LM
head), plus ``embed_sdp`` with the same value, the name Galvatron 1/2 read for it.
:meth:`Plan.from_galvatron` reads the files of every version: ``embed_sdp`` alone (before
3.0), no ``cp_sizes_enc`` (all 1), no ``use_sp`` / ``checkpoint`` / ``vtp`` (Galvatron 1).
Keys we do not model (``ep_sizes_enc``, ``tp_of_ep_sizes_enc``, ``dispatcher``, anything newer)
ride along in :attr:`Plan.extra` and are written back unchanged, so loading and re-saving a
plan keeps every field.  Our predictions travel under ``sgl_*`` keys, which Galvatron ignores.
A world size is needed to recover each layer's DP degree, ``N / (pp * tp * cp)``, as
Galvatron's ``config2strategy`` does.

>>> from sgl.systems.parallel import Plan, Strategy
>>> s = Strategy(pp=1, tp=2, dp=4, sdp=True)
>>> plan = Plan(num_nodes=1, devices_per_node=8, pp=1, pp_division=[2], chunks=1, global_bsz=8,
...             strategies=[s, s], embed_sdp=True)
>>> data = plan.to_galvatron()
>>> data["tp_sizes_enc"], data["cp_sizes_enc"], data["dp_types_enc"], data["vocab_sdp"]
('2,2', '1,1', '1,1', 1)
>>> Plan.from_galvatron(data, num_devices=8) == plan
True
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from sgl.errors import PlanError
from sgl.fileio import atomic_write
from sgl.systems.parallel.space import Strategy, is_power_of_two

__all__ = ["Plan", "GALVATRON_PLAN_KEYS", "save_plan", "load_plan", "format_plan"]

#: The plan keys SGL reads and writes, Galvatron 3.0's names (``embed_sdp``: the pre-3.0 name of ``vocab_sdp``).
GALVATRON_PLAN_KEYS = ("pp_deg", "tp_sizes_enc", "tp_consecutive_flags", "cp_sizes_enc", "dp_types_enc", "use_sp",
                       "checkpoint", "global_bsz", "chunks", "pp_division", "pipeline_type", "default_dp_type",
                       "vtp", "vsp", "vcp", "vocab_sdp", "embed_sdp")
_SGL_KEYS = ("sgl_osdp_split_enc", "sgl_num_nodes", "sgl_devices_per_node", "sgl_model", "sgl_memory_gb",
             "sgl_predicted_iteration_ms", "sgl_predicted_samples_per_s", "sgl_predicted_stage_memory_mb",
             "sgl_predicted_stage_time_ms", "sgl_space")
_REQUIRED = ("pp_deg", "tp_sizes_enc", "global_bsz", "chunks")
_PIPELINES = ("pipedream_flush", "gpipe")
_DP_TYPES = ("ddp", "zero2", "zero3")


@dataclass
class Plan:
    """A hybrid-parallel plan: one :class:`Strategy` per layer plus pipeline and batch settings.

    ``vtp`` / ``embed_sdp`` / ``vsp`` / ``vcp`` are the embedding and LM head's vocabulary-TP
    degree, ZeRO-3 flag (Galvatron's ``vocab_sdp``), Ulysses flag and context-parallel degree;
    ``cp_sizes`` the per-layer context-parallel degrees (empty: all 1); ``ckpt_modes`` the
    per-layer ``checkpoint`` values when a file used Galvatron 3.0's ``2`` (fine-grained
    recomputation, modelled as checkpointing); ``extra`` the file's keys SGL does not model,
    written back as they were.
    """

    num_nodes: int
    devices_per_node: int
    pp: int
    pp_division: List[int]
    chunks: int
    global_bsz: int
    strategies: List[Strategy]
    pipeline_type: str = "pipedream_flush"
    default_dp_type: str = "ddp"
    vtp: int = 1
    embed_sdp: bool = False
    model: str = ""
    memory_gb: Optional[float] = None
    time_ms: Optional[float] = None
    stage_memory_mb: List[float] = field(default_factory=list)
    stage_time_ms: List[float] = field(default_factory=list)
    space: str = "full"
    vsp: bool = False
    vcp: int = 1
    cp_sizes: List[int] = field(default_factory=list)
    ckpt_modes: List[int] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node

    @property
    def throughput(self) -> Optional[float]:
        """Predicted samples per second."""
        return None if not self.time_ms else self.global_bsz / (self.time_ms / 1000.0)

    def layer_cp(self) -> List[int]:
        """Context-parallel degree of every layer."""
        return list(self.cp_sizes) or [1] * len(self.strategies)

    def to_galvatron(self) -> Dict[str, Any]:
        def enc(values) -> str:
            return ",".join(str(int(v)) for v in values)

        s = self.strategies
        ckpt = self.ckpt_modes if [bool(m) for m in self.ckpt_modes] == [x.ckpt for x in s] else [x.ckpt for x in s]
        data: Dict[str, Any] = {
            "pp_deg": self.pp,
            "tp_sizes_enc": enc(x.tp for x in s),
            "tp_consecutive_flags": enc(x.tp_consec for x in s),
            "cp_sizes_enc": enc(self.layer_cp()),
            "dp_types_enc": enc(x.sdp for x in s),
            "use_sp": enc(x.sp for x in s),
            "checkpoint": enc(ckpt),
            "global_bsz": self.global_bsz,
            "chunks": self.chunks,
            "pp_division": enc(self.pp_division),
            "pipeline_type": self.pipeline_type,
            "default_dp_type": self.default_dp_type,
            "vtp": self.vtp,
            "vsp": int(self.vsp),
            "vcp": self.vcp,
            "vocab_sdp": int(self.embed_sdp),
            "embed_sdp": int(self.embed_sdp),
        }
        clash = sorted(set(self.extra) & set(GALVATRON_PLAN_KEYS + _SGL_KEYS))
        if clash:
            raise PlanError(f"Plan.extra holds {clash}, which Plan fields write; set those fields instead")
        data.update(self.extra)
        if any(x.split > 1 for x in s):
            data["sgl_osdp_split_enc"] = enc(x.split for x in s)
        data["sgl_num_nodes"] = self.num_nodes
        data["sgl_devices_per_node"] = self.devices_per_node
        if self.model:
            data["sgl_model"] = self.model
        if self.memory_gb is not None:
            data["sgl_memory_gb"] = self.memory_gb
        if self.time_ms is not None:
            # derived from the rounded time, so that loading and re-saving writes the same numbers
            data["sgl_predicted_iteration_ms"] = t = round(self.time_ms, 4)
            data["sgl_predicted_samples_per_s"] = round(self.global_bsz / (t / 1000.0), 4) if t else 0.0
        if self.stage_memory_mb:
            data["sgl_predicted_stage_memory_mb"] = [round(m, 1) for m in self.stage_memory_mb]
        if self.stage_time_ms:
            data["sgl_predicted_stage_time_ms"] = [round(t, 4) for t in self.stage_time_ms]
        data["sgl_space"] = self.space
        return data

    @classmethod
    def from_galvatron(cls, data: Mapping[str, Any], num_devices: Optional[int] = None,
                       devices_per_node: Optional[int] = None) -> "Plan":
        """Parse a plan JSON of any Galvatron version (``num_devices`` needed unless it carries ``sgl_*`` keys)."""
        def need(key: str) -> Any:
            if key not in data:
                raise PlanError(f"plan JSON is missing {key!r}; Galvatron plans carry {sorted(_REQUIRED)}")
            return data[key]

        def dec(key: str, default: Optional[int] = None, n: Optional[int] = None) -> List[int]:
            if key not in data:
                if default is None:
                    need(key)
                return [default] * (n or 0)
            text = str(data[key]).strip()
            try:
                return [int(x) for x in text.split(",")] if text else []
            except ValueError:
                raise PlanError(f"plan JSON field {key!r} must be comma-separated integers, got {data[key]!r}") from None

        def integer(key: str, default: int) -> int:
            value = data.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise PlanError(f"plan JSON field {key!r} must be a non-negative integer, got {value!r}")
            return value

        try:
            pp = int(need("pp_deg"))
            gbsz = int(need("global_bsz"))
            chunks = int(need("chunks"))
        except (TypeError, ValueError) as exc:
            raise PlanError(f"plan JSON: pp_deg, global_bsz and chunks must be integers ({exc})") from None
        tps = dec("tp_sizes_enc")
        n = len(tps)
        per_layer = {key: dec(key, default, n) for key, default in (
            ("tp_consecutive_flags", 1), ("cp_sizes_enc", 1), ("dp_types_enc", 0), ("use_sp", 0), ("checkpoint", 0),
            ("sgl_osdp_split_enc", 1))}
        consec, cps, dpt, sp, ckpt, split = per_layer.values()
        # Galvatron's default split: n // pp layers per stage, the remainder on the last one
        division = dec("pp_division", None) if "pp_division" in data else [n // pp] * (pp - 1) + [n - n // pp * (pp - 1)]
        if any(len(v) != n for v in per_layer.values()):
            raise PlanError(f"plan JSON: per-layer fields {sorted(per_layer)} must have as many entries as "
                            f"tp_sizes_enc ({n})")
        if len(division) != pp or sum(division) != n or min(division, default=1) < 1:
            raise PlanError(f"plan JSON: pp_division {division} must have pp_deg={pp} positive parts summing to {n} layers")
        for key, values, allowed in (("tp_consecutive_flags", consec, (0, 1)), ("dp_types_enc", dpt, (0, 1)),
                                     ("use_sp", sp, (0, 1)), ("checkpoint", ckpt, (0, 1, 2))):
            if any(v not in allowed for v in values):
                raise PlanError(f"plan JSON field {key!r} takes values {list(allowed)}, got {data[key]!r}")
        world = num_devices or (int(data["sgl_num_nodes"]) * int(data["sgl_devices_per_node"])
                                if "sgl_num_nodes" in data else None)
        if world is None:
            raise PlanError("plan JSON has no sgl_num_nodes/sgl_devices_per_node; pass num_devices to read a Galvatron plan")
        per_node = devices_per_node or int(data.get("sgl_devices_per_node", min(world, 8)))
        if not is_power_of_two(world) or world % per_node:
            raise PlanError(f"world size {world} must be a power of two divisible by devices_per_node={per_node}")
        strategies = []
        for i in range(n):
            if not is_power_of_two(tps[i]) or not is_power_of_two(cps[i]) or world % (pp * tps[i] * cps[i]):
                raise PlanError(f"layer {i}: tp={tps[i]}, cp={cps[i]} with pp={pp} does not divide {world} devices")
            strategies.append(Strategy(pp, tps[i], world // (pp * tps[i] * cps[i]), bool(dpt[i]), bool(consec[i]),
                                       bool(ckpt[i]), bool(sp[i]), split[i]))
        vtp, vcp, vsp = integer("vtp", 1), integer("vcp", 1), integer("vsp", 0)
        if not is_power_of_two(vtp) or not is_power_of_two(vcp) or (world // pp) % (vtp * vcp) or vsp not in (0, 1):
            raise PlanError(f"plan JSON: vtp={vtp} and vcp={vcp} must be powers of two dividing the {world // pp} "
                            f"devices of a stage, vsp={vsp} 0 or 1")
        flags = {key: integer(key, 0) for key in ("vocab_sdp", "embed_sdp") if key in data}
        if len(set(flags.values())) > 1 or any(v > 1 for v in flags.values()):
            raise PlanError(f"plan JSON: {flags} disagree or are not 0/1; vocab_sdp (Galvatron 3.0) and embed_sdp "
                            "(before 3.0) name the same setting, ZeRO-3 on embedding and LM head; keep one")
        pipeline = str(data.get("pipeline_type", "pipedream_flush"))
        dp_type = str(data.get("default_dp_type", "ddp"))
        if pipeline not in _PIPELINES or dp_type not in _DP_TYPES:
            raise PlanError(f"plan JSON: pipeline_type {pipeline!r} must be one of {list(_PIPELINES)} and "
                            f"default_dp_type {dp_type!r} one of {list(_DP_TYPES)}")
        return cls(world // per_node, per_node, pp, division, chunks, gbsz, strategies,
                   pipeline_type=pipeline, default_dp_type=dp_type, vtp=vtp, embed_sdp=bool(max(flags.values(), default=0)),
                   model=str(data.get("sgl_model", "")), memory_gb=data.get("sgl_memory_gb"),
                   time_ms=data.get("sgl_predicted_iteration_ms"),
                   stage_memory_mb=list(data.get("sgl_predicted_stage_memory_mb", [])),
                   stage_time_ms=list(data.get("sgl_predicted_stage_time_ms", [])),
                   space=str(data.get("sgl_space", "full")), vsp=bool(vsp), vcp=vcp,
                   cp_sizes=cps if any(c > 1 for c in cps) else [],
                   ckpt_modes=ckpt if any(c > 1 for c in ckpt) else [],
                   extra={k: v for k, v in data.items() if k not in GALVATRON_PLAN_KEYS + _SGL_KEYS})

    def file_name(self) -> str:
        """Galvatron's naming: ``galvatron_config_{model}_{n}nodes_{g}gpus_per_node_{mem}GB_bf16.json``."""
        mem = f"{self.memory_gb:g}" if self.memory_gb is not None else "x"
        return f"galvatron_config_{self.model or 'model'}_{self.num_nodes}nodes_{self.devices_per_node}gpus_per_node_{mem}GB_bf16.json"


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write ``plan`` as Galvatron JSON; a folder (or a path without ``.json``) gets Galvatron's file name."""
    path = Path(path)
    if path.is_dir() or path.suffix.lower() != ".json":
        path = path / plan.file_name()
    with atomic_write(path, "w") as handle:
        json.dump(plan.to_galvatron(), handle, indent=4)
    return path


def load_plan(path: str | Path, num_devices: Optional[int] = None) -> Plan:
    path = Path(path)
    if not path.exists():
        raise PlanError(f"plan file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise PlanError(f"plan file {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PlanError(f"plan file {str(path)!r} must hold a JSON object")
    return Plan.from_galvatron(data, num_devices=num_devices)


def format_plan(plan: Plan) -> str:
    """Readable summary: settings, predicted memory/throughput and runs of equal layer strategies."""
    embed = (f"embedding/head vtp={plan.vtp}" + (" ulysses" if plan.vsp else "")
             + (f" cp={plan.vcp}" if plan.vcp > 1 else "") + (" ZeRO-3" if plan.embed_sdp else ""))
    lines = [
        f"model {plan.model or '?'} on {plan.num_nodes}x{plan.devices_per_node} devices"
        + (f", budget {plan.memory_gb:g} GB" if plan.memory_gb is not None else ""),
        f"global batch {plan.global_bsz}, {plan.chunks} micro-batches, pp={plan.pp} "
        f"({plan.pipeline_type}), division {plan.pp_division}, {embed}",
    ]
    if plan.time_ms is not None:
        lines.append(f"predicted iteration {plan.time_ms:.1f} ms, {plan.throughput:.2f} samples/s")
    if plan.stage_memory_mb:
        lines.append("predicted memory per stage: " + ", ".join(f"{m / 1024:.2f} GB" for m in plan.stage_memory_mb))
    if plan.extra:
        lines.append(f"carried from the file, not modelled: {', '.join(sorted(plan.extra))}")
    cps = plan.layer_cp()
    show_cp = any(c > 1 for c in cps)
    lines.append(f"{'layers':<10} {'strategy':<12} {'pp':>3} {'tp':>3} {'dp':>3} {'dp type':<8} {'tp group':<9} "
                 f"{'ckpt':<5} {'sp':<8}" + (f" {'cp':>3}" if show_cp else ""))
    start = 0
    stage_starts = set()
    acc = 0
    for n in plan.pp_division:
        stage_starts.add(acc)
        acc += n
    s = [(x, c) for x, c in zip(plan.strategies, cps)]
    for i in range(1, len(s) + 1):
        if i == len(s) or s[i] != s[start] or i in stage_starts:
            x, cp = s[start]
            rng = f"{start}-{i - 1}" if i - 1 > start else f"{start}"
            dptype = ("zero3" if x.sdp else plan.default_dp_type) + (f"/{x.split}" if x.split > 1 else "")
            lines.append(f"{rng:<10} {x.label:<12} {x.pp:>3} {x.tp:>3} {x.dp:>3} {dptype:<8} "
                         f"{'consec' if x.tp_consec else 'strided':<9} {'yes' if x.ckpt else 'no':<5} "
                         f"{'ulysses' if x.sp else ('megatron' if x.tp > 1 else '-'):<8}"
                         + (f" {cp:>3}" if show_cp else ""))
            start = i
    return "\n".join(lines)
