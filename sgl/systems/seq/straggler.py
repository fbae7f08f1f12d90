"""Straggling rates: per-device slowdown ``sr_i = t_i / min_j t_j`` of a fixed timed GEMM.

:func:`time_gemm` times ``repeats`` products of two ``size × size`` matrices on this process;
:func:`measure_rates` runs it on every rank of a :mod:`sgl.comm` group and all-gathers the
times, so every rank gets the same rate vector; :func:`check_rates` validates a given vector
(every rate finite and ``> 0``).  :func:`inject_straggler` makes one rank of a run really slower
(the Malleus runtime, :mod:`~sgl.systems.seq.malleus_runtime`, applies it).
:func:`straggler_setting` builds the simulated settings used by the benchmark and the CLI (one
slow device, a slow node, several slow devices), reconstructed after the kinds Malleus evaluates.

>>> rates = straggling_rates([2.0, 2.0, 5.0, 2.2])
>>> rates.tolist()
[1.0, 1.0, 2.5, 1.1]
>>> straggler_setting("one-5x", 16)[:3].tolist()
[5.0, 1.0, 1.0]
>>> inject_straggler(1, 2.0)
Straggler(rank=1, factor=2.0)
>>> inject_straggler(1, 0.0)
Traceback (most recent call last):
...
sgl.errors.PlanError: straggler factor must be a finite number >= 1 (1 = normal speed, 2 = twice as slow), got 0.0
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sgl._checks import check_choice, check_int
from sgl.errors import PlanError

__all__ = ["Straggler", "inject_straggler", "time_gemm", "straggling_rates", "measure_rates", "check_rates",
           "straggler_setting", "SETTINGS"]

#: simulated straggler settings: name -> (description)
SETTINGS = {
    "none": "no straggler",
    "one-2x": "one device 2x slower",
    "one-5x": "one device 5x slower",
    "one-8x": "one device 8x slower",
    "node-2x": "every device of node 0 2x slower",
    "four-3x": "four devices of node 0 3x slower",
    "mixed": "one device 8x, two devices of another node 1.5x slower",
}


def time_gemm(size: int = 256, repeats: int = 5, work: int = 1) -> float:
    """Median milliseconds of ``work`` (default 1) ``size × size`` float32 matrix products on this process
    (``work > 1`` injects a straggler, as Malleus' experiments do)."""
    import torch

    size = check_int(size, "size", 1, error=PlanError)
    repeats = check_int(repeats, "repeats", 1, error=PlanError)
    work = check_int(work, "work", 1, error=PlanError)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g)
    b = torch.randn(size, size, generator=g)
    a @ b                                            # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(work):
            a @ b
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def check_rates(rates: Sequence[float], devices: int = 0) -> np.ndarray:
    """Rates as a float array; PlanError when one is ``<= 0`` / not finite or the count is wrong."""
    arr = np.asarray(rates, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise PlanError("straggler rates are empty: give one rate per device (1.0 = normal speed)")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr <= 0))
    if bad.size:
        raise PlanError(f"straggler rate of device {int(bad[0])} is {arr[bad[0]]}: every rate must be a finite "
                        f"number > 0 (1.0 = normal speed, 2.0 = twice as slow)")
    if devices and arr.size != devices:
        raise PlanError(f"got {arr.size} straggler rates for {devices} devices: give exactly one per device")
    return arr


def straggling_rates(times: Sequence[float]) -> np.ndarray:
    """``t_i / min t`` (so the fastest device has rate 1)."""
    t = check_rates(times)
    return t / t.min()


def measure_rates(size: int = 256, repeats: int = 5, group=None, work: int = 1) -> np.ndarray:
    """Every rank's GEMM time, all-gathered through :mod:`sgl.comm`, as straggling rates."""
    import torch

    from sgl import comm

    mine = torch.tensor([time_gemm(size, repeats, work)], dtype=torch.float64, device=comm.wire_device(group))
    return straggling_rates(torch.cat(comm.all_gather(mine, group=group)).cpu().numpy())


def straggler_setting(name: str, devices: int, node_size: int = 8) -> np.ndarray:
    """Rates of a simulated setting (see :data:`SETTINGS`)."""
    check_choice(name, "straggler setting", tuple(SETTINGS), error=PlanError)
    devices = check_int(devices, "devices", 1, error=PlanError)
    r = np.ones(devices)
    if name.startswith("one-"):
        r[0] = float(name[4:-1])
    elif name == "node-2x":
        r[:min(node_size, devices)] = 2.0
    elif name == "four-3x":
        r[:min(4, devices)] = 3.0
    elif name == "mixed":
        r[0] = 8.0
        other = min(node_size, devices - 2) if devices > 2 else 1
        r[other:other + 2] = 1.5
    return r


@dataclass(frozen=True)
class Straggler:
    """Rank ``rank`` computes ``factor`` times slower (see :func:`inject_straggler`)."""

    rank: int
    factor: float

    def slow_down(self, rank: int, seconds: float) -> float:
        """Busy-wait ``(factor - 1)·seconds`` on the straggler rank; the seconds this compute took in all."""
        if rank != self.rank or self.factor == 1.0:
            return seconds
        end = time.perf_counter() + (self.factor - 1.0) * seconds
        while time.perf_counter() < end:
            pass
        return seconds * self.factor


def inject_straggler(rank: int, factor: float) -> Straggler:
    """A straggler on ``rank``, ``factor`` (finite, ``>= 1``) times slower; pass it as the ``straggler``
    of a :class:`~sgl.systems.seq.malleus_runtime.MalleusRunConfig`.  The slow-down is extra work
    (a busy-wait of ``(factor - 1)×`` each measured compute), which holds the core as slower silicon would."""
    rank = check_int(rank, "straggler rank", 0, error=PlanError)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor < 1:
        raise PlanError(f"straggler factor must be a finite number >= 1 (1 = normal speed, 2 = twice as slow), "
                        f"got {factor!r}")
    return Straggler(rank, float(factor))
