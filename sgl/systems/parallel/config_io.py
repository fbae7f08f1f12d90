"""A searched plan, its Galvatron JSON form and a readable table.

:meth:`Plan.to_galvatron` writes the keys Galvatron's runtime reads (``pp_deg``,
``tp_sizes_enc``, ``tp_consecutive_flags``, ``dp_types_enc``, ``use_sp``, ``checkpoint``,
``global_bsz``, ``chunks``, ``pp_division``, ``pipeline_type``, ``default_dp_type``, ``vtp``,
``vsp``, ``embed_sdp``); our predictions ride along under ``sgl_*`` keys, which Galvatron
ignores.  :meth:`Plan.from_galvatron` reads Galvatron's files back (a world size is needed
to recover each layer's DP degree, as Galvatron's ``config2strategy`` does).

>>> from sgl.systems.parallel import Plan, Strategy
>>> s = Strategy(pp=1, tp=2, dp=4, sdp=True)
>>> plan = Plan(num_nodes=1, devices_per_node=8, pp=1, pp_division=[2], chunks=1, global_bsz=8,
...             strategies=[s, s])
>>> data = plan.to_galvatron()
>>> data["tp_sizes_enc"], data["dp_types_enc"], data["pp_division"]
('2,2', '1,1', '2')
>>> Plan.from_galvatron(data, num_devices=8).strategies == plan.strategies
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

__all__ = ["Plan", "save_plan", "load_plan", "format_plan"]


@dataclass
class Plan:
    """A hybrid-parallel plan: one :class:`Strategy` per layer plus pipeline and batch settings."""

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

    @property
    def num_devices(self) -> int:
        return self.num_nodes * self.devices_per_node

    @property
    def throughput(self) -> Optional[float]:
        """Predicted samples per second."""
        return None if not self.time_ms else self.global_bsz / (self.time_ms / 1000.0)

    def to_galvatron(self) -> Dict[str, Any]:
        def enc(values) -> str:
            return ",".join(str(int(v)) for v in values)

        s = self.strategies
        data: Dict[str, Any] = {
            "pp_deg": self.pp,
            "tp_sizes_enc": enc(x.tp for x in s),
            "tp_consecutive_flags": enc(x.tp_consec for x in s),
            "dp_types_enc": enc(x.sdp for x in s),
            "use_sp": enc(x.sp for x in s),
            "checkpoint": enc(x.ckpt for x in s),
            "global_bsz": self.global_bsz,
            "chunks": self.chunks,
            "pp_division": enc(self.pp_division),
            "pipeline_type": self.pipeline_type,
            "default_dp_type": self.default_dp_type,
            "vtp": self.vtp,
            "vsp": 0,
            "embed_sdp": int(self.embed_sdp),
        }
        if any(x.split > 1 for x in s):
            data["sgl_osdp_split_enc"] = enc(x.split for x in s)
        data["sgl_num_nodes"] = self.num_nodes
        data["sgl_devices_per_node"] = self.devices_per_node
        if self.model:
            data["sgl_model"] = self.model
        if self.memory_gb is not None:
            data["sgl_memory_gb"] = self.memory_gb
        if self.time_ms is not None:
            data["sgl_predicted_iteration_ms"] = round(self.time_ms, 4)
            data["sgl_predicted_samples_per_s"] = round(self.throughput or 0.0, 4)
        if self.stage_memory_mb:
            data["sgl_predicted_stage_memory_mb"] = [round(m, 1) for m in self.stage_memory_mb]
        data["sgl_space"] = self.space
        return data

    @classmethod
    def from_galvatron(cls, data: Mapping[str, Any], num_devices: Optional[int] = None,
                       devices_per_node: Optional[int] = None) -> "Plan":
        """Parse Galvatron's plan JSON (``num_devices`` needed unless the file carries ``sgl_*`` keys)."""
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

        try:
            pp = int(need("pp_deg"))
            gbsz = int(need("global_bsz"))
            chunks = int(need("chunks"))
        except (TypeError, ValueError) as exc:
            raise PlanError(f"plan JSON: pp_deg, global_bsz and chunks must be integers ({exc})") from None
        tps = dec("tp_sizes_enc")
        n = len(tps)
        consec = dec("tp_consecutive_flags", 1, n)
        dpt = dec("dp_types_enc", 0, n)
        sp = dec("use_sp", 0, n)
        ckpt = dec("checkpoint", 0, n)
        split = dec("sgl_osdp_split_enc", 1, n)
        division = dec("pp_division", None) if "pp_division" in data else [n // pp] * pp
        if any(len(v) != n for v in (consec, dpt, sp, ckpt, split)):
            raise PlanError("plan JSON: per-layer fields tp_sizes_enc, tp_consecutive_flags, dp_types_enc, use_sp, "
                            "checkpoint must have the same number of entries")
        if len(division) != pp or sum(division) != n or min(division, default=1) < 1:
            raise PlanError(f"plan JSON: pp_division {division} must have pp_deg={pp} positive parts summing to {n} layers")
        world = num_devices or (int(data["sgl_num_nodes"]) * int(data["sgl_devices_per_node"])
                                if "sgl_num_nodes" in data else None)
        if world is None:
            raise PlanError("plan JSON has no sgl_num_nodes/sgl_devices_per_node; pass num_devices to read a Galvatron plan")
        per_node = devices_per_node or int(data.get("sgl_devices_per_node", min(world, 8)))
        if not is_power_of_two(world) or world % per_node:
            raise PlanError(f"world size {world} must be a power of two divisible by devices_per_node={per_node}")
        strategies = []
        for i in range(n):
            if not is_power_of_two(tps[i]) or world % (pp * tps[i]):
                raise PlanError(f"layer {i}: tp={tps[i]} with pp={pp} does not divide {world} devices")
            strategies.append(Strategy(pp, tps[i], world // (pp * tps[i]), bool(dpt[i]), bool(consec[i]),
                                       bool(ckpt[i]), bool(sp[i]), split[i]))
        return cls(world // per_node, per_node, pp, division, chunks, gbsz, strategies,
                   pipeline_type=str(data.get("pipeline_type", "pipedream_flush")),
                   default_dp_type=str(data.get("default_dp_type", "ddp")),
                   vtp=int(data.get("vtp", 1)), embed_sdp=bool(int(data.get("embed_sdp", 0))),
                   model=str(data.get("sgl_model", "")), memory_gb=data.get("sgl_memory_gb"),
                   time_ms=data.get("sgl_predicted_iteration_ms"),
                   stage_memory_mb=list(data.get("sgl_predicted_stage_memory_mb", [])),
                   space=str(data.get("sgl_space", "full")))

    def file_name(self) -> str:
        """Galvatron's naming: ``galvatron_config_{model}_{n}nodes_{g}gpus_per_node_{mem}GB_bf16.json``."""
        mem = f"{self.memory_gb:g}" if self.memory_gb is not None else "x"
        return f"galvatron_config_{self.model or 'model'}_{self.num_nodes}nodes_{self.devices_per_node}gpus_per_node_{mem}GB_bf16.json"


_REQUIRED = ("pp_deg", "tp_sizes_enc", "global_bsz", "chunks")


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
    lines = [
        f"model {plan.model or '?'} on {plan.num_nodes}x{plan.devices_per_node} devices"
        + (f", budget {plan.memory_gb:g} GB" if plan.memory_gb is not None else ""),
        f"global batch {plan.global_bsz}, {plan.chunks} micro-batches, pp={plan.pp} "
        f"({plan.pipeline_type}), division {plan.pp_division}, embedding/head vtp={plan.vtp}"
        f"{' ZeRO-3' if plan.embed_sdp else ''}",
    ]
    if plan.time_ms is not None:
        lines.append(f"predicted iteration {plan.time_ms:.1f} ms, {plan.throughput:.2f} samples/s")
    if plan.stage_memory_mb:
        lines.append("predicted memory per stage: " + ", ".join(f"{m / 1024:.2f} GB" for m in plan.stage_memory_mb))
    lines.append(f"{'layers':<10} {'strategy':<12} {'pp':>3} {'tp':>3} {'dp':>3} {'dp type':<8} {'tp group':<9} {'ckpt':<5} {'sp':<8}")
    start = 0
    stage_starts = set()
    acc = 0
    for n in plan.pp_division:
        stage_starts.add(acc)
        acc += n
    s = plan.strategies
    for i in range(1, len(s) + 1):
        if i == len(s) or s[i] != s[start] or i in stage_starts:
            x = s[start]
            rng = f"{start}-{i - 1}" if i - 1 > start else f"{start}"
            dptype = ("zero3" if x.sdp else plan.default_dp_type) + (f"/{x.split}" if x.split > 1 else "")
            lines.append(f"{rng:<10} {x.label:<12} {x.pp:>3} {x.tp:>3} {x.dp:>3} {dptype:<8} "
                         f"{'consec' if x.tp_consec else 'strided':<9} {'yes' if x.ckpt else 'no':<5} "
                         f"{'ulysses' if x.sp else ('megatron' if x.tp > 1 else '-'):<8}")
            start = i
    return "\n".join(lines)
