"""Joining and leaving the default process group, and asking who is where.

:func:`init` reads the ``torchrun`` environment or explicit arguments, picks Gloo on CPU
and NCCL on CUDA and validates everything; :func:`shutdown` leaves. Before :func:`init` the
world has one rank (rank 0 of 1), so the same code runs with and without ``torchrun``.
"""
from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

import sgl.comm._state as _state
from sgl.comm._state import _ENV_HELP, Group, _Config
from sgl.device import DeviceLike, get_device
from sgl.errors import CommError, SGLError

__all__ = ["init", "is_initialized", "get_rank", "get_world_size", "get_local_rank", "get_backend",
           "shutdown"]


def init(
    backend: str | None = None,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    timeout: float = 60.0,
    device: DeviceLike = None,
    local_rank: int | None = None,
) -> None:
    """Join the default process group.

    Each of ``rank``, ``world_size``, ``master_addr``, ``master_port`` and
    ``local_rank`` comes from its argument, else from the environment
    variable ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``,
    ``LOCAL_RANK`` (as set by ``torchrun``).  ``local_rank`` finally defaults
    to ``rank``; with ``world_size == 1`` the master address and port default
    to ``127.0.0.1`` and a free port.

    ``backend`` defaults to ``"nccl"`` when ``device`` resolves to CUDA and
    ``"gloo"`` otherwise.  With ``device=None`` and an explicit backend,
    the device is CUDA for NCCL and CPU for anything else.  A bare ``"cuda"``
    device becomes ``cuda:<local_rank>`` so each local process gets its GPU.

    ``timeout`` (seconds) bounds the rendezvous, and is the default timeout
    of every later blocking call of this module.

    Calling ``init`` again while initialised is a no-op if the requested
    backend, rank and world size (those given or found in the environment)
    match the current ones, and raises :class:`CommError` otherwise; call
    :func:`shutdown` first to re-initialise differently.

    Raises:
        CommError: missing or invalid rank/world size/address/port/timeout,
            unavailable backend, conflicting re-initialisation, or a failed
            or timed-out rendezvous.
        DeviceError: ``device`` is malformed or unavailable.
    """
    if not dist.is_available():
        raise CommError(
            "comm.init: this torch build has no torch.distributed support "
            f"(torch {torch.__version__}). Fix: install a standard torch wheel."
        )
    rank = _int_setting("rank", rank, "RANK")
    world_size = _int_setting("world_size", world_size, "WORLD_SIZE")
    if dist.is_initialized():
        _check_same_config(backend, rank, world_size)
        return

    missing = [
        f"{arg} (env {env})"
        for arg, env, value in (("rank", "RANK", rank), ("world_size", "WORLD_SIZE", world_size))
        if value is None
    ]
    if missing:
        raise CommError(
            f"comm.init: cannot tell {' and '.join(missing)}: neither the argument nor the "
            f"environment variable is set. Fix: {_ENV_HELP}."
        )
    assert rank is not None and world_size is not None
    if world_size < 1:
        raise CommError(
            f"comm.init: world_size must be >= 1, got {world_size}. "
            "Fix: pass the number of participating processes."
        )
    if not 0 <= rank < world_size:
        raise CommError(
            f"comm.init: rank must be in [0, {world_size}) for world_size={world_size}, "
            f"got rank={rank}. Fix: give each process a distinct rank 0..{world_size - 1}."
        )
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
        raise CommError(
            f"comm.init: timeout must be a positive number of seconds, got {timeout!r}."
        )
    timeout = float(timeout)

    if master_addr is None:
        master_addr = os.environ.get("MASTER_ADDR", "").strip() or None
    elif not isinstance(master_addr, str) or not master_addr.strip():
        raise CommError(
            f"comm.init: master_addr must be a host name or IP address, got {master_addr!r}."
        )
    port = _int_setting("master_port", master_port, "MASTER_PORT")
    if world_size == 1:
        # Nobody else needs to find us, so any local endpoint will do.
        master_addr = master_addr or "127.0.0.1"
        port = port if port is not None else _free_port()
    missing = [
        f"{arg} (env {env})"
        for arg, env, value in (
            ("master_addr", "MASTER_ADDR", master_addr),
            ("master_port", "MASTER_PORT", port),
        )
        if value is None
    ]
    if missing:
        raise CommError(
            f"comm.init (rank {rank}/{world_size}): cannot tell {' and '.join(missing)}: "
            f"neither the argument nor the environment variable is set. Fix: {_ENV_HELP}."
        )
    assert master_addr is not None and port is not None
    if not 1 <= port <= 65535:
        raise CommError(
            f"comm.init: master_port must be in [1, 65535], got {port}. "
            "Fix: pick a free TCP port that all ranks agree on."
        )

    local = _int_setting("local_rank", local_rank, "LOCAL_RANK")
    local = rank if local is None else local
    if local < 0:
        raise CommError(f"comm.init: local_rank must be >= 0, got {local}.")

    if device is None:
        if backend is None:
            dev = get_device(None)
        else:
            dev = get_device("cuda" if backend == "nccl" else "cpu")
    else:
        dev = get_device(device)
    if dev.type == "cuda" and dev.index is None:
        # Modulo: some launchers expose only this process's GPU(s) via
        # CUDA_VISIBLE_DEVICES while LOCAL_RANK still counts all processes.
        dev = get_device(f"cuda:{local % max(torch.cuda.device_count(), 1)}")
    if backend is None:
        backend = "nccl" if dev.type == "cuda" else "gloo"
    if backend == "nccl" and dev.type != "cuda":
        raise CommError(
            f"comm.init: backend 'nccl' needs a CUDA device, got device {dev}. "
            "Fix: pass device='cuda' or backend='gloo'."
        )
    if not isinstance(backend, str) or not dist.is_backend_available(backend):
        available = [b for b in ("gloo", "nccl", "mpi", "ucc") if dist.is_backend_available(b)]
        raise CommError(
            f"comm.init: backend {backend!r} is not available in this torch build; "
            f"available: {available}. Fix: pass backend='gloo' (CPU) or 'nccl' (CUDA)."
        )
    if dev.type == "cuda":
        torch.cuda.set_device(dev)

    where = f"rank {rank}/{world_size}, {backend} via {master_addr}:{port}, timeout {timeout:g}s"
    try:
        # Under torchrun the agent already serves the store on MASTER_PORT;
        # rank 0 must then connect as a client (as torch's env:// init does).
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True)
        store = dist.TCPStore(
            master_addr,
            port,
            world_size,
            is_master=rank == 0 and not agent_store,
            timeout=timedelta(seconds=timeout),
        )
        kwargs: dict[str, Any] = {}
        if backend == "nccl":
            # Binding the device lets NCCL create its communicator eagerly and
            # silences torch's "using the device under current context" warning.
            kwargs["device_id"] = dev
        dist.init_process_group(
            backend,
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout),
            **kwargs,
        )
    except SGLError:
        raise
    except Exception as exc:
        raise CommError(
            f"comm.init failed ({where}): {exc}. Fix: check that all {world_size} processes "
            "start within the timeout and agree on MASTER_ADDR/MASTER_PORT, that rank 0 can "
            "bind the port (free, reachable) and that each rank is used exactly once."
        ) from exc
    _state.config = _Config(backend, rank, world_size, local, master_addr, port, dev, timeout)


