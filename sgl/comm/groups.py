"""Sub-groups of the world (every rank creates every group, members or not)."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import torch.distributed as dist

from sgl.comm._errors import _error
from sgl.comm._state import Group
from sgl.comm._validate import _check_ranks, _timeout
from sgl.comm.world import get_world_size, is_initialized

__all__ = ["new_group"]


def new_group(
    ranks: Sequence[int], *, backend: str | None = None, timeout: float | None = None
) -> Group:
    """Create a sub-group of the given global ``ranks`` and return it.

    Like ``torch.distributed.new_group``, *every* rank of the world must call
    this with the same ``ranks``, including ranks that are not members.
    Non-members get a handle they must not use in collectives (doing so
    raises :class:`CommError`).  When not initialised, ``new_group([0])``
    returns ``None`` (the one-rank world itself).
    """
    world = get_world_size()
    checked = _check_ranks(ranks, world)
    if not is_initialized():
        return None
    seconds = _timeout(timeout)
    try:
        return dist.new_group(
            ranks=checked, timeout=timedelta(seconds=seconds), backend=backend
        )
    except Exception as exc:
        raise _error("new_group", seconds, exc, None) from exc
