"""Cost-model inputs: per-model and per-cluster profiles, in Galvatron's JSON formats.

A :class:`ModelProfile` holds what Galvatron's ``memory_profiling_*`` and
``computation_profiling_*`` files hold: parameter MB of one layer (fp32 bytes, Galvatron's
``parameter_size``), activation MB per sample for each TP degree and with checkpointing
(``tp_activation_per_bsz_dict``), embedding/LM-head memory with pipelining off, on the first
and on the last stage (``other_memory_pp_off`` / ``_pp_on_first`` / ``_pp_on_last``), and the
forward time of one layer per sample (``layertype_0``, ms).  A :class:`HardwareProfile` holds
``allreduce_bandwidth_*`` (bus bandwidth, GB/s, keyed ``allreduce_size_{g}_consec_{0|1}``),
``p2p_bandwidth_*`` (``pp_size_{k}``) and ``overlap_coefficient.json``.

Galvatron's published files load as they are (raw per-run records next to the derived keys
are ignored); :func:`save_model_profile` / :func:`save_hardware_profile` write the same keys,
so profiles measured by :mod:`sgl.systems.runtime.profiler` are readable by Galvatron too.

>>> from sgl.systems.parallel import load_builtin_profiles
>>> model, hw = load_builtin_profiles("llama-7b", num_nodes=1, devices_per_node=8)
>>> round(model.param_mb, 1), model.act_mb[1], hw.bandwidth(8, crosses_nodes=False)
(773.3, 301.28173828125, 162.888)
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from sgl.errors import PlanError
from sgl.fileio import atomic_write
from sgl.systems.parallel.model import TransformerConfig, get_model_config

__all__ = [
    "ModelProfile",
    "HardwareProfile",
    "BUILTIN_PROFILE_DIR",
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

_OTHER_KEYS = {"pp_off": "other_memory_pp_off", "first": "other_memory_pp_on_first", "last": "other_memory_pp_on_last"}


@dataclass
class ModelProfile:
    """Per-layer memory (MB) and time (ms) of one Transformer layer type, plus embedding/head.

    ``act_mb[tp]`` is activation MB per sample under Megatron TP degree ``tp``; ``ckpt_act_mb``
    the per-sample MB kept with checkpointing; ``act_sp_mb`` the same for Ulysses SP (optional).
    ``other[k] = (model_states_mb, activation_mb_per_sample)`` for ``k`` in
    ``pp_off|first|last``.  ``fwd_ms`` is forward ms per sample of one layer; ``other_fwd_ms``
    the embedding + LM head forward ms per sample.
    """

    param_mb: float
    act_mb: Dict[int, float]
    ckpt_act_mb: float
    other: Dict[str, Tuple[float, float]]
    fwd_ms: float
    other_fwd_ms: float = 0.0
    act_sp_mb: Dict[int, float] = field(default_factory=dict)
    source: str = ""

    def activation(self, tp: int, *, sp: bool = False, ckpt: bool = False) -> float:
        """Activation MB per sample of one layer under this TP/SP degree."""
        if ckpt:
            return self.ckpt_act_mb / (tp if sp else 1)
        table = self.act_sp_mb if sp and self.act_sp_mb else self.act_mb
        if tp in table:
            return table[tp]
        if sp:
            return self.act_mb[1] / tp
        # Beyond the profiled degrees: extrapolate with the last halving observed.
        known = sorted(table)
        lo = max(k for k in known if k <= tp) if any(k <= tp for k in known) else known[0]
        ratio = table[known[-1]] / table[known[-2]] if len(known) > 1 else 0.5
        steps = int(round(math.log2(tp / lo)))
        return table[lo] * ratio ** steps

    def validate(self, max_tp: int) -> None:
        if not self.param_mb > 0 or not self.fwd_ms > 0:
            raise PlanError(f"model profile {self.source!r}: parameter_size and forward time must be > 0")
        if 1 not in self.act_mb:
            raise PlanError(
                f"model profile {self.source!r}: tp_activation_per_bsz_dict has no entry for TP degree 1; "
                f"found {sorted(self.act_mb)}"
            )
        for key in ("pp_off", "first", "last"):
            if key not in self.other:
                raise PlanError(f"model profile {self.source!r}: missing {_OTHER_KEYS[key]!r}")


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
def model_profile_names(config: TransformerConfig, precision: str = "bf16") -> Tuple[str, str]:
    """Galvatron's (memory, computation) file names for a model shape."""
    tag = f"{precision}_hidden{config.hidden_size}_head{config.num_heads}_seqlen{config.seq_length}"
    return f"memory_profiling_{tag}.json", f"computation_profiling_{tag}.json"


