"""Search objectives — all measured on the running trial, never estimated — and Pareto tools.

=============  ==========  =================================================================
name           direction   what is measured
=============  ==========  =================================================================
accuracy       maximize    best validation accuracy (the test split is never looked at)
epoch_time     minimize    training seconds per epoch (wall clock, mean over epochs run)
train_time     minimize    precompute seconds (as measured when the hops were computed) + training
latency        minimize    inference seconds: base model over every node + post-processing
memory         minimize    peak memory of the trial in MB: CUDA peak allocation on GPU; on CPU
                           the peak resident-set growth over the trial, sampled every 2 ms
model_bytes    minimize    bytes of the deployed model (packed int8, CSR for pruned weights)
=============  ==========  =================================================================

Example:
    >>> from sgl.search import parse_objectives, pareto_front, hypervolume_2d
    >>> [o.name for o in parse_objectives("accuracy,latency")]
    ['accuracy', 'latency']
    >>> pareto_front([(0.8, 2.0), (0.7, 1.0), (0.6, 3.0)], ["maximize", "minimize"])
    [0, 1]
    >>> round(hypervolume_2d([(0.8, 2.0), (0.7, 1.0)], ["maximize", "minimize"], reference=(0.0, 4.0)), 6)
    2.3
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from sgl.errors import ConfigError

__all__ = ["Objective", "OBJECTIVES", "parse_objectives", "pareto_front", "hypervolume_2d", "MemoryMeter"]


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "maximize" | "minimize"
    unit: str
    description: str


OBJECTIVES = {o.name: o for o in (
    Objective("accuracy", "maximize", "", "best validation accuracy"),
    Objective("epoch_time", "minimize", "s", "training time per epoch"),
    Objective("train_time", "minimize", "s", "precompute + training time"),
    Objective("latency", "minimize", "s", "inference time over all nodes incl. post-processing"),
    Objective("memory", "minimize", "MB", "peak memory growth of the trial"),
    Objective("model_bytes", "minimize", "B", "bytes of the deployed model"),
)}


def parse_objectives(spec: Union[str, Sequence[str]]) -> List[Objective]:
    """``"accuracy,latency"`` -> objectives; at least two distinct, known names."""
    names = [n.strip().lower() for n in (spec.split(",") if isinstance(spec, str) else spec) if str(n).strip()]
    unknown = [n for n in names if n not in OBJECTIVES]
    if unknown:
        raise ConfigError(f"unknown objective(s) {unknown}; choose two or more of {', '.join(OBJECTIVES)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"objective listed twice in {names}")
    if len(names) < 2:
        raise ConfigError(f"a multi-objective search needs at least two objectives, got {names}; "
                          f"e.g. --objectives accuracy,latency")
    return [OBJECTIVES[n] for n in names]


def _as_minimize(point: Sequence[float], directions: Sequence[str]) -> Tuple[float, ...]:
    return tuple(-v if d == "maximize" else v for v, d in zip(point, directions))


def pareto_front(points: Sequence[Sequence[float]], directions: Sequence[str]) -> List[int]:
    """Indices of the non-dominated points (ties: equal points are all kept)."""
    for d in directions:
        if d not in ("maximize", "minimize"):
            raise ConfigError(f"direction must be 'maximize' or 'minimize', got {d!r}")
    values = [_as_minimize(p, directions) for p in points]
    front = []
    for i, p in enumerate(values):
        dominated = any(all(q_j <= p_j for q_j, p_j in zip(q, p)) and q != p for q in values)
        if not dominated:
            front.append(i)
    return front


def hypervolume_2d(points: Iterable[Sequence[float]], directions: Sequence[str],
                   reference: Sequence[float]) -> float:
    """Exact area dominated by ``points`` and bounded by ``reference`` (two objectives).

    The reference point must be worse than every point that should count (points not
    strictly better than it in both objectives contribute nothing).
    """
    if len(directions) != 2 or len(reference) != 2:
        raise ConfigError("hypervolume_2d needs exactly two objectives and a 2-D reference point")
    ref = _as_minimize(reference, directions)
    pts = sorted({_as_minimize(p, directions) for p in points})
    pts = [p for p in pts if p[0] < ref[0] and p[1] < ref[1]]
    area, best_y = 0.0, ref[1]
    for x, y in pts:  # sweep along the first objective; keep the running minimum of the second
        if y < best_y:
            area += (ref[0] - x) * (best_y - y)
            best_y = y
    return area


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: fall back to the lifetime peak
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _release_free_memory() -> None:
    # no gc.collect(): it cost 0.4 s per trial with optuna's objects alive; tensors are refcounted
    try:  # return freed heap pages to the OS so the baseline is the live memory, not old garbage
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class MemoryMeter:
    """Peak memory growth (bytes) of the code run inside ``with MemoryMeter(device) as m:``.

    On CUDA it is ``torch.cuda.max_memory_allocated`` above the starting allocation; on
    CPU a background thread samples the resident set every ``interval`` seconds (large
    tensors are ``mmap``-ed by the allocator, so they show up and vanish in RSS).
    """

    def __init__(self, device: Optional[object] = None, interval: float = 0.002) -> None:
        self.device = device
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _cuda(self) -> bool:
        return getattr(self.device, "type", str(self.device or "cpu")).startswith("cuda")

    def __enter__(self) -> "MemoryMeter":
        _release_free_memory()
        if self._cuda():
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return self
        self._base = _rss_bytes()
        self._peak = self._base

        def sample() -> None:
            while not self._stop.is_set():
                self._peak = max(self._peak, _rss_bytes())
                time.sleep(self.interval)

        self._thread = threading.Thread(target=sample, daemon=True, name="sgl-memory-meter")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._cuda():
            import torch

            torch.cuda.synchronize(self.device)
            self.peak_bytes = max(0, torch.cuda.max_memory_allocated(self.device) - self._base)
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak = max(self._peak, _rss_bytes())
        self.peak_bytes = max(0, self._peak - self._base)

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 2**20
