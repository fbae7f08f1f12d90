"""Thin, validated layer over :mod:`torch.distributed`.

All multi-process code in SGL (embedding training, MoE all-to-all, pipeline
stages) talks to other processes through this module only.  Compared with raw
``torch.distributed`` it adds:

* one :func:`init` that reads the ``torchrun`` environment or explicit
  arguments, picks Gloo on CPU and NCCL on CUDA, and validates everything;
* a ``timeout`` (seconds) on every blocking call, and conversion of every
  failure or timeout into :class:`sgl.errors.CommError` naming the operation,
  the rank and the timeout;
* :func:`all_gather` with a different first dimension on every rank and
  :func:`all_to_all` with uneven splits (split sizes are exchanged for you);
* single-process fallbacks: before :func:`init`, the world has one rank and
  collectives are identities, so the same code runs with and without
  ``torchrun``;
* :func:`spawn`, which runs a function in N local processes with hard
  timeouts (used by the tests).

Multi-process example -- save as ``demo.py`` and run
``torchrun --nproc-per-node 2 demo.py``::

    import torch
    from sgl import comm

    comm.init()                                # RANK, WORLD_SIZE, MASTER_* from torchrun
    rank, world = comm.get_rank(), comm.get_world_size()
    x = torch.full((rank + 1, 2), float(rank))    # rank r holds r + 1 rows
    parts = comm.all_gather(x)                 # [1x2 zeros, 2x2 ones]
    total = comm.all_reduce(torch.tensor([1.0]))  # tensor([2.])
    print(rank, [p.shape[0] for p in parts], total.item())
    comm.shutdown()

The same without torchrun, from a plain ``python`` script::

    import torch
    from sgl import comm

    def main(rank: int, world_size: int) -> None:
        print(rank, comm.all_reduce(torch.tensor([1.0])))

    if __name__ == "__main__":
        comm.spawn(main, 2)

Single process, nothing initialised -- collectives are identities:

>>> import torch
>>> import sgl.comm as comm
>>> comm.is_initialized(), comm.get_rank(), comm.get_world_size()
(False, 0, 1)
>>> comm.all_reduce(torch.tensor([2.0]), op="mean")
tensor([2.])
>>> comm.all_gather(torch.arange(3))
[tensor([0, 1, 2])]

Rules every caller must follow (as with torch.distributed): every rank of a
group makes the same sequence of collective calls with matching dtypes and
trailing shapes.  After a :class:`CommError` caused by a timeout or a dead
peer, the process group is in an undefined state: call :func:`shutdown`.
"""
from __future__ import annotations

import math
import os
import pickle
import queue as queue_mod
import socket
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Optional

import torch
import torch.distributed as dist

from sgl.device import DeviceLike, get_device
from sgl.errors import CommError, SGLError

__all__ = [
    "ReduceOpName",
    "init",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "get_backend",
    "all_reduce",
    "all_gather",
    "all_to_all",
    "broadcast",
    "send",
    "recv",
    "barrier",
    "new_group",
    "shutdown",
    "spawn",
]

ReduceOpName = Literal["sum", "mean", "max", "min", "prod"]
Group = Optional[dist.ProcessGroup]

#: Timeout (seconds) used when neither the call nor :func:`init` gave one
#: (only happens when torch.distributed was initialised outside SGL).
_DEFAULT_TIMEOUT = 60.0
#: Shapes are exchanged as fixed-length int64 vectors; more dims is an error.
_MAX_DIMS = 16
#: Dtypes are exchanged by their position in this tuple (codes must agree
#: across processes, so never reorder it; append only).
_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.complex64, torch.complex128, torch.uint8, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.bool,
)
_ENV_HELP = (
    "launch with `torchrun --nproc-per-node N script.py` (it sets RANK, WORLD_SIZE, "
    "MASTER_ADDR, MASTER_PORT and LOCAL_RANK), pass them to comm.init(rank=..., "
    "world_size=..., master_addr=..., master_port=...), or run the function "
    "with sgl.comm.spawn(fn, world_size)"
)


@dataclass(frozen=True)
class _Config:
    """What :func:`init` set up; ``None`` at module level until then."""

    backend: str
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    device: torch.device
    timeout: float


_config: _Config | None = None


