"""One Transformer layer type's profile and Galvatron's two file layouts for it.

A :class:`ModelProfile` holds what Galvatron's ``memory_profiling_*`` and
``computation_profiling_*`` files hold: parameter MB of one layer (fp32 bytes, Galvatron's
``parameter_size``), activation MB per sample for each TP degree and with checkpointing
(``tp_activation_per_bsz_dict``), embedding/LM-head memory with pipelining off, on the first
and on the last stage (``other_memory_pp_off`` / ``_pp_on_first`` / ``_pp_on_last``, per
vocabulary-TP degree when profiled so), and the forward time of one layer per sample (ms).

Two layouts are read and written (:data:`PROFILE_LAYOUTS`):

* ``"galvatron3"`` -- Galvatron 3.0: files ``memory_profiling_{precision}_{model}_all.json`` /
  ``computation_profiling_{precision}_{model}_all.json``; every memory entry is keyed by
  sequence length (``"layertype_0": {"2048": {...}}``, ``"other_memory_pp_off": {"2048":
  {"model_states": {"1": ..., "2": ...}, "activation": {...}}}``), with ``_sp`` twins
  (``layertype_0_sp``, ``other_memory_pp_off_sp``, ...) profiled with sequence parallelism --
  a file may hold only those; times are ``layertype_0_bsz{B}_seq{S}`` /
  ``layertype_other_bsz{B}_seq{S}`` ms per sample.
* ``"legacy"`` -- Galvatron 1/2: ``memory_profiling_{precision}_hidden{h}_head{a}_seqlen{s}.json``
  with the same objects unkeyed by sequence length, and a ``layertype_0`` forward time (or
  Galvatron-2's per-batch keys).

Reading accepts either layout under any file name (raw per-run records next to the derived
keys are ignored); a file with several sequence lengths needs the model, to choose one.

>>> from sgl.systems.parallel import get_model_config, model_profile_names
>>> model_profile_names(get_model_config("llama-7b"), layout="galvatron3")
('memory_profiling_bf16_llama-7b_all.json', 'computation_profiling_bf16_llama-7b_all.json')
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from sgl.errors import PlanError
from sgl.fileio import atomic_write
from sgl.systems.parallel.model import TransformerConfig, get_model_config

__all__ = ["ModelProfile", "PROFILE_LAYOUTS", "model_profile_names", "load_model_profile", "save_model_profile"]

#: Galvatron's model-profile layouts: 3.0 (keyed by sequence length) and 1/2 ("legacy").
PROFILE_LAYOUTS = ("galvatron3", "legacy")

OTHER_KEYS = {"pp_off": "other_memory_pp_off", "first": "other_memory_pp_on_first", "last": "other_memory_pp_on_last"}

#: per vocabulary-TP degree: (model-states MB, activation MB per sample) on one device
OtherTable = Dict[int, Tuple[float, float]]


@dataclass
class ModelProfile:
    """Per-layer memory (MB) and time (ms) of one Transformer layer type, plus embedding/head.

    ``act_mb[tp]`` is activation MB per sample under Megatron TP degree ``tp``; ``ckpt_act_mb``
    the per-sample MB kept with checkpointing; ``act_sp_mb`` the same for Ulysses SP (optional).
    ``other[k] = (model_states_mb, activation_mb_per_sample)`` for ``k`` in
    ``pp_off|first|last`` at vocabulary-TP degree 1; ``other_vtp[k][d]`` the same at degree
    ``d`` where it was profiled (``other_sp_vtp`` with sequence parallelism); other degrees
    divide the degree-1 figures by ``d``.  ``fwd_ms`` is forward ms per sample of one layer
    (measured at ``batch_size`` samples when known); ``other_fwd_ms`` the embedding + LM head
    forward ms per sample.

    >>> p = ModelProfile(param_mb=10.0, act_mb={1: 8.0}, ckpt_act_mb=1.0, fwd_ms=2.0,
    ...                  other={"pp_off": (40.0, 4.0), "first": (20.0, 1.0), "last": (20.0, 3.0)},
    ...                  other_vtp={"pp_off": {1: (40.0, 4.0), 2: (24.0, 2.5)}})
    >>> p.other_memory("pp_off", 2), p.other_memory("first", 2)
    ((24.0, 2.5), (10.0, 0.5))
    """

    param_mb: float
    act_mb: Dict[int, float]
    ckpt_act_mb: float
    other: Dict[str, Tuple[float, float]]
    fwd_ms: float
    other_fwd_ms: float = 0.0
    act_sp_mb: Dict[int, float] = field(default_factory=dict)
    source: str = ""
    other_vtp: Dict[str, OtherTable] = field(default_factory=dict)
    other_sp_vtp: Dict[str, OtherTable] = field(default_factory=dict)
    batch_size: Optional[int] = None

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

    def other_memory(self, key: str, vtp: int, *, sp: bool = False) -> Tuple[float, float]:
        """(model-states MB, activation MB per sample) of the embedding/head part ``key`` per device."""
        table = (self.other_sp_vtp if sp and self.other_sp_vtp else self.other_vtp).get(key, {})
        if vtp in table:
            return table[vtp]
        states, act = self.other[key]
        return states / vtp, act / vtp

    def validate(self, max_tp: int) -> None:
        if not self.param_mb > 0 or not self.fwd_ms > 0:
            raise PlanError(f"model profile {self.source!r}: parameter_size and forward time must be > 0")
        if 1 not in self.act_mb:
            raise PlanError(
                f"model profile {self.source!r}: tp_activation_per_bsz_dict has no entry for TP degree 1; "
                f"found {sorted(self.act_mb)}"
            )
        for key in OTHER_KEYS:
            if key not in self.other:
                raise PlanError(f"model profile {self.source!r}: missing {OTHER_KEYS[key]!r}")


def model_profile_names(config: TransformerConfig, precision: str = "bf16", layout: str = "galvatron3") -> Tuple[str, str]:
    """Galvatron's (memory, computation) file names for a model in ``layout`` (:data:`PROFILE_LAYOUTS`)."""
    if layout == "galvatron3":
        tag = f"{precision}_{config.name}_all"
    elif layout == "legacy":
        tag = f"{precision}_hidden{config.hidden_size}_head{config.num_heads}_seqlen{config.seq_length}"
    else:
        raise PlanError(f"unknown profile layout {layout!r}; choose one of {list(PROFILE_LAYOUTS)}")
    return f"memory_profiling_{tag}.json", f"computation_profiling_{tag}.json"


