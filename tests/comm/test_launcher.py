"""Tests for sgl.comm.launcher: spawn reports child failures and kills children on timeout.

Worker functions live at module level so the ``spawn`` start method can pickle them.
"""
from __future__ import annotations

import time

import pytest

import sgl.comm as comm
from sgl.errors import CommError

#: Hard wall-clock limit for each spawned run (seconds).
RUN_TIMEOUT = 45.0


def _failing_worker(rank: int, world: int) -> None:
    if rank == 1:
        raise ValueError("boom from rank 1")
    comm.barrier(timeout=60)  # would wait a minute: spawn must not


def _sleeping_worker(rank: int, world: int) -> None:
    time.sleep(120)


def test_spawn_propagates_child_exception() -> None:
    start = time.monotonic()
    with pytest.raises(CommError) as info:
        comm.spawn(_failing_worker, 2, timeout=RUN_TIMEOUT)
    msg = str(info.value)
    assert "rank 1 of 2 raised ValueError: boom from rank 1" in msg
    assert "Traceback" in msg and "_failing_worker" in msg
    # The other rank was killed rather than waited for.
    assert time.monotonic() - start < 30


def test_spawn_kills_children_after_timeout() -> None:
    start = time.monotonic()
    with pytest.raises(CommError, match=r"timed out after 4s; rank\(s\) \[0, 1\]"):
        comm.spawn(_sleeping_worker, 2, timeout=4.0)
    assert time.monotonic() - start < 15


def test_spawn_argument_checks() -> None:
    with pytest.raises(CommError, match="callable"):
        comm.spawn("not a function", 2)  # type: ignore[arg-type]
    with pytest.raises(CommError, match="world_size must be an int >= 1"):
        comm.spawn(_sleeping_worker, 0)
    with pytest.raises(CommError, match="module-level function"):
        comm.spawn(lambda rank, world: None, 1, timeout=10)
