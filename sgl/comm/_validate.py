"""Argument checks shared by the collectives, point-to-point calls and sub-groups of :mod:`sgl.comm`.

Each raises :class:`~sgl.errors.CommError` naming the ``comm.<op>`` that was called.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

import sgl.comm._state as _state
from sgl.comm._state import _DEFAULT_TIMEOUT, _ENV_HELP, Group
from sgl.comm.world import is_initialized
from sgl.errors import CommError


def _timeout(timeout: float | None) -> float:
    """Validated per-call timeout in seconds, defaulting to init's timeout."""
    if timeout is None:
        return _state.config.timeout if _state.config is not None else _DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise CommError(f"comm: timeout must be a positive number of seconds, got {timeout!r}.")
    return float(timeout)


def _require_init(op: str) -> None:
    """Point-to-point ops need a peer, so they need an initialised group."""
    if not is_initialized():
        raise CommError(
            f"comm.{op}: not initialised, and a single-process world has no peer to "
            f"{op} {'to' if op == 'send' else 'from'}. Fix: call comm.init() first ({_ENV_HELP})."
        )


def _check_tensor(tensor: Any, op: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise CommError(f"comm.{op}: expected a torch.Tensor, got {type(tensor).__name__}.")


def _check_member(group: Group, op: str) -> None:
    if group is not None and dist.get_rank(group) < 0:
        raise CommError(
            f"comm.{op}: rank {dist.get_rank()} is not a member of this group (ranks "
            f"{dist.get_process_group_ranks(group)}). Fix: only call {op} on ranks in the group."
        )


def _check_peer(peer: Any, op: str, name: str, group: Group, *, allow_self: bool) -> None:
    """Validate a global ``src``/``dst`` rank against the world or ``group``."""
    if not isinstance(peer, int) or isinstance(peer, bool):
        raise CommError(f"comm.{op}: {name} must be an int rank, got {peer!r}.")
    if not is_initialized():
        if peer != 0:
            raise CommError(
                f"comm.{op}: {name}={peer}, but not initialised the only rank is 0."
            )
        return
    _check_member(group, op)
    members = (
        list(range(dist.get_world_size()))
        if group is None
        else dist.get_process_group_ranks(group)
    )
    if peer not in members:
        raise CommError(
            f"comm.{op}: {name}={peer} is not a rank of the group {members}. "
            f"Fix: pass a global rank from {members}."
        )
    if not allow_self and peer == dist.get_rank():
        raise CommError(f"comm.{op}: {name}={peer} is this process's own rank; pick another rank.")


def _check_ranks(ranks: Any, world: int) -> list[int]:
    """Validate new_group's ranks: distinct ints in [0, world)."""
    if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Sequence):
        raise CommError(f"comm.new_group: ranks must be a sequence of ints, got {ranks!r}.")
    ranks = list(ranks)
    bad = [r for r in ranks if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < world]
    if not ranks or bad or len(set(ranks)) != len(ranks):
        raise CommError(
            f"comm.new_group: ranks must be a non-empty list of distinct ints in [0, {world}), "
            f"got {ranks!r}."
        )
    return sorted(ranks)


def _check_splits(splits: Any, name: str, world: int, total: int | None) -> list[int]:
    """Validate split sizes: ``world`` non-negative ints (summing to ``total``)."""
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    if isinstance(splits, (str, bytes)) or not isinstance(splits, Sequence):
        raise CommError(f"comm.all_to_all: {name} must be a list of ints, got {splits!r}.")
    values = list(splits)
    if len(values) != world:
        raise CommError(
            f"comm.all_to_all: {name} has {len(values)} entries for a group of {world} ranks; "
            "expected one row count per rank."
        )
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values):
        raise CommError(
            f"comm.all_to_all: {name} must be non-negative ints, got {values}."
        )
    if total is not None and sum(values) != total:
        raise CommError(
            f"comm.all_to_all: {name} {values} sum to {sum(values)}, but the input has "
            f"{total} rows. Fix: make the splits sum to the input's first dimension."
        )
    return values