def hardware_profile_names(num_nodes: int, devices_per_node: int) -> Tuple[str, str, str]:
    tag = f"{num_nodes}nodes_{devices_per_node}gpus_per_node"
    return f"allreduce_bandwidth_{tag}.json", f"p2p_bandwidth_{tag}.json", "overlap_coefficient.json"


# ----------------------------------------------------------------------------- reading
def _read_json(path: Path) -> Dict[str, Any]:
    if not path.exists():
        raise PlanError(f"profile file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"profile file {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PlanError(f"profile file {str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PlanError(f"{where}: expected a non-negative number, got {value!r}")
    return float(value)


def _first_tp(value: Any, where: str) -> float:
    """Galvatron-2 stores some 'other memory' entries per vocab-TP degree; take degree 1."""
    if isinstance(value, dict):
        if "1" not in value:
            raise PlanError(f"{where}: per-degree table has no key '1' (keys {sorted(value)})")
        return _number(value["1"], f"{where}['1']")
    return _number(value, where)


def _parse_memory(data: Mapping[str, Any], where: str) -> Dict[str, Any]:
    layer = data.get("layertype_0")
    if not isinstance(layer, dict):
        raise PlanError(f"{where}: missing 'layertype_0' object with parameter_size and tp_activation_per_bsz_dict")
    if "parameter_size" not in layer or "tp_activation_per_bsz_dict" not in layer:
        raise PlanError(f"{where}: 'layertype_0' needs 'parameter_size' and 'tp_activation_per_bsz_dict', got {sorted(layer)}")
    param = _number(layer["parameter_size"], f"{where}: layertype_0.parameter_size")
    acts, ckpt = _parse_acts(layer["tp_activation_per_bsz_dict"], f"{where}: layertype_0.tp_activation_per_bsz_dict")
    other: Dict[str, Tuple[float, float]] = {}
    for short, key in _OTHER_KEYS.items():
        entry = data.get(key)
        if not isinstance(entry, dict) or "model_states" not in entry or "activation" not in entry:
            raise PlanError(f"{where}: missing {key!r} object with 'model_states' and 'activation'")
        other[short] = (_first_tp(entry["model_states"], f"{where}: {key}.model_states"),
                        _first_tp(entry["activation"], f"{where}: {key}.activation"))
    act_sp: Dict[int, float] = {}
    sp_layer = data.get("layertype_0_sp")
    if isinstance(sp_layer, dict) and "tp_activation_per_bsz_dict" in sp_layer:
        act_sp, _ = _parse_acts(sp_layer["tp_activation_per_bsz_dict"], f"{where}: layertype_0_sp")
    return {"param_mb": param, "act_mb": acts, "ckpt_act_mb": ckpt, "other": other, "act_sp_mb": act_sp}


def _parse_acts(table: Any, where: str) -> Tuple[Dict[int, float], float]:
    if not isinstance(table, dict):
        raise PlanError(f"{where}: expected an object keyed by TP degree, got {type(table).__name__}")
    acts: Dict[int, float] = {}
    ckpt = None
    for key, value in table.items():
        if key == "checkpoint":
            ckpt = _number(value, f"{where}.checkpoint")
            continue
        try:
            degree = int(key)
        except ValueError:
            raise PlanError(f"{where}: key {key!r} is neither a TP degree nor 'checkpoint'") from None
        acts[degree] = _number(value, f"{where}[{key!r}]")
    if ckpt is None:
        raise PlanError(f"{where}: missing 'checkpoint' entry")
    if 1 not in acts:
        raise PlanError(f"{where}: missing the TP degree '1' entry")
    return acts, ckpt


_BSZ_KEY = re.compile(r"^layertype_(0|other)_bsz(\d+)(?:_seq(\d+))?$")


def _parse_computation(data: Mapping[str, Any], where: str, seq: Optional[int]) -> Tuple[float, Optional[float]]:
    """Forward ms per sample of one layer (and of embedding+head when profiled)."""
    if "layertype_0" in data:
        fwd = _number(data["layertype_0"], f"{where}: layertype_0")
        other = data.get("layertype_other")
        return fwd, (None if other is None else _number(other, f"{where}: layertype_other"))
    # Galvatron-2 batch mode: per-sample values per batch size; the largest batch is the
    # steady-state throughput the static model wants.
    best: Dict[str, Tuple[int, float]] = {}
    for key, value in data.items():
        m = _BSZ_KEY.match(key)
        if not m or (seq is not None and m.group(3) is not None and int(m.group(3)) != seq):
            continue
        bsz = int(m.group(2))
        if m.group(1) not in best or bsz > best[m.group(1)][0]:
            best[m.group(1)] = (bsz, _number(value, f"{where}: {key}"))
    if "0" not in best:
        raise PlanError(f"{where}: no 'layertype_0' forward time (nor layertype_0_bsz*_seq{seq or '*'} keys)")
    return best["0"][1], (best["other"][1] if "other" in best else None)


def load_model_profile(
    memory_path: str | Path,
    computation_path: str | Path,
    config: TransformerConfig | str | None = None,
) -> ModelProfile:
    """Read Galvatron ``memory_profiling_*.json`` + ``computation_profiling_*.json``.

    When the computation file has no embedding/LM-head time, it is estimated from the layer's
    time scaled by FLOPs (``2 h V`` vs the layer's forward FLOPs per token) for ``config``.
    """
    memory_path, computation_path = Path(memory_path), Path(computation_path)
    cfg = get_model_config(config) if config is not None else None
    mem = _parse_memory(_read_json(memory_path), str(memory_path))
    fwd, other_fwd = _parse_computation(_read_json(computation_path), str(computation_path),
                                        cfg.seq_length if cfg else None)
    if other_fwd is None:
        other_fwd = fwd * cfg.head_flops_per_token() / cfg.layer_flops_per_token() if cfg else 0.0
    profile = ModelProfile(fwd_ms=fwd, other_fwd_ms=other_fwd, source=f"{memory_path.name}+{computation_path.name}", **mem)
    profile.validate(max_tp=max(profile.act_mb))
    return profile


def load_hardware_profile(directory: str | Path, num_nodes: int, devices_per_node: int) -> HardwareProfile:
    """Read ``allreduce_bandwidth_*``, ``p2p_bandwidth_*`` and ``overlap_coefficient.json`` from a folder."""
    directory = Path(directory)
    ar_name, p2p_name, ov_name = hardware_profile_names(num_nodes, devices_per_node)
    allreduce: Dict[Tuple[int, int], float] = {}
    for key, value in _read_json(directory / ar_name).items():
        m = re.match(r"^allreduce_size_(\d+)_consec_([01])$", key)
        if not m:
            raise PlanError(f"{directory / ar_name}: unexpected key {key!r}; expected allreduce_size_<g>_consec_<0|1>")
        bw = _number(value, f"{directory / ar_name}: {key}")
        if bw <= 0:
            raise PlanError(f"{directory / ar_name}: {key} must be a positive bandwidth (GB/s), got {value!r}")
        allreduce[(int(m.group(1)), int(m.group(2)))] = bw
    p2p: Dict[int, float] = {}
    p2p_path = directory / p2p_name
    if p2p_path.exists():
        for key, value in _read_json(p2p_path).items():
            m = re.match(r"^pp_size_(\d+)$", key)
            if not m:
                raise PlanError(f"{p2p_path}: unexpected key {key!r}; expected pp_size_<k>")
            bw = _number(value, f"{p2p_path}: {key}")
            if bw <= 0:
                raise PlanError(f"{p2p_path}: {key} must be a positive bandwidth (GB/s), got {value!r}")
            p2p[int(m.group(1))] = bw
    overlap = 1.0
    if (directory / ov_name).exists():
        data = _read_json(directory / ov_name)
        if "overlap_coe" not in data:
            raise PlanError(f"{directory / ov_name}: missing 'overlap_coe'")
        overlap = _number(data["overlap_coe"], f"{directory / ov_name}: overlap_coe")
        if overlap < 1.0:
            raise PlanError(f"{directory / ov_name}: overlap_coe is a slowdown and must be >= 1, got {overlap}")
    return HardwareProfile(num_nodes, devices_per_node, allreduce, p2p, overlap, source=str(directory / ar_name))


# ----------------------------------------------------------------------------- writing
def save_model_profile(profile: ModelProfile, directory: str | Path, config: TransformerConfig,
                       precision: str = "bf16") -> Tuple[Path, Path]:
    """Write a profile in Galvatron's memory/computation JSON formats; returns both paths."""
    directory = Path(directory)
    mem_name, comp_name = model_profile_names(config, precision)
    acts = {str(k): v for k, v in sorted(profile.act_mb.items())}
    acts["checkpoint"] = profile.ckpt_act_mb
    memory: Dict[str, Any] = {"layertype_0": {"parameter_size": profile.param_mb, "tp_activation_per_bsz_dict": acts}}
    for short, key in _OTHER_KEYS.items():
        states, act = profile.other[short]
        memory[key] = {"model_states": states, "activation": act}
    if profile.act_sp_mb:
        sp = {str(k): v for k, v in sorted(profile.act_sp_mb.items())}
        sp["checkpoint"] = profile.ckpt_act_mb
        memory["layertype_0_sp"] = {"parameter_size": profile.param_mb, "tp_activation_per_bsz_dict": sp}
    computation = {"layertype_0": profile.fwd_ms, "layertype_other": profile.other_fwd_ms}
    for name, data in ((mem_name, memory), (comp_name, computation)):
        with atomic_write(directory / name, "w") as handle:
            json.dump(data, handle, indent=4)
    return directory / mem_name, directory / comp_name


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
    return replace(
        reference,
        param_mb=reference.param_mb * param_scale,
        act_mb={k: v * act_scale for k, v in reference.act_mb.items()},
        ckpt_act_mb=reference.ckpt_act_mb * act_scale,
        act_sp_mb={k: v * act_scale for k, v in reference.act_sp_mb.items()},
        other={k: (s * other_scale, a * act_scale * config.vocab_size / reference_config.vocab_size)
               for k, (s, a) in reference.other.items()},
        fwd_ms=reference.fwd_ms * flops / ref_flops,
        other_fwd_ms=reference.fwd_ms * flops / ref_flops * config.head_flops_per_token() / config.layer_flops_per_token(),
        source=f"estimated for {config.name} from {reference.source}",
    )


def load_builtin_profiles(model: TransformerConfig | str, num_nodes: int = 1, devices_per_node: int = 8,
                          directory: str | Path | None = None) -> Tuple[ModelProfile, HardwareProfile]:
    """Model and hardware profiles from ``directory`` (default: the shipped A100 files).

    A model shape without a profile file is estimated from the LLaMA-7B profile
    (:func:`estimate_model_profile`); a cluster shape without files raises :class:`PlanError`.
    """
    cfg = get_model_config(model)
    folder = Path(directory) if directory is not None else BUILTIN_PROFILE_DIR
    found = None
    for precision in ("bf16", "fp16", "fp32"):
        mem_name, comp_name = model_profile_names(cfg, precision)
        if (folder / mem_name).exists() and (folder / comp_name).exists():
            found = (folder / mem_name, folder / comp_name)
            break
    if found is not None:
        profile = load_model_profile(found[0], found[1], cfg)
    elif directory is not None:
        raise PlanError(
            f"no profile for {cfg.name} in {str(folder)!r}: expected {model_profile_names(cfg)[0]} and "
            f"{model_profile_names(cfg)[1]} (or the fp16/fp32 variants); run `sgl plan profile --model {cfg.name} --out DIR`"
        )
    else:
        ref_cfg = get_model_config("llama-7b")
        ref_mem, ref_comp = model_profile_names(ref_cfg)
        ref = load_model_profile(BUILTIN_PROFILE_DIR / ref_mem, BUILTIN_PROFILE_DIR / ref_comp, ref_cfg)
        profile = estimate_model_profile(cfg, ref, ref_cfg)
    if not (folder / hardware_profile_names(num_nodes, devices_per_node)[0]).exists() and directory is not None \
            and (BUILTIN_PROFILE_DIR / hardware_profile_names(num_nodes, devices_per_node)[0]).exists():
        folder = BUILTIN_PROFILE_DIR
    hardware = load_hardware_profile(folder, num_nodes, devices_per_node)
    return profile, hardware