# --------------------------------------------------------------------------
# Setup and queries
# --------------------------------------------------------------------------
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
    global _config
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
    _config = _Config(backend, rank, world_size, local, master_addr, port, dev, timeout)


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
    if _config is not None:
        return _config.local_rank
    env = os.environ.get("LOCAL_RANK", "")
    return int(env) if env.strip().isdigit() else dist.get_rank()


def get_backend(group: Group = None) -> str | None:
    """Backend name of ``group`` (e.g. ``"gloo"``), or ``None`` when not initialised."""
    return str(dist.get_backend(group)) if is_initialized() else None


def new_group(
    ranks: Sequence[int], *, backend: str | None = None, timeout: float | None = None
) -> Group:
    """Create a sub-group of the given global ``ranks`` and return it.

    Like ``torch.distributed.new_group``, *every* rank of the world must call
    this with the same ``ranks``, including ranks that are not members.
    Non-members get a handle they must not use in collectives (doing so
    raises :class:`CommError`).  When not initialised, ``new_group([0])``
    returns ``None`` (the one-rank world itself).
    """
    world = get_world_size()
    checked = _check_ranks(ranks, world)
    if not is_initialized():
        return None
    seconds = _timeout(timeout)
    try:
        return dist.new_group(
            ranks=checked, timeout=timedelta(seconds=seconds), backend=backend
        )
    except Exception as exc:
        raise _error("new_group", seconds, exc, None) from exc


def shutdown() -> None:
    """Destroy the default process group (and all sub-groups).

    Safe to call when not initialised, and more than once.
    """
    global _config
    _config = None
    if is_initialized():
        try:
            dist.destroy_process_group()
        except Exception as exc:
            raise CommError(f"comm.shutdown: destroy_process_group failed: {exc}") from exc


# --------------------------------------------------------------------------
# Collectives
# --------------------------------------------------------------------------
_REDUCE_OPS: dict[str, Any] = {
    "sum": dist.ReduceOp.SUM,
    "mean": dist.ReduceOp.SUM,  # Gloo has no AVG: sum, then divide.
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "prod": dist.ReduceOp.PRODUCT,
}


def all_reduce(
    tensor: torch.Tensor,
    op: ReduceOpName = "sum",
    group: Group = None,
    timeout: float | None = None,
) -> torch.Tensor:
    """Reduce ``tensor`` element-wise over all ranks of ``group``, in place.

    ``op`` is ``"sum"``, ``"mean"`` (floating/complex tensors only),
    ``"max"``, ``"min"`` or ``"prod"``.  Returns ``tensor`` itself.  When
    not initialised this is the identity.

    >>> all_reduce(torch.tensor([1, 5]), op="max")
    tensor([1, 5])
    """
    _check_tensor(tensor, "all_reduce")
    if not isinstance(op, str) or op not in _REDUCE_OPS:
        raise CommError(
            f"comm.all_reduce: unknown op {op!r}; expected one of {sorted(_REDUCE_OPS)}."
        )
    if op == "mean" and not (tensor.is_floating_point() or tensor.is_complex()):
        raise CommError(
            f"comm.all_reduce: op='mean' needs a floating or complex tensor, got {tensor.dtype}. "
            "Fix: convert with tensor.float() first, or use op='sum'."
        )
    if not is_initialized():
        return tensor
    _check_member(group, "all_reduce")
    seconds = _timeout(timeout)
    # torch.distributed needs contiguous memory; reduce a copy and write back
    # so callers still get in-place semantics on views.
    buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    torch_op = _REDUCE_OPS[op]
    use_avg = op == "mean" and get_backend(group) == "nccl"
    if use_avg:
        torch_op = dist.ReduceOp.AVG
    with _translate("all_reduce", seconds, group):
        work = dist.all_reduce(buf, op=torch_op, group=group, async_op=True)
        _wait(work, "all_reduce", seconds, group)
    if op == "mean" and not use_avg:
        buf.div_(dist.get_world_size(group))
    if buf is not tensor:
        tensor.copy_(buf)
    return tensor


