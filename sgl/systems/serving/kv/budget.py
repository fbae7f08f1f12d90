"""How many KV tokens a decode step may attend: sink + recent window + retrieved middle tokens.

PQCache (and every baseline here) splits a budget ``b`` of the context length ``T`` as
``n = ceil(b * T)`` attended tokens besides the sink: ``n_recent = round(r * n)`` from the end
of the sequence and ``n_topk = n - n_recent`` chosen from the middle ``[sink, T - n_recent)``.
At ``b = 1`` every token is attended, so sparse attention equals exact attention.

>>> KVBudget(0.1, sink=4).split(1000)
(4, 50, 50)
>>> KVBudget(1.0, sink=4).split(10)
(4, 3, 3)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

from sgl._checks import check_int, check_real
from sgl.errors import ConfigError

__all__ = ["KVBudget", "check_budget"]


def check_budget(value: float, name: str = "budget") -> float:
    """A budget fraction in ``(0, 1]``: the share of the context a decode step attends."""
    try:
        return check_real(value, name, 0.0, 1.0, open_low=True)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; a budget is the fraction of the context attended, e.g. 0.1 "
                          f"for 10 %") from None


@dataclass(frozen=True)
class KVBudget:
    """Token budget of one decode step.

    Args:
        budget: fraction ``b`` in ``(0, 1]`` of the context attended besides the sink tokens.
        sink: leading tokens always attended (StreamingLLM's attention sinks; PQCache uses 32
            on 100k contexts, a few on short ones).
        recent_ratio: share ``r`` of the ``ceil(b T)`` tokens taken from the recent window.
    """

    budget: float = 0.1
    sink: int = 4
    recent_ratio: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", check_budget(self.budget))
        object.__setattr__(self, "sink", check_int(self.sink, "sink", minimum=0))
        object.__setattr__(self, "recent_ratio", check_real(self.recent_ratio, "recent_ratio", 0.0, 1.0))

    def split(self, length: int) -> Tuple[int, int, int]:
        """``(sink, n_recent, n_topk)`` for a context of ``length`` tokens (clipped to fit).

        The recent window always holds the current token (``n_recent >= 1``).
        """
        length = check_int(length, "length", minimum=1)
        sink = min(self.sink, length - 1)
        rest = length - sink
        total = min(rest, max(1, math.ceil(self.budget * length - 1e-9)))
        recent = min(total, max(1, round(self.recent_ratio * total)))
        topk = total - recent
        return sink, recent, topk
