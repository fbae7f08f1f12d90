"""Inputs of the heterogeneous-GPU serving plan, and their JSON format.

``--gpus FILE`` (JSON)::

    {"gpus": [{"name": "A100", "price_per_hour": 3.67, "available": 8}, ...],
     "configs": [{"name": "A100-tp2", "gpus": {"A100": 2}, "tp": 2, "pp": 1,
                  "throughput": {"short": 12.0, "long": 1.5}}, ...]}

a *deployment config* is one model replica: how many GPUs of each type it holds (a pipeline
may span types), its TP/PP degrees, and its profiled maximum throughput (requests/s at the
SLO) per workload type; a type it cannot serve (out of memory, SLO missed) is left out.
``--workload FILE``: ``{"workloads": [{"name": "short", "requests": 10000}, ...]}`` —
requests of each type to serve. Mélange's solver input (``gpu_info`` with ``cost`` and a
``tputs`` matrix over (input, output) length buckets, ``workload_distribution``,
``total_request_rate``) is read by :func:`from_melange` (one single-GPU config per type).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError, PlanError

__all__ = ["GPUType", "DeployConfig", "Workload", "ServingProblem", "load_problem", "from_melange"]


@dataclass(frozen=True)
class GPUType:
    name: str
    price_per_hour: float
    available: int

    def __post_init__(self) -> None:
        check_real(self.price_per_hour, f"price_per_hour of GPU {self.name!r}", 0.0, open_low=True, error=PlanError)
        check_int(self.available, f"available of GPU {self.name!r}", minimum=0, error=PlanError)


@dataclass(frozen=True)
class DeployConfig:
    name: str
    gpus: Dict[str, int]
    throughput: Dict[str, float]
    tp: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        if not self.gpus or any(check_int(n, f"GPU count of config {self.name!r}", minimum=1, error=PlanError) < 1
                                for n in self.gpus.values()):
            raise PlanError(f"config {self.name!r} must hold at least one GPU")
        for w, thr in self.throughput.items():
            check_real(thr, f"throughput of config {self.name!r} on {w!r}", 0.0, open_low=True, error=PlanError)
        check_int(self.tp, f"tp of config {self.name!r}", minimum=1, error=PlanError)
        check_int(self.pp, f"pp of config {self.name!r}", minimum=1, error=PlanError)
        if self.tp * self.pp != sum(self.gpus.values()):
            raise PlanError(f"config {self.name!r}: tp*pp = {self.tp * self.pp} but it holds "
                            f"{sum(self.gpus.values())} GPUs")


@dataclass(frozen=True)
class Workload:
    name: str
    requests: float

    def __post_init__(self) -> None:
        check_real(self.requests, f"requests of workload {self.name!r}", 0.0, error=PlanError)


@dataclass
class ServingProblem:
    """GPU types, deployment configs and workload types of one planning problem (validated)."""

    gpus: List[GPUType]
    configs: List[DeployConfig]
    workloads: List[Workload]
    _prices: List[float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.gpus or not self.configs or not self.workloads:
            raise PlanError("a serving problem needs at least one GPU type, one config and one workload type")
        names = {g.name for g in self.gpus}
        wnames = {w.name for w in self.workloads}
        for items, what in ((self.gpus, "GPU type"), (self.configs, "config"), (self.workloads, "workload")):
            dup = sorted({x.name for x in items if [y.name for y in items].count(x.name) > 1})
            if dup:
                raise PlanError(f"{what} name(s) {dup} appear twice; names must be unique")
        for c in self.configs:
            unknown = set(c.gpus) - names
            if unknown:
                raise PlanError(f"config {c.name!r} uses unknown GPU type(s) {sorted(unknown)}; "
                                f"known: {sorted(names)}")
            extra = set(c.throughput) - wnames
            if extra:
                raise PlanError(f"config {c.name!r} has throughput for unknown workload(s) {sorted(extra)}")
        for w in self.workloads:
            if w.requests > 0 and not any(w.name in c.throughput for c in self.configs):
                raise PlanError(f"no config can serve workload {w.name!r}: give a throughput for it")
        price = {g.name: g.price_per_hour for g in self.gpus}
        self._prices = [sum(n * price[g] for g, n in c.gpus.items()) for c in self.configs]

    @property
    def config_prices(self) -> List[float]:
        """Hourly price of one replica of each config."""
        return list(self._prices)

    def restricted(self, gpu: str) -> "ServingProblem":
        """The same problem with only the configs that use GPU type ``gpu`` alone (a homogeneous fleet)."""
        configs = [c for c in self.configs if set(c.gpus) == {gpu}]
        if not configs:
            raise PlanError(f"no config uses only GPU type {gpu!r}")
        return ServingProblem(self.gpus, configs, self.workloads)


def _read(path: Union[str, Path]) -> Any:
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{path} does not exist")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None


_SHAPES = {
    "gpus": '{"gpus": [{"name": "A100", "price_per_hour": 3.67, "available": 8}, ...]}',
    "configs": '{"configs": [{"name": "A100-tp2", "gpus": {"A100": 2}, "tp": 2, "throughput": {"short": 12.0}}, ...]}',
    "workloads": '{"workloads": [{"name": "short", "requests": 10000}, ...]}',
}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


def _entries(doc: Any, key: str, file: str) -> List[Dict[str, Any]]:
    """``doc[key]``: a list of objects, or a PlanError that names the field and the expected shape."""
    if not isinstance(doc, dict) or key not in doc:
        raise PlanError(f"the {file} file needs a top-level \"{key}\" list, got {_kind(doc)}"
                        f"{' with keys ' + str(sorted(doc)) if isinstance(doc, dict) else ''}; expected {_SHAPES[key]}")
    items = doc[key]
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        got = _kind(items) if not isinstance(items, list) else \
            f"a list holding {_kind(next(i for i in items if not isinstance(i, dict)))}"
        raise PlanError(f"\"{key}\" in the {file} file must be a list of objects, got {got}; expected {_SHAPES[key]}")
    return items


def _value(item: Dict[str, Any], name: str, key: str, i: int, kind: type, required: bool = True,
           default: Any = None) -> Any:
    where = f"{key}[{i}]" + (f" ({item['name']!r})" if isinstance(item.get("name"), str) else "")
    if name not in item:
        if required:
            raise PlanError(f"{where} has no \"{name}\" field; expected {_SHAPES[key]}")
        return default
    value = item[name]
    ok = isinstance(value, kind) and not isinstance(value, bool) if kind is not dict else isinstance(value, dict)
    if kind in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        want = {dict: "an object", str: "a string", int: "a number", float: "a number"}[kind]
        raise PlanError(f"{where}.{name} must be {want}, got {_kind(value)} {value!r}; expected {_SHAPES[key]}")
    return value


def _problem_from_dicts(gpus_doc: Any, workload_doc: Any) -> ServingProblem:
    gpus = [GPUType(str(_value(g, "name", "gpus", i, str)), _value(g, "price_per_hour", "gpus", i, float),
                    _value(g, "available", "gpus", i, int))
            for i, g in enumerate(_entries(gpus_doc, "gpus", "--gpus"))]
    configs = [DeployConfig(str(_value(c, "name", "configs", i, str)),
                            {str(k): v for k, v in _value(c, "gpus", "configs", i, dict).items()},
                            {str(k): v for k, v in _value(c, "throughput", "configs", i, dict).items()},
                            _value(c, "tp", "configs", i, int, required=False, default=1),
                            _value(c, "pp", "configs", i, int, required=False, default=1))
               for i, c in enumerate(_entries(gpus_doc, "configs", "--gpus"))]
    workloads = [Workload(str(_value(w, "name", "workloads", i, str)), _value(w, "requests", "workloads", i, float))
                 for i, w in enumerate(_entries(workload_doc, "workloads", "--workload"))]
    return ServingProblem(gpus, configs, workloads)


def load_problem(gpus_file: Union[str, Path], workload_file: Union[str, Path]) -> ServingProblem:
    """Read the ``--gpus`` and ``--workload`` JSON files (the format above)."""
    return _problem_from_dicts(_read(gpus_file), _read(workload_file))


def from_melange(doc: Dict[str, Any], available: Union[int, Dict[str, int]] = 64,
                 horizon_s: float = 3600.0) -> ServingProblem:
    """A problem from Mélange's solver input: one 1-GPU config per type, buckets as workload types.

    Requests per bucket = ``total_request_rate * share * horizon_s``; a zero throughput cell
    means the GPU cannot serve that bucket.
    """
    try:
        info, dist, rate = doc["gpu_info"], doc["workload_distribution"], float(doc["total_request_rate"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"not a Mélange input (needs gpu_info, workload_distribution, "
                        f"total_request_rate): {exc}") from None
    cells: List[Tuple[int, int]] = [(i, j) for i, row in enumerate(dist) for j, _ in enumerate(row)]
    workloads = [Workload(f"in{i}-out{j}", rate * float(dist[i][j]) * horizon_s) for i, j in cells]
    gpus, configs = [], []
    for name, g in info.items():
        avail = available[name] if isinstance(available, dict) else available
        gpus.append(GPUType(name, float(g["cost"]), avail))
        thr = {f"in{i}-out{j}": float(g["tputs"][i][j]) for i, j in cells if float(g["tputs"][i][j]) > 0}
        configs.append(DeployConfig(f"{name}-x1", {name: 1}, thr))
    return ServingProblem(gpus, configs, workloads)
