"""Thin, validated layer over :mod:`torch.distributed`.

All multi-process code in SGL (embedding training, MoE all-to-all, pipeline
stages) talks to other processes through this module only.  Compared with raw
``torch.distributed`` it adds:

* one :func:`init` that reads the ``torchrun`` environment or explicit
  arguments, picks Gloo on CPU and NCCL on CUDA, and validates everything;
* a ``timeout`` (seconds) on every blocking call, and conversion of every
  failure or timeout into :class:`sgl.errors.CommError` naming the operation,
  the rank and the timeout;
* :func:`all_gather` with a different first dimension on every rank and
  :func:`all_to_all` with uneven splits (split sizes are exchanged for you);
* single-process fallbacks: before :func:`init`, the world has one rank and
  collectives are identities, so the same code runs with and without
  ``torchrun``;
* :func:`spawn`, which runs a function in N local processes with hard
  timeouts (used by the tests).

Multi-process example -- save as ``demo.py`` and run
``torchrun --nproc-per-node 2 demo.py``::

    import torch
    from sgl import comm

    comm.init()                                # RANK, WORLD_SIZE, MASTER_* from torchrun
    rank, world = comm.get_rank(), comm.get_world_size()
    x = torch.full((rank + 1, 2), float(rank))    # rank r holds r + 1 rows
    parts = comm.all_gather(x)                 # [1x2 zeros, 2x2 ones]
    total = comm.all_reduce(torch.tensor([1.0]))  # tensor([2.])
    print(rank, [p.shape[0] for p in parts], total.item())
    comm.shutdown()

The same without torchrun, from a plain ``python`` script::

    import torch
    from sgl import comm

    def main(rank: int, world_size: int) -> None:
        print(rank, comm.all_reduce(torch.tensor([1.0])))

    if __name__ == "__main__":
        comm.spawn(main, 2)

Single process, nothing initialised -- collectives are identities:

>>> import torch
>>> import sgl.comm as comm
>>> comm.is_initialized(), comm.get_rank(), comm.get_world_size()
(False, 0, 1)
>>> comm.all_reduce(torch.tensor([2.0]), op="mean")
tensor([2.])
>>> comm.all_gather(torch.arange(3))
[tensor([0, 1, 2])]

Rules every caller must follow (as with torch.distributed): every rank of a
group makes the same sequence of collective calls with matching dtypes and
trailing shapes.  After a :class:`CommError` caused by a timeout or a dead
peer, the process group is in an undefined state: call :func:`shutdown`.

The package keeps one concept per module: :mod:`~sgl.comm.world` (init, shutdown, ranks,
backends, the environment), :mod:`~sgl.comm.groups` (sub-groups),
:mod:`~sgl.comm.collectives`, :mod:`~sgl.comm.p2p` (send/recv) and
:mod:`~sgl.comm.launcher` (:func:`spawn`); the private ``_state``, ``_validate``,
``_errors`` and ``_wire`` modules hold what they share.
"""
from __future__ import annotations

from typing import Any

import sgl.comm._state as _state
from sgl.comm._errors import _error, _translate, _wait, _where
from sgl.comm._state import _DEFAULT_TIMEOUT, _ENV_HELP, Group, ReduceOpName, _Config
from sgl.comm._validate import (
    _check_member, _check_peer, _check_ranks, _check_splits, _check_tensor, _require_init, _timeout,
)
from sgl.comm._wire import (
    _DTYPES, _MAX_DIMS, _check_agree, _comm_device, _decode_meta, _meta, _pad_rows, _unwire, _wire,
)
from sgl.comm.collectives import (
    _REDUCE_OPS, all_gather, all_reduce, all_to_all, barrier, broadcast, to_wire, wire_device,
)
from sgl.comm.groups import new_group
from sgl.comm.launcher import _child_main, _collect, _kill, spawn
from sgl.comm.p2p import recv, send
from sgl.comm.world import (
    _check_same_config, _free_port, _int_setting, get_backend, get_local_rank, get_rank,
    get_world_size, init, is_initialized, shutdown,
)

__all__ = [
    "ReduceOpName",
    "init",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "get_backend",
    "all_reduce",
    "all_gather",
    "all_to_all",
    "broadcast",
    "send",
    "recv",
    "barrier",
    "wire_device",
    "to_wire",
    "new_group",
    "shutdown",
    "spawn",
]


def __getattr__(name: str) -> Any:
    # ``sgl.comm._config`` was a module global before the split; read the live value.
    if name == "_config":
        return _state.config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
