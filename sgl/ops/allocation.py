"""How a hop's host memory is allocated: the strategy is measured once per machine, not assumed.

A hop's output (``[num_nodes, d]``, 512 MiB at 1M x 128 float32) is written once by the
parallel kernel. Its pages can come in three ways:

* ``"touch"``: an anonymous mapping advised ``MADV_HUGEPAGE`` and left unpopulated. The
  kernel's first write faults the pages in, each thread those of its own row block: in
  parallel, NUMA-local, 2 MiB at a time, and the next hop's random row gathers miss the TLB
  far less than with 4 KiB pages.
* ``"populate"``: the same mapping populated at once with ``MADV_POPULATE_WRITE``: one system
  call on one thread, no faults inside the kernel.
* ``"plain"``: ``torch.empty`` (4 KiB pages, faulted in on first write).

Which is fastest depends on the machine, and not only on its hardware. On a VM whose memory
the host backs lazily, a huge page that the guest has not used before costs a host fault per
4 KiB: there populating took 1.1 s per 512 MiB (the kernel's three hops took 0.48 s in all),
first-touch huge pages were as slow, and 4 KiB pages, recycled from the guest's free lists,
were 2.5-5x faster; huge pages freed by an earlier huge-page run are fast again, and on another
VM huge pages had been measured the faster way. So :func:`allocation_strategy` measures once
per machine and boot (:func:`calibrate_allocation`) and caches the choice in
``allocation.json`` under :func:`sgl.fileio.user_cache_dir` (``$SGL_CACHE_DIR``, else
``~/.cache/sgl``). An unreadable cache file is ignored and rewritten atomically; a read-only
one keeps the choice for the process only. ``SGL_HUGE_PAGES`` forces a strategy:
``0``/``plain``, ``1``/``populate``, ``touch``; ``auto`` (or unset) uses the measured one.

Host-only: these are CPU buffers for the numba kernel (:mod:`sgl.ops.kernels`).

Example:
    >>> import torch
    >>> from sgl.ops.allocation import empty_rows
    >>> empty_rows(4, 3, torch.float32).shape
    torch.Size([4, 3])
    >>> empty_rows(4, 3, torch.float32, strategy="plain").device
    device(type='cpu')
"""
from __future__ import annotations

import json
import mmap
import os
import platform
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from sgl.errors import ConfigError
from sgl.fileio import atomic_write, user_cache_dir

__all__ = ["ALLOCATION_STRATEGIES", "CALIBRATION_BYTES", "empty_rows", "allocation_strategy", "calibrate_allocation",
           "allocation_cache_path", "machine_fingerprint"]

#: The ways a hop buffer can be allocated (see the module docstring).
ALLOCATION_STRATEGIES = ("touch", "populate", "plain")
#: Bytes allocated and written per strategy and round by :func:`calibrate_allocation`.
CALIBRATION_BYTES = 32 * 2**20
#: A strategy must beat the preferred one by this factor to replace it: huge pages make the
#: next hop's random row gathers miss the TLB less (not part of the timing), and first touch
#: lands pages on the NUMA node of the thread that computes their rows.
_MARGIN = 0.9
_HUGE_BYTES = 2 * 2**20
_ENV = "SGL_HUGE_PAGES"
_FORCED = {"0": "plain", "off": "plain", "plain": "plain", "1": "populate", "on": "populate",
           "populate": "populate", "touch": "touch"}
_CACHE_VERSION = 1
_CHOSEN: Optional[str] = None  # this process's calibrated choice


def _madvise_constants():
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    populate = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform.startswith("linux") else None)
    return advice, populate


def empty_rows(n: int, d: int, dtype: torch.dtype, *, strategy: Optional[str] = None) -> torch.Tensor:
    """An uninitialised C-contiguous ``[n, d]`` CPU tensor for a hop, allocated by ``strategy``.

    ``strategy`` is one of :data:`ALLOCATION_STRATEGIES`; the default is
    :func:`allocation_strategy` (``SGL_HUGE_PAGES``, else this machine's calibrated choice).
    Arrays under 2 MiB, and systems without ``MADV_HUGEPAGE``, get ``torch.empty``; ``populate``
    falls back to ``touch`` where the kernel lacks ``MADV_POPULATE_WRITE``.
    """
    nbytes = n * d * torch.empty(0, dtype=dtype, device="cpu").element_size()
    advice, populate = _madvise_constants()
    if nbytes < _HUGE_BYTES or advice is None:
        return torch.empty(n, d, dtype=dtype, device="cpu")
    if strategy is None:
        strategy = allocation_strategy()
    if strategy not in ALLOCATION_STRATEGIES:
        raise ConfigError(f"strategy must be one of {ALLOCATION_STRATEGIES}, got {strategy!r}")
    if strategy == "plain":
        return torch.empty(n, d, dtype=dtype, device="cpu")
    try:
        region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        region.madvise(advice)
    except (OSError, ValueError, AttributeError):  # no THP: plain pages
        return torch.empty(n, d, dtype=dtype, device="cpu")
    if strategy == "populate" and populate is not None:
        try:
            region.madvise(populate)
        except (OSError, ValueError):  # kernel < 5.14: the first write faults the pages in
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "non-writable buffer": the mapping is writable
        flat = torch.frombuffer(region, dtype=dtype, count=n * d)  # keeps ``region`` alive
    return flat.view(n, d)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def machine_fingerprint() -> str:
    """What the allocation choice depends on: host, kernel, CPUs, memory and THP settings (an
    entry is also re-measured after a reboot, which resets what the guest memory has seen)."""
    thp = []
    for name in ("enabled", "defrag"):
        try:
            thp.append(Path(f"/sys/kernel/mm/transparent_hugepage/{name}").read_text().split("[")[1].split("]")[0])
        except (OSError, IndexError):
            thp.append("-")
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**30
    except (ValueError, OSError, AttributeError):
        mem = 0
    return (f"{socket.gethostname()}|{platform.release()}|{platform.machine()}|cpus={os.cpu_count()}|"
            f"mem={mem}GiB|thp={thp[0]}/{thp[1]}")


