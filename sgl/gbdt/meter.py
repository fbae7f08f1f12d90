"""``CommMeter``: bytes, calls and seconds of the collectives a distributed layout makes.

``bytes_sent`` is the payload this rank hands to the collective (for an
all-reduce or all-gather: the tensor; for an all-to-all: the pieces for other
ranks; for a broadcast: the tensor times the receivers, at the source only),
independent of the backend's algorithm.

>>> m = CommMeter()
>>> m.add("all_reduce", 800, 0.01); m.add("all_reduce", 800, 0.01)
>>> m.as_dict()["bytes_sent"], m.by_op["all_reduce"]["calls"]
(1600, 2)
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CommMeter"]


@dataclass
class CommMeter:
    """Totals and a per-operation breakdown of one rank's communication."""

    bytes_sent: int = 0
    calls: int = 0
    seconds: float = 0.0
    by_op: dict = field(default_factory=dict)

    def add(self, op: str, nbytes: int, seconds: float) -> None:
        self.bytes_sent += int(nbytes)
        self.calls += 1
        self.seconds += float(seconds)
        rec = self.by_op.setdefault(op, {"bytes": 0, "calls": 0, "seconds": 0.0})
        rec["bytes"] += int(nbytes)
        rec["calls"] += 1
        rec["seconds"] += float(seconds)

    def as_dict(self) -> dict:
        return {"bytes_sent": self.bytes_sent, "calls": self.calls, "seconds": self.seconds,
                "by_op": {k: dict(v) for k, v in self.by_op.items()}}
