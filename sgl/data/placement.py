"""Device placement of SGL's data containers: one map over the tensors an object holds.

:class:`DevicePlacement` gives :class:`~sgl.data.Graph`, :class:`~sgl.data.HeteroGraph` and the
samplers' :class:`~sgl.samplers.Block` / :class:`~sgl.samplers.MiniBatch` the methods a PyTorch
(and PyG) user expects: ``to(device, non_blocking=False)``, ``cpu()``, ``cuda()``,
``pin_memory()`` and a ``device`` property. They all go through :func:`map_tensors`, which
rebuilds an object's attributes, walking into lists, tuples, dicts and nested containers.

Semantics (the same for every container):

* ``to`` / ``cpu`` / ``cuda`` / ``pin_memory`` return a **new** object; the original is never
  changed (PyG's ``Data.to`` moves in place and returns ``self``; a new object means a graph
  that is still used elsewhere, a cached dataset say, stays where it was). The new object's
  lists and dicts are new too, so setting attributes on it never touches the original.
* Tensors follow :meth:`torch.Tensor.to`: a tensor already on ``device`` is reused, not copied;
  pass ``copy=True`` for a result whose tensors share no storage with the original (or use
  ``Graph.clone()``). Values other than tensors (strings, numbers, other objects) are shared.
* Nothing is re-validated: the tensors were checked at construction and moving them does not
  change their values.
* ``pin_memory()`` copies CPU tensors into page-locked memory (tensors on a GPU are left
  alone). Pinning needs an accelerator build of torch with a visible device, as in PyG (whose
  ``Data.pin_memory`` raises torch's ``RuntimeError`` there); SGL raises
  :class:`~sgl.errors.DeviceError` saying so, on a CPU-only machine simply skip it.

Example:
    >>> import torch
    >>> from sgl.data import Graph
    >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), x=torch.ones(2, 3))
    >>> g.device
    device(type='cpu')
    >>> h = g.to("cpu", copy=True)
    >>> h is g, h.x.data_ptr() == g.x.data_ptr(), torch.equal(h.x, g.x)
    (False, False, True)
"""
from __future__ import annotations

import copy as _copy
from typing import Any, Callable, Iterator, Optional, Tuple, Union

import torch

from sgl.device import get_device
from sgl.errors import DeviceError

__all__ = ["DevicePlacement", "map_tensors", "iter_tensors", "resolve_device", "device_of"]

TensorFn = Callable[[torch.Tensor], torch.Tensor]


