"""Point-to-point transfers between two ranks: :func:`send` and :func:`recv`."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from sgl.comm._errors import _translate, _wait
from sgl.comm._state import Group
from sgl.comm._validate import _check_peer, _check_tensor, _require_init, _timeout
from sgl.comm._wire import _comm_device, _wire
from sgl.errors import CommError

__all__ = ["send", "recv"]


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