# ----------------------------------------------------------------------------- reading
def read_json(path: Path) -> Dict[str, Any]:
    if not path.exists():
        raise PlanError(f"profile file {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"profile file {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PlanError(f"profile file {str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data


def number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PlanError(f"{where}: expected a non-negative number, got {value!r}")
    return float(value)


def _by_seq(value: Any, key: str, where: str, seq: Optional[int], legacy_fields: Tuple[str, ...]) -> Optional[Dict]:
    """``data[key]`` as one object: the legacy object itself, or Galvatron 3.0's entry for ``seq``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PlanError(f"{where}: {key!r} must be an object, got {type(value).__name__}")
    if any(f in value for f in legacy_fields):
        return value
    seqs = sorted(int(k) for k in value if str(k).isdigit())
    if not seqs:
        raise PlanError(f"{where}: {key!r} holds neither {' / '.join(legacy_fields)} (Galvatron 1/2 layout) nor "
                        f"entries per sequence length (Galvatron 3.0 layout); keys {sorted(value)}")
    if seq is None:
        if len(seqs) > 1:
            raise PlanError(f"{where}: {key!r} holds sequence lengths {seqs}; pass the model to choose one")
        seq = seqs[0]
    if seq not in seqs:
        raise PlanError(f"{where}: {key!r} has no entry for sequence length {seq} (it holds {seqs}); "
                        f"profile the model at {seq} or use a model with one of these lengths")
    entry = value[str(seq)]
    if not isinstance(entry, dict):
        raise PlanError(f"{where}: {key}[{str(seq)!r}] must be an object, got {type(entry).__name__}")
    return entry


def _degree_table(value: Any, where: str) -> Dict[int, float]:
    """A number (degree 1) or an object keyed by vocabulary-TP degree (Galvatron 2/3)."""
    if not isinstance(value, dict):
        return {1: number(value, where)}
    table = {}
    for key, v in value.items():
        if not str(key).isdigit() or int(key) < 1:
            raise PlanError(f"{where}: key {key!r} is not a vocabulary-TP degree")
        table[int(key)] = number(v, f"{where}[{key!r}]")
    if 1 not in table:
        raise PlanError(f"{where}: per-degree table has no key '1' (keys {sorted(value)})")
    return table


def _other_table(entry: Any, key: str, where: str) -> OtherTable:
    if not isinstance(entry, dict) or "model_states" not in entry or "activation" not in entry:
        raise PlanError(f"{where}: missing {key!r} object with 'model_states' and 'activation'")
    states = _degree_table(entry["model_states"], f"{where}: {key}.model_states")
    acts = _degree_table(entry["activation"], f"{where}: {key}.activation")
    # A degree profiled on one side only: the other side as the cost model assumes, degree 1 / d.
    return {d: (states.get(d, states[1] / d), acts.get(d, acts[1] / d)) for d in sorted(set(states) | set(acts))}


def _parse_acts(table: Any, where: str) -> Tuple[Dict[int, float], float]:
    if not isinstance(table, dict):
        raise PlanError(f"{where}: expected an object keyed by TP degree, got {type(table).__name__}")
    acts: Dict[int, float] = {}
    ckpt = None
    for key, value in table.items():
        if key == "checkpoint":
            ckpt = number(value, f"{where}.checkpoint")
            continue
        try:
            degree = int(key)
        except ValueError:
            raise PlanError(f"{where}: key {key!r} is neither a TP degree nor 'checkpoint'") from None
        acts[degree] = number(value, f"{where}[{key!r}]")
    if ckpt is None:
        raise PlanError(f"{where}: missing 'checkpoint' entry")
    if 1 not in acts:
        raise PlanError(f"{where}: missing the TP degree '1' entry")
    return acts, ckpt


def _parse_layer(layer: Dict, key: str, where: str) -> Tuple[float, Dict[int, float], float]:
    if "parameter_size" not in layer or "tp_activation_per_bsz_dict" not in layer:
        raise PlanError(f"{where}: {key!r} needs 'parameter_size' and 'tp_activation_per_bsz_dict', got {sorted(layer)}")
    acts, ckpt = _parse_acts(layer["tp_activation_per_bsz_dict"], f"{where}: {key}.tp_activation_per_bsz_dict")
    return number(layer["parameter_size"], f"{where}: {key}.parameter_size"), acts, ckpt


def parse_memory(data: Mapping[str, Any], where: str, seq: Optional[int] = None) -> Dict[str, Any]:
    """The :class:`ModelProfile` memory fields of a memory file in either layout."""
    fields = ("parameter_size", "tp_activation_per_bsz_dict")
    layer = _by_seq(data.get("layertype_0"), "layertype_0", where, seq, fields)
    sp_layer = _by_seq(data.get("layertype_0_sp"), "layertype_0_sp", where, seq, fields)
    if layer is None and sp_layer is None:
        raise PlanError(f"{where}: missing 'layertype_0' (or 'layertype_0_sp') object with parameter_size and "
                        "tp_activation_per_bsz_dict")
    param, acts, ckpt = _parse_layer(layer if layer is not None else sp_layer,
                                     "layertype_0" if layer is not None else "layertype_0_sp", where)
    act_sp = _parse_layer(sp_layer, "layertype_0_sp", where)[1] if sp_layer is not None else {}
    tables: Dict[str, Dict[str, OtherTable]] = {}
    for suffix in ("", "_sp"):
        entries = {short: _by_seq(data.get(key + suffix), key + suffix, where, seq, ("model_states", "activation"))
                   for short, key in OTHER_KEYS.items()}
        if all(e is not None for e in entries.values()):
            tables[suffix] = {short: _other_table(e, OTHER_KEYS[short] + suffix, where) for short, e in entries.items()}
    # A file profiled with sequence parallelism only (Galvatron 3.0's usual) supplies both modes.
    preferred = ("", "_sp") if layer is not None else ("_sp", "")
    base = next((s for s in preferred if s in tables), None)
    if base is None:
        names = [key + preferred[0] for key in OTHER_KEYS.values()]
        missing = next((name for name in names if data.get(name) is None), names[0])
        raise PlanError(f"{where}: missing {missing!r} object with 'model_states' and 'activation'")
    other_vtp = tables[base]
    return {"param_mb": param, "act_mb": acts, "ckpt_act_mb": ckpt, "act_sp_mb": act_sp,
            "other": {short: t[1] for short, t in other_vtp.items()}, "other_vtp": other_vtp,
            "other_sp_vtp": tables.get("_sp", {})}


_BSZ_KEY = re.compile(r"^layertype_(0|other)_bsz(\d+)(?:_seq(\d+))?$")


def parse_computation(data: Mapping[str, Any], where: str,
                      seq: Optional[int]) -> Tuple[float, Optional[float], Optional[int]]:
    """(forward ms per sample of one layer, of embedding+head or None, batch size or None)."""
    if "layertype_0" in data:
        fwd = number(data["layertype_0"], f"{where}: layertype_0")
        other = data.get("layertype_other")
        return fwd, (None if other is None else number(other, f"{where}: layertype_other")), None
    # Per-batch keys (Galvatron 2 batch mode, Galvatron 3.0): per-sample values; the largest
    # batch is the steady-state throughput the static model wants.
    found = [(m, value) for m, value in ((_BSZ_KEY.match(k), v) for k, v in data.items()) if m]
    seqs = sorted({int(m.group(3)) for m, _ in found if m.group(3) is not None})
    if seq is None and len(seqs) > 1:
        raise PlanError(f"{where}: forward times for sequence lengths {seqs}; pass the model to choose one")
    best: Dict[str, Tuple[int, float]] = {}
    for m, value in found:
        if seq is not None and m.group(3) is not None and int(m.group(3)) != seq:
            continue
        bsz = int(m.group(2))
        if m.group(1) not in best or bsz > best[m.group(1)][0]:
            best[m.group(1)] = (bsz, number(value, f"{where}: {m.group(0)}"))
    if "0" not in best:
        raise PlanError(f"{where}: no 'layertype_0' forward time (nor layertype_0_bsz*_seq{seq or '*'} keys"
                        + (f"; the file has sequence lengths {seqs}" if seqs else "") + ")")
    return best["0"][1], (best["other"][1] if "other" in best else None), best["0"][0]


def load_model_profile(
    memory_path: str | Path,
    computation_path: str | Path,
    config: TransformerConfig | str | None = None,
) -> ModelProfile:
    """Read Galvatron ``memory_profiling_*.json`` + ``computation_profiling_*.json`` (either layout).

    When the computation file has no embedding/LM-head time, it is estimated from the layer's
    time scaled by FLOPs (``2 h V`` vs the layer's forward FLOPs per token) for ``config``.
    """
    memory_path, computation_path = Path(memory_path), Path(computation_path)
    cfg = get_model_config(config) if config is not None else None
    seq = cfg.seq_length if cfg else None
    mem = parse_memory(read_json(memory_path), str(memory_path), seq)
    fwd, other_fwd, bsz = parse_computation(read_json(computation_path), str(computation_path), seq)
    if other_fwd is None:
        other_fwd = fwd * cfg.head_flops_per_token() / cfg.layer_flops_per_token() if cfg else 0.0
    profile = ModelProfile(fwd_ms=fwd, other_fwd_ms=other_fwd, batch_size=bsz,
                           source=f"{memory_path.name}+{computation_path.name}", **mem)
    profile.validate(max_tp=max(profile.act_mb))
    return profile


# ----------------------------------------------------------------------------- writing
def _acts_payload(acts: Mapping[int, float], ckpt: float) -> Dict[str, float]:
    out = {str(k): v for k, v in sorted(acts.items())}
    out["checkpoint"] = ckpt
    return out


def _other_payload(profile: ModelProfile, short: str, sp: bool, layout: str) -> Dict[str, Any]:
    table = (profile.other_sp_vtp if sp and profile.other_sp_vtp else profile.other_vtp).get(short, {})
    if layout == "legacy" and set(table) <= {1}:
        states, act = profile.other[short]
        return {"model_states": states, "activation": act}
    # Galvatron 3.0 looks up every vocabulary-TP degree it searches: write all profiled TP degrees.
    degrees = sorted(set(table) | set(profile.act_mb) | {1})
    values = {d: profile.other_memory(short, d, sp=sp) for d in degrees}
    return {"model_states": {str(d): v[0] for d, v in values.items()},
            "activation": {str(d): v[1] for d, v in values.items()}}


def memory_payload(profile: ModelProfile, config: TransformerConfig, layout: str) -> Dict[str, Any]:
    """The memory file of ``profile`` in ``layout``."""
    def keyed(entry: Any) -> Any:
        return {str(config.seq_length): entry} if layout == "galvatron3" else entry

    modes = [("", profile.act_mb)] + ([("_sp", profile.act_sp_mb)] if profile.act_sp_mb else [])
    data: Dict[str, Any] = {}
    for suffix, acts in modes:
        data["layertype_0" + suffix] = keyed({"parameter_size": profile.param_mb,
                                               "tp_activation_per_bsz_dict": _acts_payload(acts, profile.ckpt_act_mb)})
    for suffix, _ in modes:
        if suffix and layout == "legacy" and not profile.other_sp_vtp:
            continue  # Galvatron 1/2 read only the unsuffixed embedding tables
        for short, key in OTHER_KEYS.items():
            data[key + suffix] = keyed(_other_payload(profile, short, bool(suffix), layout))
    return data


def computation_payload(profile: ModelProfile, config: TransformerConfig, layout: str) -> Dict[str, float]:
    if layout == "legacy":
        return {"layertype_0": profile.fwd_ms, "layertype_other": profile.other_fwd_ms}
    tag = f"bsz{profile.batch_size or 1}_seq{config.seq_length}"
    return {f"layertype_0_{tag}": profile.fwd_ms, f"layertype_other_{tag}": profile.other_fwd_ms}


def save_model_profile(profile: ModelProfile, directory: str | Path, config: TransformerConfig,
                       precision: str = "bf16", layout: str = "galvatron3") -> Tuple[Path, Path]:
    """Write ``profile`` as Galvatron's memory/computation JSON in ``layout``; returns both paths.

    ``"galvatron3"`` (default) is what Galvatron 3.0's search engine reads, ``"legacy"`` what
    Galvatron 1/2 read (see :data:`PROFILE_LAYOUTS`).  Files are written atomically.
    """
    directory = Path(directory)
    mem_name, comp_name = model_profile_names(config, precision, layout)
    for name, data in ((mem_name, memory_payload(profile, config, layout)),
                       (comp_name, computation_payload(profile, config, layout))):
        with atomic_write(directory / name, "w") as handle:
            json.dump(data, handle, indent=4)
    return directory / mem_name, directory / comp_name