def allocation_cache_path() -> Path:
    """Where the per-machine choices are kept: ``user_cache_dir() / "allocation.json"``."""
    return user_cache_dir() / "allocation.json"


def calibrate_allocation(nbytes: int = CALIBRATION_BYTES, rounds: int = 3) -> Dict[str, Any]:
    """Time every strategy the way a hop uses it: allocate ``nbytes`` of output and let the
    fused kernel write it (a synthetic graph of 4 edges per row whose sources fit in cache, so
    the output's pages dominate), ``rounds`` interleaved rounds. Returns ``{"strategy",
    "seconds": {strategy: slowest round}, "bytes"}``.

    Timing the kernel's own writes matters: a buffer written right after its page faults in is
    still in cache, one written row by row as a hop computes is not. Every buffer stays
    allocated until all are timed, so none is served from pages another just freed; the
    slowest round counts, since a machine keeps a few recently freed (on a VM, already
    host-backed) pages that make the first rounds fast while a real run's hops are mostly new
    memory. ``touch`` is preferred; ``populate`` replaces it only when at least 10 % faster,
    and ``plain`` the better of the two likewise. Without ``MADV_HUGEPAGE`` the answer is
    ``plain``, untimed.
    """
    import numpy as np

    from sgl.ops import _spmm_numba as nb  # the kernel itself (sgl.ops.kernels imports this module)

    advice, _ = _madvise_constants()
    if advice is None:
        return {"strategy": "plain", "seconds": {}, "bytes": 0}
    cols, degree, sources = 64, 4, 4096
    rows = max(sources, int(nbytes) // (cols * 4))
    indptr = np.arange(0, rows * degree + 1, degree, dtype=np.int64)
    indices = np.random.default_rng(0).integers(0, sources, rows * degree).astype(np.int64)
    values, loop = np.full(rows * degree, 0.25, dtype=np.float32), np.zeros(0, dtype=np.float32)
    bounds = np.linspace(0, rows, nb.set_threads(None) * 16 + 1).astype(np.int64)
    x = np.zeros((rows, cols), dtype=np.float32)

    def hop(out: torch.Tensor) -> None:
        nb.spmm(bounds, indptr, indices, values, loop, x, out.numpy(), 0, cols, 0, 1, 16)

    hop(torch.empty(rows, cols, dtype=torch.float32, device="cpu"))  # compiled code loaded, threads up
    times: Dict[str, list] = {"touch": [], "populate": [], "plain": []}
    held = []
    for _ in range(max(1, int(rounds))):
        for strategy, spent in times.items():
            start = time.perf_counter()
            out = empty_rows(rows, cols, torch.float32, strategy=strategy)
            hop(out)
            spent.append(time.perf_counter() - start)
            held.append(out)
    del held
    seconds = {strategy: max(spent) for strategy, spent in times.items()}
    huge = "populate" if seconds["populate"] < _MARGIN * seconds["touch"] else "touch"
    choice = "plain" if seconds["plain"] < _MARGIN * seconds[huge] else huge
    return {"strategy": choice, "seconds": {k: round(v, 6) for k, v in seconds.items()}, "bytes": rows * cols * 4}


def _read_cache(path: Path) -> Dict[str, Any]:
    """The valid machine entries of the cache file; anything unreadable counts as absent."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION or not isinstance(data.get("machines"),
                                                                                            dict):
        return {}
    return {key: entry for key, entry in data["machines"].items()
            if isinstance(entry, dict) and entry.get("strategy") in ALLOCATION_STRATEGIES}


def allocation_strategy(refresh: bool = False) -> str:
    """The strategy :func:`empty_rows` uses by default.

    ``SGL_HUGE_PAGES`` wins when set (``0``/``plain``, ``1``/``populate``, ``touch``; ``auto``
    means unset). Otherwise this machine's entry in :func:`allocation_cache_path`, measured
    by :func:`calibrate_allocation` and stored (atomically) when missing, unreadable, from an
    earlier boot or ``refresh`` is true; the choice is then kept for the rest of the process.
    """
    global _CHOSEN
    forced = os.environ.get(_ENV, "").strip().lower()
    if forced and forced != "auto":
        if forced not in _FORCED:
            raise ConfigError(f"{_ENV}={forced!r} is not understood; use 0 (4 KiB pages), 1 (huge pages populated "
                              f"at once), touch (huge pages faulted in by the kernel) or auto (measured once)")
        return _FORCED[forced]
    if _CHOSEN is not None and not refresh:
        return _CHOSEN
    path = allocation_cache_path()
    machines = _read_cache(path)
    key, boot = machine_fingerprint(), _boot_id()
    if key not in machines or machines[key].get("boot_id") != boot or refresh:
        result = calibrate_allocation()
        machines[key] = {**result, "boot_id": boot, "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}
        try:
            with atomic_write(path, "w") as handle:
                json.dump({"version": _CACHE_VERSION, "machines": machines}, handle, indent=2, sort_keys=True)
        except OSError:  # read-only cache folder: keep the choice for this process only
            pass
    _CHOSEN = machines[key]["strategy"]
    return _CHOSEN
