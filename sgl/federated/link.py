"""A wide-area link model and a traffic meter: counted bytes turned into modelled seconds.

Parties of a vertical federation sit in different organisations, joined by a wide-area link;
local Gloo on 127.0.0.1 is ~1000x faster, so real time alone would hide what matters. A
:class:`WANLink` prices one message of ``b`` bytes at ``latency + 8 b / bandwidth`` seconds.
A :class:`TrafficMeter` records every message a party sends or receives and, per
communication round, the modelled time of the slowest peer (peers talk in parallel).

Example:
    >>> link = WANLink(bandwidth_mbps=100, latency_ms=10)
    >>> round(link.seconds(1_250_000), 4)    # 10 Mbit at 100 Mbit/s + 10 ms
    0.11
    >>> meter = TrafficMeter(link)
    >>> meter.log(1, 1000, "sent"); meter.log(1, 1000, "received"); meter.end_round()
    >>> meter.rounds, meter.bytes_sent, round(meter.link_seconds, 5)
    (1, 1000, 0.02016)
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict

from sgl.errors import ConfigError

__all__ = ["WANLink", "TrafficMeter"]


@dataclass(frozen=True)
class WANLink:
    """A link of ``bandwidth_mbps`` megabits per second and ``latency_ms`` one-way latency."""

    bandwidth_mbps: float = 100.0
    latency_ms: float = 10.0

    def __post_init__(self) -> None:
        if not self.bandwidth_mbps > 0:
            raise ConfigError(f"bandwidth_mbps must be > 0, got {self.bandwidth_mbps!r}")
        if not self.latency_ms >= 0:
            raise ConfigError(f"latency_ms must be >= 0, got {self.latency_ms!r}")

    def seconds(self, nbytes: int) -> float:
        """Modelled transfer time of one message of ``nbytes`` bytes."""
        return self.latency_ms / 1e3 + 8.0 * nbytes / (self.bandwidth_mbps * 1e6)


@dataclass
class TrafficMeter:
    """Bytes and messages per peer and direction, rounds, modelled link time and real time."""

    link: WANLink = field(default_factory=WANLink)
    bytes_sent: int = 0
    bytes_received: int = 0
    messages: int = 0
    rounds: int = 0
    link_seconds: float = 0.0
    _round: Dict[int, float] = field(default_factory=lambda: defaultdict(float), repr=False)
    _start: float = field(default_factory=time.perf_counter, repr=False)

    def log(self, peer: int, nbytes: int, direction: str) -> None:
        """Record one message of ``nbytes`` to (``"sent"``) or from (``"received"``) ``peer``."""
        if direction == "sent":
            self.bytes_sent += int(nbytes)
        elif direction == "received":
            self.bytes_received += int(nbytes)
        else:
            raise ConfigError(f"direction must be 'sent' or 'received', got {direction!r}")
        self.messages += 1
        self._round[peer] += self.link.seconds(nbytes)

    def end_round(self) -> None:
        """Close a communication round: add the slowest peer's modelled time."""
        if self._round:
            self.link_seconds += max(self._round.values())
            self.rounds += 1
            self._round.clear()

    @property
    def real_seconds(self) -> float:
        return time.perf_counter() - self._start

    def summary(self) -> Dict[str, Any]:
        """``bytes_sent``, ``bytes_received``, ``messages``, ``rounds``, ``link_seconds``, ``real_seconds``."""
        return {"bytes_sent": self.bytes_sent, "bytes_received": self.bytes_received, "messages": self.messages,
                "rounds": self.rounds, "link_seconds": self.link_seconds, "real_seconds": self.real_seconds}
