"""How :mod:`sgl.comm` words failures: every torch.distributed error or timeout becomes a
:class:`~sgl.errors.CommError` naming the operation, the rank and the timeout."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from sgl.comm._state import Group
from sgl.comm.world import get_backend, get_rank, get_world_size, is_initialized
from sgl.errors import CommError, SGLError


def _where(group: Group) -> str:
    """'rank R/W' (plus group rank when a sub-group is used) for messages."""
    text = f"rank {get_rank()}/{get_world_size()}"
    if group is not None and is_initialized():
        text += f" (group rank {dist.get_rank(group)}/{dist.get_world_size(group)})"
    return text


def _error(op: str, seconds: float, exc: BaseException, group: Group, peer: str = "") -> CommError:
    """Build the CommError for a torch.distributed failure in ``op``."""
    text = str(exc)
    # Gloo words timeouts in several ways; monitored_barrier names missing ranks.
    markers = ("timed out", "timeout", "failed to pass monitoredbarrier")
    timed_out = any(marker in text.lower() for marker in markers)
    hint = (
        f"A peer probably never called comm.{op} (or called a different operation); every "
        "rank of the group must make the same calls in the same order. The process group "
        "is unusable now: call comm.shutdown()."
        if timed_out
        else "Check that every rank passes matching dtypes/shapes and that no peer died."
    )
    what = "timed out" if timed_out else "failed"
    try:
        backend = get_backend(group)
    except Exception:  # noqa: BLE001 -- e.g. a broken group; the message matters more
        backend = None
    peer = f" {peer}" if peer else ""
    return CommError(
        f"comm.{op}{peer} {what} on {_where(group)} (backend {backend}, timeout {seconds:g}s): "
        f"{type(exc).__name__}: {text}. {hint}"
    )


@contextmanager
def _translate(op: str, seconds: float, group: Group, peer: str = "") -> Iterator[None]:
    """Turn any torch.distributed exception inside the block into CommError."""
    try:
        yield
    except SGLError:
        raise
    except Exception as exc:
        raise _error(op, seconds, exc, group, peer) from exc


def _wait(work: Any, op: str, seconds: float, group: Group) -> None:
    """Wait for an async work handle at most ``seconds``."""
    if work is None:  # torch returns None for non-members; _check_member prevents it
        raise CommError(f"comm.{op}: this rank is not a member of the group.")
    if work.wait(timeout=timedelta(seconds=seconds)) is False:
        raise CommError(
            f"comm.{op} timed out on {_where(group)} after {seconds:g}s. A peer probably "
            f"never called comm.{op}; call comm.shutdown()."
        )
