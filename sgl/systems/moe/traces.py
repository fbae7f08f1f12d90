"""Routing traces on disk, and the LAER-MoE artifact's per-rank loads.

**Format ``sgl-moe-trace`` v1** (one ``.npz``, written atomically):

* ``counts``: int64 ``[steps, layers, samples, experts]`` — kept (token, expert) pairs of each
  sample of the global batch at each MoE layer and step (``sum over experts <= tokens * top_k``);
* ``meta``: a JSON string with ``format`` (``"sgl-moe-trace"``), ``version`` (1), ``num_experts``,
  ``top_k``, ``tokens_per_sample`` and free-form ``source``.

:func:`save_trace` / :func:`load_trace` write and read it (a trace written by anyone else in this
format loads the same way); :func:`synthetic_trace` draws one with a tunable per-sample expert
affinity; :func:`load_laer_loads` reads ``token_analysis_backup.csv`` (per-*device* loads).
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError, DatasetError
from sgl.fileio import atomic_write

__all__ = ["RoutingTrace", "save_trace", "load_trace", "synthetic_trace", "load_laer_loads", "TRACE_FORMAT"]

TRACE_FORMAT = "sgl-moe-trace"


@dataclass
class RoutingTrace:
    """Per-sample, per-layer, per-expert routing counts (see the module docstring for the format)."""

    counts: np.ndarray
    top_k: int
    tokens_per_sample: int
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.counts = np.asarray(self.counts)
        if self.counts.ndim != 4:
            raise DatasetError(f"trace counts must be [steps, layers, samples, experts], got shape {self.counts.shape}")
        if not np.issubdtype(self.counts.dtype, np.integer):
            raise DatasetError(f"trace counts must be integers, got {self.counts.dtype}")
        if (self.counts < 0).any():
            raise DatasetError(f"trace counts hold negative values (min {self.counts.min()}); "
                               "routing counts are >= 0: the file is corrupt or not a routing trace")
        check_int(self.top_k, "trace top_k", 1, error=DatasetError)
        check_int(self.tokens_per_sample, "trace tokens_per_sample", 1, error=DatasetError)
        over = self.counts.sum(-1) > self.tokens_per_sample * self.top_k
        if over.any():
            raise DatasetError(f"a sample routes {int(self.counts.sum(-1).max())} pairs, more than "
                               f"tokens_per_sample * top_k = {self.tokens_per_sample * self.top_k}")
        self.counts = self.counts.astype(np.int64)

    @property
    def num_experts(self) -> int:
        return self.counts.shape[-1]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.counts.shape


def save_trace(trace: RoutingTrace, path: str | Path) -> Path:
    path = Path(path)
    meta = {"format": TRACE_FORMAT, "version": 1, "num_experts": trace.num_experts, "top_k": trace.top_k,
            "tokens_per_sample": trace.tokens_per_sample, "source": trace.source, **trace.extra}
    buf = io.BytesIO()
    np.savez_compressed(buf, counts=trace.counts, meta=np.array(json.dumps(meta)))
    with atomic_write(path) as f:
        f.write(buf.getvalue())
    return path


def load_trace(path: str | Path) -> RoutingTrace:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"routing trace {path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as z:
            counts, meta = z["counts"], json.loads(str(z["meta"]))
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(f"{path} is not an {TRACE_FORMAT} .npz file ({exc}); write it with save_trace") from exc
    if meta.get("format") != TRACE_FORMAT or meta.get("version") != 1:
        raise DatasetError(f"{path}: format {meta.get('format')!r} v{meta.get('version')} is not {TRACE_FORMAT} v1")
    if meta.get("num_experts") != counts.shape[-1]:
        raise DatasetError(f"{path}: meta says {meta.get('num_experts')} experts, counts have {counts.shape[-1]}")
    known = {"format", "version", "num_experts", "top_k", "tokens_per_sample", "source"}
    return RoutingTrace(counts, meta["top_k"], meta["tokens_per_sample"], meta.get("source", ""),
                        {k: v for k, v in meta.items() if k not in known})


def synthetic_trace(steps: int, layers: int, samples: int, experts: int, tokens: int, top_k: int,
                    affinity: float, seed: int = 0) -> RoutingTrace:
    """Each sample prefers a few "home" experts: a share ``affinity`` of its pairs go to its
    ``top_k`` home experts (consecutive ids — co-activated experts, which EP lays out together —
    the same in every layer but for a 10 % drift per layer), the rest uniformly."""
    check_real(affinity, "affinity", 0.0, 1.0)
    rng = np.random.default_rng(seed)
    counts = np.zeros((steps, layers, samples, experts), dtype=np.int64)
    for t in range(steps):
        home = (rng.integers(0, experts, samples)[:, None] + np.arange(top_k)) % experts
        for l in range(layers):
            drift = rng.random((samples, top_k)) < 0.1  # a tenth of the homes move per layer
            home = np.where(drift, rng.integers(0, experts, (samples, top_k)), home)
            p = np.full((samples, experts), (1 - affinity) / experts)
            np.add.at(p, (np.arange(samples)[:, None], home), affinity / top_k)
            counts[t, l] = rng.multinomial(tokens * top_k, p / p.sum(1, keepdims=True))
    return RoutingTrace(counts, top_k, tokens, source=f"synthetic affinity={affinity} seed={seed}")


def load_laer_loads(path: str | Path, model: str, method: str = "FSDP") -> np.ndarray:
    """``[iters, layers, ranks]`` per-rank token loads from LAER's ``token_analysis_backup.csv``."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path} does not exist (expected the LAER-MoE token_analysis_backup.csv)")
    rows = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        need = {"rank", "method", "model_name", "layer", "iter", "token_num"}
        if not need <= set(reader.fieldnames or ()):
            raise DatasetError(f"{path} lacks columns {sorted(need - set(reader.fieldnames or ()))}")
        for r in reader:
            if r["model_name"] == model and r["method"] == method:
                rows.append((int(r["iter"]), int(r["layer"]), int(r["rank"]), int(r["token_num"])))
    if not rows:
        raise ConfigError(f"{path} has no rows for model {model!r}, method {method!r}")
    a = np.array(rows)
    if (a[:, 3] < 0).any():
        raise DatasetError(f"{path} holds negative token counts; the file is corrupt")
    out = np.zeros((a[:, 0].max() + 1, a[:, 1].max() + 1, a[:, 2].max() + 1), dtype=np.int64)
    out[a[:, 0], a[:, 1], a[:, 2]] = a[:, 3]
    return out
