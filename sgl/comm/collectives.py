"""Collectives over a group: :func:`all_reduce`, :func:`all_gather` (uneven first dimension),
:func:`all_to_all` (uneven splits), :func:`broadcast` and :func:`barrier`.

Each has a ``timeout`` and is the identity (or a no-op) before :func:`~sgl.comm.init`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from sgl.comm._errors import _translate, _wait
from sgl.comm._state import Group, ReduceOpName
from sgl.comm._validate import _check_member, _check_peer, _check_splits, _check_tensor, _timeout
from sgl.comm._wire import _check_agree, _decode_meta, _meta, _pad_rows, _unwire, _wire
from sgl.comm.world import get_backend, get_world_size, is_initialized
from sgl.errors import CommError

__all__ = ["all_reduce", "all_gather", "all_to_all", "broadcast", "barrier", "wire_device", "to_wire"]


def wire_device(group: Group = None) -> torch.device:
    """The device whose tensors ``group``'s backend moves: the rank's GPU under NCCL, else the CPU.

    Host code (numpy/numba rooms) builds its messages on the CPU and calls :func:`to_wire`
    before a collective, then ``.cpu()`` on what comes back.

    >>> import sgl.comm as comm
    >>> comm.wire_device().type  # before init: the CPU
    'cpu'
    """
    if not is_initialized():
        return torch.device("cpu")
    from sgl.comm._wire import _comm_device

    return _comm_device(group)


def to_wire(tensor: torch.Tensor, group: Group = None) -> torch.Tensor:
    """``tensor`` on :func:`wire_device` (no copy when it is there already)."""
    return tensor.to(wire_device(group))


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