def all_gather(
    tensor: torch.Tensor, group: Group = None, timeout: float | None = None
) -> list[torch.Tensor]:
    """Gather ``tensor`` from every rank of ``group``; returns one tensor per rank.

    The first dimension may differ between ranks (sizes are exchanged, data
    is padded for the transfer and trimmed again); dtype and the remaining
    dimensions must agree, otherwise every rank raises :class:`CommError`.
    When not initialised, returns ``[tensor]``.

    >>> all_gather(torch.ones(2, 3))[0].shape
    torch.Size([2, 3])
    """
    _check_tensor(tensor, "all_gather")
    if not is_initialized():
        return [tensor]
    _check_member(group, "all_gather")
    seconds = _timeout(timeout)
    world = dist.get_world_size(group)
    mine = _meta(tensor, "all_gather")
    with _translate("all_gather", seconds, group):
        metas = [torch.empty_like(mine) for _ in range(world)]
        work = dist.all_gather(metas, mine, group=group, async_op=True)
        _wait(work, "all_gather", seconds, group)
    shapes = [_decode_meta(m.tolist()) for m in metas]
    _check_agree(shapes, "all_gather", group)
    if tensor.dim() == 0:
        send = tensor.reshape(1)
        rows = [1] * world
    else:
        send = tensor.contiguous()
        rows = [s[1][0] for s in shapes]
    longest = max(rows)
    if longest == 0 or math.prod(send.shape[1:]) == 0:
        # Nothing to move (every tensor is empty); build empties of the right shapes.
        out = [send.new_empty((r,) + tuple(send.shape[1:])) for r in rows]
    else:
        padded = _wire(_pad_rows(send, longest))[0]
        bufs = [torch.empty_like(padded) for _ in range(world)]
        with _translate("all_gather", seconds, group):
            work = dist.all_gather(bufs, padded, group=group, async_op=True)
            _wait(work, "all_gather", seconds, group)
        out = [_unwire(b, send.dtype)[:r] for b, r in zip(bufs, rows)]
    if tensor.dim() == 0:
        out = [o.reshape(()) for o in out]
    return out