def map_tensors(value: Any, fn: TensorFn) -> Any:
    """``value`` with ``fn`` applied to every tensor in it.

    Walks lists, tuples (named tuples keep their type), dicts and :class:`DevicePlacement`
    objects (rebuilt with :func:`map_container`); anything else is returned as it is.

    Example:
        >>> map_tensors({"a": [torch.ones(1), "text"], "b": 3}, lambda t: t * 2)
        {'a': [tensor([2.]), 'text'], 'b': 3}
    """
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, DevicePlacement):
        return map_container(value, fn)
    if isinstance(value, dict):
        return {key: map_tensors(item, fn) for key, item in value.items()}
    if isinstance(value, list):
        return [map_tensors(item, fn) for item in value]
    if isinstance(value, tuple):
        items = [map_tensors(item, fn) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def map_container(obj: Any, fn: TensorFn) -> Any:
    """A shallow copy of ``obj`` whose attributes are mapped with :func:`map_tensors`.

    The copy is made without calling ``__init__`` (no re-validation), the way
    :func:`copy.copy` does; frozen dataclasses work too.
    """
    out = _copy.copy(obj)
    out.__dict__.update({key: map_tensors(value, fn) for key, value in vars(obj).items()})
    return out


def iter_tensors(value: Any, prefix: str = "") -> Iterator[Tuple[str, torch.Tensor]]:
    """``(path, tensor)`` for every tensor that :func:`map_tensors` would visit."""
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, DevicePlacement):
        for key, item in vars(value).items():
            yield from iter_tensors(item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_tensors(item, f"{prefix}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from iter_tensors(item, f"{prefix}[{i}]")


def device_of(obj: Any) -> torch.device:
    """The one device all tensors of ``obj`` live on (CPU when it holds none).

    Raises:
        DeviceError: the tensors are spread over several devices.
    """
    found = {}
    for path, tensor in iter_tensors(obj):
        found.setdefault(tensor.device, path)
    if len(found) > 1:
        where = ", ".join(f"{path} on {device}" for device, path in found.items())
        raise DeviceError(f"this {type(obj).__name__} holds tensors on {len(found)} devices ({where}); move it "
                          f"to one with .to(device)")
    return next(iter(found), torch.device("cpu"))


def resolve_device(device: Any) -> torch.device:
    """Turn what ``Tensor.to`` accepts as a device into a :class:`torch.device`, checking CUDA.

    ``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"auto"``, an ``int`` N (GPU N) and
    :class:`torch.device` are accepted; CPU and CUDA go through :func:`sgl.device.get_device`,
    so asking for CUDA on a machine without it raises :class:`~sgl.errors.DeviceError`.
    Other torch device types (``"meta"``, ``"mps"``...) are passed on to torch.

    Example:
        >>> resolve_device("cpu"), resolve_device(torch.device("cpu"))
        (device(type='cpu'), device(type='cpu'))
    """
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise DeviceError(f"a GPU index must be >= 0, got {device}")
        return get_device(f"cuda:{device}")
    if isinstance(device, str) and device.strip().lower().split(":")[0] in ("cpu", "cuda", "auto"):
        return get_device(device)
    if isinstance(device, (str, torch.device)):
        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError) as exc:
            raise DeviceError(f"invalid device {device!r}: {exc}; pass e.g. 'cpu', 'cuda' or 'cuda:0'") from None
        return get_device(parsed) if parsed.type in ("cpu", "cuda") else parsed
    raise DeviceError(f"a device is a str, a torch.device or a GPU index, got {type(device).__name__} "
                      f"({device!r}); pass e.g. 'cpu' or 'cuda:0'")


def _check_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise DeviceError(f"{name} must be True or False, got {value!r}")
    return value


class DevicePlacement:
    """``to`` / ``cpu`` / ``cuda`` / ``pin_memory`` / ``device`` for an object holding tensors.

    Every attribute (in ``vars(self)``) is mapped, private ones included; see the module
    docstring for what the methods return.
    """

    def to(self, device: Union[str, torch.device, int], non_blocking: bool = False, copy: bool = False) -> Any:
        """A new object with every tensor on ``device``.

        Args:
            device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``, a :class:`torch.device` or a GPU index.
            non_blocking: as :meth:`torch.Tensor.to`: asynchronous host-to-GPU copies from
                pinned memory (see :meth:`pin_memory`).
            copy: copy every tensor even when it is already on ``device``.

        Raises:
            DeviceError: the device is malformed or unavailable (CUDA on a CPU-only machine).
        """
        target = resolve_device(device)
        _check_flag(non_blocking, "non_blocking")
        _check_flag(copy, "copy")

        def move(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.to(target, non_blocking=non_blocking, copy=copy)

        try:
            return map_container(self, move)
        except RuntimeError as exc:  # e.g. a torch device type this build cannot reach
            raise DeviceError(f"could not move this {type(self).__name__} to {target}: {exc}") from exc

    def cpu(self) -> Any:
        """A new object with every tensor in CPU memory (see :meth:`to`)."""
        return self.to("cpu")

    def cuda(self, device: Optional[Union[str, torch.device, int]] = None, non_blocking: bool = False) -> Any:
        """A new object with every tensor on a GPU: ``device`` is ``None`` (the current GPU), a
        GPU index or a CUDA device.

        Raises:
            DeviceError: CUDA is not available, or ``device`` is not a CUDA device.
        """
        target = resolve_device("cuda" if device is None else device)
        if target.type != "cuda":
            raise DeviceError(f"cuda() moves to a GPU but was given {device!r}; use .to({str(target)!r}) instead")
        return self.to(target, non_blocking=non_blocking)

    def pin_memory(self) -> Any:
        """A new object whose CPU tensors are in page-locked memory, for fast (and, with
        ``to(..., non_blocking=True)``, asynchronous) copies to a GPU.

        Raises:
            DeviceError: this torch build or machine has no accelerator (pinning needs one).
        """

        def pin(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.pin_memory() if tensor.device.type == "cpu" else tensor

        try:
            return map_container(self, pin)
        except RuntimeError as exc:
            raise DeviceError(
                f"pin_memory() needs an accelerator build of torch with a visible GPU (torch {torch.__version__}, "
                f"CUDA build: {torch.version.cuda or 'none'}, torch.cuda.is_available()={torch.cuda.is_available()}): "
                f"{exc}. Pinned memory only speeds up copies to a GPU; skip it on a CPU-only machine") from exc

    @property
    def device(self) -> torch.device:
        """The device of the tensors (``DeviceError`` if they are spread over several)."""
        return device_of(self)
