"""Party-to-party messages: every tensor that crosses a party boundary goes through a channel.

:class:`CommChannel` sends over :mod:`sgl.comm` (one Gloo/NCCL rank per party; the same code
under ``torchrun`` across machines): a small int64 header (dtype, shape) and then the payload,
each message kind on its own tag, with a timeout so that a party that dies or stops answering
makes its peers raise :class:`~sgl.errors.CommError` instead of hanging. Every payload is counted
by the channel's :class:`~sgl.federated.link.TrafficMeter`. :class:`LocalChannel` is the same
interface over in-process queues, for parties run as threads (tests, single-machine
simulation); it counts bytes identically.

Example (two threads):
    >>> import threading, torch
    >>> a, b = LocalChannel.pair()
    >>> t = threading.Thread(target=lambda: a.send(torch.ones(2, 3), 1, "act")); t.start()
    >>> b.recv(0, "act").shape, b.meter.bytes_received
    (torch.Size([2, 3]), 24)
    >>> t.join()
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import queue
from typing import Dict, Optional, Tuple

import torch

from sgl.errors import CommError, ConfigError
from sgl.federated.link import TrafficMeter, WANLink

__all__ = ["Channel", "CommChannel", "LocalChannel", "MESSAGE_KINDS"]

#: message kind -> tag (one tag per kind keeps an out-of-order message from matching another kind)
MESSAGE_KINDS: Dict[str, int] = {"act": 1, "grad": 2, "eval": 3, "ids": 4, "cipher": 5, "share": 6, "ctrl": 7}
_DTYPES = [torch.float32, torch.float64, torch.int64, torch.uint8, torch.int32, torch.float16, torch.bfloat16]
_HEADER = 8  # dtype code, ndim, up to 6 dims


class Channel(ABC):
    """What a party needs: ``send(tensor, peer, kind)``, ``recv(peer, kind)``, a ``meter`` and ``rank``."""

    rank: int
    meter: TrafficMeter

    @abstractmethod
    def send(self, tensor: torch.Tensor, peer: int, kind: str) -> None:
        """Deliver ``tensor`` to party ``peer`` as a message of ``kind`` (counted by ``meter``)."""

    @abstractmethod
    def recv(self, peer: int, kind: str) -> torch.Tensor:
        """The next message of ``kind`` from party ``peer``."""

    @staticmethod
    def _tag(kind: str) -> int:
        if kind not in MESSAGE_KINDS:
            raise ConfigError(f"unknown message kind {kind!r}; known: {', '.join(MESSAGE_KINDS)}")
        return MESSAGE_KINDS[kind]


def _header(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype not in _DTYPES:
        raise CommError(f"cannot send dtype {tensor.dtype}; supported: {_DTYPES}")
    if tensor.dim() > _HEADER - 2:
        raise CommError(f"cannot send a {tensor.dim()}-d tensor; at most {_HEADER - 2} dims")
    head = [_DTYPES.index(tensor.dtype), tensor.dim(), *tensor.shape]
    return torch.tensor(head + [0] * (_HEADER - len(head)), dtype=torch.int64)


class CommChannel(Channel):
    """Messages over :mod:`sgl.comm` point-to-point calls, with ``timeout`` seconds per call.

    Tensors travel on the communication device (CPU for Gloo) and come back on ``device``.
    """

    def __init__(self, link: Optional[WANLink] = None, timeout: float = 60.0,
                 device: Optional[torch.device] = None) -> None:
        from sgl import comm

        if not comm.is_initialized():
            raise CommError("CommChannel needs an initialised sgl.comm world (comm.init() or comm.spawn)")
        self._comm = comm
        self.rank = comm.get_rank()
        self.timeout = float(timeout)
        self.device = device
        self.meter = TrafficMeter(link or WANLink())

    def send(self, tensor: torch.Tensor, peer: int, kind: str) -> None:
        tag = self._tag(kind)
        payload = tensor.detach().contiguous()
        if self._comm.get_backend() == "gloo":
            payload = payload.cpu()
        head = _header(payload)
        self._comm.send(head.to(payload.device), peer, timeout=self.timeout, tag=tag)
        self._comm.send(payload, peer, timeout=self.timeout, tag=tag)
        self.meter.log(peer, payload.numel() * payload.element_size(), "sent")

    def recv(self, peer: int, kind: str) -> torch.Tensor:
        tag = self._tag(kind)
        head = self._comm.recv((_HEADER,), peer, dtype=torch.int64, timeout=self.timeout, tag=tag).tolist()
        dtype, shape = _DTYPES[int(head[0])], tuple(int(s) for s in head[2:2 + int(head[1])])
        out = self._comm.recv(shape, peer, dtype=dtype, timeout=self.timeout, tag=tag)
        self.meter.log(peer, out.numel() * out.element_size(), "received")
        return out if self.device is None else out.to(self.device)


class LocalChannel(Channel):
    """In-process channel between parties run as threads; same counting as :class:`CommChannel`."""

    def __init__(self, rank: int, boxes: Dict[Tuple[int, int, str], "queue.Queue"], link: Optional[WANLink] = None,
                 timeout: float = 60.0) -> None:
        self.rank, self._boxes, self.timeout = rank, boxes, float(timeout)
        self.meter = TrafficMeter(link or WANLink())

    @classmethod
    def group(cls, size: int, link: Optional[WANLink] = None, timeout: float = 60.0) -> list:
        """``size`` connected channels, one per party (rank = position)."""
        boxes: Dict[Tuple[int, int, str], queue.Queue] = {}
        return [cls(r, boxes, link, timeout) for r in range(size)]

    @classmethod
    def pair(cls, link: Optional[WANLink] = None, timeout: float = 60.0) -> list:
        return cls.group(2, link, timeout)

    def _box(self, src: int, dst: int, kind: str) -> "queue.Queue":
        self._tag(kind)
        return self._boxes.setdefault((src, dst, kind), queue.Queue())

    def send(self, tensor: torch.Tensor, peer: int, kind: str) -> None:
        payload = tensor.detach().clone()
        self._box(self.rank, peer, kind).put(payload)
        self.meter.log(peer, payload.numel() * payload.element_size(), "sent")

    def recv(self, peer: int, kind: str) -> torch.Tensor:
        try:
            out = self._box(peer, self.rank, kind).get(timeout=self.timeout)
        except queue.Empty:
            raise CommError(f"recv of {kind!r} from party {peer} at party {self.rank} timed out after "
                            f"{self.timeout:g}s: the peer died or stopped answering") from None
        self.meter.log(peer, out.numel() * out.element_size(), "received")
        return out
