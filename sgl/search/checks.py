"""Argument checks of the search: :mod:`sgl._checks` with the search's own messages.

The scalar checks live in :mod:`sgl._checks`; the search's errors have always been worded
their own way (``"trials must be a positive integer, got 0"``), which callers match on.

    >>> keep_message("trials must be a positive integer, got 0", check_int, 0, 1)
    Traceback (most recent call last):
    ...
    sgl.errors.ConfigError: trials must be a positive integer, got 0
"""
from __future__ import annotations

from typing import Any, Callable

from sgl._checks import check_int
from sgl.errors import ConfigError

__all__ = ["keep_message"]


def keep_message(message: str, check: Callable[..., Any], value: Any, *args: Any, **kwargs: Any) -> Any:
    """``check(value, ...)`` of :mod:`sgl._checks`, raising ``ConfigError(message)`` instead of its text."""
    try:
        return check(value, "value", *args, **kwargs)
    except ConfigError:
        raise ConfigError(message) from None
