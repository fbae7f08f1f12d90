"""What the rooms of :mod:`sgl.comm` share: the record of :func:`~sgl.comm.init`, type names, constants.

:data:`config` is read and written as ``_state.config`` (never imported by name), so every
module sees the current setup after :func:`~sgl.comm.init` and :func:`~sgl.comm.shutdown`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

import torch
import torch.distributed as dist

ReduceOpName = Literal["sum", "mean", "max", "min", "prod"]
Group = Optional[dist.ProcessGroup]

#: Timeout (seconds) used when neither the call nor :func:`init` gave one
#: (only happens when torch.distributed was initialised outside SGL).
_DEFAULT_TIMEOUT = 60.0
_ENV_HELP = (
    "launch with `torchrun --nproc-per-node N script.py` (it sets RANK, WORLD_SIZE, "
    "MASTER_ADDR, MASTER_PORT and LOCAL_RANK), pass them to comm.init(rank=..., "
    "world_size=..., master_addr=..., master_port=...), or run the function "
    "with sgl.comm.spawn(fn, world_size)"
)


@dataclass(frozen=True)
class _Config:
    """What :func:`~sgl.comm.init` set up (kept as ``_state.config``)."""

    backend: str
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    device: torch.device
    timeout: float


#: What :func:`~sgl.comm.init` set up; ``None`` until then and after :func:`~sgl.comm.shutdown`.
config: _Config | None = None
