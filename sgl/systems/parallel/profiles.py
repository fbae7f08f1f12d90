"""Cost-model inputs: model and cluster profiles in Galvatron's JSON formats, and the shipped set.

The model side (:class:`ModelProfile`, Galvatron 3.0 and legacy file layouts) lives in
:mod:`~sgl.systems.parallel.model_profile` and is re-exported here.  A
:class:`HardwareProfile` holds ``allreduce_bandwidth_*`` (bus bandwidth, GB/s, keyed
``allreduce_size_{g}_consec_{0|1}``), ``p2p_bandwidth_*`` (``pp_size_{k}``) and
``overlap_coefficient.json`` -- one layout in every Galvatron version.

Galvatron's published files load as they are; :func:`save_model_profile` /
:func:`save_hardware_profile` write the same keys, so profiles measured by
:mod:`sgl.systems.runtime.profiler` are readable by Galvatron too.

>>> from sgl.systems.parallel import load_builtin_profiles
>>> model, hw = load_builtin_profiles("llama-7b", num_nodes=1, devices_per_node=8)
>>> round(model.param_mb, 1), model.act_mb[1], hw.bandwidth(8, crosses_nodes=False)
(773.3, 301.28173828125, 162.888)
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Tuple

from sgl.errors import PlanError
from sgl.fileio import atomic_write
from sgl.systems.parallel.model import TransformerConfig, get_model_config
from sgl.systems.parallel.model_profile import (PROFILE_LAYOUTS, ModelProfile, OtherTable, load_model_profile,
                                                model_profile_names, number, read_json, save_model_profile)

__all__ = [
    "ModelProfile",
    "HardwareProfile",
    "BUILTIN_PROFILE_DIR",
    "PROFILE_LAYOUTS",
    "model_profile_names",
    "hardware_profile_names",
    "load_model_profile",
    "load_hardware_profile",
    "save_model_profile",
    "save_hardware_profile",
    "load_builtin_profiles",
    "estimate_model_profile",
]

#: Galvatron's published A100 profiles for LLaMA-7B/13B (see profiles/README.md for provenance).
BUILTIN_PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"


@dataclass
class HardwareProfile:
    """Collective bandwidths (GB/s) of one cluster shape and the compute/comm overlap slowdown."""

    num_nodes: int
    devices_per_node: int
    allreduce_bw: Dict[Tuple[int, int], float]
    p2p_bw: Dict[int, float]
    overlap_coe: float = 1.0
    source: str = ""

    def bandwidth(self, group: int, *, crosses_nodes: bool) -> float:
        """All-reduce bus bandwidth of a group of ``group`` devices (GB/s)."""
        if group <= 1:
            return math.inf
        # In Galvatron's files consec_1 groups of size <= devices_per_node are intra-node and
        # consec_0 groups (strided over all devices) cross nodes when there are several nodes.
        if crosses_nodes and (group, 0) in self.allreduce_bw:
            return self.allreduce_bw[(group, 0)]
        for key in ((group, 1), (group, 0)):
            if key in self.allreduce_bw:
                return self.allreduce_bw[key]
        raise PlanError(
            f"hardware profile {self.source!r} has no all-reduce bandwidth for a group of {group} devices "
            f"(keys allreduce_size_{group}_consec_0/1); profile this cluster shape with `sgl plan profile`"
        )

    def p2p(self, pp: int) -> float:
        if pp in self.p2p_bw:
            return self.p2p_bw[pp]
        if not self.p2p_bw:
            raise PlanError(f"hardware profile {self.source!r} has no p2p bandwidth (pp_size_*)")
        nearest = min(self.p2p_bw, key=lambda k: abs(math.log2(k) - math.log2(pp)))
        return self.p2p_bw[nearest]


# ----------------------------------------------------------------------------- file names
def hardware_profile_names(num_nodes: int, devices_per_node: int) -> Tuple[str, str, str]:
    tag = f"{num_nodes}nodes_{devices_per_node}gpus_per_node"
    return f"allreduce_bandwidth_{tag}.json", f"p2p_bandwidth_{tag}.json", "overlap_coefficient.json"


def load_hardware_profile(directory: str | Path, num_nodes: int, devices_per_node: int) -> HardwareProfile:
    """Read ``allreduce_bandwidth_*``, ``p2p_bandwidth_*`` and ``overlap_coefficient.json`` from a folder."""
    directory = Path(directory)
    ar_name, p2p_name, ov_name = hardware_profile_names(num_nodes, devices_per_node)
    allreduce: Dict[Tuple[int, int], float] = {}
    for key, value in read_json(directory / ar_name).items():
        m = re.match(r"^allreduce_size_(\d+)_consec_([01])$", key)
        if not m:
            raise PlanError(f"{directory / ar_name}: unexpected key {key!r}; expected allreduce_size_<g>_consec_<0|1>")
        bw = number(value, f"{directory / ar_name}: {key}")
        if bw <= 0:
            raise PlanError(f"{directory / ar_name}: {key} must be a positive bandwidth (GB/s), got {value!r}")
        allreduce[(int(m.group(1)), int(m.group(2)))] = bw
    p2p: Dict[int, float] = {}
    p2p_path = directory / p2p_name
    if p2p_path.exists():
        for key, value in read_json(p2p_path).items():
            m = re.match(r"^pp_size_(\d+)$", key)
            if not m:
                raise PlanError(f"{p2p_path}: unexpected key {key!r}; expected pp_size_<k>")
            bw = number(value, f"{p2p_path}: {key}")
            if bw <= 0:
                raise PlanError(f"{p2p_path}: {key} must be a positive bandwidth (GB/s), got {value!r}")
            p2p[int(m.group(1))] = bw
    overlap = 1.0
    if (directory / ov_name).exists():
        data = read_json(directory / ov_name)
        if "overlap_coe" not in data:
            raise PlanError(f"{directory / ov_name}: missing 'overlap_coe'")
        overlap = number(data["overlap_coe"], f"{directory / ov_name}: overlap_coe")
        if overlap < 1.0:
            raise PlanError(f"{directory / ov_name}: overlap_coe is a slowdown and must be >= 1, got {overlap}")
    return HardwareProfile(num_nodes, devices_per_node, allreduce, p2p, overlap, source=str(directory / ar_name))


# ----------------------------------------------------------------------------- writing
def save_hardware_profile(profile: HardwareProfile, directory: str | Path) -> Tuple[Path, Path, Path]:
    directory = Path(directory)
    names = hardware_profile_names(profile.num_nodes, profile.devices_per_node)
    payloads = (
        {f"allreduce_size_{g}_consec_{c}": bw for (g, c), bw in sorted(profile.allreduce_bw.items(), reverse=True)},
        {f"pp_size_{k}": bw for k, bw in sorted(profile.p2p_bw.items())},
        {"overlap_coe": profile.overlap_coe},
    )
    for name, data in zip(names, payloads):
        with atomic_write(directory / name, "w") as handle:
            json.dump(data, handle, indent=4)
    return tuple(directory / n for n in names)  # type: ignore[return-value]


# ----------------------------------------------------------------------------- helpers
def estimate_model_profile(config: TransformerConfig, reference: ModelProfile,
                           reference_config: TransformerConfig) -> ModelProfile:
    """Scale a measured profile to another shape: time by FLOPs, memory by parameters/activations.

    Used only for presets that have no profile file; results are labelled as estimates.
    """
    flops = config.layer_flops_per_token() * config.seq_length
    ref_flops = reference_config.layer_flops_per_token() * reference_config.seq_length
    act_scale = (config.hidden_size * config.seq_length) / (reference_config.hidden_size * reference_config.seq_length)
    param_scale = config.layer_params() / reference_config.layer_params()
    other_scale = config.other_params() / reference_config.other_params()
    other_act_scale = act_scale * config.vocab_size / reference_config.vocab_size

    def scaled(table: Dict[str, OtherTable]) -> Dict[str, OtherTable]:
        return {k: {d: (s * other_scale, a * other_act_scale) for d, (s, a) in t.items()} for k, t in table.items()}

    return replace(
        reference,
        param_mb=reference.param_mb * param_scale,
        act_mb={k: v * act_scale for k, v in reference.act_mb.items()},
        ckpt_act_mb=reference.ckpt_act_mb * act_scale,
        act_sp_mb={k: v * act_scale for k, v in reference.act_sp_mb.items()},
        other={k: (s * other_scale, a * other_act_scale) for k, (s, a) in reference.other.items()},
        other_vtp=scaled(reference.other_vtp),
        other_sp_vtp=scaled(reference.other_sp_vtp),
        fwd_ms=reference.fwd_ms * flops / ref_flops,
        other_fwd_ms=reference.fwd_ms * flops / ref_flops * config.head_flops_per_token() / config.layer_flops_per_token(),
        source=f"estimated for {config.name} from {reference.source}",
    )


def _find_model_profile(folder: Path, cfg: TransformerConfig):
    """(memory, computation) paths of ``cfg`` in ``folder`` under any precision and layout, or None."""
    for precision in ("bf16", "fp16", "fp32"):
        for layout in PROFILE_LAYOUTS:
            mem_name, comp_name = model_profile_names(cfg, precision, layout)
            if (folder / mem_name).exists() and (folder / comp_name).exists():
                return folder / mem_name, folder / comp_name
    return None


def load_builtin_profiles(model: TransformerConfig | str, num_nodes: int = 1, devices_per_node: int = 8,
                          directory: str | Path | None = None) -> Tuple[ModelProfile, HardwareProfile]:
    """Model and hardware profiles from ``directory`` (default: the shipped A100 files).

    A model shape without a profile file is estimated from the LLaMA-7B profile
    (:func:`estimate_model_profile`); a cluster shape without files raises :class:`PlanError`.
    """
    cfg = get_model_config(model)
    folder = Path(directory) if directory is not None else BUILTIN_PROFILE_DIR
    found = _find_model_profile(folder, cfg)
    if found is not None:
        profile = load_model_profile(found[0], found[1], cfg)
    elif directory is not None:
        names = [model_profile_names(cfg, layout=layout) for layout in PROFILE_LAYOUTS]
        raise PlanError(
            f"no profile for {cfg.name} in {str(folder)!r}: expected {names[0][0]} and {names[0][1]} "
            f"(Galvatron 3.0) or {names[1][0]} and {names[1][1]} (Galvatron 1/2), or their fp16/fp32 variants; "
            f"run `sgl plan profile --model {cfg.name} --out DIR`"
        )
    else:
        ref_cfg = get_model_config("llama-7b")
        ref = load_model_profile(*_find_model_profile(BUILTIN_PROFILE_DIR, ref_cfg), ref_cfg)
        profile = estimate_model_profile(cfg, ref, ref_cfg)
    if not (folder / hardware_profile_names(num_nodes, devices_per_node)[0]).exists() and directory is not None \
            and (BUILTIN_PROFILE_DIR / hardware_profile_names(num_nodes, devices_per_node)[0]).exists():
        folder = BUILTIN_PROFILE_DIR
    hardware = load_hardware_profile(folder, num_nodes, devices_per_node)
    return profile, hardware