def is_initialized() -> bool:
    """Whether the default process group exists (via :func:`init` or torch directly)."""
    return dist.is_available() and dist.is_initialized()


def get_rank(group: Group = None) -> int:
    """This process's rank in ``group`` (the world by default); 0 when not initialised.

    Returns -1 if this process is not a member of ``group``.
    """
    return dist.get_rank(group) if is_initialized() else 0


def get_world_size(group: Group = None) -> int:
    """Number of ranks in ``group`` (the world by default); 1 when not initialised.

    Returns -1 if this process is not a member of ``group``.
    """
    return dist.get_world_size(group) if is_initialized() else 1


def get_local_rank() -> int:
    """Rank of this process on its machine; 0 when not initialised.

    When torch.distributed was initialised outside :func:`init`, this reads
    ``LOCAL_RANK`` and falls back to the global rank.
    """
    if not is_initialized():
        return 0
    if _state.config is not None:
        return _state.config.local_rank
    env = os.environ.get("LOCAL_RANK", "")
    return int(env) if env.strip().isdigit() else dist.get_rank()


def get_backend(group: Group = None) -> str | None:
    """Backend name of ``group`` (e.g. ``"gloo"``), or ``None`` when not initialised."""
    return str(dist.get_backend(group)) if is_initialized() else None


def shutdown() -> None:
    """Destroy the default process group (and all sub-groups).

    Safe to call when not initialised, and more than once.
    """
    _state.config = None
    if is_initialized():
        try:
            dist.destroy_process_group()
        except Exception as exc:
            raise CommError(f"comm.shutdown: destroy_process_group failed: {exc}") from exc


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _int_setting(arg: str, value: int | None, env: str) -> int | None:
    """``value`` if given, else ``int($env)``, else None; CommError if not an int."""
    if value is not None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise CommError(f"comm.init: {arg} must be an int, got {value!r}.")
        return value
    raw = os.environ.get(env, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise CommError(
            f"comm.init: environment variable {env}={raw!r} is not an integer. "
            f"Fix: set {env} to an integer or pass {arg}=... explicitly."
        ) from None


def _check_same_config(backend: str | None, rank: int | None, world_size: int | None) -> None:
    """Raise CommError if a repeated init asks for something different."""
    current = {
        "backend": str(dist.get_backend()),
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
    }
    wanted = {"backend": backend, "rank": rank, "world_size": world_size}
    diff = [f"{k}={wanted[k]!r} (current {current[k]!r})"
            for k in current if wanted[k] is not None and wanted[k] != current[k]]
    if diff:
        raise CommError(
            f"comm.init: already initialised as rank {current['rank']}/{current['world_size']} "
            f"({current['backend']}), but asked for {', '.join(diff)}. "
            "Fix: call comm.shutdown() before initialising with a different configuration."
        )
