"""Choose the torch device (and the matching distributed backend) SGL runs on.

Precedence: an explicit ``device`` argument, then the ``SGL_DEVICE``
environment variable, then ``"cuda"`` when a GPU is visible, else ``"cpu"``.
Accepted spellings are ``"cpu"``, ``"cuda"``, ``"cuda:N"`` and ``"auto"``
(case-insensitive, surrounding spaces ignored), or a :class:`torch.device`
of type ``cpu`` or ``cuda``.

>>> from sgl.device import get_device, default_backend
>>> get_device("cpu")
device(type='cpu')
>>> default_backend("cpu")
'gloo'
>>> get_device("tpu")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sgl.errors.DeviceError: Invalid device 'tpu' (from argument `device`). Expected "cpu", ...
"""
from __future__ import annotations

import os
import re
from typing import Literal, Union

import torch

from sgl.errors import DeviceError

__all__ = ["ENV_VAR", "DeviceLike", "get_device", "default_backend"]

#: Environment variable consulted when no device is passed explicitly.
ENV_VAR = "SGL_DEVICE"

#: Everything :func:`get_device` accepts.
DeviceLike = Union[str, torch.device, None]

_VALID = '"cpu", "cuda", "cuda:N" (N = GPU index) or "auto"'
_PATTERN = re.compile(r"^(cpu|cuda|auto)(?::(\d+))?$")


def get_device(device: DeviceLike = None) -> torch.device:
    """Resolve ``device`` to a :class:`torch.device`, validating availability.

    ``None`` falls back to ``$SGL_DEVICE`` and then to ``"auto"`` (CUDA when
    available, otherwise CPU).  ``"cuda"`` without an index is returned as
    ``device(type='cuda')`` (the current CUDA device).

    Raises:
        DeviceError: the value is malformed, CUDA is requested but
            unavailable, or ``cuda:N`` names a GPU that is not visible.

    >>> get_device("CPU ")
    device(type='cpu')
    >>> get_device(torch.device("cpu"))
    device(type='cpu')
    >>> get_device("auto").type in ("cpu", "cuda")
    True
    """
    if device is None:
        env = os.environ.get(ENV_VAR, "")
        if env.strip():
            return _resolve(env, f"environment variable {ENV_VAR}")
        return _resolve("auto", "default")
    return _resolve(device, "argument `device`")


def default_backend(device: DeviceLike = None) -> Literal["nccl", "gloo"]:
    """Return the torch.distributed backend suited to ``device``.

    NCCL for CUDA devices, Gloo otherwise.  ``device`` is resolved with
    :func:`get_device`, so the same precedence and validation apply.

    >>> default_backend("cpu")
    'gloo'
    """
    return "nccl" if get_device(device).type == "cuda" else "gloo"


def _resolve(value: str | torch.device, source: str) -> torch.device:
    """Parse and validate one device value; ``source`` names where it came from."""
    if isinstance(value, torch.device):
        if value.type == "cpu":
            return value
        if value.type == "cuda":
            _check_cuda(value.index, value, source)
            return value
        raise DeviceError(
            f"Unsupported device {value!r} (from {source}). Expected {_VALID}. "
            f'Fix: pass device="cpu" or a CUDA device.'
        )
    if not isinstance(value, str):
        hint = (
            f'pass device="cuda:{value}" instead of a bare GPU index'
            if isinstance(value, int) and not isinstance(value, bool)
            else 'pass e.g. device="cpu"'
        )
        raise DeviceError(
            f"Invalid device {value!r} of type {type(value).__name__} (from {source}). "
            f"Expected a str ({_VALID}), a torch.device or None. Fix: {hint}."
        )
    match = _PATTERN.match(value.strip().lower())
    # An index only makes sense after "cuda"; "cpu:0"/"auto:1" are rejected
    # rather than silently ignored.
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise DeviceError(
            f"Invalid device {value!r} (from {source}). Expected {_VALID}. "
            f'Fix: pass one of these, e.g. device="cpu", or set {ENV_VAR}=cpu.'
        )
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    idx = None if index is None else int(index)
    _check_cuda(idx, value, source)
    return torch.device("cuda") if idx is None else torch.device("cuda", idx)


def _check_cuda(index: int | None, value: object, source: str) -> None:
    """Raise DeviceError unless CUDA (and GPU ``index``, if given) is usable."""
    if not torch.cuda.is_available():
        raise DeviceError(
            f"Device {value!r} (from {source}) requests CUDA, but "
            f"torch.cuda.is_available() is False (torch {torch.__version__}, "
            f"CUDA build: {torch.version.cuda or 'none'}). "
            f'Fix: use device="cpu" or "auto", unset {ENV_VAR}, or install a CUDA '
            f"build of torch and make a GPU visible (check CUDA_VISIBLE_DEVICES)."
        )
    count = torch.cuda.device_count()
    if index is not None and index >= count:
        raise DeviceError(
            f"Device {value!r} (from {source}) names GPU {index}, but only {count} "
            f"GPU(s) are visible (valid: cuda:0 .. cuda:{count - 1}). "
            f'Fix: pick an index below {count}, or use device="cuda"/"auto".'
        )
