"""Scalar argument checks and byte sizes: the one home of the checks every layer uses.

Validation happens once, at the public boundary (the scikit-learn habit). These checks
take plain Python values, import nothing but :mod:`sgl.errors`, and so can be used by every
layer, ``sgl.systems`` included (graph-data checks live in :mod:`sgl.data.validation`).
Each raises ``error`` (default :class:`~sgl.errors.ConfigError`) with a message that names
the argument, what was expected and what was received.

Byte sizes follow one convention everywhere (IEC / SI, as ``df -H`` vs ``df -h``):
decimal units are powers of ten, binary units powers of two.

    >>> parse_bytes("512MB"), parse_bytes("512MiB"), parse_bytes(4096)
    (512000000, 536870912, 4096)
    >>> check_int(3, "k", minimum=1)
    3
    >>> check_real(0.5, "dropout", 0.0, 1.0, open_high=True)
    0.5
"""
from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any, Optional, Sequence, Union

from sgl.errors import ConfigError

__all__ = ["check_int", "check_real", "check_probability", "check_bool", "check_choice", "with_message",
           "parse_bytes", "format_bytes", "BYTE_UNITS"]


def check_int(value: Any, name: str, minimum: Optional[int] = None, maximum: Optional[int] = None, *,
              error: type = ConfigError) -> int:
    """``value`` as an ``int``; bools, floats and strings are rejected.

    The message reads ``"{name} must be an integer >= {minimum}, got {value!r}"`` (or
    ``in [minimum, maximum]`` when both bounds are given).
    """
    if minimum is not None and maximum is not None:
        expected = f"an integer in [{minimum}, {maximum}]"
    elif minimum is not None:
        expected = f"an integer >= {minimum}"
    elif maximum is not None:
        expected = f"an integer <= {maximum}"
    else:
        expected = "an integer"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise error(f"{name} must be {expected}, got {value!r}")
    if (minimum is not None and int(value) < minimum) or (maximum is not None and int(value) > maximum):
        raise error(f"{name} must be {expected}, got {value!r}")
    return int(value)


def check_real(value: Any, name: str, low: float = -math.inf, high: float = math.inf, *,
               open_low: bool = False, open_high: bool = False, error: type = ConfigError) -> float:
    """``value`` as a finite-or-bounded ``float`` in ``[low, high]`` (ends opened by the flags).

    The message reads ``"{name} must be a number in [low, high], got {value!r}"``, or
    ``">= low"`` when only a lower bound is given.
    """
    ok = isinstance(value, Real) and not isinstance(value, bool) and not math.isnan(float(value))
    if ok:
        v = float(value)
        ok = (v > low if open_low else v >= low) and (v < high if open_high else v <= high)
    if not ok:
        if math.isfinite(high) or not math.isfinite(low):
            interval = f"{'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        else:
            interval = f"{'>' if open_low else '>='} {low}"
        raise error(f"{name} must be a number in {interval}, got {value!r}" if interval[0] in "([" else
                    f"{name} must be a number {interval}, got {value!r}")
    return float(value)


def check_probability(value: Any, name: str, *, error: type = ConfigError) -> float:
    """A rate in ``[0, 1)`` (a dropout of 1 would zero every activation)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0.0 <= float(value) < 1.0:
        raise error(f"{name} must be a probability in [0, 1), got {value!r}")
    return float(value)


def check_bool(value: Any, name: str, *, error: type = ConfigError) -> bool:
    if not isinstance(value, bool):
        raise error(f"{name} must be True or False, got {value!r}")
    return value


def check_choice(value: Any, name: str, choices: Sequence[Any], *, error: type = ConfigError) -> Any:
    if value not in choices:
        raise error(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def with_message(message: str, check: Any, value: Any, *args: Any, error: type = ConfigError, **options: Any) -> Any:
    """``check(value, ...)`` (one of the checks above) raising ``error(message)`` instead of its own text.

    For entry points whose messages predate this module and that callers match on:

    >>> with_message("trials must be a positive integer, got 0", check_int, 0, 1)
    Traceback (most recent call last):
    ...
    sgl.errors.ConfigError: trials must be a positive integer, got 0
    """
    try:
        return check(value, "value", *args, error=error, **options)
    except error:
        raise error(message) from None


#: unit -> bytes. ``kB``/``MB``/``GB``/``TB`` (and ``k``/``M``/``G``/``T``) are powers of ten,
#: ``KiB``/``MiB``/``GiB``/``TiB`` powers of two; case does not matter.
BYTE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
              "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(value: Union[str, int, float], name: str = "a memory size", *, error: type = ConfigError) -> int:
    """A byte count from ``"512MB"`` (512·10^6), ``"512MiB"`` (512·2^20), ``"1.5GB"`` or a number.

    Plain numbers (and strings without a unit) are bytes; the result must be positive.
    """
    if isinstance(value, bool):
        raise error(f"{name} must be a size like 512MB or 512MiB, got {value!r}")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
        if not match or match.group(2).lower() not in BYTE_UNITS:
            raise error(f"cannot read {name} {value!r}; use e.g. 512MB (10^6 bytes each), 256MiB (2^20), "
                        f"2GB, 24GiB or a byte count")
        number, unit = float(match.group(1)), match.group(2).lower()
    if not math.isfinite(number):
        raise error(f"{name} must be finite, got {value!r}")
    size = int(round(number * BYTE_UNITS[unit]))
    if size <= 0:
        raise error(f"{name} must be positive, got {value!r}")
    return size


def format_bytes(size: float) -> str:
    """``536870912`` -> ``'512.0 MiB'`` (binary units, as memory is usually reported)."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"
