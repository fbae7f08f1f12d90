"""What travels besides the data: dtype/shape metadata, padding of uneven rows, bool as bytes,
and the device that holds receive buffers."""
from __future__ import annotations

import torch

import sgl.comm._state as _state
from sgl.comm._errors import _where
from sgl.comm._state import Group
from sgl.comm.world import get_backend
from sgl.errors import CommError


#: Shapes are exchanged as fixed-length int64 vectors; more dims is an error.
_MAX_DIMS = 16
#: Dtypes are exchanged by their position in this tuple (codes must agree
#: across processes, so never reorder it; append only).
_DTYPES: tuple[torch.dtype, ...] = (
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.complex64, torch.complex128, torch.uint8, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.bool,
)


def _comm_device(group: Group) -> torch.device:
    """Where metadata/receive buffers live: the rank's GPU for NCCL, else CPU."""
    if get_backend(group) == "nccl":
        if _state.config is not None and _state.config.device.type == "cuda":
            return _state.config.device
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