def all_to_all(
    inputs: list[torch.Tensor] | torch.Tensor,
    input_splits: Sequence[int] | None = None,
    output_splits: Sequence[int] | None = None,
    group: Group = None,
    timeout: float | None = None,
) -> list[torch.Tensor] | torch.Tensor:
    """Send a slice of rows to every rank of ``group`` and receive one from each.

    Two forms:

    * ``inputs`` is a list with one tensor per rank: ``inputs[i]`` goes to
      rank ``i`` of the group; returns a list whose ``j``-th entry came from
      rank ``j``.  ``input_splits`` must then be ``None``.
    * ``inputs`` is one tensor: its rows are cut by ``input_splits`` (equal
      parts when ``None``, which needs the first dimension divisible by the
      group size); returns the received rows concatenated in rank order.

    Splits may be uneven and zero.  When ``output_splits`` is ``None`` the
    split sizes (plus dtype and trailing shape, which must agree) are
    exchanged first, at the cost of one small extra all-to-all; pass them
    when known.  Not initialised: returns ``inputs`` after validation.

    >>> all_to_all([torch.arange(3)])
    [tensor([0, 1, 2])]
    """
    if is_initialized():
        _check_member(group, "all_to_all")  # before sizes: non-members see world -1
    world = get_world_size(group) if is_initialized() else 1
    if isinstance(inputs, torch.Tensor):
        as_list = False
        data = inputs
        _check_tensor(data, "all_to_all")
        if data.dim() == 0:
            raise CommError(
                "comm.all_to_all: input tensor must have at least 1 dimension, got a scalar."
            )
        if input_splits is None:
            if data.shape[0] % world:
                raise CommError(
                    f"comm.all_to_all: input has {data.shape[0]} rows, not divisible by the "
                    f"group size {world}, and no input_splits were given. Fix: pass "
                    f"input_splits (one row count per rank, summing to {data.shape[0]})."
                )
            in_splits = [data.shape[0] // world] * world
        else:
            in_splits = _check_splits(input_splits, "input_splits", world, data.shape[0])
    else:
        as_list = True
        if not isinstance(inputs, (list, tuple)):
            raise CommError(
                f"comm.all_to_all: inputs must be a torch.Tensor or a list of tensors, "
                f"got {type(inputs).__name__}."
            )
        if input_splits is not None:
            raise CommError(
                "comm.all_to_all: input_splits is only for a single input tensor; with a "
                "list of tensors the split sizes are the tensors' lengths. Fix: drop input_splits."
            )
        if len(inputs) != world:
            raise CommError(
                f"comm.all_to_all: got {len(inputs)} input tensors for a group of {world} "
                f"ranks. Fix: pass exactly one tensor per rank (empty ones are fine)."
            )
        for i, t in enumerate(inputs):
            _check_tensor(t, f"all_to_all (inputs[{i}])")
        first = inputs[0]
        for i, t in enumerate(inputs):
            if t.dim() == 0 or t.dtype != first.dtype or t.shape[1:] != first.shape[1:]:
                raise CommError(
                    f"comm.all_to_all: inputs[{i}] has shape {tuple(t.shape)} and dtype "
                    f"{t.dtype}, but inputs[0] has {tuple(first.shape)} and {first.dtype}; all "
                    "inputs need >= 1 dimension, one dtype and equal trailing dimensions."
                )
        in_splits = [t.shape[0] for t in inputs]
        data = inputs[0] if world == 1 else torch.cat([t.contiguous() for t in inputs])
    if output_splits is not None:
        out_splits: list[int] | None = _check_splits(output_splits, "output_splits", world, None)
    else:
        out_splits = None

    if not is_initialized():
        if out_splits is not None and out_splits != in_splits:
            raise CommError(
                f"comm.all_to_all: in a single process output_splits must equal the input "
                f"split sizes {in_splits}, got {out_splits}."
            )
        return list(inputs) if as_list else inputs  # type: ignore[arg-type]

    seconds = _timeout(timeout)
    data = data.contiguous()
    if out_splits is None:
        # Tell each destination how many rows (and what dtype/trailing shape)
        # it will receive from us; one tiny all_to_all_single of int64 rows.
        mine = _meta(data, "all_to_all")
        send_meta = mine.repeat(world, 1)
        send_meta[:, 2] = torch.tensor(in_splits, dtype=torch.int64, device=mine.device)
        recv_meta = torch.empty_like(send_meta)
        with _translate("all_to_all", seconds, group):
            work = dist.all_to_all_single(recv_meta, send_meta, group=group, async_op=True)
            _wait(work, "all_to_all", seconds, group)
        peers = [_decode_meta(m) for m in recv_meta.tolist()]
        # Every rank receives every rank's metadata, so a mismatch makes all
        # ranks raise here instead of some of them hanging in the data step.
        _check_agree(peers, "all_to_all", group)
        out_splits = [s[0] for _, s in peers]
    out = data.new_empty((sum(out_splits),) + tuple(data.shape[1:]))
    wire_in, wire_out = _wire(data)[0], _wire(out)[0]
    with _translate("all_to_all", seconds, group):
        work = dist.all_to_all_single(
            wire_out,
            wire_in,
            output_split_sizes=out_splits,
            input_split_sizes=in_splits,
            group=group,
            async_op=True,
        )
        _wait(work, "all_to_all", seconds, group)
    return list(out.split(out_splits)) if as_list else out


def broadcast(
    tensor: torch.Tensor, src: int = 0, group: Group = None, timeout: float | None = None
) -> torch.Tensor:
    """Copy ``tensor`` from global rank ``src`` to every rank of ``group``, in place.

    All ranks pass a tensor of the same shape and dtype; returns ``tensor``.
    Not initialised: ``src`` must be 0 and this is the identity.
    """
    _check_tensor(tensor, "broadcast")
    _check_peer(src, "broadcast", "src", group, allow_self=True)
    if not is_initialized():
        return tensor
    seconds = _timeout(timeout)
    buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    with _translate("broadcast", seconds, group):
        work = dist.broadcast(_wire(buf)[0], src=src, group=group, async_op=True)
        _wait(work, "broadcast", seconds, group)
    if buf is not tensor:
        tensor.copy_(buf)
    return tensor


def send(
    tensor: torch.Tensor,
    dst: int,
    group: Group = None,
    timeout: float | None = None,
    tag: int = 0,
) -> None:
    """Send ``tensor`` to global rank ``dst`` (blocking until handed over).

    The receiver must call :func:`recv` with the same shape, dtype and tag.
    """
    _check_tensor(tensor, "send")
    _require_init("send")
    _check_peer(dst, "send", "dst", group, allow_self=False)
    seconds = _timeout(timeout)
    with _translate("send", seconds, group, peer=f"to rank {dst}"):
        work = dist.isend(_wire(tensor.contiguous())[0], dst=dst, group=group, tag=tag)
        _wait(work, "send", seconds, group)


def recv(
    tensor: torch.Tensor | Sequence[int] | torch.Size | int,
    src: int,
    *,
    dtype: torch.dtype = torch.float32,
    group: Group = None,
    timeout: float | None = None,
    tag: int = 0,
) -> torch.Tensor:
    """Receive a tensor sent by global rank ``src`` with :func:`send`.

    ``tensor`` is either a buffer filled in place, or a shape; with a shape a
    new tensor of ``dtype`` is allocated on this process's comm device
    (CPU for Gloo, the rank's GPU for NCCL).  Returns the filled tensor.
    """
    _require_init("recv")
    _check_peer(src, "recv", "src", group, allow_self=False)
    if isinstance(tensor, torch.Tensor):
        buf = tensor
    else:
        shape = (tensor,) if isinstance(tensor, int) else tuple(tensor)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise CommError(
                f"comm.recv: expected a tensor or a shape of non-negative ints, got {tensor!r}."
            )
        if not isinstance(dtype, torch.dtype):
            raise CommError(f"comm.recv: dtype must be a torch.dtype, got {dtype!r}.")
        buf = torch.empty(shape, dtype=dtype, device=_comm_device(group))
    seconds = _timeout(timeout)
    target = buf if buf.is_contiguous() else buf.contiguous()
    with _translate("recv", seconds, group, peer=f"from rank {src}"):
        work = dist.irecv(_wire(target)[0], src=src, group=group, tag=tag)
        _wait(work, "recv", seconds, group)
    if target is not buf:
        buf.copy_(target)
    return buf


def barrier(group: Group = None, timeout: float | None = None) -> None:
    """Block until every rank of ``group`` arrives, or raise CommError after ``timeout``.

    On Gloo this is ``monitored_barrier``, so the error names the ranks that
    did not arrive.  No-op when not initialised.
    """
    if not is_initialized():
        return
    _check_member(group, "barrier")
    seconds = _timeout(timeout)
    with _translate("barrier", seconds, group):
        if get_backend(group) == "gloo":
            dist.monitored_barrier(
                group=group, timeout=timedelta(seconds=seconds), wait_all_ranks=True
            )
        else:
            work = dist.barrier(group=group, async_op=True, timeout=timedelta(seconds=seconds))
            _wait(work, "barrier", seconds, group)


# --------------------------------------------------------------------------
# Local multi-process runner
# --------------------------------------------------------------------------
def spawn(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout: float = 60.0,
    comm_timeout: float | None = None,
    start_method: str = "spawn",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` local processes.

    Each child gets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/
    ``MASTER_PORT`` set, is initialised with :func:`init` on 127.0.0.1 and a
    free port (so a further ``comm.init()`` inside ``fn`` is a no-op) and is
    shut down afterwards.  Returns the children's return values by rank
    (they must be picklable).  ``fn`` and ``args`` must be picklable too, so
    ``fn`` has to be a module-level function.

    ``timeout`` (seconds) bounds the whole run: children still running then
    are killed.  ``comm_timeout`` (default: ``timeout``) is the children's
    :func:`init` timeout and so the default of their collectives.

    Raises:
        CommError: a child raised (the message carries its traceback), died
            without reporting, or the run exceeded ``timeout``.
    """
    if not callable(fn):
        raise CommError(f"comm.spawn: fn must be callable, got {type(fn).__name__}.")
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise CommError(f"comm.spawn: world_size must be an int >= 1, got {world_size!r}.")
    if not timeout > 0:
        raise CommError(f"comm.spawn: timeout must be > 0 seconds, got {timeout!r}.")
    comm_timeout = float(timeout if comm_timeout is None else comm_timeout)
    import torch.multiprocessing as mp  # local: only spawn needs it

    ctx = mp.get_context(start_method)
    results: queue_mod.Queue = ctx.Queue()
    port = _free_port()
    procs = []
    deadline = time.monotonic() + timeout
    try:
        for rank in range(world_size):
            proc = ctx.Process(
                target=_child_main,
                args=(fn, rank, world_size, args, backend, port, comm_timeout, results),
                name=f"sgl-comm-rank{rank}",
            )
            try:
                proc.start()
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                raise CommError(
                    f"comm.spawn: cannot send fn/args to the child processes ({exc}). "
                    "Fix: use a module-level function (no lambda or nested function) and "
                    "picklable arguments."
                ) from exc
            procs.append(proc)
        return _collect(procs, results, world_size, deadline, timeout)
    finally:
        _kill(procs)
        results.close()


def _child_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    args: tuple[Any, ...],
    backend: str,
    port: int,
    comm_timeout: float,
    results: Any,
) -> None:
    """Body of one :func:`spawn` child: init, run, report, shut down."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    try:
        init(
            backend,
            rank=rank,
            world_size=world_size,
            master_addr="127.0.0.1",
            master_port=port,
            timeout=comm_timeout,
        )
        value = fn(rank, world_size, *args)
        # Plain pickle (not the torch.multiprocessing reducer) so tensors are
        # copied by value and survive this process exiting.
        results.put((rank, True, pickle.dumps(value)))
    except BaseException as exc:  # noqa: BLE001 -- report everything, even SystemExit
        results.put((rank, False, (f"{type(exc).__name__}: {exc}", traceback.format_exc())))
    finally:
        try:
            shutdown()
        except Exception:  # noqa: BLE001 -- the run's outcome is already reported
            pass


def _collect(
    procs: list[Any], results: Any, world_size: int, deadline: float, timeout: float
) -> list[Any]:
    """Wait for one report per rank; raise CommError on error, death or timeout."""
    values: dict[int, Any] = {}
    errors: dict[int, tuple[str, str]] = {}
    while len(values) + len(errors) < world_size and not errors:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            missing = sorted(set(range(world_size)) - set(values))
            raise CommError(
                f"comm.spawn: timed out after {timeout:g}s; rank(s) {missing} of {world_size} "
                "did not finish and were killed. Fix: look for a rank that skips a collective "
                "(deadlock) or raise `timeout` for slow work."
            )
        try:
            rank, ok, payload = results.get(timeout=min(0.1, remaining))
        except queue_mod.Empty:
            dead = [
                r for r, p in enumerate(procs)
                if p.exitcode is not None and r not in values and r not in errors
            ]
            if dead:
                # A report may still be in flight from a child that just exited.
                try:
                    rank, ok, payload = results.get(timeout=1.0)
                except queue_mod.Empty:
                    r = dead[0]
                    raise CommError(
                        f"comm.spawn: rank {r} of {world_size} exited with code "
                        f"{procs[r].exitcode} without reporting a result. Negative codes "
                        "mean killed by that signal (out of memory, crash in native code); "
                        "code 1 before fn ran usually means the child could not start: the "
                        "calling script needs an `if __name__ == '__main__':` guard and fn "
                        "must be importable (see the child's stderr)."
                    ) from None
            else:
                continue
        if ok:
            values[rank] = pickle.loads(payload)
        else:
            errors[rank] = payload
    if errors:
        rank = min(errors)
        summary, tb = errors[rank]
        others = "".join(f"\n  rank {r}: {e[0]}" for r, e in sorted(errors.items()) if r != rank)
        raise CommError(
            f"comm.spawn: rank {rank} of {world_size} raised {summary}"
            + (f"\nOther failing ranks:{others}" if others else "")
            + f"\n\nTraceback in rank {rank}:\n{tb}"
        )
    # Everyone reported; give them a moment to shut down cleanly.
    for proc in procs:
        proc.join(max(0.0, min(5.0, deadline - time.monotonic())))
    return [values[r] for r in range(world_size)]


def _kill(procs: list[Any]) -> None:
    """Terminate, then kill, any child still alive."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
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


def _timeout(timeout: float | None) -> float:
    """Validated per-call timeout in seconds, defaulting to init's timeout."""
    if timeout is None:
        return _config.timeout if _config is not None else _DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise CommError(f"comm: timeout must be a positive number of seconds, got {timeout!r}.")
    return float(timeout)


def _where(group: Group) -> str:
    """'rank R/W' (plus group rank when a sub-group is used) for messages."""
    text = f"rank {get_rank()}/{get_world_size()}"
    if group is not None and is_initialized():
        text += f" (group rank {dist.get_rank(group)}/{dist.get_world_size(group)})"
    return text


def _error(op: str, seconds: float, exc: BaseException, group: Group, peer: str = "") -> CommError:
    """Build the CommError for a torch.distributed failure in ``op``."""
    text = str(exc)
    # Gloo words timeouts in several ways; monitored_barrier names missing ranks.
    markers = ("timed out", "timeout", "failed to pass monitoredbarrier")
    timed_out = any(marker in text.lower() for marker in markers)
    hint = (
        f"A peer probably never called comm.{op} (or called a different operation); every "
        "rank of the group must make the same calls in the same order. The process group "
        "is unusable now: call comm.shutdown()."
        if timed_out
        else "Check that every rank passes matching dtypes/shapes and that no peer died."
    )
    what = "timed out" if timed_out else "failed"
    try:
        backend = get_backend(group)
    except Exception:  # noqa: BLE001 -- e.g. a broken group; the message matters more
        backend = None
    peer = f" {peer}" if peer else ""
    return CommError(
        f"comm.{op}{peer} {what} on {_where(group)} (backend {backend}, timeout {seconds:g}s): "
        f"{type(exc).__name__}: {text}. {hint}"
    )


@contextmanager
def _translate(op: str, seconds: float, group: Group, peer: str = "") -> Iterator[None]:
    """Turn any torch.distributed exception inside the block into CommError."""
    try:
        yield
    except SGLError:
        raise
    except Exception as exc:
        raise _error(op, seconds, exc, group, peer) from exc


def _wait(work: Any, op: str, seconds: float, group: Group) -> None:
    """Wait for an async work handle at most ``seconds``."""
    if work is None:  # torch returns None for non-members; _check_member prevents it
        raise CommError(f"comm.{op}: this rank is not a member of the group.")
    if work.wait(timeout=timedelta(seconds=seconds)) is False:
        raise CommError(
            f"comm.{op} timed out on {_where(group)} after {seconds:g}s. A peer probably "
            f"never called comm.{op}; call comm.shutdown()."
        )


def _require_init(op: str) -> None:
    """Point-to-point ops need a peer, so they need an initialised group."""
    if not is_initialized():
        raise CommError(
            f"comm.{op}: not initialised, and a single-process world has no peer to "
            f"{op} {'to' if op == 'send' else 'from'}. Fix: call comm.init() first ({_ENV_HELP})."
        )


def _check_tensor(tensor: Any, op: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise CommError(f"comm.{op}: expected a torch.Tensor, got {type(tensor).__name__}.")


def _check_member(group: Group, op: str) -> None:
    if group is not None and dist.get_rank(group) < 0:
        raise CommError(
            f"comm.{op}: rank {dist.get_rank()} is not a member of this group (ranks "
            f"{dist.get_process_group_ranks(group)}). Fix: only call {op} on ranks in the group."
        )


def _check_peer(peer: Any, op: str, name: str, group: Group, *, allow_self: bool) -> None:
    """Validate a global ``src``/``dst`` rank against the world or ``group``."""
    if not isinstance(peer, int) or isinstance(peer, bool):
        raise CommError(f"comm.{op}: {name} must be an int rank, got {peer!r}.")
    if not is_initialized():
        if peer != 0:
            raise CommError(
                f"comm.{op}: {name}={peer}, but not initialised the only rank is 0."
            )
        return
    _check_member(group, op)
    members = (
        list(range(dist.get_world_size()))
        if group is None
        else dist.get_process_group_ranks(group)
    )
    if peer not in members:
        raise CommError(
            f"comm.{op}: {name}={peer} is not a rank of the group {members}. "
            f"Fix: pass a global rank from {members}."
        )
    if not allow_self and peer == dist.get_rank():
        raise CommError(f"comm.{op}: {name}={peer} is this process's own rank; pick another rank.")


def _check_ranks(ranks: Any, world: int) -> list[int]:
    """Validate new_group's ranks: distinct ints in [0, world)."""
    if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Sequence):
        raise CommError(f"comm.new_group: ranks must be a sequence of ints, got {ranks!r}.")
    ranks = list(ranks)
    bad = [r for r in ranks if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < world]
    if not ranks or bad or len(set(ranks)) != len(ranks):
        raise CommError(
            f"comm.new_group: ranks must be a non-empty list of distinct ints in [0, {world}), "
            f"got {ranks!r}."
        )
    return sorted(ranks)


def _check_splits(splits: Any, name: str, world: int, total: int | None) -> list[int]:
    """Validate split sizes: ``world`` non-negative ints (summing to ``total``)."""
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    if isinstance(splits, (str, bytes)) or not isinstance(splits, Sequence):
        raise CommError(f"comm.all_to_all: {name} must be a list of ints, got {splits!r}.")
    values = list(splits)
    if len(values) != world:
        raise CommError(
            f"comm.all_to_all: {name} has {len(values)} entries for a group of {world} ranks; "
            "expected one row count per rank."
        )
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values):
        raise CommError(
            f"comm.all_to_all: {name} must be non-negative ints, got {values}."
        )
    if total is not None and sum(values) != total:
        raise CommError(
            f"comm.all_to_all: {name} {values} sum to {sum(values)}, but the input has "
            f"{total} rows. Fix: make the splits sum to the input's first dimension."
        )
    return values


def _comm_device(group: Group) -> torch.device:
    """Where metadata/receive buffers live: the rank's GPU for NCCL, else CPU."""
    if get_backend(group) == "nccl":
        if _config is not None and _config.device.type == "cuda":
            return _config.device
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _meta(tensor: torch.Tensor, op: str) -> torch.Tensor:
    """Encode dtype and shape as a fixed-length int64 vector for exchange."""
    if tensor.dtype not in _DTYPES:
        raise CommError(f"comm.{op}: dtype {tensor.dtype} is not supported; use one of {_DTYPES}.")
    if tensor.dim() > _MAX_DIMS:
        raise CommError(
            f"comm.{op}: tensors may have at most {_MAX_DIMS} dims, got {tensor.dim()}."
        )
    shape = list(tensor.shape) + [-1] * (_MAX_DIMS - tensor.dim())
    values = [_DTYPES.index(tensor.dtype), tensor.dim()] + shape
    # Metadata travels on the data's device (NCCL cannot move CPU tensors).
    return torch.tensor(values, dtype=torch.int64, device=tensor.device)


def _decode_meta(values: list[int]) -> tuple[torch.dtype, tuple[int, ...]]:
    """Inverse of :func:`_meta`: (dtype, shape)."""
    return _DTYPES[values[0]], tuple(values[2 : 2 + values[1]])


def _check_agree(
    metas: list[tuple[torch.dtype, tuple[int, ...]]], op: str, group: Group
) -> None:
    """All ranks see the same metadata, so all raise together (no one hangs)."""
    dtype0, shape0 = metas[0]
    for j, (dtype, shape) in enumerate(metas):
        if dtype != dtype0 or len(shape) != len(shape0) or shape[1:] != shape0[1:]:
            listing = ", ".join(f"group rank {i}: {d} {s}" for i, (d, s) in enumerate(metas))
            raise CommError(
                f"comm.{op} on {_where(group)}: ranks disagree on dtype or trailing shape "
                f"({listing}). Only the first dimension may differ between ranks. Fix: "
                "pass tensors of one dtype with equal dimensions after the first."
            )


def _pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    """``tensor`` extended with zero rows to ``rows`` rows."""
    if tensor.shape[0] == rows:
        return tensor
    pad = tensor.new_zeros((rows - tensor.shape[0],) + tuple(tensor.shape[1:]))
    return torch.cat([tensor, pad])


def _wire(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.dtype]:
    """View bool tensors as uint8: Gloo does not move bool, bytes are identical."""
    if tensor.dtype == torch.bool:
        return tensor.view(torch.uint8), torch.bool
    return tensor, tensor.dtype


def _unwire(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Inverse of :func:`_wire`."""
    if dtype == torch.bool and tensor.dtype == torch.uint8:
        return tensor.view(torch.bool)
    return tensor
