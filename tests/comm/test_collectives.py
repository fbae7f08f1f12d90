"""Tests for sgl.comm.collectives over real processes and in a single process.

Multi-process tests run 2 (one test: 3) Gloo processes on 127.0.0.1 through
``comm.spawn``, with hard timeouts so a broken collective fails instead of
hanging.  Each spawned run checks many operations at once because starting
processes dominates the cost (so the two-rank run also covers send/recv,
barrier and repeated init, and the three-rank run sub-groups).  Worker
functions live at module level so the ``spawn`` start method can pickle them;
they assert inside the children and ``spawn`` re-raises any failure with the
child's traceback.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

import sgl.comm as comm
from sgl.errors import CommError

#: Hard wall-clock limit for each spawned run (seconds).
RUN_TIMEOUT = 45.0


def _raises(fn, *args, match: str = "", **kwargs) -> str:
    """Call fn and return the CommError message; fail if it does not raise (for children)."""
    try:
        fn(*args, **kwargs)
    except CommError as exc:
        assert match in str(exc), f"{match!r} not in {exc}"
        return str(exc)
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise CommError")


# --------------------------------------------------------------------------
# Workers (run inside spawned processes)
# --------------------------------------------------------------------------
def _collectives_worker(rank: int, world: int) -> dict:
    assert comm.is_initialized()
    assert (comm.get_rank(), comm.get_world_size(), comm.get_local_rank()) == (rank, world, rank)
    assert comm.get_backend() == "gloo"

    # --- all_reduce, every op; returned tensor is the input, modified in place.
    base = torch.tensor([1.0, -2.0, 3.0]) * (rank + 1)  # rank0: x, rank1: 2x
    expected = {
        "sum": torch.tensor([3.0, -6.0, 9.0]),
        "mean": torch.tensor([1.5, -3.0, 4.5]),
        "max": torch.tensor([2.0, -2.0, 6.0]),
        "min": torch.tensor([1.0, -4.0, 3.0]),
        "prod": torch.tensor([2.0, 8.0, 18.0]),
    }
    for op, want in expected.items():
        t = base.clone()
        out = comm.all_reduce(t, op=op)
        assert out is t, op
        assert torch.equal(t, want), (op, t)
    ints = comm.all_reduce(torch.tensor([rank + 1, 10]), op="sum")
    assert torch.equal(ints, torch.tensor([3, 20]))
    # Non-contiguous view: reduced in place through a contiguous copy.
    mat = torch.arange(6.0).reshape(2, 3) + rank
    col = mat[:, 1]
    assert not col.is_contiguous()
    comm.all_reduce(col, op="sum", timeout=10)
    assert torch.equal(mat[:, 1], torch.tensor([3.0, 9.0]))
    assert torch.equal(mat[:, 0], torch.tensor([0.0, 3.0]) + rank)  # untouched

    # --- all_gather with uneven first dimension (rank r holds r + 1 rows).
    mine = torch.arange((rank + 1) * 2, dtype=torch.float64).reshape(rank + 1, 2) + 100 * rank
    parts = comm.all_gather(mine)
    assert [tuple(p.shape) for p in parts] == [(1, 2), (2, 2)]
    assert torch.equal(parts[0], torch.tensor([[0.0, 1.0]], dtype=torch.float64))
    want_1 = torch.tensor([[100.0, 101.0], [102.0, 103.0]], dtype=torch.float64)
    assert torch.equal(parts[1], want_1)
    # One rank empty, bool dtype, scalars, all-empty.
    flags = torch.tensor([True, False, True]) if rank == 1 else torch.zeros(0, dtype=torch.bool)
    got = comm.all_gather(flags)
    assert got[0].shape == (0,) and got[0].dtype == torch.bool
    assert torch.equal(got[1], torch.tensor([True, False, True]))
    scalars = comm.all_gather(torch.tensor(float(rank)))
    assert [s.shape for s in scalars] == [torch.Size([]), torch.Size([])]
    assert [s.item() for s in scalars] == [0.0, 1.0]
    empties = comm.all_gather(torch.zeros(0, 4))
    assert [tuple(e.shape) for e in empties] == [(0, 4), (0, 4)]

    # --- all_to_all, uneven: rank r sends r + i + 1 rows to rank i.
    splits = [rank + i + 1 for i in range(world)]
    rows = torch.cat([torch.full((n, 2), 10 * rank + i) for i, n in enumerate(splits)])
    out = comm.all_to_all(rows, input_splits=splits)
    recv_splits = [j + rank + 1 for j in range(world)]  # rank j sent j + rank + 1 rows
    assert isinstance(out, torch.Tensor) and out.shape == (sum(recv_splits), 2)
    want = torch.cat([torch.full((n, 2), 10 * j + rank) for j, n in enumerate(recv_splits)])
    assert torch.equal(out, want)
    # Same with known output splits (no size exchange).
    out2 = comm.all_to_all(rows, input_splits=splits, output_splits=recv_splits)
    assert torch.equal(out2, want)
    # List form, including a zero-row piece and int64 data.
    pieces = [torch.arange(rank * i, dtype=torch.int64) + 1000 * rank for i in range(world)]
    got = comm.all_to_all(pieces)
    assert isinstance(got, list) and len(got) == world
    for j, g in enumerate(got):
        assert torch.equal(g, torch.arange(j * rank, dtype=torch.int64) + 1000 * j), (j, g)
    # Even split by default.
    even = comm.all_to_all(torch.arange(4) + 10 * rank)
    assert torch.equal(even, torch.tensor([0, 1, 10, 11]) + 2 * rank)

    # --- broadcast from each rank; non-contiguous target.
    for src in range(world):
        t = torch.full((3,), float(rank))
        assert comm.broadcast(t, src=src) is t
        assert torch.equal(t, torch.full((3,), float(src)))
    grid = torch.full((3, 2), float(rank))
    comm.broadcast(grid.t(), src=1)
    assert torch.equal(grid, torch.ones(3, 2))

    # --- send / recv: into a buffer, into a fresh tensor from a shape, tags.
    if rank == 0:
        comm.send(torch.arange(5.0), dst=1)
        comm.send(torch.tensor([[1, 2], [3, 4]]), dst=1, tag=7)
        back = comm.recv((2,), src=1, dtype=torch.int32, timeout=10)
        assert torch.equal(back, torch.tensor([42, 43], dtype=torch.int32))
    else:
        buf = torch.zeros(5)
        assert comm.recv(buf, src=0) is buf
        assert torch.equal(buf, torch.arange(5.0))
        fresh = comm.recv([2, 2], src=0, dtype=torch.int64, tag=7)
        assert torch.equal(fresh, torch.tensor([[1, 2], [3, 4]]))
        comm.send(torch.tensor([42, 43], dtype=torch.int32), dst=0, timeout=10)

    # --- barrier
    comm.barrier()
    comm.barrier(timeout=10)

    # --- repeated init: same config is a no-op, different config is an error.
    comm.init()  # env from spawn: same rank/world
    comm.init("gloo", rank=rank, world_size=world)
    _raises(comm.init, rank=rank, world_size=world + 1, match="comm.shutdown()")
    _raises(comm.init, "nccl", match="backend='nccl'")

    # --- validation errors, identical on both ranks so nobody hangs.
    _raises(comm.all_to_all, rows, input_splits=[1, 1], match="sum to 2")
    _raises(comm.all_to_all, rows, input_splits=[-1, sum(splits) + 1], match="non-negative")
    _raises(comm.all_to_all, rows, input_splits=splits, output_splits=[1], match="2 ranks")
    _raises(comm.all_to_all, torch.arange(3), match="not divisible")
    _raises(comm.all_to_all, [torch.zeros(1)], match="one tensor per rank")
    _raises(comm.all_to_all, [torch.zeros(1), torch.zeros(1, 2)], match="trailing")
    _raises(comm.all_reduce, [1.0], match="expected a torch.Tensor, got list")
    _raises(comm.all_reduce, torch.ones(1), op="avg", match="unknown op 'avg'")
    _raises(comm.all_reduce, torch.ones(1, dtype=torch.int64), op="mean", match="floating")
    _raises(comm.all_reduce, torch.ones(1), timeout=-1, match="positive")
    _raises(comm.send, torch.ones(1), dst=rank, match="own rank")
    _raises(comm.send, torch.ones(1), dst=5, match="dst=5")
    _raises(comm.broadcast, torch.ones(1), src=2, match="src=2")
    # Ranks disagreeing on trailing shape / dtype: every rank raises, and the
    # group stays usable because only metadata was exchanged.
    msg = _raises(comm.all_gather, torch.zeros(2, rank + 1), match="disagree")
    assert "Fix:" in msg
    _raises(comm.all_to_all, torch.zeros(2, dtype=torch.float32 if rank else torch.int64),
            match="disagree")
    assert torch.equal(comm.all_reduce(torch.ones(1)), torch.tensor([2.0]))

    return {"rank": rank, "tensor": torch.full((2,), float(rank))}


def _subgroup_worker(rank: int, world: int) -> None:
    assert world == 3
    # Every rank must create every group, members or not.
    pair = comm.new_group([2, 0])
    solo = comm.new_group([1])
    if rank in (0, 2):
        assert comm.get_world_size(pair) == 2
        assert comm.get_rank(pair) == (0 if rank == 0 else 1)
        t = comm.all_reduce(torch.tensor([float(rank + 1)]), group=pair)
        assert torch.equal(t, torch.tensor([4.0]))  # 1 + 3, rank 1 not included
        parts = comm.all_gather(torch.ones(rank + 1), group=pair)
        assert [p.numel() for p in parts] == [1, 3]
        # Group of 2: rank 0 sends 1 row to group-rank 1 (global 2), rank 2 sends 2 rows back.
        me = comm.get_rank(pair)
        splits = [0, 1] if me == 0 else [2, 0]
        got = comm.all_to_all(torch.full((sum(splits),), rank), input_splits=splits, group=pair)
        assert torch.equal(got, torch.full((2,), 2) if me == 0 else torch.full((1,), 0))
        b = comm.broadcast(torch.tensor([rank]), src=2, group=pair)  # src is a global rank
        assert b.item() == 2
        comm.barrier(group=pair, timeout=10)
        _raises(comm.broadcast, torch.ones(1), src=1, group=pair, match="not a rank of the group")
        _raises(comm.all_reduce, torch.ones(1), group=solo, match="not a member")
    else:
        assert comm.get_rank(pair) == -1
        _raises(comm.all_reduce, torch.ones(1), group=pair, match="not a member")
        _raises(comm.all_gather, torch.ones(1), group=pair, match="not a member")
        _raises(comm.all_to_all, torch.ones(2), group=pair, match="not a member")
        _raises(comm.barrier, group=pair, match="not a member")
        solo_sum = comm.all_reduce(torch.tensor([5.0]), group=solo)
        assert torch.equal(solo_sum, torch.tensor([5.0]))
    _raises(comm.new_group, [0, 3], match="distinct ints in [0, 3)")
    comm.barrier(timeout=10)


def _timeout_worker(rank: int, world: int, flag: str) -> dict:
    """Rank 0 calls ops rank 1 never joins; rank 1 idles until rank 0 is done.

    A Gloo timeout closes the connections of the group it happened on, so
    each case gets its own (fresh) group.
    """
    groups = [comm.new_group([0, 1]) for _ in range(3)]
    timings: dict[str, float] = {}
    if rank == 1:
        deadline = time.monotonic() + 30
        while not Path(flag).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return timings
    try:
        for group, (name, call) in zip(
            groups,
            (
                ("recv", lambda g: comm.recv((3,), src=1, group=g, timeout=1.0)),
                ("barrier", lambda g: comm.barrier(group=g, timeout=1.0)),
                ("all_reduce", lambda g: comm.all_reduce(torch.ones(2), group=g, timeout=1.0)),
            ),
        ):
            start = time.monotonic()
            msg = _raises(call, group, match=f"comm.{name}")
            timings[name] = time.monotonic() - start
            assert "rank 0/2" in msg and "timeout 1s" in msg and "timed out" in msg, msg
            if name == "barrier":
                assert "Ranks 1 failed to pass monitoredBarrier" in msg, msg
    finally:
        Path(flag).touch()
    return timings


# --------------------------------------------------------------------------
# Multi-process tests
# --------------------------------------------------------------------------
def test_collectives_two_ranks() -> None:
    results = comm.spawn(_collectives_worker, 2, timeout=RUN_TIMEOUT)
    assert [r["rank"] for r in results] == [0, 1]
    assert torch.equal(results[1]["tensor"], torch.ones(2))


def test_subgroup_collectives_three_ranks() -> None:
    assert comm.spawn(_subgroup_worker, 3, timeout=RUN_TIMEOUT) == [None, None, None]


def test_timeouts_raise_comm_error_quickly(tmp_path: Path) -> None:
    start = time.monotonic()
    results = comm.spawn(
        _timeout_worker, 2, str(tmp_path / "done"), timeout=RUN_TIMEOUT, comm_timeout=10.0
    )
    timings = results[0]
    assert set(timings) == {"recv", "barrier", "all_reduce"}
    for name, seconds in timings.items():
        assert 0.9 <= seconds < 5.0, (name, seconds)
    assert time.monotonic() - start < RUN_TIMEOUT


# --------------------------------------------------------------------------
# Single-process behaviour (no process group)
# --------------------------------------------------------------------------
def test_not_initialized_collectives_are_identity() -> None:
    t = torch.tensor([1.0, 2.0])
    for op in ("sum", "mean", "max", "min", "prod"):
        assert comm.all_reduce(t, op=op) is t
    assert torch.equal(t, torch.tensor([1.0, 2.0]))
    gathered = comm.all_gather(t)
    assert len(gathered) == 1 and gathered[0] is t
    assert comm.all_to_all(t) is t
    assert comm.all_to_all(t, input_splits=[2], output_splits=[2]) is t
    pieces = [torch.ones(3)]
    assert comm.all_to_all(pieces) == pieces
    assert comm.broadcast(t, src=0) is t
    comm.barrier()
    comm.barrier(timeout=1)
    assert comm.new_group([0]) is None
    comm.shutdown()
    comm.shutdown()  # safe twice


def test_not_initialized_validation() -> None:
    t = torch.ones(4)
    with pytest.raises(CommError, match=r"sum to 3, but the input has 4 rows"):
        comm.all_to_all(t, input_splits=[3])
    with pytest.raises(CommError, match="non-negative"):
        comm.all_to_all(t, input_splits=[-4])
    with pytest.raises(CommError, match="2 entries for a group of 1"):
        comm.all_to_all(t, input_splits=[2, 2])
    with pytest.raises(CommError, match="output_splits must equal"):
        comm.all_to_all(t, input_splits=[4], output_splits=[3])
    with pytest.raises(CommError, match="2 input tensors for a group of 1"):
        comm.all_to_all([t, t])
    with pytest.raises(CommError, match="only for a single input tensor"):
        comm.all_to_all([t], input_splits=[4])
    with pytest.raises(CommError, match="scalar"):
        comm.all_to_all(torch.tensor(1.0))
    with pytest.raises(CommError, match="expected a torch.Tensor, got list"):
        comm.all_gather([1, 2])  # type: ignore[arg-type]
    with pytest.raises(CommError, match="unknown op"):
        comm.all_reduce(t, op="avg")  # type: ignore[arg-type]
    with pytest.raises(CommError, match="floating"):
        comm.all_reduce(torch.ones(2, dtype=torch.int32), op="mean")
    with pytest.raises(CommError, match="only rank is 0"):
        comm.broadcast(t, src=1)
    with pytest.raises(CommError, match=r"distinct ints in \[0, 1\)"):
        comm.new_group([1])
