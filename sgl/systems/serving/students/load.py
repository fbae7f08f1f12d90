"""Bursty arrivals and a serving loop with adaptive student pruning.

:func:`bursty_arrivals` draws a Markov-modulated Poisson process: a calm rate ``λ_0`` and a
burst rate ``λ_1`` alternate with exponential holding times, the usual model of the bursts an
online service sees. :func:`replay` serves the arrivals one batch at a time on a virtual clock:
when the server is free it takes up to ``max_batch`` waiting requests, runs the *real* model
on them, and advances the clock by the measured compute time, so latency = queueing + compute.
With :class:`AdaptivePruning` the server runs only the first ``k`` students,

    k = max(1, K - floor(queue / step)),

dropping the last (smallest-residual) students as the queue grows; ``k >= 1`` always.

>>> import numpy as np
>>> t = bursty_arrivals(200, calm_rate=10, burst_rate=200, mean_calm=1.0, mean_burst=0.2, seed=0)
>>> bool(np.all(np.diff(t) >= 0)), len(t)
(True, 200)
>>> AdaptivePruning(4, step=8).active(0), AdaptivePruning(4, step=8).active(100)
(4, 1)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import numpy as np

from sgl._checks import check_int, check_real

__all__ = ["bursty_arrivals", "AdaptivePruning", "replay"]


def bursty_arrivals(n: int, *, calm_rate: float = 20.0, burst_rate: float = 400.0, mean_calm: float = 1.0,
                    mean_burst: float = 0.1, seed: int = 0) -> np.ndarray:
    """``n`` sorted arrival times (s) of a two-state Markov-modulated Poisson process."""
    n = check_int(n, "n", minimum=1)
    rates = (check_real(calm_rate, "calm_rate", 0.0, open_low=True),
             check_real(burst_rate, "burst_rate", 0.0, open_low=True))
    holds = (check_real(mean_calm, "mean_calm", 0.0, open_low=True),
             check_real(mean_burst, "mean_burst", 0.0, open_low=True))
    rng = np.random.default_rng(seed)
    out, now, state = [], 0.0, 0
    while len(out) < n:
        end = now + rng.exponential(holds[state])
        while len(out) < n:
            now += rng.exponential(1.0 / rates[state])
            if now > end:
                now = end
                break
            out.append(now)
        state = 1 - state
    return np.asarray(out)


@dataclass(frozen=True)
class AdaptivePruning:
    """Run ``K - floor(queue / step)`` students (at least one) when ``queue`` requests wait."""

    num_students: int
    step: int = 16

    def __post_init__(self) -> None:
        check_int(self.num_students, "num_students", minimum=1)
        check_int(self.step, "step", minimum=1)

    def active(self, queue: int) -> int:
        return max(1, self.num_students - int(queue) // self.step)


def replay(serve: Callable[[np.ndarray, int], np.ndarray], arrivals: np.ndarray, *, max_batch: int = 32,
           pruning: Optional[AdaptivePruning] = None, num_students: int = 1) -> Dict[str, object]:
    """Serve ``arrivals`` with ``serve(request_ids, active) -> predictions``; latencies in ms.

    Returns ``latency_ms`` (per request), ``predictions``, ``active`` (students used per request),
    ``mean_ms``, ``p99_ms`` and ``throughput`` (requests per second of virtual time).
    """
    max_batch = check_int(max_batch, "max_batch", minimum=1)
    arrivals = np.asarray(arrivals, dtype=float)
    n = len(arrivals)
    done = np.zeros(n)
    preds = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    clock, head = 0.0, 0
    while head < n:
        clock = max(clock, arrivals[head])
        waiting = int(np.searchsorted(arrivals, clock, side="right")) - head
        take = min(max_batch, waiting)
        active = pruning.active(waiting) if pruning is not None else num_students
        rows = np.arange(head, head + take)
        start = time.perf_counter()
        preds[rows] = serve(rows, active)
        clock += time.perf_counter() - start
        done[rows], used[rows] = clock, active
        head += take
    lat = 1000.0 * (done - arrivals)
    return {"latency_ms": lat, "predictions": preds, "active": used, "mean_ms": float(lat.mean()),
            "p99_ms": float(np.percentile(lat, 99)), "throughput": n / max(done[-1] - arrivals[0], 1e-9)}
